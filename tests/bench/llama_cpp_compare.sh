#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SinkScope's CPU engine against llama.cpp on the same GGUF file and thread count, alternating
# runs: prefill of 512 tokens and 128 decode steps after a 512-token context (llama-bench's pp512
# and tg128 @ d512 against bench_cpu_e2e's prefill and decode), then a table with the ratios; the
# peak RSS of each program over one such run (prefill 512, then 128 decode steps), from
# /usr/bin/time, is the table's last row.
# llama.cpp is built once, CPU only, from the llama-cpp-python sdist's vendor/llama.cpp (PyPI),
# in build/llama-cpp.
#   bash tests/bench/llama_cpp_compare.sh [--threads N] [--rounds N] [--model FILE]
# Decode is also compared at an empty context (llama-bench's tg128 against 128 steps after a
# 1-token prompt). Environment: SINKSCOPE_QGEMV=float / int8 compares SinkScope's other decode
# paths (the default is int16, engine/backend/qgemv.h).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
THREADS=2 ROUNDS=3
MODEL="${SINKSCOPE_MODEL:-$HOME/.cache/sinkscope/SmolLM2-135M-Instruct.Q4_1.gguf}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) THREADS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --model) MODEL=$2; shift ;;
    -h | --help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "llama_cpp_compare: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -f "$MODEL" ]] || { echo "llama_cpp_compare: no model at $MODEL" >&2; exit 1; }
OURS="$ROOT/build/tests/bench/bench_cpu_e2e"
[[ -x "$OURS" ]] || { echo "llama_cpp_compare: build bench_cpu_e2e first (cmake --build build --target bench_cpu_e2e)" >&2; exit 1; }

LC="$ROOT/build/llama-cpp"
BENCH="$LC/src/build/bin/llama-bench"
if [[ ! -x "$BENCH" ]]; then
  mkdir -p "$LC"
  if [[ ! -d "$LC/src" ]]; then
    echo "llama_cpp_compare: fetching the llama-cpp-python sdist (llama.cpp's source) into $LC"
    python3 -m pip download --no-deps --no-binary :all: llama-cpp-python -d "$LC" >"$LC/download.log" 2>&1
    tar xzf "$LC"/llama_cpp_python-*.tar.gz -C "$LC"
    mv "$LC"/llama_cpp_python-*/vendor/llama.cpp "$LC/src"
  fi
  echo "llama_cpp_compare: building llama-bench (CPU) in $LC/src/build, once"
  # GGML_NATIVE enables AMX where the CPU lists it, but a virtual machine may not let a process
  # use the AMX tiles (ldtilecfg faults: "Illegal instruction"): build without them.
  noamx=""
  if echo 'int main(){}' | cc -x c -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -o /dev/null - 2>/dev/null; then
    noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  fi
  cmake -S "$LC/src" -B "$LC/src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DCMAKE_C_FLAGS="$noamx" -DCMAKE_CXX_FLAGS="$noamx" \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
    >"$LC/configure.log" 2>&1
  cmake --build "$LC/src/build" --target llama-bench -j "$(nproc)" >"$LC/build.log" 2>&1
fi

out="$ROOT/build/llama_cpp_compare"
mkdir -p "$out"
: >"$out/runs.txt"
for r in $(seq 1 "$ROUNDS"); do
  # llama-bench: pp512, and tg128 after a 512-token context (-d 512).
  "$BENCH" -m "$MODEL" -t "$THREADS" -p 512 -n 0 -r 1 -o csv >"$out/lc_pp_$r.csv" 2>/dev/null
  "$BENCH" -m "$MODEL" -t "$THREADS" -p 0 -n 128 -d 512 -r 1 -o csv >"$out/lc_tg_$r.csv" 2>/dev/null
  "$OURS" --threads "$THREADS" --prefill 512 --decode 128 --reps 1 >"$out/ours_$r.txt" 2>&1
  # Decode at an empty context: llama-bench's tg128; ours after a 1-token prompt.
  "$BENCH" -m "$MODEL" -t "$THREADS" -p 0 -n 128 -r 1 -o csv >"$out/lc_tg0_$r.csv" 2>/dev/null
  "$OURS" --threads "$THREADS" --prefill 1 --decode 128 --reps 1 >"$out/ours0_$r.txt" 2>&1
  ts() { python3 -c "import csv,sys; r=list(csv.DictReader(open('$1'))); print(r[-1]['avg_ts'])"; }
  lc_pp=$(ts "$out/lc_pp_$r.csv") lc_tg=$(ts "$out/lc_tg_$r.csv") lc_tg0=$(ts "$out/lc_tg0_$r.csv")
  ours=$(grep -E "^\| +$THREADS \|" "$out/ours_$r.txt" | awk -F'|' '{gsub(/ /,""); print $3, $4}')
  ours0=$(grep -E "^\| +$THREADS \|" "$out/ours0_$r.txt" | awk -F'|' '{gsub(/ /,""); print $4}')
  echo "$r $lc_pp $lc_tg $ours $lc_tg0 $ours0" >>"$out/runs.txt"
done
# Peak RSS (KiB) of one whole run of each program: the model loaded, 512 tokens, 128 steps.
rss() { /usr/bin/time -f "%M" -o "$out/rss.txt" "$@" >/dev/null 2>&1 && cat "$out/rss.txt"; }
lc_rss=$(rss "$BENCH" -m "$MODEL" -t "$THREADS" -p 512 -n 128 -r 1)
our_rss=$(rss "$OURS" --threads "$THREADS" --prefill 512 --decode 128 --reps 1)
python3 - "$out/runs.txt" "$THREADS" "${SINKSCOPE_QGEMV:-int16 (default)}" "$lc_rss" "$our_rss" <<'PY'
import statistics, sys
rows = [list(map(float, l.split()[1:])) for l in open(sys.argv[1]) if l.strip()]
lc_rss, our_rss = float(sys.argv[4]) / 1024, float(sys.argv[5]) / 1024
med = lambda i: statistics.median(r[i] for r in rows)
lc_pp, lc_tg, our_pp, our_tg, lc_tg0, our_tg0 = (med(i) for i in range(6))
print(f"threads {sys.argv[2]}, {len(rows)} alternating rounds, medians (SinkScope qgemv: {sys.argv[3]})")
print("| | llama.cpp | SinkScope | ratio |")
print("|---|--:|--:|--:|")
print(f"| prefill 512 tokens, tok/s | {lc_pp:.1f} | {our_pp:.1f} | {our_pp / lc_pp:.2f}x |")
print(f"| decode 128 after 512, tok/s | {lc_tg:.1f} | {our_tg:.1f} | {our_tg / lc_tg:.2f}x |")
print(f"| decode 128 at an empty context, tok/s | {lc_tg0:.1f} | {our_tg0:.1f} | {our_tg0 / lc_tg0:.2f}x |")
print(f"| peak RSS, prefill 512 + decode 128, MiB | {lc_rss:.0f} | {our_rss:.0f} | {our_rss / lc_rss:.2f}x |")
PY
