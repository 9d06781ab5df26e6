// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli: the argument parser and usage errors in-process (no model needed), then the
// built binary end to end (exit statuses; generation with the default model when present).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "engine/model/model.h"
#include "engine/util/json_io.h"
#include "cli_test_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using sinkscope::cli::ArgParser;
using sinkscope::cli::UsageError;

namespace {

std::vector<std::string> argv_of(std::initializer_list<const char*> a) {
  return std::vector<std::string>(a.begin(), a.end());
}

// Runs parse_generate_args and returns the usage error message ("" when it parsed).
std::string generate_error(std::initializer_list<const char*> a) {
  try {
    sinkscope::cli::parse_generate_args(argv_of(a));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

using sinkscope::test::CliRun;
using sinkscope::test::run_binary;
using sinkscope::test::slurp;

CliRun run_in_process(std::initializer_list<const char*> a) {
  std::ostringstream out, err;
  CliRun r;
  r.status = sinkscope::cli::run_cli(argv_of(a), out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace

// ---- ArgParser -------------------------------------------------------------------------------

TEST(CliArgs, ParsesOptionsFlagsAndInlineValues) {
  ArgParser p("t [options]", "test");
  p.option("--n", "N", "a number").option("--s", "S", "a string").flag("--f", "a flag");
  p.parse(argv_of({"--n", "42", "--s=a=b", "--f"}));
  EXPECT_FALSE(p.help_requested());
  EXPECT_EQ(p.get_int("--n", 0, 0, 100), 42);
  EXPECT_EQ(*p.get("--s"), "a=b");
  EXPECT_TRUE(p.has("--f"));
  p.parse(argv_of({"--s", "-1"}));  // a value may start with '-'
  EXPECT_EQ(*p.get("--s"), "-1");
  EXPECT_FALSE(p.has("--f"));
  EXPECT_EQ(p.get_int("--n", 7, 0, 100), 7);  // fallback when absent
  EXPECT_THROW(p.get("--undeclared"), std::logic_error);
}

TEST(CliArgs, UsageErrorsNameTheProblem) {
  ArgParser p("t [options]", "test");
  p.option("--n", "N", "a number").flag("--f", "a flag");
  const auto error = [&](std::initializer_list<const char*> a) -> std::string {
    try {
      p.parse(argv_of(a));
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error({"--bogus"}).find("unknown option '--bogus'"), std::string::npos);
  EXPECT_NE(error({"-x"}).find("unknown option"), std::string::npos);
  EXPECT_NE(error({"stray"}).find("unexpected argument 'stray'"), std::string::npos);
  EXPECT_NE(error({"--n"}).find("missing value for --n"), std::string::npos);
  EXPECT_NE(error({"--n", "--f"}).find("missing value for --n"), std::string::npos);
  EXPECT_NE(error({"--f=1"}).find("takes no value"), std::string::npos);
  EXPECT_NE(error({"--n", "1", "--n", "2"}).find("more than once"), std::string::npos);
  EXPECT_EQ(error({"--f", "--help", "--bogus"}), "");  // --help stops parsing
  EXPECT_TRUE(p.help_requested());
  const std::string help = p.help();
  EXPECT_NE(help.find("--n N"), std::string::npos);
  EXPECT_NE(help.find("-h, --help"), std::string::npos);
}

TEST(CliArgs, GpuWeightsOption) {
  // Default: auto (the backend picks by memory); bf16 or the file format on request; anything
  // else names the option.
  EXPECT_EQ(sinkscope::cli::parse_generate_args(argv_of({"--prompt", "Hi"})).backend.gpu_weights,
            sinkscope::GpuWeights::kAuto);
  EXPECT_EQ(sinkscope::cli::parse_generate_args(
                argv_of({"--prompt", "Hi", "--gpu-weights", "auto"})).backend.gpu_weights,
            sinkscope::GpuWeights::kAuto);
  EXPECT_EQ(sinkscope::cli::parse_generate_args(
                argv_of({"--prompt", "Hi", "--gpu-weights", "bf16"})).backend.gpu_weights,
            sinkscope::GpuWeights::kBf16);
  EXPECT_EQ(sinkscope::cli::parse_generate_args(
                argv_of({"--prompt", "Hi", "--gpu-weights", "native"})).backend.gpu_weights,
            sinkscope::GpuWeights::kNative);
  const std::string e = generate_error({"--prompt", "Hi", "--gpu-weights", "fp8"});
  EXPECT_NE(e.find("--gpu-weights"), std::string::npos) << e;
  EXPECT_NE(e.find("fp8"), std::string::npos) << e;
  EXPECT_STREQ(sinkscope::gpu_weights_name(sinkscope::GpuWeights::kBf16), "bf16");
  EXPECT_STREQ(sinkscope::gpu_weights_name(sinkscope::GpuWeights::kAuto), "auto");
  EXPECT_FALSE(sinkscope::parse_gpu_weights("BF16").has_value());
}

TEST(CliArgs, GpuActivationsOption) {
  // int8 (one plane, llama.cpp's precision) by default, int16 on request, anything else named
  // in the error.
  EXPECT_EQ(sinkscope::cli::parse_generate_args(argv_of({"--prompt", "Hi"})).backend.gpu_activations,
            sinkscope::GpuActivations::kInt8);
  const auto opt = sinkscope::cli::parse_generate_args(
      argv_of({"--prompt", "Hi", "--gpu-weights", "native", "--gpu-activations", "int16"}));
  EXPECT_EQ(opt.backend.gpu_activations, sinkscope::GpuActivations::kInt16);
  const std::string e = generate_error({"--prompt", "Hi", "--gpu-activations", "fp8"});
  EXPECT_NE(e.find("--gpu-activations"), std::string::npos) << e;
  EXPECT_NE(e.find("fp8"), std::string::npos) << e;
  EXPECT_STREQ(sinkscope::gpu_activations_name(sinkscope::GpuActivations::kInt8), "int8");
  EXPECT_EQ(sinkscope::parse_gpu_activations("int16"), sinkscope::GpuActivations::kInt16);
  EXPECT_FALSE(sinkscope::parse_gpu_activations("INT8").has_value());
}

TEST(CliArgs, SparseDecodeOption) {
  // Default: the backend chooses the faster kernels; always on request; the rest is an error.
  using sinkscope::SparseDecodeKernels;
  using sinkscope::cli::parse_generate_args;
  EXPECT_EQ(parse_generate_args(argv_of({"--prompt", "Hi"})).backend.sparse_decode,
            SparseDecodeKernels::kAuto);
  EXPECT_EQ(parse_generate_args(argv_of({"--prompt", "Hi", "--sparse-decode", "always"}))
                .backend.sparse_decode,
            SparseDecodeKernels::kAlways);
  EXPECT_EQ(parse_generate_args(argv_of({"--prompt", "Hi", "--sparse-decode", "auto"}))
                .backend.sparse_decode,
            SparseDecodeKernels::kAuto);
  const std::string e = generate_error({"--prompt", "Hi", "--sparse-decode", "never"});
  EXPECT_NE(e.find("--sparse-decode"), std::string::npos) << e;
  EXPECT_NE(e.find("never"), std::string::npos) << e;
}

TEST(CliArgs, DecodePathReport) {
  using sinkscope::DecodePathStats;
  // A backend that makes no choice (the CPU) reports nothing.
  EXPECT_TRUE(sinkscope::cli::decode_path_json(DecodePathStats{}).is_null());
  EXPECT_EQ(sinkscope::cli::decode_path_line(DecodePathStats{}), "");
  DecodePathStats d;
  d.chooses = true;
  d.sparse_steps = 2;
  d.probe_steps = 2;
  d.dense_steps = 38;
  d.skipped_estimate = 0.62;
  d.predicted_ratio = 1.91;
  d.last_kv_len = 340;
  const auto j = sinkscope::cli::decode_path_json(d);
  EXPECT_EQ(j.at("dense_steps").get<long long>(), 38);
  EXPECT_EQ(j.at("last_kernels").get<std::string>(), "dense");
  EXPECT_NEAR(j.at("predicted_sparse_over_dense").get<double>(), 1.91, 1e-12);
  const std::string line = sinkscope::cli::decode_path_line(d);
  EXPECT_NE(line.find("38 the dense ones"), std::string::npos) << line;
  EXPECT_NE(line.find("1.91x"), std::string::npos) << line;
  EXPECT_NE(line.find("62 %"), std::string::npos) << line;
}

TEST(CliArgs, NumbersAreStrict) {
  using sinkscope::cli::parse_double;
  using sinkscope::cli::parse_int;
  using sinkscope::cli::parse_uint64;
  EXPECT_EQ(parse_int("--k", "+5", 0, 10), 5);
  EXPECT_EQ(parse_int("--k", "-3", -5, 10), -3);
  EXPECT_THROW(parse_int("--k", "", 0, 10), UsageError);
  EXPECT_THROW(parse_int("--k", "5x", 0, 10), UsageError);
  EXPECT_THROW(parse_int("--k", "1.5", 0, 10), UsageError);
  EXPECT_THROW(parse_int("--k", " 5", 0, 10), UsageError);
  EXPECT_THROW(parse_int("--k", "11", 0, 10), UsageError);
  EXPECT_THROW(parse_int("--k", "99999999999999999999999", 0, 10), UsageError);
  EXPECT_EQ(parse_uint64("--seed", "18446744073709551615"), 18446744073709551615ull);
  EXPECT_THROW(parse_uint64("--seed", "-1"), UsageError);
  EXPECT_THROW(parse_uint64("--seed", "18446744073709551616"), UsageError);
  EXPECT_DOUBLE_EQ(parse_double("--t", "0.7", 0, 1), 0.7);
  EXPECT_DOUBLE_EQ(parse_double("--t", "1e-1", 0, 1), 0.1);
  EXPECT_THROW(parse_double("--t", "nan", 0, 1), UsageError);
  EXPECT_THROW(parse_double("--t", "inf", 0, 1e9), UsageError);
  EXPECT_THROW(parse_double("--t", "0", 0, 1, true), UsageError);
  EXPECT_THROW(parse_double("--t", "1.01", 0, 1), UsageError);
  EXPECT_THROW(parse_double("--t", "0.5.", 0, 1), UsageError);
  try {
    parse_int("--max-tokens", "0", 1, 64);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--max-tokens: '0' is out of range [1, 64]");
  }
}

// ---- subcommand arguments --------------------------------------------------------------------

TEST(CliGenerateArgs, Defaults) {
  const auto a = sinkscope::cli::parse_generate_args(argv_of({"--prompt", "Hi"}));
  EXPECT_EQ(*a.prompt, "Hi");
  EXPECT_FALSE(a.model);
  EXPECT_EQ(a.max_tokens, 128);
  EXPECT_EQ(a.temperature, 0.0f);
  EXPECT_EQ(a.top_k, 0);
  EXPECT_EQ(a.top_p, 1.0f);
  EXPECT_EQ(a.threads, 0);
  EXPECT_EQ(a.ctx, 0);
  EXPECT_FALSE(a.chat || a.json || a.hash);
}

TEST(CliGenerateArgs, AllOptions) {
  const auto a = sinkscope::cli::parse_generate_args(
      argv_of({"--model", "m.gguf",        "--prompt-file", "p.txt",   "--max-tokens",
               "7",       "--chat",        "--system",      "sys",     "--seed",
               "9",       "--temperature", "0.5",           "--top-k", "40",
               "--top-p", "0.9",           "--threads",     "2",       "--ctx",
               "256",     "--json",        "--hash"}));
  EXPECT_EQ(*a.model, "m.gguf");
  EXPECT_EQ(*a.prompt_file, "p.txt");
  EXPECT_FALSE(a.prompt);
  EXPECT_EQ(a.max_tokens, 7);
  EXPECT_TRUE(a.chat);
  EXPECT_EQ(*a.system, "sys");
  EXPECT_EQ(a.seed, 9u);
  EXPECT_FLOAT_EQ(a.temperature, 0.5f);
  EXPECT_EQ(a.top_k, 40);
  EXPECT_FLOAT_EQ(a.top_p, 0.9f);
  EXPECT_EQ(a.threads, 2);
  EXPECT_EQ(a.ctx, 256);
  EXPECT_TRUE(a.json && a.hash);
}

TEST(CliGenerateArgs, Errors) {
  EXPECT_NE(generate_error({}).find("a prompt is required"), std::string::npos);
  EXPECT_NE(generate_error({"--prompt", ""}).find("the prompt is empty"), std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "a", "--prompt-file", "f"}).find("not both"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "a", "--max-tokens", "0"}).find("out of range"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "a", "--max-tokens", "x"}).find("expected an integer"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "a", "--temperature", "-1"}).find("--temperature"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "a", "--top-p", "0"}).find("--top-p"), std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "a", "--threads", "-2"}).find("--threads"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "a", "--system", "s"}).find("--system needs --chat"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "a", "--hash"}).find("--hash needs --json"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "a", "--max-tokens"}).find("missing value"),
            std::string::npos);
  EXPECT_EQ(generate_error({"--help", "--bogus"}), "");
}

