// SPDX-License-Identifier: Apache-2.0
// Arguments of `sinkscope-cli config ACTION FILE [options]`: the action and the config file are
// positional, the rest are long options checked by ArgParser.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace sinkscope::cli {

enum class ConfigAction { kCheck, kShow, kExportLlamaCpp, kExport, kCapacity };

struct ConfigArgs {
  bool help = false;
  std::string help_text;
  ConfigAction action = ConfigAction::kCheck;
  std::string file;
  bool json = false;                  // check, export-llamacpp, capacity
  int64_t batch = 1;                  // capacity
  std::optional<int64_t> budget_mib;  // capacity; default: global_cache_limit_mib
  std::optional<std::string> model;   // capacity: where the model shape comes from
  std::string to;                     // export: trtllm | vllm | sglang | llamacpp
  std::optional<std::string> out;     // export: write the file here (atomically)
};

inline constexpr int64_t kMaxConfigBatch = int64_t(1) << 20;

// Throws UsageError; with --help (after `config` or after the action) only help/help_text are
// meaningful.
ConfigArgs parse_config_args(std::span<const std::string> args);

}  // namespace sinkscope::cli
