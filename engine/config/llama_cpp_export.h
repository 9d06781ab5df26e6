// SPDX-License-Identifier: Apache-2.0
// A config as llama.cpp flags (llama-server; the cache flags are common to llama-cli too), for
// deployments that run llama.cpp: -c/--ctx-size, --keep with --context-shift for sinks + window,
// -ctk/-ctv (--cache-type-k/-v) for the KV type, -fa/--flash-attn. What llama.cpp cannot express
// (dynamic-sparse skipping, 16-bit sinks in a quantized cache, original positions, ...) is listed
// in notes, so nobody mistakes the export for the validated configuration.
#pragma once

#include <string>
#include <vector>

#include "engine/config/config.h"

namespace sinkscope {

struct LlamaCppExport {
  std::vector<std::string> args;   // argv, starting with "llama-server"
  std::vector<std::string> notes;  // settings with no (or only an approximate) equivalent
  // The arguments as one POSIX-shell line, each quoted where needed.
  std::string command_line() const;
  // command_line(), then each note as a "# " comment line.
  std::string format() const;
};

LlamaCppExport export_llama_cpp(const SinkScopeConfig& c);

}  // namespace sinkscope
