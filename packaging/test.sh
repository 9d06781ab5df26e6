#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The test command: set up (packages + model), build everything including the tests, run ctest.
# Tests that need the default model fail (rather than skip) when it is missing.
# Extra arguments go to ctest, e.g.  bash packaging/test.sh -R Json
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

bash "$ROOT/packaging/setup.sh"

export SINKSCOPE_REQUIRE_MODEL=1
jobs="${SINKSCOPE_TEST_JOBS:-2}"
echo "test: ctest -j$jobs in $ROOT/build"
status=0
ctest --test-dir "$ROOT/build" --output-on-failure -j "$jobs" "$@" || status=$?
if ((status == 0)); then echo "test: all tests passed"; else echo "test: FAILED (ctest status $status)" >&2; fi
exit "$status"
