#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Parses every shell and Python script of the repository without running it (a ctest test):
# the GPU scripts, set-up and plotting helpers only run elsewhere, so a syntax error in them
# would otherwise show up first inside a device call. Writes nothing.
#   bash scripts/check_scripts.sh [ROOT]
set -uo pipefail
ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$ROOT" || exit 2
status=0
n=0
for f in scripts/*.sh tests/gpu/*.sh .ci/run; do
  [[ -f "$f" ]] || continue
  n=$((n + 1))
  bash -n "$f" || { echo "syntax error: $f"; status=1; }
done
for f in scripts/*.py tests/gpu/*.py tests/oracle/*.py; do
  [[ -f "$f" ]] || continue
  n=$((n + 1))
  python3 -c 'import ast, sys; ast.parse(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1])' "$f" ||
    { echo "syntax error: $f"; status=1; }
done
echo "check_scripts: $n scripts parsed, status $status"
exit $status
