# Sourced by device scripts that run their checks as logged steps (fp8_tp_device.sh, fp8_recipes_check.sh), after
# they set `bin` (a folder made by tests/gpu/make_carry.sh) and `out`: the carried libraries on the library path,
# NVLink multicast off unless set, the GPUs and the time printed, then `step NAME COMMAND...`, which logs the
# command under $out/NAME.log, prints its exit and wall time, and sets status=1 when it fails.
export LD_LIBRARY_PATH=$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
date -u
SECONDS=0
status=0
step() {
  local name=$1 start=$SECONDS; shift
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $((SECONDS - start)) s"
  [ $rc -eq 0 ] || status=1
}
