#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SinkScope's CUDA backend against llama.cpp's CUDA build on the same GPU and GGUF file, runs
# alternating: for each prompt length L, prefill of L tokens and greedy decode of D tokens after
# it (bench_e2e --prompt L --decode D) against llama-bench's pp<L> and tg<D> at depth L, flash
# attention on and off. Prints one table with the ratios (ours / llama.cpp; above 1 is faster).
#
# Two steps, so that the source can travel to a GPU machine without network:
#   bash tests/gpu/llama_cpp_gpu_compare.sh pack [OUT]       (here: llama.cpp's source from the
#        llama-cpp-python sdist on PyPI, only what llama-bench needs; default
#        build/carry/llama-src.tar.xz, about 6 MB)
#   bash tests/gpu/llama_cpp_gpu_compare.sh run --src TARBALL --ours BENCH_E2E --model FILE
#        [--lens "512 2048 8000"] [--decode 128] [--rounds 2] [--weights native|bf16]
#        [--fa "1 0"] [--reps 3] [--act int16|int8] [--build DIR] [--out DIR]
#        (on the GPU machine: builds llama-bench for sm_90 once into --build, default
#        /tmp/llama-cpp-cuda, then measures; CSV and logs into --out, default build/llama_cpp_gpu;
#        --fa: llama.cpp's flash-attention settings to run, --reps: repetitions per measurement
#        on both sides, for long prompts where 3 take minutes; --act: bench_e2e's activation
#        precision of the native quantized GEMVs, int8 being llama.cpp's own)
#   bash tests/gpu/llama_cpp_gpu_compare.sh build --src TARBALL [--build DIR] [--out DIR]
#        (the build step of run alone, e.g. started in the background while other GPU work runs;
#        a run meanwhile waits for it: both take a lock on DIR.lock)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mode=${1:-}
shift || true

