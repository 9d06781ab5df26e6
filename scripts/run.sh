#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: set up (quietly when already done), then start the SinkScope workbench with the
# default model. Without a display (no $DISPLAY / $WAYLAND_DISPLAY) it runs the headless CLI
# instead. Arguments select the CLI and are passed through, e.g.
#   bash scripts/run.sh generate --prompt "Hi" --max-tokens 32
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLI="$ROOT/build/app/cli/sinkscope-cli"
GUI="$ROOT/build/app/gui/sinkscope"
SAMPLE_PROMPT="$ROOT/resources/prompts/attention-sinks.txt"

if (($# == 0)) && [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
  bash "$ROOT/scripts/setup.sh" --quiet --gui --target sinkscope
  if [[ -x "$GUI" ]]; then
    exec "$GUI"
  fi
  echo "run: the workbench was not built (Qt 6 missing?); starting the CLI instead" >&2
fi

bash "$ROOT/scripts/setup.sh" --quiet --target sinkscope-cli
[[ -x "$CLI" ]] || { echo "run: error: $CLI was not built" >&2; exit 1; }
if (($# == 0)); then
  echo "run: no display; running the CLI (the workbench needs a display)" >&2
  set -- generate --chat --prompt-file "$SAMPLE_PROMPT"
fi
exec "$CLI" "$@"
