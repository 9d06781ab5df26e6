#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets (tests/fuzz) with clang into build-fuzz/ and runs each for a chosen
# time, then prints executions, coverage and crashes per target.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s; targets:
#                                                                gguf tokenizer config hf)
#
# Seeds come from tests/fuzz/corpus/<target>/ and the reproducers in tests/fuzz/regressions/
# (read only); inputs that add coverage collect in build-fuzz/fuzz-corpus/<target>/, crashes in
# build-fuzz/fuzz-artifacts/<target>/. Exit status: 0 no crash, 1 a crash, 2 cannot build.
# A crash is fixed by fixing the code and committing the reproducer to tests/fuzz/regressions/
# <target>/, which tests/unit/test_malformed_corpus.cpp replays in every build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${SINKSCOPE_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(gguf tokenizer config hf)
[[ "$SECONDS_PER_TARGET" =~ ^[0-9]+$ && "$SECONDS_PER_TARGET" -gt 0 ]] ||
  { echo "fuzz: error: SECONDS_PER_TARGET must be a positive integer" >&2; exit 2; }

# Per-target input size limits: GGUF seeds are up to ~30 KB; text inputs stay small so each
# execution is fast.
max_len() {
  case "$1" in
    gguf) echo 65536 ;;
    tokenizer) echo 4096 ;;
    config) echo 4096 ;;
    hf) echo 65536 ;;
    *) echo "fuzz: error: unknown target '$1' (gguf, tokenizer, config, hf)" >&2; exit 2 ;;
  esac
}
for t in "${TARGETS[@]}"; do max_len "$t" >/dev/null; done

CC_BIN="$(command -v clang || command -v clang-14 || true)"
CXX_BIN="$(command -v clang++ || command -v clang++-14 || true)"
if [[ -z "$CC_BIN" || -z "$CXX_BIN" ]]; then
  echo "fuzz: error: clang not found (apt-get install clang libclang-rt-14-dev llvm-14)" >&2
  exit 2
fi
if [[ ! -f "$BUILD/build.ninja" ]]; then
  echo "fuzz: configuring $BUILD (clang, -DSINKSCOPE_FUZZ=ON)"
  mkdir -p "$BUILD"
  CC="$CC_BIN" CXX="$CXX_BIN" cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSINKSCOPE_FUZZ=ON -DSINKSCOPE_TESTS=OFF -DSINKSCOPE_GUI=OFF -DSINKSCOPE_CUDA=OFF \
    >"$BUILD/fuzz-configure.log" 2>&1 ||
    { tail -n 30 "$BUILD/fuzz-configure.log" >&2; echo "fuzz: error: configure failed" >&2; exit 2; }
fi
build_targets=()
for t in "${TARGETS[@]}"; do build_targets+=("fuzz_$t"); done
echo "fuzz: building ${build_targets[*]} in $BUILD"
cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" --target "${build_targets[@]}" \
  >"$BUILD/fuzz-build.log" 2>&1 ||
  { tail -n 40 "$BUILD/fuzz-build.log" >&2; echo "fuzz: error: build failed" >&2; exit 2; }

symbolizer="$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)"
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}${symbolizer:+:external_symbolizer_path=$symbolizer}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

rows=()
crashed=0
for t in "${TARGETS[@]}"; do
  corpus="$BUILD/fuzz-corpus/$t"
  artifacts="$BUILD/fuzz-artifacts/$t"
  log="$BUILD/fuzz-$t.log"
  mkdir -p "$corpus" "$artifacts"
  args=(-max_total_time="$SECONDS_PER_TARGET" -max_len="$(max_len "$t")" -timeout=20
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/")
  [[ -f "$ROOT/tests/fuzz/$t.dict" ]] && args+=(-dict="$ROOT/tests/fuzz/$t.dict")
  echo "fuzz: $t for ${SECONDS_PER_TARGET} s (log: $log)"
  status=0
  # Seed folders that exist (git keeps no empty folders; libFuzzer stops on a missing one).
  seeds=()
  for d in "$ROOT/tests/fuzz/corpus/$t" "$ROOT/tests/fuzz/regressions/$t"; do
    [[ -d "$d" ]] && seeds+=("$d")
  done
  "$BUILD/tests/fuzz/fuzz_$t" "${args[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1 || status=$?
  # libFuzzer's last status line: "#N  DONE  cov: C ft: F corp: U/S ..."; final stats follow.
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  per_s="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
  last="$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)"
  cov="$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")"
  ft="$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")"
  corp="$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")"
  result=ok
  if ((status != 0)); then
    result="CRASH (status $status)"
    crashed=1
    tail -n 60 "$log" >&2
    ls "$artifacts" >&2 || true
  fi
  rows+=("$(printf '%-10s %6s %12s %9s %7s %7s %14s  %s' "$t" "$SECONDS_PER_TARGET" "${execs:-?}" \
    "${per_s:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result")")
done

echo
printf '%-10s %6s %12s %9s %7s %7s %14s  %s\n' target seconds execs "exec/s" cov features corpus result
for r in "${rows[@]}"; do echo "$r"; done
if ((crashed)); then
  echo "fuzz: a target crashed; the reproducer is in $BUILD/fuzz-artifacts/<target>/ (fix, then" \
    "commit it to tests/fuzz/regressions/<target>/)" >&2
  exit 1
fi
echo "fuzz: no crashes"
