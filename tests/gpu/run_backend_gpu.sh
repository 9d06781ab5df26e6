#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds and runs the CUDA backend's GPU checks: test_cuda_backend (CPU vs GPU logits, decode
# graphs, sparse/dense, reset/overflow/cancel), bench_e2e (prefill + decode tokens/s) and the
# HF transformers baseline on the same GPU (hf_e2e_bench.py), then prints a summary table last.
# Configures exactly like run_gpu.sh (SINKSCOPE_TESTS=OFF, SINKSCOPE_GPU_TESTS=ON), so both
# scripts share one build folder and the attention kernels compile once.
#   MODEL=<file.gguf>  (or SINKSCOPE_MODEL) the model; else $ROOT/.model/<file> or its split
#                      parts $ROOT/.model/<file>.part-*; else the set-up script's cache path
#   BUILD=<dir> (default build-gpu)   OUT=<dir> (default build/gpu-results/backend)
#   SKIP_TESTS=1 / SKIP_BENCH=1 / SKIP_HF=1 / SKIP_ABLATE=1 (bench with PDL / fused combine /
#   fused decode off)     REPS=<n> benchmark repetitions (default 5)
#   SKIP_TRACE=1 skips the profiler checks: test_cupti (CUPTI collector, kernel attribution with
#                eager and replayed decode steps) and bench_trace_overhead (decode tok/s and
#                overhead per CUPTI preset); TRACE_PRESETS=<list> for test_cupti (default full,lean)
#   SKIP_SOAK=1 skips the soak: bench_soak --backend cuda, SOAK_RUNS (default 1000) mixed short /
#                long / cancelled runs on the model, RSS and GPU memory growth bound 1 %
#   SKIP_HF_ORACLES=1 skips test_cuda_hf_oracles (the CUDA backend vs HF transformers on tiny
#                checkpoints of every family that tests/gpu/make_cuda_hf_oracles.py writes)
#   SKIP_SKIPMASK=1 skips test_skip_agreement (CPU vs GPU skip masks of every layer and head on
#                ~2K tokens, lambda 0 / 0.01 / 0.05; SKIPMASK_ARGS=<extra arguments>)
#   SKIP_CAPTURED=1 skips the captured-QKV benchmark: capture_qkv (post-RoPE Q/K/V of SmolLM2
#                layers CAPTURE_LAYERS (default 3,15,27) at CAPTURE_LENGTHS (default 2048,4096,8192)
#                into $OUT/qkv, scratch), bench_captured (our dense vs sparse prefill kernels at
#                several lambda) and torch_sdpa_captured.py (torch SDPA on the same tensors)
#   TEXT=<file>  real text for those two (default $ROOT/.model/kjv.txt when carried, else the
#                set-up script's eval/kjv.txt, else the GPU tests' fixed passage, repeated)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$ROOT/build/gpu-results/backend}
REPS=${REPS:-5}
mkdir -p "$OUT"
rm -f "$OUT/unfused.csv"  # the "fused decode off" rows of the summary come from this run only
[[ -n "${MODEL:-}" ]] && export SINKSCOPE_MODEL="$MODEL"
# The model is larger than one device-tool carry (64 MiB): it may arrive as split parts
# (split -b 50M FILE .model/FILE.part-) under $ROOT/.model; join and verify them once.
MODEL_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [[ -z "${SINKSCOPE_MODEL:-}" ]]; then
  if [[ -f "$ROOT/.model/$MODEL_NAME" ]]; then
    export SINKSCOPE_MODEL="$ROOT/.model/$MODEL_NAME"
  elif compgen -G "$ROOT/.model/$MODEL_NAME.part-*" >/dev/null; then
    cat "$ROOT/.model/$MODEL_NAME".part-* >"$OUT/$MODEL_NAME"
    if [[ "$(sha256sum "$OUT/$MODEL_NAME" | cut -d' ' -f1)" == "$MODEL_SHA" ]]; then
      export SINKSCOPE_MODEL="$OUT/$MODEL_NAME"
    else
      echo "WARNING: joined $ROOT/.model/$MODEL_NAME.part-* has the wrong sha256 (parts missing?)"
    fi
  fi
fi
echo "model: ${SINKSCOPE_MODEL:-<default path of engine/util/paths.h>}"

