#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Real-size models on the GPU: the 7-8B shapes as random-weight GGUF files (sinkscope-cli
# make-test-model), their prefill / decode speed and device memory from 8K to 128K tokens, the
# sparse prefill's attention saving at the 8B attention shape, TTFT dense vs dynamic-sparse with
# calibrated lambda (and the quality of the same runs) on the real SmolLM2 weights, and the
# workbench's control-change latency at 2K and 32K tokens. Tables go to stdout; logs and CSV to
# $OUT (default build/gpu-results/scale).
#   STAGES   which parts, in order (default "models decode attn llama-8b e2e ttft-8b ttft-real
#            latency llama-real report": the stages on the real model last, so that its file may
#            still be travelling while the 8B stages run; "ttft" and "llama" are both halves):
#     models   make the 8B-shape files (SHAPES, default "llama3-8b:q4_k_m llama3-8b:q8_0") into
#              $SCALE_DIR, with make-test-model's --sink-pattern (SINK_PATTERN=0: without), so
#              that lambda sets the skipped share of the ttft stage's sparse runs there
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
#              LAT_MODEL (default: the real model, and for lengths past LAT_REAL_CONTEXT,
#              default 8192, the first 8B file of SHAPES)
#     decode   the 8B files' decode with native weights for each
#              activations:GEMV-variant[:head[:repack[:merge[:fuse]]]] of DECODE_RUNS (default
#              "int8:8 int8:0 int8:8:native:1:1:0 int8:8:native:0 int8:8:native:1:0 int8:8:bf16";
#              kernels/qgemv_wide.h; head: SINKSCOPE_GPU_LM_HEAD, default native; repack:
#              SINKSCOPE_QWEIGHT_REPACK, merge: SINKSCOPE_QWEIGHT_MERGE, fuse:
#              SINKSCOPE_QGEMV_FUSE, default 1 each):
#              2K prompt, 128 steps, median of 3; unless DECODE_PICK=0 or SINKSCOPE_QGEMV_VARIANT
#              is set, the fastest int8 variant on the first file becomes SINKSCOPE_QGEMV_VARIANT
#              for the stages after it (the report names it)
#     llama    llama_cpp_gpu_compare.sh on the real model (bf16 weights; lengths LLAMA_SMOL_LENS,
#              default "512 2048 8000") and on each 8B file (native weights, LLAMA_ACT, default
#              int8; lengths LLAMA_LENS, default "512 2048 8192 32768"): prefill of L tokens and
#              128 decode steps at depth L, llama.cpp with flash attention on and off, one round;
#              needs LLAMA_SRC (the pack step's tarball; llama-bench is built once, ~5 min, in
#              the background from the start of the run)
#     report   every table above that was written, into $OUT/report.md, with the date, the GPU
#              and the commit (COMMIT, else git's HEAD when there is a .git)
#   The default STAGES run all of it, which takes longer than one device call: start it with
#   tests/gpu/detach.sh and poll in the following calls (docs/gpu.md).
#   BIN        folder with the programs (default $BUILD/tests/gpu, $BUILD/app/cli; or a folder
#              holding all of them, e.g. the prebuilt archive's bin/)
#   SCALE_DIR  where the 8B files go (default /tmp/sinkscope-scale; 5-9 GB each)
#   MODEL_WAIT seconds the ttft, latency and llama stages wait for the real model file
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$ROOT/build/gpu-results/scale}
SCALE_DIR=${SCALE_DIR:-/tmp/sinkscope-scale}
STAGES=${STAGES:-models decode attn llama-8b e2e ttft-8b ttft-real latency llama-real report}
SHAPES=${SHAPES:-llama3-8b:q4_k_m llama3-8b:q8_0}
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
yn() { [[ $1 == 1 ]] && echo yes || echo no; }             # 1 -> yes, else no (report cells)
# Stages on the real model wait up to MODEL_WAIT seconds (default 0) for $SINKSCOPE_MODEL to
# appear: a run started before the last of its parts has travelled (docs/gpu.md).
wait_model() {
  local waited=0
  while [[ -n "${SINKSCOPE_MODEL:-}" && ! -s "$SINKSCOPE_MODEL" && $waited -lt ${MODEL_WAIT:-0} ]]; do
    ((waited == 0)) && echo "waiting up to ${MODEL_WAIT} s for $SINKSCOPE_MODEL"
    sleep 10
    waited=$((waited + 10))
  done
}

