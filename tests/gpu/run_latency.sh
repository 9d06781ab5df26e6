#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The workbench's latency on the GPU (issue 7): tests/bench/bench_view_latency with the CUDA
# backend and a 2K-token prompt -- a control change until the data of every view is ready,
# engine side (the GUI's RunExecutor; no Qt on the GPU image).
#   BUILD=<dir> (default build-gpu)  LAT_TOKENS (default 2048)  LAT_REPS (default 5)
#   MODEL / SINKSCOPE_MODEL: the model (run_backend_gpu.sh joins split parts)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-gpu}
[[ -n "${MODEL:-}" ]] && export SINKSCOPE_MODEL="$MODEL"
BIN="$BUILD/tests/gpu/bench_view_latency"
[[ -x "$BIN" ]] || BIN="$BUILD/tests/bench/bench_view_latency"
[[ -x "$BIN" ]] || { echo "SKIP: bench_view_latency not built in $BUILD"; exit 0; }
timeout 300 "$BIN" --backend cuda --tokens "${LAT_TOKENS:-2048}" --reps "${LAT_REPS:-5}"