echo "== configure + build (sm_90) =="
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSINKSCOPE_CUDA=ON \
  -DSINKSCOPE_GUI=OFF -DSINKSCOPE_TESTS=OFF -DSINKSCOPE_GPU_TESTS=ON \
  -DSINKSCOPE_PTXAS_VERBOSE=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_USER_MAKE_RULES_OVERRIDE_CUDA="$ROOT/tests/gpu/cuda20_override.cmake" \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
trace_targets=()
[[ "${SKIP_TRACE:-0}" != 1 ]] && trace_targets=(test_cupti bench_trace_overhead)
[[ "${SKIP_SOAK:-0}" != 1 ]] && trace_targets+=(bench_soak)
[[ "${SKIP_SKIPMASK:-0}" != 1 ]] && trace_targets+=(test_skip_agreement)
[[ "${SKIP_CAPTURED:-0}" != 1 ]] && trace_targets+=(capture_qkv bench_captured)
[[ -z "${TEXT:-}" && -f "$ROOT/.model/kjv.txt" ]] && TEXT="$ROOT/.model/kjv.txt"
[[ -n "${TEXT:-}" ]] && export SINKSCOPE_TEXT="$TEXT"
ninja -C "$BUILD" test_cuda_backend test_cuda_cache test_cuda_families test_cuda_hf_oracles test_gpu_head_map test_head_map_kernel bench_e2e test_decode_fused "${trace_targets[@]}" \
  >"$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" "$OUT/build.log" | head -40; exit 1; }
grep -A2 "ops_cu" "$OUT/build.log" | grep -E "spill" | sort | uniq -c | sed 's/^/  ptxas (ops.cu): /'
grep -A2 "decode_fused_cu" "$OUT/build.log" | grep -E "spill" | sort | uniq -c |
  sed 's/^/  ptxas (decode_fused.cu): /'
# BUILD_ONLY=1: stop after the build (a first device call that builds while the model's second
# part is still to be carried; the next call finds the build done).
if [[ "${BUILD_ONLY:-0}" == 1 ]]; then echo "build only: done ($BUILD)"; exit 0; fi