# llama-bench builds in the background from the start (about 5 minutes on the GPU machine's CPUs)
# while the stages before "llama" use the GPU; the llama stage waits for it (a lock).
if [[ " $STAGES " == *" llama"* && -f "${LLAMA_SRC:-}" ]]; then
  nice bash "$ROOT/tests/gpu/llama_cpp_gpu_compare.sh" build --src "$LLAMA_SRC" --out "$OUT/llama_build" \
    >"$OUT/llama_build.log" 2>&1 &
fi

rc=0
for stage in $STAGES; do
  echo "################ scale: $stage ($(date -u +%H:%M:%S)) ################"
  case "$stage" in ttft | ttft-real | latency | llama | llama-real) wait_model ;; esac
  case "$stage" in
    models)
      cli=$(need sinkscope-cli) || continue
      for st in $SHAPES; do
        f=$(file_of "$st")
        [[ -s "$f" ]] && { echo "$f exists"; continue; }
        t0=$(date +%s)
        # --sink-pattern: the ttft stage's sparse runs need a sink (dense speed does not change).
        "$cli" make-test-model --shape "${st%%:*}" --type "${st##*:}" --out "$f" \
          $([[ ${SINK_PATTERN:-1} == 1 ]] && echo --sink-pattern) >"$OUT/make_${st/:/_}.log" 2>&1 ||
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
    ttft | ttft-real | ttft-8b)
      bt=$(need bench_ttft) || continue
      lens=$(echo "${TTFT_LENS:-8192 32768}" | tr ' ' ',')
      if [[ $stage != ttft-8b ]]; then
        timeout 900 "$bt" --lengths "$lens" --targets "${TTFT_TARGETS:-0.6,0.75}" \
          --reps "${TTFT_REPS:-5}" --csv "$OUT/ttft.csv" 2>&1 | tee "$OUT/ttft.log"
        ((PIPESTATUS[0] == 0)) || rc=1
      fi
      if [[ $stage != ttft-real && "${TTFT_8B:-1}" != 0 ]]; then
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
      first_8b=$(file_of "${SHAPES%% *}")
      for L in ${LAT_LENS:-2048 32768}; do
        m=${LAT_MODEL:-${SINKSCOPE_MODEL:-}}
        # Past the real model's context (SmolLM2: 8K) the benchmark would shorten the prompt to it:
        # such lengths run on the first 8B file instead.
        [[ -z "${LAT_MODEL:-}" && $L -gt ${LAT_REAL_CONTEXT:-8192} && -s "$first_8b" ]] && m=$first_8b
        { echo "latency model: $(basename "$m")"
          SINKSCOPE_MODEL="$m" timeout 600 "$bl" --backend cuda --tokens "$L" --reps "${LAT_REPS:-3}" 2>&1
        } | tee "$OUT/latency_$L.log" | grep -E "latency model|control change|^\||SKIP|FAIL"
      done
      ;;
    decode)
      e2e=$(need bench_e2e) || continue
      table="$OUT/decode_ab.md"
      echo "| model | activations | GEMV variant | LM head | Q8_0/Q6_K repacked | parts merged | norm, SwiGLU fused | decode tok/s (2K prompt, 128 steps) |" >"$table"
      echo "|---|---|--:|---|---|---|---|--:|" >>"$table"
      pick_file="" best=0 best_v=""
      for st in $SHAPES; do
        f=$(file_of "$st")
        [[ -s "$f" ]] || { echo "SKIP: $f missing (stage models)"; continue; }
        [[ -z "$pick_file" ]] && pick_file=$f
        for run in ${DECODE_RUNS:-int8:8 int8:0 int8:8:native:1:1:0 int8:8:native:0 int8:8:native:1:0 int8:8:bf16}; do
          IFS=: read -r act var head rep merge fuse <<<"$run"
          head=${head:-native} rep=${rep:-1} merge=${merge:-1} fuse=${fuse:-1}
          log="$OUT/decode_${st/:/_}_${act}_v${var}_${head}_r${rep}_m${merge}_f$fuse.log"
          SINKSCOPE_QWEIGHT_MERGE=$merge SINKSCOPE_QWEIGHT_REPACK=$rep SINKSCOPE_GPU_LM_HEAD=$head \
            SINKSCOPE_QGEMV_FUSE=$fuse SINKSCOPE_QGEMV_VARIANT=$var \
            SINKSCOPE_MODEL="$f" timeout 300 \
            "$e2e" --prompt 2048 --decode 128 --reps 3 --weights native --act "$act" --no-eager \
            >"$log" 2>&1 || rc=1
          tps=$(awk -F'|' '/sinkscope cuda graph/ {gsub(/ /,""); print $5}' "$log")
          echo "| $st | $act | $var | $head | $(yn "$rep") | $(yn "$merge") | $(yn "$fuse") | ${tps:-failed} |" >>"$table"
          if [[ $f == "$pick_file" && $act == int8 && $head == native && $rep == 1 && $merge == 1 &&
            $fuse == 1 && -n "$tps" ]] &&
            awk -v a="$tps" -v b="$best" 'BEGIN { exit !(a > b) }'; then
            best=$tps best_v=$var
          fi
        done
      done
      cat "$table"
      if [[ ${DECODE_PICK:-1} == 1 && -z "${SINKSCOPE_QGEMV_VARIANT:-}" && -n "$best_v" ]]; then
        export SINKSCOPE_QGEMV_VARIANT=$best_v
        echo "GEMV variant $best_v ($best tok/s on $(basename "$pick_file")) for the stages after decode" |
          tee "$OUT/decode_pick.txt"
      fi
      ;;
    llama | llama-real | llama-8b)
      e2e=$(need bench_e2e) || continue
      [[ -f "${LLAMA_SRC:-}" ]] || { echo "SKIP: llama: LLAMA_SRC (llama_cpp_gpu_compare.sh pack) not set or missing"; continue; }
      runs=()
      [[ $stage != llama-8b && -s "${SINKSCOPE_MODEL:-}" ]] &&
        runs+=("$SINKSCOPE_MODEL|bf16|${LLAMA_SMOL_LENS:-512 2048 8000}")
      for st in $SHAPES; do
        f=$(file_of "$st")
        [[ $stage != llama-real && -s "$f" ]] && runs+=("$f|native|${LLAMA_LENS:-512 2048 8192 32768}")
      done
      for r in "${runs[@]}"; do
        IFS='|' read -r f w lens <<<"$r"
        name=$(basename "$f" .gguf)
        echo "--- $name ($w weights)"
        timeout 1800 bash "$ROOT/tests/gpu/llama_cpp_gpu_compare.sh" run --src "$LLAMA_SRC" \
          --ours "$e2e" --model "$f" --lens "$lens" --decode 128 --rounds 1 --reps 1 --fa "1 0" \
          --weights "$w" $([[ $w == native ]] && echo --act "${LLAMA_ACT:-int8}") \
          --out "$OUT/llama_$name" 2>&1 | tee "$OUT/llama_$name.log" | tail -8
        ((PIPESTATUS[0] == 0)) || rc=1
        { echo "$name, $w weights$([[ $w == native ]] && echo ", ${LLAMA_ACT:-int8} activations"):"; echo
          grep '^|' "$OUT/llama_$name.log"; echo; } >"$OUT/llama_$name.md"
      done
      ;;
    report)
      rep="$OUT/report.md"
      commit=${COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}
      gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
      {
        echo "# Real-size models on the GPU: $(date -u +%Y-%m-%d), ${gpu:-unknown GPU}, commit $commit"
        echo
        section() { [[ -s "$2" ]] && { echo "## $1"; echo; cat "$2"; echo; }; }
        section "Speed and device memory (e2e)" "$OUT/e2e.md"
        section "8B decode: activation precision and GEMV kernel variant" "$OUT/decode_ab.md"
        [[ -s "$OUT/decode_pick.txt" ]] && { cat "$OUT/decode_pick.txt"; echo; }
        for f in "$OUT"/llama_*.md; do section "Against llama.cpp: $(basename "$f" .md | sed 's/^llama_//')" "$f"; done
        [[ -s "$OUT/ttft.log" ]] && { echo "## TTFT, dense against dynamic-sparse"; echo; grep -E '^\|' "$OUT/ttft.log"; echo; }
        for f in "$OUT"/ttft_*.log; do
          [[ -s "$f" ]] && { echo "## TTFT, dense against dynamic-sparse, $(basename "$f" .log | sed 's/^ttft_//') (random weights, skip share from the sink pattern)"; echo; grep -E '^\|' "$f"; echo; }
        done
        [[ -s "$OUT/skip_sweep.log" ]] && { echo "## Sparse prefill at the 8B attention shape"; echo; grep -E "=== skip sweep|^\|" "$OUT/skip_sweep.log"; echo; }
        for f in "$OUT"/latency_*.log; do
          [[ -s "$f" ]] && { echo "## Workbench latency, $(basename "$f" .log | sed 's/latency_//') tokens"; echo; grep -E "latency model|control change|^\|" "$f"; echo; }
        done
      } >"$rep"
      echo "report: $rep ($(grep -c '^|' "$rep") table rows)"
      ;;
    *) echo "run_scale: unknown stage '$stage' (models decode attn llama llama-8b llama-real e2e ttft ttft-8b ttft-real latency report)" >&2; exit 2 ;;
  esac
done
exit $rc
