#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Real-size models on the GPU: the 7-8B shapes as random-weight GGUF files (sinkscope-cli
# make-test-model), their prefill / decode speed and device memory from 8K to 128K tokens, the
# sparse prefill's attention saving at the 8B attention shape, TTFT dense vs dynamic-sparse with
# calibrated lambda (and the quality of the same runs) on the real SmolLM2 weights, and the
# workbench's control-change latency at 2K and 32K tokens. Tables go to stdout; logs and CSV to
# $OUT (default build/gpu-results/scale).
#   STAGES   which parts, in order (default "models e2e attn ttft latency"):
#     models   make the 8B-shape files (SHAPES, default "llama3-8b:q4_k_m") into $SCALE_DIR
#     e2e      bench_e2e on each file: prefill of each of E2E_LENS tokens (default
#              "8192 32768 131072") then E2E_DECODE (default 64) decode steps, weights
#              E2E_WEIGHTS (default "bf16 native"); device memory per model and context
#     attn     bench_attention --skip-sweep 128 ATTN_L (default 32768): dense vs sparse prefill at
#              the Llama-3-8B attention shape (32 query / 8 KV heads, d 128) over skip shares
#     ttft     bench_ttft on the real model (MODEL / SINKSCOPE_MODEL) at TTFT_LENS (default
#              "8192 32768"), targets TTFT_TARGETS (default "0.6,0.75"): per (L, target) a "fit"
#              row (calibrate's c / L) and a "solved" row (the fixed lambda whose measured share
#              at L is the target); then, unless TTFT_8B=0, each 8B file of SHAPES that exists
#              (stage models), --speed-only --no-fit (random weights: quality means nothing,
#              and the fit's lambda grid skips nothing), weights TTFT_8B_WEIGHTS (default bf16)
#     latency  bench_view_latency --backend cuda at LAT_LENS (default "2048 32768") tokens on
#              LAT_MODEL (default: the real model)
#   BIN        folder with the programs (default $BUILD/tests/gpu, $BUILD/app/cli; or a folder
#              holding all of them, e.g. the prebuilt archive's bin/)
#   SCALE_DIR  where the 8B files go (default /tmp/sinkscope-scale; 5-9 GB each)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$ROOT/build/gpu-results/scale}
SCALE_DIR=${SCALE_DIR:-/tmp/sinkscope-scale}
STAGES=${STAGES:-models e2e attn ttft latency}
SHAPES=${SHAPES:-llama3-8b:q4_k_m}
mkdir -p "$OUT" "$SCALE_DIR"
[[ -n "${MODEL:-}" ]] && export SINKSCOPE_MODEL="$MODEL"

find_bin() {  # name -> path of the program, or empty
  local d
  for d in ${BIN:-} "$BUILD/tests/gpu" "$BUILD/tests/bench" "$BUILD/app/cli"; do
    [[ -x "$d/$1" ]] && { echo "$d/$1"; return; }
  done
}
need() {  # name: the path, or a SKIP line and a non-zero status
  local p
  p=$(find_bin "$1")
  [[ -n "$p" ]] || { echo "SKIP: $1 not found (BIN=${BIN:-}, BUILD=$BUILD)"; return 1; }
  echo "$p"
}
file_of() { echo "$SCALE_DIR/${1%%:*}-${1##*:}.gguf"; }  # shape:type -> its file

