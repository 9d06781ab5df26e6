#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 5's streaming evaluation on the CUDA backend (SmolLM2, trained context 8K), every run
# through `sinkscope-cli` so that the numbers are the ones a user reproduces:
#   1. perplexity per segment over >= 100K tokens of real text (the King James Bible of
#      `packaging/setup.sh --eval-data`): dense (full cache, degrades past 8K), window only
#      (S = 0), window + S sinks for S in 1 2 4 8, and sliding window with re-computation (the
#      reference), for W in 256 1024; every run scores the same tokens (every KV_STRIDE-th);
#   2. int8 / int4 KV, each with and without sink protection, against unquantized KV under the
#      same policy (W = 1024, S = 4): perplexity change, mean KL, top-1 (stream-ppl --vs-unquantized);
#   3. passkey retrieval vs window and sink count.
# Then prints the tables (packaging/kv_eval_table.py) and writes the plot.
#   BUILD=<dir> (default build-gpu, built by run_backend_gpu.sh or packaging/gpu.sh BUILD_ONLY=1)
#   OUT=<dir>   KV_TEXT=<file> (default .model/kjv.txt, else the set-up script's copy)
#   KV_TOKENS (default 102400)  KV_STRIDE (default 4)  KV_SEGMENT (default 8192)
#   KV_BACKEND (default cuda)   KV_QUANT_TOKENS (default 16384)   SKIP_PASSKEY=1
#   MODEL / SINKSCOPE_MODEL as in run_backend_gpu.sh (that script joins split model parts).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
OUT=${OUT:-$BUILD/out-kv}
mkdir -p "$OUT"
CLI="$BUILD/app/cli/sinkscope-cli"
[[ -x "$CLI" ]] || { echo "SKIP: $CLI not built (run packaging/gpu.sh BUILD_ONLY=1 first)"; exit 0; }
TEXT=${KV_TEXT:-$ROOT/.model/kjv.txt}
[[ -f "$TEXT" ]] || TEXT=${XDG_CACHE_HOME:-$HOME/.cache}/sinkscope/eval/kjv.txt
[[ -f "$TEXT" ]] || { echo "SKIP: no evaluation text (KV_TEXT, or packaging/setup.sh --eval-data)"; exit 0; }
N=${KV_TOKENS:-102400}
STRIDE=${KV_STRIDE:-4}
SEG=${KV_SEGMENT:-8192}
BK=${KV_BACKEND:-cuda}
QN=${KV_QUANT_TOKENS:-16384}
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

echo "== 1. streaming perplexity =="
run dense --dense --chunk 256
for W in 256 1024; do
  for S in 0 1 2 4 8; do run "w${W}_s${S}" --window "$W" --sinks "$S" --chunk 64; done
  run "w${W}_recompute" --window "$W" --recompute
done

echo "== 2. int8 / int4 KV vs unquantized KV (W 1024, S 4, $QN tokens) =="
for kv in int8 int4; do
  for prot in off on; do
    args=(--window 1024 --sinks 4 --kv "$kv" --vs-unquantized --chunk 64)
    [[ $prot == on ]] && args+=(--protect-sinks)
    name="quant_${kv}_protect_${prot}"
    t0=$SECONDS
    # auto: where the CUDA kernels do not take the format the CPU runs it (the note says so)
    if "$CLI" stream-ppl --file "$TEXT" --max-tokens "$QN" --stride "$STRIDE" --segment "$SEG" \
        --backend auto --json "${args[@]}" >"$OUT/$name.json" 2>"$OUT/$name.err"; then
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
  pk=(passkey --backend "$BK" --lengths 2048,4096,8192 --depths 0,0.25,0.5,0.75,1 --trials 2 --json)
  for cfg in "dense" "256 0" "256 4" "1024 0" "1024 4" "2048 4"; do
    set -- $cfg
    if [[ $1 == dense ]]; then name=passkey_dense; extra=(); else
      name="passkey_w$1_s$2"; extra=(--window "$1" --sinks "$2"); fi
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
python3 "$ROOT/packaging/kv_eval_table.py" "$OUT" --svg "$OUT/kv_stream_ppl.svg" || rc=1
exit $rc
