// SPDX-License-Identifier: Apache-2.0
// The CLI's subcommands. Each returns the exit status; usage mistakes throw UsageError and
// runtime failures throw std::exception (run_cli turns both into messages and statuses).
#pragma once

#include <iosfwd>
#include <span>
#include <string>

#include "app/cli/kv_args.h"
#include "app/cli/options.h"
#include "app/cli/trace_args.h"

namespace sinkscope::cli {

int run_generate(const GenerateArgs& args, std::ostream& out, std::ostream& err);
int run_perplexity(const PerplexityArgs& args, std::ostream& out, std::ostream& err);
int run_info(const InfoArgs& args, std::ostream& out, std::ostream& err);
int run_trace(const TraceArgs& args, std::ostream& out, std::ostream& err);
// KV-cache commands (app/cli/kv_args.h): sink detection, streaming perplexity, passkey.
int run_sinks(const SinksArgs& args, std::ostream& out, std::ostream& err);
int run_stream_ppl(const StreamPplArgs& args, std::ostream& out, std::ostream& err);
int run_passkey(const PasskeyArgs& args, std::ostream& out, std::ostream& err);
// `config ACTION FILE ...` parses its own arguments (app/cli/config_args.h).
int run_config(std::span<const std::string> args, std::ostream& out, std::ostream& err);
int run_calibrate(std::span<const std::string> args, std::ostream& out, std::ostream& err);
int run_quality(std::span<const std::string> args, std::ostream& out, std::ostream& err);
// Validation against the dense baseline and grid sweeps (engine/eval/validation.h, engine/eval/sweep.h).
int run_validate(std::span<const std::string> args, std::ostream& out, std::ostream& err);
int run_sweep(std::span<const std::string> args, std::ostream& out, std::ostream& err);
// Random-weight GGUF models of real shapes for benchmarks (engine/format/testmodel.h).
int run_make_test_model(std::span<const std::string> args, std::ostream& out, std::ostream& err);

// The whole program after argv: dispatches a subcommand, prints errors, returns the status
// (0 success, 1 runtime error, 2 usage error). Never throws.
int run_cli(std::span<const std::string> args, std::ostream& out, std::ostream& err);

}  // namespace sinkscope::cli
