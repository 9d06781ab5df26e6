#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 5's streaming evaluation on the CUDA backend (SmolLM2, trained context 8K), every run
# through `sinkscope-cli` so that the numbers are the ones a user reproduces:
#   1. perplexity per segment over >= 100K tokens of real text (the King James Bible of
#      `scripts/setup.sh --eval-data`): dense (full cache, degrades past 8K), window only
#      (S = 0), window + S sinks for S in 1 2 4 8, and sliding window with re-computation (the
#      reference), for W in 256 1024; every run scores the same tokens (every KV_STRIDE-th);
#   2. int8 / int4 KV, each with and without sink protection, against unquantized KV under the
#      same policy (W = 1024, S = 4): perplexity change, mean KL, top-1 (stream-ppl --vs-unquantized);
#   3. passkey retrieval vs window and sink count.
# Then prints the tables (scripts/kv_eval_table.py) and writes the plot.
#   BUILD=<dir> (default build-gpu, built by run_backend_gpu.sh or scripts/gpu.sh BUILD_ONLY=1)
#   OUT=<dir> (default build/gpu-results/kv)   KV_TEXT=<file> (default .model/kjv.txt, else the set-up script's copy)
#   KV_TOKENS (default 102400)  KV_STRIDE (default 4)  KV_SEGMENT (default 8192)
#   KV_BACKEND (default cuda)   KV_QUANT_TOKENS (default 8192)   KV_RUNS (below)
#   SKIP_QUANT=1   SKIP_PASSKEY=1
#   MODEL / SINKSCOPE_MODEL as in run_backend_gpu.sh (that script joins split model parts).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$ROOT/build/gpu-results/kv}
mkdir -p "$OUT"
CLI="$BUILD/app/cli/sinkscope-cli"
[[ -x "$CLI" ]] || { echo "SKIP: $CLI not built (run scripts/gpu.sh BUILD_ONLY=1 first)"; exit 0; }
TEXT=${KV_TEXT:-$ROOT/.model/kjv.txt}
[[ -f "$TEXT" ]] || TEXT=${XDG_CACHE_HOME:-$HOME/.cache}/sinkscope/eval/kjv.txt
[[ -f "$TEXT" ]] || { echo "SKIP: no evaluation text (KV_TEXT, or scripts/setup.sh --eval-data)"; exit 0; }
N=${KV_TOKENS:-102400}
STRIDE=${KV_STRIDE:-4}
SEG=${KV_SEGMENT:-8192}
BK=${KV_BACKEND:-cuda}
QN=${KV_QUANT_TOKENS:-8192}
[[ -n "${MODEL:-}" ]] && export SINKSCOPE_MODEL="$MODEL"
echo "kv eval: $(basename "$TEXT") ($(sha256sum "$TEXT" | cut -c1-16)), $N tokens, every ${STRIDE}th scored, backend $BK"

rc=0
run() {  # name args... -> $OUT/<name>.json (+ .csv), a line on failure
  local name=$1
  shift
  local t0=$SECONDS
  if "$CLI" stream-ppl --file "$TEXT" --max-tokens "$N" --stride "$STRIDE" --segment "$SEG" \
      --backend "$BK" --json "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"; then
    echo "  $name: $((SECONDS - t0)) s"
  else
    echo "  $name FAILED (rc=$?): $(tail -2 "$OUT/$name.err")"
    rm -f "$OUT/$name.json"
    rc=1
  fi
}

# KV_RUNS: which streaming runs (default all): dense, w<W>_s<S>, w<W>_recompute. Both backends
# stream in chunks in either position mode (a window run over 100K tokens: ~20 s on an H200).
RUNS=${KV_RUNS:-dense w256_s0 w256_s1 w256_s2 w256_s4 w256_s8 w256_recompute w1024_s0 w1024_s1 w1024_s2 w1024_s4 w1024_s8 w1024_recompute}
echo "== 1. streaming perplexity =="
for r in $RUNS; do
  case $r in
    dense) run dense --dense --chunk 256 ;;
    w*_recompute) W=${r#w}; W=${W%_recompute}; run "$r" --window "$W" --recompute ;;
    w*_s*) W=${r#w}; S=${W#*_s}; W=${W%_s*}; run "$r" --window "$W" --sinks "$S" --chunk 64 ;;
    *) echo "  unknown run $r" ;;
  esac
done

# A window as long as the text with S = 4 sinks: nothing is evicted (the full cache's
# attention), the first four positions are the sinks that --protect-sinks keeps in 16 bit, and
# the stream runs in chunks on the GPU too.
echo "== 2. int8 / int4 KV vs unquantized KV (S 4, W = $QN, $QN tokens) =="
for kv in $([[ "${SKIP_QUANT:-0}" == 1 ]] || echo int8 int4); do
  for prot in off on; do
    args=(--window "$QN" --sinks 4 --kv "$kv" --vs-unquantized --chunk 256)
    [[ $prot == on ]] && args+=(--protect-sinks)
    name="quant_${kv}_protect_${prot}"
    t0=$SECONDS
    if "$CLI" stream-ppl --file "$TEXT" --max-tokens "$QN" --stride "$STRIDE" --segment "$SEG" \
        --backend "$BK" --json "${args[@]}" >"$OUT/$name.json" 2>"$OUT/$name.err"; then
      echo "  $name: $((SECONDS - t0)) s $(grep -h "note" "$OUT/$name.err" | head -1)"
    else
      echo "  $name FAILED: $(tail -2 "$OUT/$name.err")"
      rm -f "$OUT/$name.json"
      rc=1
    fi
  done
done

if [[ "${SKIP_PASSKEY:-0}" != 1 ]]; then
  echo "== 3. passkey retrieval vs window and sinks =="
  # Prompts up to the trained context (8K), so the windows use `original` positions (no
  # extrapolation below 8K; and the GPU prefills in chunks instead of token by token).
  pk=(passkey --backend "$BK" --lengths 2048,4096,8000 --depths 0,0.25,0.5,0.75,1 --trials 2 --json)
  for cfg in "dense" "256 0" "256 4" "1024 0" "1024 4" "2048 4"; do
    set -- $cfg
    if [[ $1 == dense ]]; then name=passkey_dense; extra=(); else
      name="passkey_w$1_s$2"; extra=(--window "$1" --sinks "$2" --position-mode original); fi
    t0=$SECONDS
    if "$CLI" "${pk[@]}" "${extra[@]}" >"$OUT/$name.json" 2>"$OUT/$name.err"; then
      echo "  $name: $((SECONDS - t0)) s"
    else
      echo "  $name FAILED: $(tail -2 "$OUT/$name.err")"
      rm -f "$OUT/$name.json"
      rc=1
    fi
  done
fi

echo "== tables =="
python3 "$ROOT/scripts/kv_eval_table.py" "$OUT" --svg "$OUT/kv_stream_ppl.svg" || rc=1
exit $rc
