// SPDX-License-Identifier: Apache-2.0
// A validated config as the serving engines' own configuration, for deployments that run on
// TensorRT-LLM, vLLM, SGLang or llama.cpp: each export is that engine's documented format (a
// YAML file for `trtllm-serve --config`, `vllm serve --config` and `sglang.launch_server
// --config`; llama-server flags for llama.cpp) plus notes on every setting the engine cannot
// express, or only approximately. Nothing is dropped silently, and where an engine has no
// equivalent the export keeps the dense baseline's behaviour for that setting (a full 16-bit
// cache, dense attention), never something less exact than what was validated.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/config/config.h"

namespace sinkscope {

enum class ServingEngine { kLlamaCpp, kTrtLlm, kVllm, kSglang };

// "llamacpp", "trtllm", "vllm", "sglang"; nullopt for anything else.
std::optional<ServingEngine> parse_serving_engine(std::string_view name);
const char* to_string(ServingEngine e);

struct ServingExport {
  ServingEngine engine = ServingEngine::kVllm;
  std::string text;                // the engine's config: YAML, or one shell command line
  std::string usage;               // how to run it, e.g. "vllm serve MODEL --config FILE"
  std::vector<std::string> notes;  // what the engine cannot express, one sentence each
  bool yaml() const { return engine != ServingEngine::kLlamaCpp; }
  // The notes and the usage as "# " comment lines, then the text: a file the engine reads
  // (YAML comments; for llama.cpp a shell script).
  std::string format() const;
};

// Throws std::runtime_error when this build cannot write YAML (built without yaml-cpp).
ServingExport export_serving(ServingEngine e, const SinkScopeConfig& c);

}  // namespace sinkscope
