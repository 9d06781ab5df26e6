#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Copies the header-only dependencies (nlohmann-json, CLI11) from this machine's Debian packages
# into build/deps/include, where CMake looks for them when their packages are missing
# (SINKSCOPE_HEADER_DEPS in CMakeLists.txt). For the lent GPU machines, which have no network:
# carry build/deps with the working tree.   bash tests/gpu/pack_header_deps.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST="$ROOT/build/deps/include"
mkdir -p "$DEST"
for dir in /usr/include/nlohmann /usr/include/CLI; do
  [[ -d "$dir" ]] || { echo "pack_header_deps: $dir not found (install nlohmann-json3-dev and libcli11-dev)" >&2; exit 1; }
  rm -rf "$DEST/$(basename "$dir")"
  cp -r "$dir" "$DEST/"
done
echo "pack_header_deps: $(du -sh "$DEST" | cut -f1) in $DEST"
