#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs GPU test programs built here (a CUDA build folder, sm_90) with the shared libraries the
# lent GPU machine's image lacks (OpenBLAS and its Fortran runtime, libstdc++) into one xz
# archive, so a device call can run them without building first. The programs share most of
# their bytes (the engine and its kernels), which xz's large dictionary folds together.
#   bash tests/gpu/pack_prebuilt.sh [BUILD_DIR] [TARGET...]
#     BUILD_DIR  default build-cuda;  TARGETs default test_cuda_backend test_gpu_head_map
#                test_cuda_cache (paths relative to BUILD_DIR/tests/gpu, or BUILD_DIR-relative)
#   OUT=<file>   default build/carry/prebuilt.tar.xz
# On the device:  mkdir -p /tmp/pre && tar xJf build/carry/prebuilt.tar.xz -C /tmp/pre &&
#                 LD_LIBRARY_PATH=/tmp/pre/lib /tmp/pre/bin/test_cuda_backend
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${1:-$ROOT/build-cuda}
[[ $# -gt 0 ]] && shift
targets=("$@")
((${#targets[@]})) || targets=(test_cuda_backend test_gpu_head_map test_cuda_cache)
OUT=${OUT:-$ROOT/build/carry/prebuilt.tar.xz}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$(dirname "$OUT")"
for t in "${targets[@]}"; do
  for f in "$BUILD/tests/gpu/$t" "$BUILD/$t"; do
    [[ -x "$f" ]] && { cp "$f" "$stage/bin/"; continue 2; }
  done
  echo "pack_prebuilt: $t not built in $BUILD" >&2
  exit 1
done
# Libraries outside the CUDA toolkit and glibc: the device image has CUDA 13 and glibc, not these.
ldd "$stage"/bin/* | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libutil.so* | libgcc_s.so*) ;;
    libcuda*.so* | libcublas*.so* | libcupti.so* | libnvToolsExt*.so*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
tar cf - -C "$stage" bin lib | xz -9 -T1 >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "pack_prebuilt: $(du -h "$OUT" | cut -f1) in $OUT: $(ls "$stage/bin" | tr '\n' ' ')+ $(ls "$stage/lib" | tr '\n' ' ')"