rc=0
for stage in $STAGES; do
  echo "################ scale: $stage ################"
  case "$stage" in
    models)
      cli=$(need sinkscope-cli) || continue
      for st in $SHAPES; do
        f=$(file_of "$st")
        [[ -s "$f" ]] && { echo "$f exists"; continue; }
        t0=$(date +%s)
        "$cli" make-test-model --shape "${st%%:*}" --type "${st##*:}" --out "$f" >"$OUT/make_${st/:/_}.log" 2>&1 ||
          { tail -5 "$OUT/make_${st/:/_}.log"; rc=1; continue; }
        echo "$f: $(du -BM "$f" | cut -f1) in $(($(date +%s) - t0)) s"
      done
      ;;
    e2e)
      e2e=$(need bench_e2e) || continue
      table="$OUT/e2e.md"
      echo "| model | weights | prompt L | prefill tok/s | prefill ms | decode tok/s @ L | device MiB |" >"$table"
      echo "|---|---|--:|--:|--:|--:|--:|" >>"$table"
      for st in $SHAPES; do
        f=$(file_of "$st")
        [[ -s "$f" ]] || { echo "SKIP: $f missing (stage models)"; continue; }
        for w in ${E2E_WEIGHTS:-bf16 native}; do
          for L in ${E2E_LENS:-8192 32768 131072}; do
            log="$OUT/e2e_${st/:/_}_${w}_$L.log"
            reps=3
            ((L > 40000)) && reps=1
            SINKSCOPE_MODEL="$f" timeout 600 "$e2e" --prompt "$L" --decode "${E2E_DECODE:-64}" \
              --reps "$reps" --weights "$w" --no-eager --csv "$OUT/e2e.csv" >"$log" 2>&1
            r=$?
            if ((r != 0)) || ! grep -q "sinkscope cuda graph" "$log"; then
              echo "| $st | $w | $L | failed: $(grep -m1 -E 'FAIL|error|needs' "$log" | cut -c1-120) | | | |" >>"$table"
              continue
            fi
            mib=$(sed -n 's/.*held by the backend: \([0-9.]*\) MiB.*/\1/p' "$log")
            awk -v st="$st" -v w="$w" -v L="$L" -v mib="$mib" -F'|' \
              '/sinkscope cuda graph/ {gsub(/ /,""); printf "| %s | %s | %s | %s | %s | %s | %s |\n", st, w, L, $3, $4, $5, mib}' \
              "$log" >>"$table"
          done
        done
      done
      cat "$table"
      ;;
    attn)
      ba=$(need bench_attention) || continue
      L=${ATTN_L:-32768}
      timeout 600 "$ba" "$OUT/skip_sweep.csv" --skip-sweep 128 "$L" >"$OUT/skip_sweep.log" 2>&1 || rc=1
      grep "=== skip sweep" "$OUT/skip_sweep.log"
      ;;
    ttft)
      bt=$(need bench_ttft) || continue
      lens=$(echo "${TTFT_LENS:-8192 32768}" | tr ' ' ',')
      timeout 900 "$bt" --lengths "$lens" --targets "${TTFT_TARGETS:-0.6,0.75}" \
        --reps "${TTFT_REPS:-5}" --csv "$OUT/ttft.csv" 2>&1 | tee "$OUT/ttft.log"
      ((PIPESTATUS[0] == 0)) || rc=1
      if [[ "${TTFT_8B:-1}" != 0 ]]; then
        for st in $SHAPES; do
          f=$(file_of "$st")
          [[ -s "$f" ]] || { echo "SKIP: $f missing (stage models)"; continue; }
          echo "--- ttft, $st (random weights, speed only)"
          timeout 900 "$bt" --model "$f" --speed-only --no-fit --lengths "$lens" \
            --targets "${TTFT_TARGETS:-0.6,0.75}" --reps "${TTFT_8B_REPS:-3}" \
            --weights "${TTFT_8B_WEIGHTS:-bf16}" --csv "$OUT/ttft_${st/:/_}.csv" 2>&1 |
            tee "$OUT/ttft_${st/:/_}.log"
          ((PIPESTATUS[0] == 0)) || rc=1
        done
      fi
      ;;
    latency)
      bl=$(need bench_view_latency) || continue
      for L in ${LAT_LENS:-2048 32768}; do
        SINKSCOPE_MODEL="${LAT_MODEL:-${SINKSCOPE_MODEL:-}}" timeout 600 "$bl" --backend cuda \
          --tokens "$L" --reps "${LAT_REPS:-3}" 2>&1 | tee "$OUT/latency_$L.log" | grep -E "control change|^\||SKIP|FAIL"
      done
      ;;
    *) echo "run_scale: unknown stage '$stage' (models e2e attn ttft latency)" >&2; exit 2 ;;
  esac
done
exit $rc
