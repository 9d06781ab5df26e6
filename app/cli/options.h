// SPDX-License-Identifier: Apache-2.0
// The subcommands' arguments as plain structs, parsed and range-checked without touching the
// model (checks that need the model, e.g. --max-tokens against the context, happen when it runs).
#pragma once

#include "app/cli/attention_options.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "engine/backend/attention.h"
#include "engine/backend/backend_factory.h"

namespace sinkscope::cli {

// Limits checked at parse time; the model's own limits are checked later.
inline constexpr int kMaxTokensLimit = 1 << 20;
inline constexpr int kMaxThreads = 1024;
inline constexpr int kMaxContextLimit = 1 << 20;

struct GenerateArgs {
  bool help = false;
  std::string help_text;
  std::optional<std::string> model;
  std::optional<std::string> prompt;  // exactly one of prompt / prompt_file
  std::optional<std::string> prompt_file;
  int max_tokens = 128;
  bool chat = false;
  std::optional<std::string> system;  // only with chat
  uint64_t seed = 0;
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;
  float top_p = 1.0f;
  int threads = 0;  // 0: all hardware threads
  int ctx = 0;      // 0: the model's trained context
  bool json = false;
  bool hash = false;  // include the model's sha256 in --json output
  AttentionSettings attention;
  BackendChoice backend;  // --backend, --gpu-weights, --sparse-decode
};

struct PerplexityArgs {
  bool help = false;
  std::string help_text;
  std::optional<std::string> model;
  std::string file;
  int ctx = 512;
  int threads = 0;
  bool json = false;
  AttentionSettings attention;
  BackendChoice backend;  // --backend, --gpu-weights, --sparse-decode
};

struct InfoArgs {
  bool help = false;
  std::string help_text;
  std::optional<std::string> model;
  bool json = false;
};

// Each throws UsageError; with --help only help/help_text are meaningful.
GenerateArgs parse_generate_args(std::span<const std::string> args);
PerplexityArgs parse_perplexity_args(std::span<const std::string> args);
InfoArgs parse_info_args(std::span<const std::string> args);

}  // namespace sinkscope::cli
