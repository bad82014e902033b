{
 "builtin": false,
 "format": "twin-profile",
 "gpus": [
  {
   "attention_backward": {
    "half_work": 10692333017.53027,
    "peak": 0.09848063658689443
   },
   "attention_forward": {
    "half_work": 4018667587.819626,
    "peak": 0.15674915282019392
   },
   "gemm": {
    "half_work": 2679261106.9632773,
    "peak": 0.7176111913496029
   },
   "gpu": "H100-SXM-80GB",
   "launch_overhead_ns": 2000.0,
   "measured": {
    "activation_backward:rows=1024,cols=11008,gated=1": {
     "median_ns": 62305.0,
     "p10_ns": 61761.4,
     "p90_ns": 62529.6,
     "samples": 15
    },
    "activation_backward:rows=1024,cols=14336,gated=1": {
     "median_ns": 80387.0,
     "p10_ns": 80206.8,
     "p90_ns": 80488.4,
     "samples": 15
    },
    "activation_backward:rows=1024,cols=16384,gated=0": {
     "median_ns": 68705.0,
     "p10_ns": 68123.2,
     "p90_ns": 69217.6,
     "samples": 15
    },
    "attention_backward:b=1,h=16,kvh=16,sq=1024,skv=1024,d=64,causal=1,flash=1": {
     "median_ns": 145156.0,
     "p10_ns": 142909.0,
     "p90_ns": 146659.0,
     "samples": 15
    }
   },
   "memory_bound": {
    "half_work": 614347.746739676,
    "peak": 0.47690383037054945
   },
   "reference_sm_clock_MHz": 1710.4188676851563,
   "sustained_clock": {
    "points": [
     {
      "gemm_duty": 0.99,
      "sm_clock_MHz": 1465.0
     },
     {
      "gemm_duty": 0.41,
      "sm_clock_MHz": 1612.0
     }
    ]
   }
  }
 ],
 "inter_node": {
  "bandwidth": {
   "half_work": 8388608.0,
   "peak": 0.9
  },
  "latency_us": 5.0
 },
 "intra_node": {
  "bandwidth": {
   "half_work": 16777216.0,
   "peak": 0.8
  },
  "latency_us": 1.5
 },
 "intra_node_pcie": {
  "bandwidth": {
   "half_work": 16777216.0,
   "peak": 0.75
  },
  "latency_us": 1.5
 },
 "name": "calibrated 1x H100-SXM-80GB (vm)",
 "overlap": {
  "communication_slowdown": 1.05,
  "compute_slowdown": 1.1
 },
 "provenance": {
  "calibration_seconds": 401.271015934,
  "collective_timing": "nccl-tests: float32, CUDA events around iterations, mean averaged over ranks",
  "command": "build-carry/twin calibrate --out /tmp/gc/profile.json"
 },
 "version": 1
}