test_status="not run"
fused_status="not run"
rc=0
if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  echo "== test_decode_fused (fused decode kernels vs float64 reference, then timing) =="
  timeout 600 "$BUILD/tests/gpu/test_decode_fused" >"$OUT/test_decode_fused.log" 2>&1 || rc=1
  cat "$OUT/test_decode_fused.log"
  fused_status=$(grep -E "^(RESULT|SKIP)" "$OUT/test_decode_fused.log" | tail -1)
  [[ -z "$fused_status" ]] && fused_status="crashed, see $OUT/test_decode_fused.log"
  echo "== test_cuda_backend =="
  timeout 900 "$BUILD/tests/gpu/test_cuda_backend" >"$OUT/test.log" 2>&1 || rc=$?
  cat "$OUT/test.log"
  test_status=$(grep -E "^(RESULT|SKIP)" "$OUT/test.log" | tail -1)
  [[ -z "$test_status" ]] && test_status="crashed (rc=$rc), see $OUT/test.log"
  echo "== test_cuda_cache (sliding window + sinks, position modes, budgets vs the CPU) =="
  timeout 900 "$BUILD/tests/gpu/test_cuda_cache" >"$OUT/test_cache.log" 2>&1 || rc=1
  cat "$OUT/test_cache.log"
  cache_status=$(grep -E "^(RESULT|SKIP)" "$OUT/test_cache.log" | tail -1)
  [[ -z "$cache_status" ]] && cache_status="crashed, see $OUT/test_cache.log"
  echo "== test_cuda_families (model families vs the CPU backend and transformers) =="
  timeout 600 "$BUILD/tests/gpu/test_cuda_families" >"$OUT/test_families.log" 2>&1 || rc=1
  cat "$OUT/test_families.log"
  families_status=$(grep -E "^(RESULT|SKIP)" "$OUT/test_families.log" | tail -1)
  [[ -z "$families_status" ]] && families_status="crashed, see $OUT/test_families.log"
  hf_status="skipped (SKIP_HF_ORACLES=1)"
  if [[ "${SKIP_HF_ORACLES:-0}" != 1 ]]; then
    echo "== test_cuda_hf_oracles (CUDA vs HF transformers, head_dim 64 / 128) =="
    # Tiny random-weight checkpoints of every family and transformers' logits, written by
    # tests/gpu/make_cuda_hf_oracles.py (torch + transformers) under $OUT/hf_oracles.
    if ! python3 -c "import torch, transformers" >/dev/null 2>&1; then
      echo "SKIP: python3 has no torch + transformers" >"$OUT/test_hf_oracles.log"
    elif ! timeout 900 python3 "$ROOT/tests/gpu/make_cuda_hf_oracles.py" --out "$OUT/hf_oracles" \
        >"$OUT/hf_oracles_make.log" 2>&1; then
      tail -20 "$OUT/hf_oracles_make.log"
      echo "RESULT: FAIL (make_cuda_hf_oracles.py failed, see $OUT/hf_oracles_make.log)" \
        >"$OUT/test_hf_oracles.log"
      rc=1
    else
      cat "$OUT/hf_oracles_make.log"
      timeout 600 "$BUILD/tests/gpu/test_cuda_hf_oracles" "$OUT/hf_oracles" \
        >"$OUT/test_hf_oracles.log" 2>&1 || rc=1
    fi
    cat "$OUT/test_hf_oracles.log"
    hf_status=$(grep -E "^(RESULT|SKIP)" "$OUT/test_hf_oracles.log" | tail -1)
    [[ -z "$hf_status" ]] && hf_status="crashed, see $OUT/test_hf_oracles.log"
  fi
  echo "== test_gpu_head_map (the workbench's map from captured Q/K vs the CPU reference) =="
  timeout 600 "$BUILD/tests/gpu/test_gpu_head_map" >"$OUT/test_head_map.log" 2>&1 || rc=1
  cat "$OUT/test_head_map.log"
  map_status=$(grep -E "^(RESULT|SKIP)" "$OUT/test_head_map.log" | tail -1)
  [[ -z "$map_status" ]] && map_status="crashed, see $OUT/test_head_map.log"
  echo "== test_head_map_kernel (the map computed on the GPU vs headMapFromQK; timed at 32K) =="
  timeout 600 "$BUILD/tests/gpu/test_head_map_kernel" >"$OUT/test_head_map_kernel.log" 2>&1 || rc=1
  cat "$OUT/test_head_map_kernel.log"
  mapk_status=$(grep -E "^(RESULT|SKIP)" "$OUT/test_head_map_kernel.log" | tail -1)
  [[ -z "$mapk_status" ]] && mapk_status="crashed, see $OUT/test_head_map_kernel.log"
  test_status="$test_status; cache: $cache_status; families: $families_status; hf oracles: $hf_status; map: $map_status; map kernel: $mapk_status"
fi

if [[ "${SKIP_BENCH:-0}" != 1 ]]; then
  echo "== bench_e2e (ours) =="
  timeout 600 "$BUILD/tests/gpu/bench_e2e" --csv "$OUT/ours.csv" --ids "$OUT/prompt_ids.txt" \
    --reps "$REPS" >"$OUT/bench.log" 2>&1 || echo "bench_e2e failed (rc=$?)"
  cat "$OUT/bench.log"
  if [[ "${SKIP_ABLATE:-0}" != 1 ]]; then
    # Decode-step switches (docs/environment.md): PDL off, fused combine off, both,
    # fused decode kernels off (the cuBLAS + element-wise path).
    for sw in "SINKSCOPE_PDL=0" "SINKSCOPE_FUSED_COMBINE=0" "SINKSCOPE_PDL=0 SINKSCOPE_FUSED_COMBINE=0" \
      "SINKSCOPE_FUSED_DECODE=0"; do
      echo "== bench_e2e with $sw =="
      csv_arg=()
      [[ "$sw" == "SINKSCOPE_FUSED_DECODE=0" ]] && csv_arg=(--csv "$OUT/unfused.csv")
      env $sw timeout 300 "$BUILD/tests/gpu/bench_e2e" --reps 3 "${csv_arg[@]}" 2>&1 |
        grep -E "graph stats|decode path|sinkscope cuda graph" || echo "bench_e2e ($sw) failed"
    done
    # The summary table's "fused decode off" rows.
    [[ -s "$OUT/unfused.csv" ]] && sed -i 's/^sinkscope_/sinkscope_unfused_decode_/' "$OUT/unfused.csv"
  fi
  if [[ "${SKIP_HF:-0}" != 1 ]]; then
    echo "== HF transformers (same GPU, same prompt) =="
    ids_arg=()
    [[ -s "$OUT/prompt_ids.txt" ]] && ids_arg=(--ids "$OUT/prompt_ids.txt")
    PYTHONUNBUFFERED=1 timeout 900 python3 "$ROOT/tests/gpu/hf_e2e_bench.py" "${ids_arg[@]}" \
      --reps 3 --csv "$OUT/hf.csv" >"$OUT/hf.log" 2>&1 || echo "hf_e2e_bench failed (rc=$?)"
    grep -vE "^\s*$" "$OUT/hf.log" | grep -vE "Warning|warn\(" | tail -15
  fi