if [[ "$mode" == pack ]]; then
  OUT=${1:-$ROOT/build/carry/llama-src.tar.xz}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  python3 -m pip download --no-deps --no-binary :all: llama-cpp-python -d "$work" >"$work/dl.log" 2>&1 ||
    { cat "$work/dl.log" >&2; exit 1; }
  tar xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
  src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
  stage="$work/llama.cpp"
  mkdir -p "$stage/tools" "$stage/ggml/src"
  cp -r "$src"/{CMakeLists.txt,cmake,include,src,common,vendor,LICENSE} "$stage/"
  cp -r "$src/tools/llama-bench" "$stage/tools/"
  # Only llama-bench of the tools.
  printf 'find_package(Threads REQUIRED)\nllama_add_compile_flags()\nadd_subdirectory(llama-bench)\n' \
    >"$stage/tools/CMakeLists.txt"
  cp -r "$src/ggml"/{CMakeLists.txt,cmake,include} "$stage/ggml/"
  cp "$src"/ggml/src/*.* "$stage/ggml/src/"
  cp -r "$src"/ggml/src/{ggml-cpu,ggml-cuda,ggml-blas} "$stage/ggml/src/"
  mkdir -p "$(dirname "$OUT")"
  tar cJf "$OUT" -C "$work" llama.cpp
  echo "llama_cpp_gpu_compare: $(du -h "$OUT" | cut -f1) in $OUT ($(basename "$work"/llama_cpp_python-*.tar.gz))"
  exit 0
fi

[[ "$mode" == run || "$mode" == build ]] || { sed -n 2,18p "$0"; exit 2; }
SRC="" OURS="" MODEL="" LENS="512 2048 8000" DECODE=128 ROUNDS=2 BUILD=/tmp/llama-cpp-cuda WEIGHTS="" ACT=""
FA="1 0" REPS=3
OUTDIR=$ROOT/build/llama_cpp_gpu
while [[ $# -gt 0 ]]; do
  case "$1" in
    --src) SRC=$2; shift ;;
    --ours) OURS=$2; shift ;;
    --model) MODEL=$2; shift ;;
    --lens) LENS=$2; shift ;;
    --decode) DECODE=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --weights) WEIGHTS=$2; shift ;;
    --act) ACT=$2; shift ;;
    --fa) FA=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --build) BUILD=$2; shift ;;
    --out) OUTDIR=$2; shift ;;
    *) echo "llama_cpp_gpu_compare: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ "$mode" == run ]]; then  # before a build of minutes: a wrong path fails at once
  [[ -f "$MODEL" ]] || { echo "llama_cpp_gpu_compare: no model at '$MODEL'" >&2; exit 1; }
  [[ -x "$OURS" ]] || { echo "llama_cpp_gpu_compare: bench_e2e not found at '$OURS'" >&2; exit 1; }
fi
mkdir -p "$OUTDIR" "$(dirname "$BUILD")"
BENCH="$BUILD/build/bin/llama-bench"
# Builds llama-bench into $BUILD unless it is there; one build at a time (a run started while a
# background build is going waits for it on the lock, then finds the program).
exec 9>"$BUILD.lock"
flock 9
if [[ ! -x "$BENCH" ]]; then
  [[ -f "$SRC" ]] || { echo "llama_cpp_gpu_compare: no source tarball at '$SRC' (run the pack step)" >&2; exit 1; }
  mkdir -p "$BUILD"
  tar xJf "$SRC" -C "$BUILD" --strip-components=1
  t0=$(date +%s)
  cmake -S "$BUILD" -B "$BUILD/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_APP=OFF >"$OUTDIR/llama_configure.log" 2>&1 || { tail -30 "$OUTDIR/llama_configure.log" >&2; exit 1; }
  cmake --build "$BUILD/build" --target llama-bench -j "$(nproc)" >"$OUTDIR/llama_build.log" 2>&1 ||
    { tail -30 "$OUTDIR/llama_build.log" >&2; exit 1; }
  echo "llama_cpp_gpu_compare: llama-bench built in $(($(date +%s) - t0)) s"
fi
flock -u 9
[[ "$mode" == build ]] && exit 0

csv="$OUTDIR/runs.csv"
echo "round,L,engine,fa,prefill_tok_s,decode_tok_s" >"$csv"
for r in $(seq 1 "$ROUNDS"); do
  for L in $LENS; do
    for fa in $FA; do
      "$BENCH" -m "$MODEL" -ngl 99 -fa "$fa" -p "$L" -n 0 -r "$REPS" -o csv >"$OUTDIR/lc_pp.csv" 2>>"$OUTDIR/llama_bench.err" || true
      "$BENCH" -m "$MODEL" -ngl 99 -fa "$fa" -p 0 -n "$DECODE" -d "$L" -r "$REPS" -o csv >"$OUTDIR/lc_tg.csv" 2>>"$OUTDIR/llama_bench.err" || true
      # A failed llama-bench run (out of memory at a long depth, say) leaves no row: "nan".
      pp=$(python3 -c "import csv; print(list(csv.DictReader(open('$OUTDIR/lc_pp.csv')))[-1]['avg_ts'])" 2>/dev/null || echo nan)
      tg=$(python3 -c "import csv; print(list(csv.DictReader(open('$OUTDIR/lc_tg.csv')))[-1]['avg_ts'])" 2>/dev/null || echo nan)
      echo "$r,$L,llama.cpp,$fa,$pp,$tg" >>"$csv"
    done
    SINKSCOPE_MODEL="$MODEL" "$OURS" --prompt "$L" --decode "$DECODE" --reps "$REPS" --no-eager ${WEIGHTS:+--weights "$WEIGHTS"} ${ACT:+--act "$ACT"} \
      --csv "$OUTDIR/ours.csv" >"$OUTDIR/ours_$L.log" 2>&1 ||
      { cat "$OUTDIR/ours_$L.log" >&2; exit 1; }
    python3 - "$OUTDIR/ours.csv" "$r" "$L" >>"$csv" <<'PY'
import csv, sys
row = [x for x in csv.DictReader(open(sys.argv[1])) if x["engine"] == "sinkscope_graph"][0]
print(f"{sys.argv[2]},{sys.argv[3]},sinkscope,-,{row['prefill_tok_s']},{row['decode_tok_s']}")
PY
  done
done
python3 - "$csv" "$MODEL" "$DECODE" "$REPS" <<'PY'
import csv, math, os, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(L, engine, fa, key):
    v = []
    for r in rows:
        if r["L"] == L and r["engine"] == engine and r["fa"] == fa:
            try:
                v.append(float(r[key]))
            except ValueError:  # a run that failed (out of memory, say) left no number
                pass
    return statistics.median(v) if v else math.nan
def f(x, digits):
    return "-" if math.isnan(x) else f"{x:.{digits}f}"
def ratio(ours, *theirs):
    t = [x for x in theirs if not math.isnan(x)]
    return "-" if not t or math.isnan(ours) else f"{ours / max(t):.2f}x"
lens = sorted({r["L"] for r in rows}, key=int)
n = len({r["round"] for r in rows})
print(f"model {os.path.basename(sys.argv[2])}, decode {sys.argv[3]} tokens after the prompt, "
      f"medians of {n} alternating rounds (llama-bench -r {sys.argv[4]} each, bench_e2e --reps {sys.argv[4]})")
print("| prompt L | ours prefill tok/s | llama.cpp FA on | FA off | ratio (best) "
      "| ours decode tok/s @ L | llama.cpp FA on | FA off | ratio (best) |")
print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for L in lens:
    op, od = med(L, "sinkscope", "-", "prefill_tok_s"), med(L, "sinkscope", "-", "decode_tok_s")
    p1, p0 = med(L, "llama.cpp", "1", "prefill_tok_s"), med(L, "llama.cpp", "0", "prefill_tok_s")
    d1, d0 = med(L, "llama.cpp", "1", "decode_tok_s"), med(L, "llama.cpp", "0", "decode_tok_s")
    print(f"| {L} | {f(op, 0)} | {f(p1, 0)} | {f(p0, 0)} | {ratio(op, p1, p0)} "
          f"| {f(od, 1)} | {f(d1, 1)} | {f(d0, 1)} | {ratio(od, d1, d0)} |")
PY
