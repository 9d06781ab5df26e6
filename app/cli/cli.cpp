// SPDX-License-Identifier: Apache-2.0
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/world.h"
#include "engine/version.h"

namespace sinkscope::cli {

namespace {

const char* const kTopHelp =
    "Usage: sinkscope-cli COMMAND [options]\n"
    "\n"
    "Headless front end of the SinkScope inference engine.\n"
    "\n"
    "Commands:\n"
    "  generate     generate text from a prompt (streams tokens, or --json)\n"
    "  perplexity   score a text file\n"
    "  info         show a model's configuration, tensors and tokenizer\n"
    "  trace        run a generation with the profiler on; write a Chrome trace\n"
    "  quality      dynamic-sparse vs dense on a text: sparsity, KL, top-1, perplexity change\n"
    "  calibrate    fit the dynamic-sparse threshold for a target sparsity (length_scaled c)\n"
    "  validate     run a config against the dense baseline on the validation dataset; write\n"
    "               the validated config (results, gates, pass/fail, provenance)\n"
    "  sweep        validate a grid of settings; CSV/JSON with the Pareto fronts marked\n"
    "  config       check or show a config file, export it to a serving engine's settings\n"
    "               (llama.cpp, vLLM, SGLang, TensorRT-LLM), or size its KV cache (capacity)\n"
    "  sinks        find attention sinks and recommend sink_keep_count\n"
    "  stream-ppl   perplexity of a long text streamed through a bounded (sink + window) cache\n"
    "  passkey      passkey-retrieval accuracy by prompt length and depth\n"
    "  make-test-model  write a random-weight GGUF of a real model's shape (benchmarks)\n"
    "\n"
    "Options:\n"
    "  -h, --help   show this help (COMMAND --help for a command's options)\n"
    "  --version    show the version\n"
    "\n"
    "Without --model the default model is used: $SINKSCOPE_MODEL, else\n"
    "SmolLM2-135M-Instruct.Q4_1.gguf in $SINKSCOPE_CACHE_DIR, $XDG_CACHE_HOME/sinkscope or\n"
    "~/.cache/sinkscope (scripts/setup.sh fetches it).\n"
    "Exit status: 0 success, 1 runtime error, 2 usage error.\n";

std::string version_line() {
  return std::string("sinkscope-cli ") + SINKSCOPE_VERSION + " (git " + SINKSCOPE_GIT_SHA + ")\n";
}

}  // namespace

int run_cli(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  std::string command;
  try {
    if (args.empty()) {
      err << kTopHelp;
      return 2;
    }
    command = args[0];
    const auto rest = args.subspan(1);
    if (command == "-h" || command == "--help" || command == "help") {
      out << kTopHelp;
      return 0;
    }
    if (command == "--version" || command == "version") {
      out << version_line();
      return 0;
    }
    if (command == "generate") return run_generate(parse_generate_args(rest), out, err);
    if (command == "perplexity") return run_perplexity(parse_perplexity_args(rest), out, err);
    if (command == "info") return run_info(parse_info_args(rest), out, err);
    if (command == "config") return run_config(rest, out, err);
    if (command == "calibrate") return run_calibrate(rest, out, err);
    if (command == "quality") return run_quality(rest, out, err);
    if (command == "validate") return run_validate(rest, out, err);
    if (command == "sweep") return run_sweep(rest, out, err);
    if (command == "trace") return run_trace(parse_trace_args(rest), out, err);
    if (command == "sinks") return run_sinks(parse_sinks_args(rest), out, err);
    if (command == "stream-ppl") return run_stream_ppl(parse_stream_ppl_args(rest), out, err);
    if (command == "passkey") return run_passkey(parse_passkey_args(rest), out, err);
    if (command == "make-test-model") return run_make_test_model(rest, out, err);
    const std::string what = command.rfind("-", 0) == 0 ? "unknown option '" : "unknown command '";
    command.clear();
    throw UsageError(what + args[0] + "' (commands: generate, perplexity, info, config, calibrate, quality, validate, sweep, trace, sinks, stream-ppl, passkey, make-test-model)");
  } catch (const UsageError& e) {
    out.flush();
    const std::string who = command.empty() ? "sinkscope-cli" : "sinkscope-cli " + command;
    err << who << world_label() << ": error: " << e.what() << "\nTry '" << who << " --help'.\n";
    if (!world_label().empty()) world_abort(2);  // the other ranks may wait for this one
    return 2;
  } catch (const std::exception& e) {
    out.flush();
    err << "sinkscope-cli" << (command.empty() ? "" : " " + command) << world_label()
        << ": error: " << e.what() << "\n";
    if (!world_label().empty()) world_abort(1);
    return 1;
  } catch (...) {
    err << "sinkscope-cli: error: unknown exception\n";
    return 1;
  }
}

}  // namespace sinkscope::cli
