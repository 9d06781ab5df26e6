#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the attention kernels for sm_90, runs the GPU tests, then the benchmarks (ours, then
# torch SDPA on the same shapes), and prints the summary table last. Needs no GoogleTest,
# OpenBLAS or yaml-cpp: it configures with SINKSCOPE_TESTS=OFF and SINKSCOPE_GPU_TESTS=ON
# (kernels/CMakeLists.txt), which builds only tests/gpu.
#   BUILD=<dir>  build folder (default build-gpu)      OUT=<dir>  logs and CSV (default build/gpu-results/attention)
#   QUICK=1      fewer test cases and lengths          SKIP_TESTS=1 / SKIP_BENCH=1
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$ROOT/build/gpu-results/attention}
mkdir -p "$OUT"
quick_arg=()
[[ "${QUICK:-0}" == 1 ]] && quick_arg=(--quick)

echo "== configure + build (sm_90) =="
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSINKSCOPE_CUDA=ON \
  -DSINKSCOPE_GUI=OFF -DSINKSCOPE_TESTS=OFF -DSINKSCOPE_GPU_TESTS=ON \
  -DSINKSCOPE_PTXAS_VERBOSE=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_USER_MAKE_RULES_OVERRIDE_CUDA="$ROOT/tests/gpu/cuda20_override.cmake" \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
ninja -C "$BUILD" test_attention_gpu test_attention_families bench_attention >"$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$OUT/build.log" | head -40; exit 1; }
grep -E "spill" "$OUT/build.log" | sort | uniq -c | sed 's/^/  ptxas: /'

rc=0
if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  echo "== GPU tests =="
  timeout 450 "$BUILD/tests/gpu/test_attention_gpu" "${quick_arg[@]}" >"$OUT/test.log" 2>&1
  rc=$?
  grep -E "^(FAIL|     )" "$OUT/test.log" | head -30
  grep -vE "^(FAIL|     )" "$OUT/test.log"
  echo "== family additions (own_window, softcap) vs the CPU attention =="
  timeout 200 "$BUILD/tests/gpu/test_attention_families" >"$OUT/test_families.log" 2>&1 || rc=1
  grep -E "^(FAIL|RESULT|SKIP)" "$OUT/test_families.log"
fi
if [[ "${SKIP_BENCH:-0}" != 1 ]]; then
  echo "== benchmark: ours =="
  timeout 400 "$BUILD/tests/gpu/bench_attention" "$OUT/ours.csv" "${quick_arg[@]}" >"$OUT/bench.log" 2>&1 ||
    { echo "bench_attention failed (rc=$?)"; tail -20 "$OUT/bench.log"; }
  # bf16 vs int8 vs int4 KV pages in the decode kernel (bench_attention's own table).
  sed -n '/^=== decode KV formats/,/^=== end decode KV formats/p' "$OUT/bench.log" | grep -v "^=== end"
  # the sparse prefill kernel forced at lambda = 0, and at lambda = 0.9
  grep -E "^=== (lambda0 overhead|lambda0.9 cost)" "$OUT/bench.log"
  # the dense decode next to floors on its own split plan (no page ids, Q or arithmetic): the
  # K + V stream alone, with our combine kernel after it, the one-kernel ticket and cluster
  # reductions, and the sparse decode's three-kernel structure at 70 % skipped tiles
  echo "== decode against its floors =="
  timeout 200 "$BUILD/tests/gpu/bench_attention" "$OUT/floors.csv" --decode-floors >"$OUT/floors.log" 2>&1 ||
    { echo "bench_attention --decode-floors failed (rc=$?)"; tail -20 "$OUT/floors.log"; }
  grep -vE "^(decode_floor|kind),|^# device" "$OUT/floors.log"
  echo "== benchmark: torch SDPA (same shapes) + table =="
  PYTHONUNBUFFERED=1 timeout 200 python3 "$ROOT/tests/gpu/torch_sdpa_bench.py" --ours "$OUT/ours.csv" \
    "${quick_arg[@]}" >"$OUT/torch.log" 2>&1 || echo "torch_sdpa_bench failed (rc=$?)"
  sed -n '/^=== prefill/,$p' "$OUT/torch.log"
  grep -E "FAILED|Error" "$OUT/torch.log" | head -10
fi
exit $rc