TEST(CliOtherArgs, PerplexityAndInfo) {
  const auto p =
      sinkscope::cli::parse_perplexity_args(argv_of({"--file", "t.txt", "--ctx", "128"}));
  EXPECT_EQ(p.file, "t.txt");
  EXPECT_EQ(p.ctx, 128);
  EXPECT_THROW(sinkscope::cli::parse_perplexity_args(argv_of({})), UsageError);
  EXPECT_THROW(sinkscope::cli::parse_perplexity_args(argv_of({"--file", "t", "--ctx", "1"})),
               UsageError);
  const auto i = sinkscope::cli::parse_info_args(argv_of({"--json"}));
  EXPECT_TRUE(i.json);
  EXPECT_THROW(sinkscope::cli::parse_info_args(argv_of({"--prompt", "x"})), UsageError);
}

// ---- run_cli in-process: statuses and messages, no model needed ------------------------------

TEST(CliRun, HelpVersionAndUsageStatuses) {
  auto r = run_in_process({"--help"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("generate"), std::string::npos);
  r = run_in_process({"--version"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("sinkscope-cli ", 0), 0u);
  r = run_in_process({});
  EXPECT_EQ(r.status, 2);
  r = run_in_process({"frobnicate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos);
  for (const char* cmd : {"generate", "perplexity", "info"}) {
    r = run_in_process({cmd, "--help"});
    EXPECT_EQ(r.status, 0) << cmd;
    EXPECT_NE(r.out.find("Usage: sinkscope-cli"), std::string::npos) << cmd;
    EXPECT_NE(r.out.find("--model"), std::string::npos) << cmd;
  }
  r = run_in_process({"generate", "--prompt", "x", "--max-tokens", "0"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("sinkscope-cli generate: error: --max-tokens"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Try 'sinkscope-cli generate --help'"), std::string::npos) << r.err;
}

TEST(CliRun, MissingFilesAreNamed) {
  auto r = run_in_process({"generate", "--prompt-file", "/nonexistent/prompt.txt"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("file not found: /nonexistent/prompt.txt"), std::string::npos) << r.err;
  r = run_in_process({"info", "--model", "/nonexistent/model.gguf"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("file not found: /nonexistent/model.gguf"), std::string::npos) << r.err;
  // A prompt file holding only whitespace is an empty prompt.
  const fs::path blank =
      fs::temp_directory_path() / ("sinkscope_blank_" + std::to_string(getpid()));
  std::ofstream(blank) << "  \n\n";
  r = run_in_process({"generate", "--prompt-file", blank.c_str()});
  fs::remove(blank);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the prompt is empty"), std::string::npos) << r.err;
}

// ---- the built binary --------------------------------------------------------------------------

TEST(CliBinary, StatusesWithoutModel) {
  auto r = run_binary({"--version"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("sinkscope-cli ", 0), 0u) << r.out;
  r = run_binary({"generate", "--prompt", "x", "--bogus"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown option '--bogus'"), std::string::npos) << r.err;
  // No default model: a runtime error (1) that says how to get it.
  r = run_binary({"generate", "--prompt", "hello"},
                 "env -u SINKSCOPE_MODEL SINKSCOPE_CACHE_DIR=/nonexistent/sinkscope-cache");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("scripts/setup.sh"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/sinkscope-cache"), std::string::npos) << r.err;
}

TEST(CliBinary, GenerateJsonWithDefaultModel) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model);
  const std::string secret = "Zebra crossings in Quixotic Town are painted";
  auto r = run_binary({"generate", "--model", model.string(), "--prompt", secret, "--max-tokens",
                       "6", "--threads", "2", "--ctx", "256", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto v = sinkscope::Json::parse(r.out);
  EXPECT_EQ(v.at("backend").get<std::string>(), "cpu");
  EXPECT_EQ(v.at("threads").get<int64_t>(), 2);
  EXPECT_EQ(v.at("context").get<int64_t>(), 256);
  EXPECT_GT(v.at("prompt_tokens").get<int64_t>(), 3);
  const auto& tokens = v.at("tokens");
  EXPECT_EQ(static_cast<int64_t>(tokens.size()), v.at("generated_tokens").get<int64_t>());
  EXPECT_GE(tokens.size(), 1u);
  EXPECT_LE(tokens.size(), 6u);
  const std::string stop = v.at("stop_reason").get<std::string>();
  EXPECT_TRUE(stop == "max_tokens" || stop == "eog") << stop;
  if (stop == "max_tokens") {
    EXPECT_EQ(tokens.size(), 6u);
  }
  EXPECT_GT(v.at("prefill_tokens_per_s").get<double>(), 0.0);
  EXPECT_FALSE(v.at("model").contains("sha256"));  // only with --hash
  EXPECT_EQ(r.err.find("Zebra"), std::string::npos) << "stderr must not contain the prompt";

  // Greedy generation is deterministic: streaming prints the same text as --json reports.
  r = run_binary({"generate", "--model", model.string(), "--prompt", secret, "--max-tokens", "6",
                  "--threads", "2", "--ctx", "256"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string streamed = r.out;
  if (!streamed.empty() && streamed.back() == '\n' && !v.at("text").get<std::string>().ends_with("\n"))
    streamed.pop_back();
  EXPECT_EQ(streamed, v.at("text").get<std::string>());
  EXPECT_EQ(r.err.find("Zebra"), std::string::npos) << "stderr must not contain the prompt";
  EXPECT_NE(r.err.find("fingerprint"), std::string::npos) << r.err;
}

TEST(CliBinary, ChatAndPromptTooLong) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model);
  auto r = run_binary({"generate", "--model", model.string(), "--chat", "--system", "Be brief.",
                       "--prompt", "Name a colour.", "--max-tokens", "4", "--threads", "2", "--ctx",
                       "128", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GT(sinkscope::Json::parse(r.out).at("prompt_tokens").get<int64_t>(), 10);

  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "the quick brown fox jumps over the lazy dog ";
  r = run_binary({"generate", "--model", model.string(), "--prompt", long_prompt, "--ctx", "64",
                  "--threads", "2"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("longer than the context (64 tokens)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("quick brown"), std::string::npos) << "stderr must not contain the prompt";
  // A prompt exactly as long as the context leaves no room for a token: the same usage error.
  r = run_binary({"generate", "--model", model.string(), "--prompt", "one two three four five six",
                  "--ctx", "6", "--threads", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("fills the context, leaving no room to generate"), std::string::npos)
      << r.err;
  r = run_binary({"generate", "--model", model.string(), "--prompt", "one two", "--ctx", "8",
                  "--max-tokens", "1", "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(", 1 thread, context 8"), std::string::npos) << r.err;
}

// quality's default lengths fit the model: on SmolLM2 (8K) the longest is 8192 - --decode, so
// the run asks for 8192 tokens of text (a short file fails fast with that count) instead of
// refusing its own defaults.
TEST(CliBinary, QualityDefaultLengthsFitTheContext) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model);
  const fs::path text =
      fs::temp_directory_path() / ("sinkscope_quality_" + std::to_string(getpid()) + ".txt");
  {
    std::ofstream out(text);
    out << "Rivers carry sand to the sea.";
  }
  const auto r = run_binary({"quality", "--model", model.string(), "--file", text.string(),
                             "--threads", "1"});
  fs::remove(text);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("default --lengths 2048,4096,8160"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("8192 are needed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("exceed the model's trained context"), std::string::npos) << r.err;
}

TEST(CliBinary, InfoJson) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model);
  auto r = run_binary({"info", "--model", model.string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto v = sinkscope::Json::parse(r.out);
  EXPECT_EQ(v.at("config").at("architecture").get<std::string>(), "llama");
  EXPECT_EQ(v.at("config").at("n_layer").get<int64_t>(), 30);
  EXPECT_EQ(v.at("config").at("n_vocab").get<int64_t>(), 49152);
  EXPECT_EQ(v.at("tokenizer").at("kind").get<std::string>(), "gpt2");
  EXPECT_EQ(v.at("tokenizer").at("chat_format").get<std::string>(), "chatml");
  EXPECT_GT(v.at("tensors").at("by_type").at("Q4_1").get<int64_t>(), 0);
  // SmolLM2-135M: 30 layers x K and V x 3 KV heads x 64 dims x 4 bytes per token; the weights
  // are the file's tensor bytes (the file is a little larger: header and alignment).
  const auto& mem = v.at("memory");
  EXPECT_EQ(mem.at("kv_bytes_per_token").get<int64_t>(), 30 * 2 * 192 * 4);
  EXPECT_EQ(mem.at("kv_bytes_trained_context").get<int64_t>(), int64_t(30 * 2 * 192 * 4) * 8192);
  const int64_t weights = mem.at("weights_bytes").get<int64_t>();
  EXPECT_LE(weights, int64_t(fs::file_size(model)));
  EXPECT_GT(weights, int64_t(fs::file_size(model)) * 95 / 100);
  // On the GPU: a bf16 KV cache (half the CPU's float32), and the weights as bf16 (134.5 M
  // parameters, 2 bytes each, the norms fp32) or with the Q4_1 projections in their blocks
  // (the embedding table stays bf16: 49152 x 576 x 2 bytes).
  const auto& cuda = mem.at("cuda");
  EXPECT_EQ(cuda.at("kv_bytes_per_token").get<int64_t>(), 30 * 2 * 192 * 2);
  const int64_t bf16 = cuda.at("weights_bf16_bytes").get<int64_t>();
  const int64_t native = cuda.at("weights_native_bytes").get<int64_t>();
  EXPECT_GT(bf16, int64_t(2) * 134'000'000);
  EXPECT_LT(bf16, int64_t(2) * 136'000'000);
  EXPECT_GT(native, int64_t(49152) * 576 * 2);
  EXPECT_LT(native, weights + int64_t(49152) * 576 * 2);
}

// A qwen3 file (the transformers oracle's, tests/data/oracles): info names the family, its head
// width (not width / heads) and the per-head Q/K norms.
TEST(CliBinary, InfoNamesTheQwen3Family) {
  const std::string model =
      std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/oracles/qwen3_tied_f32.gguf";
  auto r = run_binary({"info", "--model", model, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto v = sinkscope::Json::parse(r.out);
  EXPECT_EQ(v.at("config").at("architecture").get<std::string>(), "qwen3");
  EXPECT_EQ(v.at("config").at("family").get<std::string>(), "Qwen3");
  EXPECT_EQ(v.at("config").at("head_dim").get<int64_t>(), 32);
  EXPECT_EQ(v.at("config").at("n_embd").get<int64_t>(), 64);
  EXPECT_TRUE(v.at("config").at("qk_norm").get<bool>());
  EXPECT_FALSE(v.at("config").at("qkv_bias").get<bool>());
  EXPECT_TRUE(v.at("config").at("rope_neox").get<bool>());
  r = run_binary({"info", "--model", model});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("qwen3 (Qwen3 family)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 / 2, head dim 32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("yes (per head, before rope)"), std::string::npos) << r.out;
}

// A Hugging Face checkpoint (tests/data/hf) is given by its directory or its config.json: info
// names the format and the stored dtype, generate runs on it, a directory that is not a
// checkpoint is a usage error.
TEST(CliBinary, CheckpointDirectoryIsAModel) {
  const std::string dir = std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/hf/llama_bf16_sharded";
  auto r = run_binary({"info", "--model", dir, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto v = sinkscope::Json::parse(r.out);
  EXPECT_EQ(v.at("format").get<std::string>(), "safetensors");
  EXPECT_EQ(v.at("dtype").get<std::string>(), "BF16");
  EXPECT_EQ(v.at("config").at("architecture").get<std::string>(), "llama");
  EXPECT_EQ(v.at("config").at("rope_scaling").get<std::string>(), "llama3");
  EXPECT_TRUE(v.at("config").at("rope_neox").get<bool>());
  EXPECT_EQ(v.at("tensors").at("by_type").at("BF16").get<int64_t>(), 21);
  EXPECT_EQ(v.at("tokenizer").at("chat_format").get<std::string>(), "llama3");
  r = run_binary({"info", "--model", dir + "/config.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("format            safetensors, BF16"), std::string::npos) << r.out;
  r = run_binary({"info", "--model",
                  std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/oracles/qwen3_tied_f32.gguf",
                  "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  v = sinkscope::Json::parse(r.out);
  EXPECT_EQ(v.at("format").get<std::string>(), "GGUF");
  EXPECT_EQ(v.at("dtype").get<std::string>(), "F32");
  r = run_binary({"generate", "--model", dir, "--prompt", "The quick brown fox", "--max-tokens",
                  "4", "--threads", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("loaded llama_bf16_sharded (llama_bf16_sharded, 2 layers, safetensors)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("quick brown"), std::string::npos) << "stderr must not contain the prompt";
  // config capacity reads the shape from config.json (qwen3: head_dim 16, not 32 / 4).
  r = run_binary({"config", "capacity",
                  std::string(SINKSCOPE_SOURCE_DIR) + "/resources/configs/dense-default.yaml",
                  "--model", std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/hf/qwen3_f32",
                  "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  v = sinkscope::Json::parse(r.out);
  EXPECT_EQ(v.at("model").at("head_dim").get<int64_t>(), 16);
  EXPECT_EQ(v.at("model").at("n_layer").get<int64_t>(), 2);
  r = run_binary({"info", "--model", std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/hf/tokenizers"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("has no config.json (not a Hugging Face checkpoint)"), std::string::npos)
      << r.err;
}

// config check applies the model-dependent rules only with a model at hand, and says so when
// it has none: qwen3_f32's head_dim 16 is not a multiple of the config's int8 groups of 32.
TEST(CliBinary, ConfigCheckAppliesModelRulesWithAModel) {
  const std::string cfg =
      std::string(SINKSCOPE_SOURCE_DIR) + "/resources/configs/int8-kv-protected-sinks.yaml";
  auto r = run_binary({"config", "check", cfg});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("were not checked: no model given; give --model PATH"), std::string::npos)
      << r.out;
  r = run_binary({"config", "check", cfg, "--model",
                  std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/hf/qwen3_f32"});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("inference.quantization.group_size: 32 does not divide the model's "
                       "head_dim (16)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("not checked"), std::string::npos) << r.out;
  r = run_binary({"config", "check", cfg, "--json", "--model",
                  std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/oracles/qwen3_tied_f32.gguf"});
  const sinkscope::Json v = sinkscope::Json::parse(r.out);
  EXPECT_TRUE(v.at("model_checked").get<bool>());
  EXPECT_EQ(v.at("valid").get<bool>(), r.status == 0);
}

// Gemma files (the transformers oracles): info names the family, which layers are local with
// which window, the local RoPE base and the soft-caps.
TEST(CliBinary, InfoNamesTheGemmaWindowsAndSoftCaps) {
  const std::string dir = std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/oracles/";
  auto r = run_binary({"info", "--model", dir + "gemma2_tied_f32.gguf", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto v = sinkscope::Json::parse(r.out);
  const auto& c2 = v.at("config");
  EXPECT_EQ(c2.at("family").get<std::string>(), "Gemma 2");
  EXPECT_EQ(c2.at("sliding_window").get<int64_t>(), 8);
  std::vector<int64_t> windows;
  for (const auto& w : c2.at("layer_windows")) windows.push_back(w.get<int64_t>());
  EXPECT_EQ(windows, (std::vector<int64_t>{8, 0, 8}));
  EXPECT_DOUBLE_EQ(c2.at("attn_softcap").get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(c2.at("final_softcap").get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(c2.at("query_scale").get<double>(), 0.25);
  r = run_binary({"info", "--model", dir + "gemma2_tied_f32.gguf"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("gemma2 (Gemma 2 family)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("local 8 tokens on layers 0, 2; global on 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attention 5, final 10"), std::string::npos) << r.out;
  r = run_binary({"info", "--model", dir + "gemma3_tied_q8_0.gguf"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("gemma3 (Gemma 3 family)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("local 6 tokens on layers 0-4, 6; global on 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("theta 1000000, 16 dims, neox pairs, scaling linear x4 (global layers)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("theta 10000, no scaling"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attention none, final none"), std::string::npos) << r.out;
}

// gpt-oss (the transformers oracle): info names the learned sinks (their logits, per layer and
// head, as the file holds them), the experts and YaRN; sinks reports each head's learned sink
// mass next to the keys' alpha.
TEST(CliBinary, InfoAndSinksNameTheLearnedSinksOfGptOss) {
  const std::string path = std::string(SINKSCOPE_SOURCE_DIR) + "/tests/data/oracles/gpt_oss_mxfp4.gguf";
  const auto model = sinkscope::Model::load(path);
  auto r = run_binary({"info", "--model", path, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto v = sinkscope::Json::parse(r.out);
  const auto& c = v.at("config");
  EXPECT_EQ(c.at("family").get<std::string>(), "gpt-oss");
  EXPECT_TRUE(c.at("attn_sinks").get<bool>());
  EXPECT_EQ(c.at("n_expert").get<int64_t>(), 4);
  EXPECT_EQ(c.at("n_expert_used").get<int64_t>(), 2);
  EXPECT_EQ(c.at("rope_scaling").get<std::string>(), "yarn");
  EXPECT_DOUBLE_EQ(c.at("rope_scale_factor").get<double>(), 32.0);
  EXPECT_EQ(c.at("rope_orig_ctx").get<int64_t>(), 64);
  const auto& ls = c.at("learned_sinks");
  ASSERT_EQ(ls.size(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    ASSERT_EQ(ls[l].size(), 4u);
    for (size_t h = 0; h < 4; ++h)
      EXPECT_DOUBLE_EQ(ls[l][h].get<double>(), double(model->weights().layers[l].sinks[h]));
  }
  r = run_binary({"info", "--model", path});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("gpt-oss (gpt-oss family)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("scaling yarn x32 from 64 positions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("local 8 tokens on layers 0; global on 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4, 2 used per token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("learned sinks     yes, one logit per head and layer (2 x 4)"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MXFP4"), std::string::npos) << r.out;

  r = run_binary({"sinks", "--model", path, "--prompt", "the quick brown fox jumps over the dog",
                  "--threads", "1", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  v = sinkscope::Json::parse(r.out);
  const auto& lm = v.at("learned_sink_mass");
  ASSERT_EQ(lm.size(), 2u);
  for (const auto& layer : lm) {
    ASSERT_EQ(layer.size(), 4u);
    for (const auto& x : layer) {
      EXPECT_GT(x.get<double>(), 0.0);
      EXPECT_LT(x.get<double>(), 1.0);
    }
  }
  r = run_binary({"sinks", "--model", path, "--prompt", "the quick brown fox jumps over the dog",
                  "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("learned sinks: mean mass"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("learned sink mass per head:"), std::string::npos) << r.out;
}

TEST(CliBinary, PerplexitySmallFile) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model);
  const fs::path text =
      fs::temp_directory_path() / ("sinkscope_ppl_" + std::to_string(getpid()) + ".txt");
  {
    std::ofstream out(text);
    for (int i = 0; i < 6; ++i)
      out << "Rivers carry sand to the sea, and the sea returns it to the shore as beaches. ";
  }
  auto r = run_binary({"perplexity", "--model", model.string(), "--file", text.string(), "--ctx",
                       "32", "--threads", "2", "--json"});
  fs::remove(text);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto v = sinkscope::Json::parse(r.out);
  EXPECT_GT(v.at("perplexity").get<double>(), 1.0);
  EXPECT_LT(v.at("perplexity").get<double>(), 1000.0);
  EXPECT_GE(v.at("chunks").get<int64_t>(), 2);
  EXPECT_NEAR(std::log(v.at("perplexity").get<double>()), v.at("mean_nll").get<double>(), 1e-9);
}

// The text output says how many trailing tokens no chunk scores, and info marks the CUDA KV
// estimates that lie past the model's trained context (SmolLM2: 8K).
TEST(CliBinary, PerplexityTailAndInfoContextNotes) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model);
  const fs::path text =
      fs::temp_directory_path() / ("sinkscope_ppl_tail_" + std::to_string(getpid()) + ".txt");
  {
    std::ofstream out(text);
    for (int i = 0; i < 6; ++i)
      out << "Rivers carry sand to the sea, and the sea returns it to the shore as beaches. ";
  }
  auto j = run_binary({"perplexity", "--model", model.string(), "--file", text.string(), "--ctx",
                       "32", "--threads", "1", "--json"});
  ASSERT_EQ(j.status, 0) << j.err;
  const auto v = sinkscope::Json::parse(j.out);
  const int64_t tail = v.at("tokens").get<int64_t>() - 32 * v.at("chunks").get<int64_t>();
  auto r = run_binary({"perplexity", "--model", model.string(), "--file", text.string(), "--ctx",
                       "32", "--threads", "1"});
  fs::remove(text);
  ASSERT_EQ(r.status, 0) << r.err;
  if (tail > 0) {
    EXPECT_NE(r.out.find("the last " + std::to_string(tail) + " do not fill a chunk"),
              std::string::npos)
        << r.out;
  } else {
    EXPECT_EQ(r.out.find("do not fill a chunk"), std::string::npos) << r.out;
  }
  r = run_binary({"info", "--model", model.string()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(32K and 128K are past the trained context)"), std::string::npos) << r.out;
}

TEST(CliGenerateArgs, AttentionOptions) {
  const auto a = sinkscope::cli::parse_generate_args(
      argv_of({"--prompt", "x", "--attention", "dynamic_sparse", "--lambda-prefill", "0.02",
               "--lambda-decode", "0.005", "--min-seq-len", "512", "--block-size", "128"}));
  EXPECT_EQ(a.attention.type, sinkscope::AttentionType::kDynamicSparse);
  EXPECT_DOUBLE_EQ(a.attention.threshold_prefill, 0.02);
  EXPECT_DOUBLE_EQ(a.attention.threshold_decode, 0.005);
  EXPECT_EQ(a.attention.min_sequence_length, 512);
  EXPECT_EQ(a.attention.block_size, 128);
  EXPECT_TRUE(a.attention.skip_softmax_exp);
  const auto c = sinkscope::cli::parse_generate_args(
      argv_of({"--prompt", "x", "--attention", "dynamic_sparse", "--threshold-mode",
               "length_scaled", "--lambda-prefill", "40"}));
  EXPECT_EQ(c.attention.threshold_mode, sinkscope::ThresholdMode::kLengthScaled);
  EXPECT_DOUBLE_EQ(c.attention.threshold_prefill, 40.0);

  EXPECT_NE(generate_error({"--prompt", "x", "--attention", "bogus"}).find("--attention"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "x", "--lambda-prefill", "0.1"}).find("dynamic_sparse"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "x", "--attention", "dynamic_sparse", "--lambda-prefill",
                            "1"})
                .find("< 1"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "x", "--attention", "dynamic_sparse", "--lambda-decode",
                            "-0.1"})
                .find("--lambda-decode"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "x", "--block-size", "96"}).find("64 or 128"),
            std::string::npos);
  EXPECT_NE(generate_error({"--prompt", "x", "--threshold-mode", "log"}).find("--threshold-mode"),
            std::string::npos);
}

TEST(CliBinary, SparsePerplexityReportsSparsity) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model);
  const fs::path file = fs::temp_directory_path() / "sinkscope_cli_sparse.txt";
  {
    std::ofstream f(file);
    for (int i = 0; i < 60; ++i)
      f << "Paragraph " << i << ": the keeper of the lighthouse wrote down every ship that "
        << "passed, its flag, its cargo and the weather, as his father had before him.\n";
  }
  auto r = run_binary({"perplexity", "--model", model.string(), "--file", file.string(), "--ctx",
                       "1024", "--attention", "dynamic_sparse", "--lambda-prefill", "0.05",
                       "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const auto v = sinkscope::Json::parse(r.out);
  const auto& att = v.at("attention");
  EXPECT_EQ(att.at("type").get<std::string>(), "dynamic_sparse");
  const auto& pre = att.at("prefill");
  EXPECT_GT(pre.at("tiles_visited").get<int64_t>(), 0);
  EXPECT_GT(pre.at("tiles_skipped").get<int64_t>(), 0) << "repetitive text at lambda 0.05 skips tiles";
  EXPECT_NEAR(pre.at("sparsity").get<double>(),
              double(pre.at("tiles_skipped").get<int64_t>()) / double(pre.at("tiles_visited").get<int64_t>()), 1e-12);
  EXPECT_EQ(pre.at("sparsity_per_layer").size(), 30u);
  EXPECT_LE(pre.at("dropped_mass_bound_max").get<double>(), 1.0 * 1024);
  fs::remove(file);
}

TEST(CliBinary, StreamPplThinnedReferenceScoresTheSameTokens) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model);
  const fs::path file = fs::temp_directory_path() /
                        ("sinkscope_cli_stream_" + std::to_string(getpid()) + ".txt");
  {
    std::ofstream f(file);
    for (int i = 0; i < 12; ++i)
      f << "Line " << i << ": the ferry left the harbour at dawn with grain, salt and letters.\n";
  }
  auto run = [&](std::initializer_list<const char*> extra) {
    std::vector<std::string> a = {"stream-ppl", "--model", model.string(), "--file", file.string(),
                                  "--threads", "2", "--max-tokens", "120", "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_binary(a);
  };
  // A window that covers the whole stream: the thinned stream and the thinned re-computation
  // reference score the same 29 tokens (4, 8, ..., 116) and agree.
  const auto s = run({"--window", "256", "--stride", "4", "--chunk", "32", "--backend", "cpu"});
  const auto r = run({"--window", "256", "--recompute", "--stride", "4", "--backend", "cpu"});
  ASSERT_EQ(s.status, 0) << s.err;
  ASSERT_EQ(r.status, 0) << r.err;
  const auto vs = sinkscope::Json::parse(s.out), vr = sinkscope::Json::parse(r.out);
  EXPECT_EQ(vs.at("scored").get<int64_t>(), 29);
  EXPECT_EQ(vr.at("scored").get<int64_t>(), 29);
  EXPECT_EQ(vs.at("backend").get<std::string>(), "cpu");
  EXPECT_EQ(vs.at("stride").get<int64_t>(), 4);
  EXPECT_NEAR(vs.at("perplexity").get<double>(), vr.at("perplexity").get<double>(),
              1e-4 * vr.at("perplexity").get<double>());
  // Usage errors name the option.
  const auto bad = run({"--window", "256", "--backend", "tpu"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--backend"), std::string::npos) << bad.err;
  const auto bad2 = run({"--window", "256", "--stride", "0"});
  EXPECT_EQ(bad2.status, 2);
  EXPECT_NE(bad2.err.find("--stride"), std::string::npos) << bad2.err;
  fs::remove(file);
}
