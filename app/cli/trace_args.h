// SPDX-License-Identifier: Apache-2.0
// Arguments of `sinkscope-cli trace`: one traced generation written as a Chrome trace.
#pragma once

#include "app/cli/attention_options.h"

#include <optional>
#include <span>
#include <string>

#include "engine/backend/backend_factory.h"

namespace sinkscope::cli {

struct TraceArgs {
  bool help = false;
  std::string help_text;
  std::optional<std::string> model;
  std::optional<std::string> prompt;  // exactly one of prompt / prompt_file
  std::optional<std::string> prompt_file;
  int max_tokens = 16;
  std::string out;  // the Chrome trace (JSON), written atomically
  bool summary = false;
  BackendChoice backend;  // --backend, --gpu-weights, --sparse-decode
  int threads = 0;
  int ctx = 0;
};

// Throws UsageError; with --help only help/help_text are meaningful.
TraceArgs parse_trace_args(std::span<const std::string> args);

}  // namespace sinkscope::cli