fi

trace_status="not run"
if [[ "${SKIP_TRACE:-0}" != 1 ]]; then
  echo "== test_cupti (presets ${TRACE_PRESETS:-full,lean}) =="
  (cd "$OUT" && timeout 900 "$BUILD/tests/gpu/test_cupti" --presets "${TRACE_PRESETS:-full,lean}") \
    >"$OUT/cupti.log" 2>&1
  trace_rc=$?
  cat "$OUT/cupti.log"
  trace_status=$(grep -E "^(PASS|FAILED|SKIP)" "$OUT/cupti.log" | tail -1)
  [[ -z "$trace_status" ]] && trace_status="crashed (rc=$trace_rc), see $OUT/cupti.log"
  [[ $trace_rc -ne 0 && $rc -eq 0 ]] && rc=$trace_rc
  echo "== bench_trace_overhead (every preset) =="
  timeout 900 "$BUILD/tests/gpu/bench_trace_overhead" --backend cuda --reps "$REPS" \
    >"$OUT/trace_bench.log" 2>&1 || echo "bench_trace_overhead failed (rc=$?)"
  cat "$OUT/trace_bench.log"
fi

skipmask_status="not run"
if [[ "${SKIP_SKIPMASK:-0}" != 1 ]]; then
  echo "== test_skip_agreement (CPU vs GPU skip masks, every layer and head) =="
  # shellcheck disable=SC2086
  timeout 900 "$BUILD/tests/gpu/test_skip_agreement" ${SKIPMASK_ARGS:-} >"$OUT/skipmask.log" 2>&1
  sm_rc=$?
  cat "$OUT/skipmask.log"
  skipmask_status=$(grep -E "^(RESULT|SKIP)" "$OUT/skipmask.log" | tail -1)
  [[ -z "$skipmask_status" ]] && skipmask_status="crashed (rc=$sm_rc), see $OUT/skipmask.log"
  [[ $sm_rc -ne 0 && $rc -eq 0 ]] && rc=$sm_rc
fi

