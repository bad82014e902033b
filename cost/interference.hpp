// How much a collective and the compute beside it slow each other, pair by pair: an NCCL collective of one kind and
// size on one stream, GEMMs of one size or a memory-bound kernel on another; the compute kernel's time inside the
// collective's busy window over its time alone, and the reverse (calibrate/gpu/interference.hpp measures them into a
// profile's provenance; tools/interference_points.py makes a profile's `overlap.points` of them). An NCCL kernel holds
// SMs and moves bytes through HBM and L2, so what it takes from the kernel beside it depends on the collective and
// on the kernel. A GEMM is keyed by its waves, its 128 x 256 tiles over the GPU's SMs (gemm_waves,
// cost/gemm_interpolation_error.hpp): on two H200s a GEMM of up to two waves ran 1.8-2.1x slower beside a collective
// (the SMs NCCL holds cost it a wave; cuBLASLt spreads a GEMM of few tiles over every SM), one of 15 waves
// 1.03-1.15x; attention is keyed likewise by its tiles over its slots (interference_waves below).
// A pair between measured points is read log-linearly in the collective's bytes and the kernel's waves, clamped to
// the measured range; a collective kind without points takes the profile's scalar slowdowns. No shipped profile
// states points: on the studies of 2026-11-30 they predicted worse than the scalar pair (docs/ACCURACY.md).
#pragma once
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"
#include "core/op.hpp"
#include "core/units.hpp"

namespace twin {

// What runs beside the collective: a GEMM (keyed by its waves; attention and the router count as GEMMs, the
// compute-bound kinds) or a memory-bound kernel (every other compute kind).
enum class InterferenceCompute : std::uint8_t { gemm, memory_bound };

struct InterferencePoint {
  OpKind collective = OpKind::all_reduce;  // all_reduce, all_gather, reduce_scatter, all_to_all, send (send/recv)
  Bytes size_bytes = 0;                    // nccl-tests' S of the collective
  InterferenceCompute beside = InterferenceCompute::gemm;
  double gemm_waves = 0;                   // gemm: the measured GEMM's waves on the GPU it ran on; memory_bound: 0
  double compute_slowdown = 1.0;           // the compute kernel's time beside the collective over alone, >= 1
  double communication_slowdown = 1.0;     // the collective's time beside the compute over alone, >= 1
};

struct InterferenceFactors {
  double compute_slowdown = 1.0;
  double communication_slowdown = 1.0;
};

// The collective kind whose points price `kind`: itself for the four collectives, send for send and recv (a
// pipeline transfer or a ring step is one NCCL send/recv pair); std::nullopt for a compute kind.
std::optional<OpKind> interference_collective(OpKind kind);
// The compute class of a compute kind (gemm for the compute-bound kinds).
InterferenceCompute interference_compute(OpKind kind);

// A compute-bound op's waves on a GPU of `sm_count` SMs: a GEMM's (one group's for a grouped GEMM), the router's
// GEMM's, attention's (batch x heads x row tiles of kAttentionTiling over its slots); 0 for other kinds.
double interference_waves(const Op& op, int sm_count);

// The factors of a collective of `collective` kind and `size_bytes` beside compute of class `beside` (`gemm_waves`
// for a GEMM), read from `points`; std::nullopt when no point has that collective kind and compute class.
std::optional<InterferenceFactors> measured_interference(const std::vector<InterferencePoint>& points,
                                                         OpKind collective, double size_bytes,
                                                         InterferenceCompute beside, double gemm_waves);

nlohmann::json interference_points_json(const std::vector<InterferencePoint>& points);
// Reads an array of points (an InputError at the failing path: unknown collective or compute, a non-positive size
// or a GEMM without waves, a slowdown below 1, two points of one key).
std::vector<InterferencePoint> read_interference_points(const JsonReader& array);

}  // namespace twin
