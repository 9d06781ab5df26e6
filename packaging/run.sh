#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: set up (quietly when already done), then start SinkScope with the default model.
# Until the GUI lands this runs the headless CLI; arguments are passed through, e.g.
#   bash packaging/run.sh generate --prompt "Hi" --max-tokens 32
# Without arguments it chats with the default model about a sample prompt.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CLI="$ROOT/build/app/cli/sinkscope-cli"
SAMPLE_PROMPT="$ROOT/resources/prompts/attention-sinks.txt"

bash "$ROOT/packaging/setup.sh" --quiet --target sinkscope-cli
[[ -x "$CLI" ]] || { echo "run: error: $CLI was not built" >&2; exit 1; }

if (($# == 0)); then
  set -- generate --chat --prompt-file "$SAMPLE_PROMPT"
fi
exec "$CLI" "$@"
