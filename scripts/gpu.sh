#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU check in one command: configures without the GUI, builds for sm_90, runs the GPU tests
# and the benchmarks against torch / HF transformers on the same GPU, and prints a short table
# last. Two parts, each also runnable alone (a device call is limited to 10 minutes):
#   attention  tests/gpu/run_gpu.sh: kernel tests vs the CPU reference (shapes, GQA, L up to
#              64K), prefill/decode/sparse benchmarks vs torch SDPA flash + cuDNN
#   backend    tests/gpu/run_backend_gpu.sh: the CUDA backend vs the CPU on SmolLM2 (KL, top-1),
#              fused decode kernels, cache policies, faults, CUPTI tracing (nesting, overhead),
#              end-to-end tokens/s vs HF transformers, the GPU soak
#   kv         tests/gpu/run_kv_eval.sh: streaming perplexity over 100K tokens (dense, window,
#              window + sinks, recompute reference), int8/int4 vs 16-bit KV, passkey vs window
#              (needs the evaluation text: .model/kjv.txt or setup.sh --eval-data)
#   latency    bench_view_latency --backend cuda: the workbench's control change -> every view's
#              data, engine side, for a 2K-token prompt
#   scale      tests/gpu/run_scale.sh: 7-8B-shape random-weight files, their speed and device
#              memory from 8K to 128K tokens, the sparse prefill saving at the 8B attention shape,
#              TTFT dense vs calibrated sparse with quality on SmolLM2, view latency at 32K
#              (several minutes per stage; STAGES picks some)
# Usage: bash scripts/gpu.sh [attention|backend|kv|latency|scale|all]   (default all but scale)
#   BUILD_ONLY=1   build every GPU target and stop      LOGS=<file.tgz>  also pack every log
#   GPU_OUT=<dir>  where the logs and CSV go (default build/gpu-results/<part>/; never the source tree)
#   Options of the two scripts pass through (QUICK, SKIP_*, REPS, SOAK_RUNS, TRACE_PRESETS, MODEL).
# The model: MODEL=<gguf>, or .model/<name> (or its split parts .model/<name>.part-*), or the
# set-up script's cache.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PART=${1:-all}
export BUILD=${BUILD:-$ROOT/build-gpu}
BASE_OUT=${GPU_OUT:-$ROOT/build/gpu-results}
mkdir -p "$BASE_OUT"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

rc=0
run_part() {  # name script
  local name=$1 script=$2
  echo "################ $name ################"
  OUT="$BASE_OUT/$name" bash "$script" 2>&1 | tee "$BASE_OUT/$name.log"
  local r=${PIPESTATUS[0]}
  ((r != 0)) && rc=1
  return 0
}

if [[ "${BUILD_ONLY:-0}" == 1 ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSINKSCOPE_CUDA=ON \
    -DSINKSCOPE_GUI=OFF -DSINKSCOPE_TESTS=OFF -DSINKSCOPE_GPU_TESTS=ON \
    -DSINKSCOPE_PTXAS_VERBOSE=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_USER_MAKE_RULES_OVERRIDE_CUDA="$ROOT/tests/gpu/cuda20_override.cmake" \
    >"$BASE_OUT/configure.log" 2>&1 || { tail -40 "$BASE_OUT/configure.log"; exit 1; }
  ninja -C "$BUILD" >"$BASE_OUT/build.log" 2>&1 ||
    { grep -E "error|FAILED" "$BASE_OUT/build.log" | head -40; exit 1; }
  echo "build only: every GPU target built in $BUILD"
  exit 0
fi

case "$PART" in
  attention) run_part attention "$ROOT/tests/gpu/run_gpu.sh" ;;
  backend) run_part backend "$ROOT/tests/gpu/run_backend_gpu.sh" ;;
  kv) run_part kv "$ROOT/tests/gpu/run_kv_eval.sh" ;;
  latency) run_part latency "$ROOT/tests/gpu/run_latency.sh" ;;
  scale) run_part scale "$ROOT/tests/gpu/run_scale.sh" ;;
  all)
    run_part attention "$ROOT/tests/gpu/run_gpu.sh"
    run_part backend "$ROOT/tests/gpu/run_backend_gpu.sh"
    run_part latency "$ROOT/tests/gpu/run_latency.sh"
    run_part kv "$ROOT/tests/gpu/run_kv_eval.sh"
    ;;
  *) echo "usage: bash scripts/gpu.sh [attention|backend|kv|latency|scale|all]" >&2; exit 2 ;;
esac

if [[ -n "${LOGS:-}" ]]; then
  tar czf "$LOGS" --exclude='*.gguf' -C "$BASE_OUT" . 2>/dev/null && echo "logs: $LOGS"
fi

echo
echo "================ SinkScope GPU summary ($(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)) ================"
for name in attention backend latency kv scale; do
  [[ -f "$BASE_OUT/$name.log" ]] || continue
  echo "--- $name"
  grep -E "^(RESULT|tests:|fused decode kernels:|test_cupti:|tracing overhead|lowest overhead|soak|speed-up vs best HF|SKIP|control change ->|\| W=|\| dense|\| int|\| [0-9a-z]|=== skip sweep|SUMMARY)" \
    "$BASE_OUT/$name.log" | head -30
done
exit $rc
