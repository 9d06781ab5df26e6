// SPDX-License-Identifier: Apache-2.0
#include "app/cli/config_args.h"

#include <algorithm>
#include <vector>

#include "app/cli/args.h"
#include "engine/config/config.h"
#include "engine/config/serving_export.h"

namespace sinkscope::cli {

namespace {

const char* const kConfigHelp =
    "Usage: sinkscope-cli config ACTION FILE [options]\n"
    "\n"
    "Reads, checks and converts a SinkScope config file (YAML).\n"
    "\n"
    "Actions:\n"
    "  check FILE [--model PATH] [--json]\n"
    "                            report every problem (key path, line, column), with the\n"
    "                            model's rules when a model is at hand\n"
    "  show FILE                 print the config normalised, with every default filled in\n"
    "  export FILE --to ENGINE [--out PATH] [--json]\n"
    "                            the serving engine's own config (trtllm, vllm, sglang,\n"
    "                            llamacpp), with what it cannot express\n"
    "  export-llamacpp FILE [--json]\n"
    "                            the equivalent llama.cpp flags, and what has no equivalent\n"
    "  capacity FILE [--batch N] [--budget-mib M] [--model PATH] [--json]\n"
    "                            KV-cache memory for the config's policy, and the largest\n"
    "                            batch a memory budget holds\n"
    "\n"
    "ACTION --help shows an action's options.\n"
    "Exit status: 0 success (check: valid), 1 runtime error (e.g. an unreadable file),\n"
    "2 invalid config or usage error.\n";

struct ActionSpec {
  const char* name;
  ConfigAction action;
};
constexpr ActionSpec kActions[] = {{"check", ConfigAction::kCheck},
                                   {"show", ConfigAction::kShow},
                                   {"export-llamacpp", ConfigAction::kExportLlamaCpp},
                                   {"export", ConfigAction::kExport},
                                   {"capacity", ConfigAction::kCapacity}};

ArgParser make_parser(ConfigAction action, const std::string& name) {
  const std::string usage = "sinkscope-cli config " + name + " FILE [options]";
  const char* exit_note =
      "Exit status: 0 success, 1 runtime error (e.g. an unreadable file), 2 invalid config or "
      "usage error.\n";
  switch (action) {
    case ConfigAction::kCheck: {
      ArgParser p(usage,
                  "Checks a config file and prints every problem with its key path, line "
                  "and column (errors and warnings). The rules that depend on the model "
                  "(quantization group size against its head dim, context length against its "
                  "trained context) are checked too when a model is at hand: --model, else "
                  "the config's model.path; otherwise the report says they were not checked. "
                  "Valid: exit 0; invalid: exit 2.");
      p.option("--model", "PATH",
               "check the model-dependent rules against this model (GGUF file or Hugging "
               "Face checkpoint folder; default: model.path)")
          .flag("--json",
                "print one JSON object: valid, errors, warnings, problems[], model_checked");
      p.epilog(exit_note);
      return p;
    }
    case ConfigAction::kShow: {
      ArgParser p(usage,
                  "Prints the config as SinkScope writes it: schema order, every default "
                  "filled in, deployment-guide spellings normalised.");
      p.epilog(exit_note);
      return p;
    }
    case ConfigAction::kExportLlamaCpp: {
      ArgParser p(usage,
                  "Prints the llama.cpp (llama-server) flags equivalent to the config, "
                  "followed by notes on settings llama.cpp cannot express.");
      p.flag("--json", "print one JSON object: command, args[], notes[]");
      p.epilog(exit_note);
      return p;
    }
    case ConfigAction::kExport: {
      ArgParser p(usage,
                  "Writes the config as a serving engine's own configuration: a YAML file for "
                  "trtllm-serve --config (TensorRT-LLM), vllm serve --config (vLLM) or "
                  "sglang.launch_server --config (SGLang), or llama-server flags (llama.cpp). "
                  "Every setting the engine cannot express is named in comment lines at the "
                  "top; where it has no equivalent the dense baseline's behaviour is kept.");
      p.option("--to", "ENGINE", "trtllm, vllm, sglang or llamacpp (required)")
          .option("--out", "PATH", "write the file here, atomically (default: standard output)")
          .flag("--json", "print one JSON object: engine, usage, text, notes[]");
      p.epilog(exit_note);
      return p;
    }
    case ConfigAction::kCapacity: {
      ArgParser p(usage,
                  "Estimates the KV-cache memory of the config's cache policy (per "
                  "request and for a batch) and the largest batch a budget holds.");
      p.option("--batch", "N", "concurrent requests, each with a full cache (default 1)")
          .option("--budget-mib", "M",
                  "memory budget in MiB (default: inference.cache.global_cache_limit_mib)")
          .option("--model", "PATH",
                  "read layers / KV heads / head dim from this model (default: model.path, then "
                  "the default model, then SmolLM2-135M's shape)")
          .flag("--json", "print one JSON object");
      p.epilog(exit_note);
      return p;
    }
  }
  throw UsageError("unknown action");
}

}  // namespace

ConfigArgs parse_config_args(std::span<const std::string> args) {
  ConfigArgs a;
  if (args.empty())
    throw UsageError("an action is required (check, show, export, export-llamacpp, capacity)");
  const std::string& name = args[0];
  if (name == "--help" || name == "-h" || name == "help") {
    a.help = true;
    a.help_text = kConfigHelp;
    return a;
  }
  const ActionSpec* spec = nullptr;
  for (const ActionSpec& s : kActions)
    if (name == s.name) spec = &s;
  if (!spec)
    throw UsageError("unknown action '" + name +
                     "' (actions: check, show, export, export-llamacpp, capacity)");
  a.action = spec->action;
  ArgParser p = make_parser(a.action, name);

  // The one positional argument (FILE) may stand anywhere among the options.
  static const std::vector<std::string> kTakesValue = {"--batch", "--budget-mib", "--model",
                                                       "--to", "--out"};
  std::vector<std::string> options, positional;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& t = args[i];
    if (t == "-h" || t.rfind("--", 0) == 0) {
      options.push_back(t);
      const bool takes = std::find(kTakesValue.begin(), kTakesValue.end(), t) != kTakesValue.end();
      if (takes && i + 1 < args.size()) options.push_back(args[++i]);
    } else {
      positional.push_back(t);
    }
  }
  p.parse(options);
  a.help = p.help_requested();
  a.help_text = p.help();
  if (a.help) return a;
  if (positional.empty()) throw UsageError("the config FILE is required");
  if (positional.size() > 1) throw UsageError("unexpected argument '" + positional[1] + "'");
  a.file = positional[0];
  if (a.action != ConfigAction::kShow) a.json = p.has("--json");
  if (a.action == ConfigAction::kCheck) a.model = p.get("--model");
  if (a.action == ConfigAction::kCapacity) {
    a.batch = p.get_int("--batch", 1, 1, kMaxConfigBatch);
    if (p.has("--budget-mib"))
      a.budget_mib = p.get_int("--budget-mib", 0, 1, sinkscope::kConfigMaxMib);
    a.model = p.get("--model");
  }
  if (a.action == ConfigAction::kExport) {
    const auto to = p.get("--to");
    if (!to) throw UsageError("export needs --to ENGINE (trtllm, vllm, sglang, llamacpp)");
    if (!parse_serving_engine(*to))
      throw UsageError("--to: unknown engine '" + *to + "' (trtllm, vllm, sglang, llamacpp)");
    a.to = *to;
    a.out = p.get("--out");
    if (a.out && a.json) throw UsageError("--out and --json exclude each other");
  }
  return a;
}

}  // namespace sinkscope::cli
