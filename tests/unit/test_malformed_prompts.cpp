// SPDX-License-Identifier: Apache-2.0
// Malformed prompts, through the engine API and through the CLI in-process (run_cli): empty
// prompts, prompts that fill or overflow the context or the prompt + generation budget, texts too
// short to score, invalid UTF-8. Each is either handled (invalid UTF-8 is valid input) or refused
// with a message that names the problem and the numbers, and the same process -- the same
// backend, for the engine -- serves the next request normally. (GGUF and config files are covered
// by test_gguf.cpp, test_config.cpp and the fuzz corpora in test_malformed_corpus.cpp.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "engine/backend/backend.h"
#include "engine/format/gguf_writer.h"
#include "engine/util/json_io.h"
#include "engine/model/model.h"
#include "engine/model/session.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;

// Lone continuation bytes, truncated sequences, an overlong form, a surrogate, 0xFF, a NUL.
const std::string kInvalidUtf8("a\x80 b\xC3 c\xE2\x82 d\xC0\xAF e\xED\xA0\x80 f\xFF\xFE g\0h", 26);

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

class MalformedPrompts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::temp_directory_path() / ("sinkscope-malformed-" + std::to_string(::getpid()));
    fs::create_directories(s_dir);
    TestModelShape shape;
    shape.n_vocab = 259 + kRandomLlamaEnglishMerges + 20;
    shape.n_ctx = 128;
    s_model_path = (s_dir / "random.gguf").string();
    make_random_llama(shape, 23).write(s_model_path);
    s_model = Model::load(s_model_path);
  }
  static void TearDownTestSuite() {
    s_model.reset();
    std::error_code ec;
    fs::remove_all(s_dir, ec);
  }
  std::unique_ptr<Backend> backend(int ctx) const {
    BackendOptions o;
    o.n_threads = 1;
    o.max_context = ctx;
    return make_cpu_backend(s_model, o);
  }
  static std::string write_file(const std::string& name, const std::string& text) {
    const fs::path p = s_dir / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  struct Run {
    int status;
    std::string out, err;
  };
  static Run cli(std::vector<std::string> args) {
    std::ostringstream out, err;
    const int status = cli::run_cli(args, out, err);
    return {status, out.str(), err.str()};
  }
  // A request that must succeed after a refused one: the process keeps serving.
  static void expect_still_serving() {
    const Run r = cli({"generate", "--model", s_model_path, "--prompt", "Hello there",
                       "--max-tokens", "3", "--threads", "1", "--json"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(Json::parse(r.out).at("generated_tokens").get<int64_t>(), 3);
  }

  static inline fs::path s_dir;
  static inline std::string s_model_path;
  static inline std::shared_ptr<const Model> s_model;
};

std::vector<TokenId> ramp_tokens(size_t n) {
  std::vector<TokenId> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = TokenId(32 + i % 200);
  return t;
}

// ---- engine API --------------------------------------------------------------------------------

TEST_F(MalformedPrompts, EngineRefusesEmptyAndOverlongPromptsAndStaysUsable) {
  auto b = backend(64);
  GenerateOptions g;
  g.max_tokens = 4;
  try {
    generate(*b, {}, g);
    ADD_FAILURE() << "an empty prompt was accepted";
  } catch (const BackendError& e) {
    EXPECT_TRUE(contains(e.what(), "prompt is empty")) << e.what();
  }
  // A prompt that fills the whole context leaves no room for a generated token.
  try {
    generate(*b, ramp_tokens(64), g);
    ADD_FAILURE() << "a prompt filling the context was accepted";
  } catch (const BackendError& e) {
    EXPECT_TRUE(contains(e.what(), "64 tokens")) << e.what();
    EXPECT_TRUE(contains(e.what(), "context of 64")) << e.what();
  }
  g.max_tokens = 0;
  EXPECT_THROW(generate(*b, ramp_tokens(4), g), BackendError);
  // The same backend serves the next request, and a run that reaches the end of the context
  // stops there instead of failing.
  g.max_tokens = 20;
  g.stop_at_eog = false;
  const GenerateResult r = generate(*b, ramp_tokens(60), g);
  EXPECT_EQ(r.stop_reason, "context_full");
  EXPECT_EQ(b->n_past(), 64);
  EXPECT_EQ(r.tokens.size(), 5u);  // the prefill's token, then one per free position
  g.max_tokens = 3;
  EXPECT_EQ(generate(*b, ramp_tokens(8), g).tokens.size(), 3u);
}

TEST_F(MalformedPrompts, EnginePerplexityRefusesShortTextsAndOversizedChunks) {
  auto b = backend(32);
  try {
    perplexity(*b, ramp_tokens(1), 16);
    ADD_FAILURE();
  } catch (const BackendError& e) {
    EXPECT_TRUE(contains(e.what(), "at least 2 tokens")) << e.what();
  }
  try {
    perplexity(*b, ramp_tokens(100), 64);
    ADD_FAILURE();
  } catch (const BackendError& e) {
    EXPECT_TRUE(contains(e.what(), "ctx 64 exceeds the capacity of 32")) << e.what();
  }
  EXPECT_THROW(perplexity(*b, ramp_tokens(10), 1), BackendError);
  const PerplexityResult r = perplexity(*b, ramp_tokens(100), 32);
  EXPECT_EQ(r.n_chunks, 3);
  EXPECT_TRUE(std::isfinite(r.perplexity));
}

TEST_F(MalformedPrompts, EngineTakesInvalidUtf8) {
  const Tokenizer& tok = s_model->tokenizer();
  const std::vector<TokenId> ids = tok.encode(kInvalidUtf8);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(tok.decode(ids), kInvalidUtf8);  // byte-level: every byte round-trips
  auto b = backend(64);
  GenerateOptions g;
  g.max_tokens = 4;
  g.stop_at_eog = false;
  EXPECT_EQ(generate(*b, ids, g).tokens.size(), 4u);
}

// ---- CLI, in-process -----------------------------------------------------------------------------

TEST_F(MalformedPrompts, CliPromptBeyondTheContextThenServes) {
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "words and more words ";
  Run r = cli({"generate", "--model", s_model_path, "--prompt", long_prompt, "--ctx", "32",
               "--threads", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "longer than the context (32 tokens)")) << r.err;
  expect_still_serving();
  // --ctx beyond what the model was trained for.
  r = cli({"generate", "--model", s_model_path, "--prompt", "hi", "--ctx", "4096"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "beyond the model's trained context (128 tokens)")) << r.err;
  // Generation budget: more new tokens than the context holds.
  r = cli({"generate", "--model", s_model_path, "--prompt", "hi", "--ctx", "16", "--max-tokens",
           "17"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--max-tokens 17 is more than the context holds (16")) << r.err;
  // trace checks prompt + --max-tokens against the context up front.
  r = cli({"trace", "--model", s_model_path, "--prompt", "one two three four five six",
           "--max-tokens", "30", "--ctx", "32", "--out", (s_dir / "t.json").string(),
           "--threads", "1"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--max-tokens 30")) << r.err;
  EXPECT_FALSE(fs::exists(s_dir / "t.json"));  // nothing written for a refused run
  expect_still_serving();
}

TEST_F(MalformedPrompts, CliEmptyPromptsAndTextsThenServes) {
  Run r = cli({"generate", "--model", s_model_path, "--prompt", ""});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "the prompt is empty")) << r.err;
  r = cli({"generate", "--model", s_model_path, "--prompt-file", write_file("ws.txt", " \n\t\n")});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "the prompt is empty")) << r.err;
  r = cli({"perplexity", "--model", s_model_path, "--file", write_file("empty.txt", "")});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "the file is empty")) << r.err;
  r = cli({"perplexity", "--model", s_model_path, "--file", write_file("one.txt", "a"), "--ctx",
           "32"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "perplexity needs at least 2")) << r.err;
  expect_still_serving();
}

TEST_F(MalformedPrompts, CliInvalidUtf8IsValidInput) {
  Run r = cli({"generate", "--model", s_model_path, "--prompt", kInvalidUtf8, "--max-tokens", "4",
               "--threads", "1", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const Json v = Json::parse(r.out);  // the writer replaces invalid bytes: still JSON
  EXPECT_EQ(v.at("prompt_tokens").get<int64_t>(), int64_t(s_model->tokenizer().encode(kInvalidUtf8).size()));
  r = cli({"perplexity", "--model", s_model_path, "--file",
           write_file("bad.txt", kInvalidUtf8 + kInvalidUtf8), "--ctx", "32", "--threads", "1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "perplexity: ")) << r.out;
  expect_still_serving();
}

}  // namespace
}  // namespace sinkscope
