#!/usr/bin/env bash
# Packs a CUDA build of twin for a device machine that lacks the development machine's libraries:
# DEST/{twin,twin-gpu[,test_gpu]} (twin a symlink to twin-gpu where both are built) and DEST/lib with spdlog, fmt
# and Open MPI's libraries (and what they need) as the binaries resolve them here; CUDA, cuBLAS, cuDNN, NCCL and
# CUPTI are the device's own.
# Usage: bash tests/gpu/make_carry.sh BUILD_DIR [DEST]   (DEST defaults to build-carry; ignored by git)
set -euo pipefail
build="$1"; dest="${2:-build-carry}"
rm -rf "$dest"; mkdir -p "$dest/lib"
for binary in twin twin-gpu tests/test_gpu; do  # the test binary is built under tests/
  if [ -x "$build/$binary" ]; then cp "$build/$binary" "$dest/"; fi
done
# The device copy of the tree is limited to 64 MiB with the carry: stripped binaries, and `twin` as twin-gpu (the CUDA
# build's binary does all the CPU one does) by a symlink rather than a second copy.
strip "$dest"/twin* "$dest"/test_gpu 2>/dev/null || true
if [ -x "$dest/twin-gpu" ]; then ln -sf twin-gpu "$dest/twin"; fi
ldd "$dest"/twin* | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -E 'libspdlog|libfmt|libmpi|libopen-(pal|rte)|libhwloc|libevent|libudev|libz\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
ls "$dest" "$dest/lib"
du -sh "$dest"
