#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Real-window smoke test: the workbench in an X server (Xvfb) at 1280x720 and 1920x1080, on the
# default model with a prompt of several hundred tokens and a sliding window on; each run must
# finish and save a screenshot of the window and of every view into OUT (kept as CI artefacts
# under build/, never committed).
#   smoke_xvfb.sh SINKSCOPE_BINARY OUT_DIR
# Exit 77 (skipped) without xvfb-run or without the default model, unless
# SINKSCOPE_REQUIRE_MODEL=1 makes a missing model a failure.
set -euo pipefail
bin="$1" out="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v xvfb-run >/dev/null 2>&1 || { echo "SKIP: xvfb-run is not installed (apt-get install xvfb)"; exit 77; }
model="${SINKSCOPE_MODEL:-${SINKSCOPE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sinkscope}/SmolLM2-135M-Instruct.Q4_1.gguf}"
if [[ ! -f "$model" ]]; then
  [[ "${SINKSCOPE_REQUIRE_MODEL:-0}" == 1 ]] && { echo "FAIL: the default model is missing: $model"; exit 1; }
  echo "SKIP: the default model is missing: $model"; exit 77
fi
mkdir -p "$out"
prompt="$out/prompt.txt"
# A long document of the kind users open (Debian ships the GPL's text in every installation).
if [[ -f /usr/share/common-licenses/GPL-3 ]]; then
  head -c 2600 /usr/share/common-licenses/GPL-3 >"$prompt"
else
  for i in $(seq 40); do echo "Line $i of a long test document about attention sinks and windows."; done >"$prompt"
fi
status=0
for size in 1280x720 1920x1080; do
  dir="$out/$size"
  rm -rf "$dir" && mkdir -p "$dir"
  export XDG_CONFIG_HOME="$dir/config" XDG_RUNTIME_DIR="$dir/runtime"
  mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
  if ! QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 ${size}x24" \
      "$bin" --fresh --backend cpu --model "$model" --prompt-file "$prompt" \
      --config "$here/smoke-window.yaml" --layer 18 --head 8 \
      --screenshot "$dir/main.png" --views "$dir/views" >"$dir/log.txt" 2>&1; then
    echo "FAIL: the workbench at $size did not finish its run (log: $dir/log.txt)"; cat "$dir/log.txt"
    status=1
    continue
  fi
  # The window fills most of the screen and every view was saved.
  python3 - "$dir/main.png" "$size" <<'PY' || status=1
import struct, sys
path, size = sys.argv[1], sys.argv[2]
sw, sh = (int(x) for x in size.split("x"))
with open(path, "rb") as f:
    head = f.read(24)
assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
w, h = struct.unpack(">II", head[16:24])
if not (0.8 * sw <= w <= sw and 0.75 * sh <= h <= sh):
    sys.exit(f"FAIL: {path} is {w}x{h}, expected most of the {size} screen")
print(f"ok: {size}: window {w}x{h}")
PY
  for v in map sinks sparsity timeline compare; do
    [[ -s "$dir/views/$v.png" ]] || { echo "FAIL: $dir/views/$v.png was not saved"; status=1; }
  done
done
((status == 0)) && echo "smoke: screenshots in $out"
exit $status