captured_status="not run"
if [[ "${SKIP_CAPTURED:-0}" != 1 ]]; then
  echo "== capture_qkv + bench_captured (our dense vs sparse prefill on SmolLM2 Q/K/V) =="
  rm -rf "$OUT/qkv"
  if timeout 600 "$BUILD/tests/gpu/capture_qkv" --out "$OUT/qkv" \
      --lengths "${CAPTURE_LENGTHS:-2048,4096,8192}" --layers "${CAPTURE_LAYERS:-3,15,27}" \
      >"$OUT/capture.log" 2>&1; then
    cat "$OUT/capture.log"
    if compgen -G "$OUT/qkv/*.bin" >/dev/null; then
      timeout 600 "$BUILD/tests/gpu/bench_captured" --csv "$OUT/captured.csv" "$OUT"/qkv/*.bin \
        >"$OUT/bench_captured.log" 2>&1 || echo "bench_captured failed (rc=$?)"
      cat "$OUT/bench_captured.log"
      PYTHONUNBUFFERED=1 timeout 600 python3 "$ROOT/tests/gpu/torch_sdpa_captured.py" \
        --ours "$OUT/captured.csv" "$OUT"/qkv/*.bin >"$OUT/torch_captured.log" 2>&1 ||
        echo "torch_sdpa_captured failed (rc=$?): $(tail -3 "$OUT/torch_captured.log")"
      captured_status="done ($(ls "$OUT"/qkv/*.bin | wc -l) captures)"
    else
      captured_status="$(grep -E "^SKIP" "$OUT/capture.log" | tail -1)"
    fi
  else
    cat "$OUT/capture.log"
    captured_status="capture failed, see $OUT/capture.log"
  fi
fi

soak_status="not run"
if [[ "${SKIP_SOAK:-0}" != 1 ]]; then
  echo "== bench_soak --backend cuda (${SOAK_RUNS:-1000} runs) =="
  soak_model=()
  [[ -n "${SINKSCOPE_MODEL:-}" ]] && soak_model=(--model "$SINKSCOPE_MODEL")
  timeout 1800 "$BUILD/tests/gpu/bench_soak" --backend cuda --runs "${SOAK_RUNS:-1000}" \
    "${soak_model[@]}" --max-growth-pct 1 >"$OUT/soak.log" 2>&1
  soak_rc=$?
  cat "$OUT/soak.log"
  if grep -q "^bound .*(GPU)" "$OUT/soak.log"; then
    soak_status="$(grep -E "^(growth|GPU growth):" "$OUT/soak.log" | sed -E 's/ since the backend was made//; s/ since load//' | paste -sd';' -)"
    soak_status="$([[ $soak_rc -eq 0 ]] && echo PASS || echo FAIL) ($soak_status)"
  else
    soak_status="FAIL: crashed or no GPU figures (rc=$soak_rc), see $OUT/soak.log"
  fi
  [[ $soak_rc -ne 0 && $rc -eq 0 ]] && rc=$soak_rc
fi

echo
echo "================ summary: CUDA backend ================"
echo "tests: $test_status"
echo "soak (bench_soak --backend cuda, bound 1 %): $soak_status"
echo "fused decode kernels: $fused_status"
echo "skip masks CPU vs GPU: $skipmask_status"
grep -E "^SUMMARY" "$OUT/skipmask.log" 2>/dev/null | sed 's/^/  /'
echo "captured-QKV prefill benchmark: $captured_status"
[[ -s "$OUT/torch_captured.log" ]] && sed -n '/^=== prefill on captured/,$p' "$OUT/torch_captured.log"
if [[ "${SKIP_TRACE:-0}" != 1 ]]; then
  echo "test_cupti: $trace_status"
  grep -E "^(model \(|FAIL )" "$OUT/cupti.log" 2>/dev/null | cut -c1-160 | sed 's/^/  /'
  grep -E "^(\||tracing overhead:|lowest overhead)" "$OUT/trace_bench.log" 2>/dev/null ||
    echo "bench_trace_overhead: no results (see $OUT/trace_bench.log)"
fi
grep -E "^(PASS|FAIL)" "$OUT/test.log" 2>/dev/null | sed -E 's/^(PASS|FAIL) ([a-z0-9_]+):.*/  \1 \2/'
python3 - "$OUT/ours.csv" "$OUT/unfused.csv" "$OUT/hf.csv" <<'PY'
import csv, os, sys
rows = []
for p in sys.argv[1:]:
    if os.path.exists(p):
        rows += list(csv.DictReader(open(p)))
if not rows:
    print("benchmarks: no results (see the logs above)")
    sys.exit(0)
def f(x):
    try:
        v = float(x)
        return v if v == v else None
    except (TypeError, ValueError):
        return None
ours = {r["engine"]: r for r in rows if r["engine"].startswith("sinkscope")}
hf = [r for r in rows if not r["engine"].startswith("sinkscope")]
best_hf_pre = max([f(r["prefill_tok_s"]) for r in hf if f(r["prefill_tok_s"])] or [0])
best_hf_dec = max([f(r["decode_tok_s"]) for r in hf if f(r["decode_tok_s"])] or [0])
print(f"| {'engine':32} | {'prefill tok/s':>13} | {'decode tok/s':>12} |")
print(f"|{'-'*34}|{'-'*15}|{'-'*14}|")
for r in rows:
    p, d = f(r["prefill_tok_s"]), f(r["decode_tok_s"])
    ps = "-" if p is None else str(round(p))
    ds = "-" if d is None else f"{d:.1f}"
    print(f"| {r['engine']:32} | {ps:>13} | {ds:>12} |")
g = ours.get("sinkscope_graph")
if g and best_hf_pre and best_hf_dec:
    print(f"speed-up vs best HF: prefill x{float(g['prefill_tok_s'])/best_hf_pre:.2f}, "
          f"decode x{float(g['decode_tok_s'])/best_hf_dec:.2f}")
PY
exit $rc
