// SPDX-License-Identifier: Apache-2.0
// Passkey tasks: deterministic generation at the requested length and depth, and scoring.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/format/gguf_writer.h"
#include "engine/eval/passkey.h"

namespace sinkscope {
namespace {

std::shared_ptr<const Model> model() {
  namespace fs = std::filesystem;
  static std::shared_ptr<const Model> m = [] {
    fs::path p = fs::temp_directory_path() / "sinkscope_test_models" / "passkey.gguf";
    fs::create_directories(p.parent_path());
    TestModelShape shape;
    shape.n_vocab = 400;
    shape.n_ctx = 4096;
    make_random_llama(shape, 41).write(p);
    return Model::load(p);
  }();
  return m;
}

int count(const std::string& s, const std::string& sub) {
  int n = 0;
  for (size_t i = s.find(sub); i != std::string::npos; i = s.find(sub, i + 1)) ++n;
  return n;
}

TEST(Passkey, GeneratorIsDeterministicAndPlacesTheNeedle) {
  const Tokenizer& tok = model()->tokenizer();
  const PasskeyTask a = make_passkey_task(tok, 1024, 0.5, 7);
  const PasskeyTask b = make_passkey_task(tok, 1024, 0.5, 7);
  const PasskeyTask c = make_passkey_task(tok, 1024, 0.5, 8);
  EXPECT_EQ(a.prompt, b.prompt);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NE(a.passkey, c.passkey);
  EXPECT_EQ(a.passkey.size(), 5u);
  EXPECT_EQ(count(a.prompt, a.passkey), 2);
  EXPECT_EQ(a.prompt.substr(a.prompt.size() - 15), "The pass key is");
  // Length within one filler sentence group of the target.
  EXPECT_LE(int(a.tokens.size()), 1024);
  EXPECT_GE(int(a.tokens.size()), 1024 - 80);
  for (double depth : {0.0, 0.25, 1.0}) {
    const PasskeyTask t = make_passkey_task(tok, 2048, depth, 3);
    const double rel = double(t.needle_token) / double(t.tokens.size());
    EXPECT_NEAR(rel, depth, 0.08) << depth;
  }
  EXPECT_THROW(make_passkey_task(tok, 1024, 1.5, 1), std::invalid_argument);
  EXPECT_THROW(make_passkey_task(tok, 10, 0.5, 1), std::invalid_argument);
}

TEST(Passkey, ScorerTakesTheFirstDigitRun) {
  EXPECT_EQ(first_digits(" 48213. Remember"), "48213");
  EXPECT_EQ(first_digits("no digits"), "");
  EXPECT_EQ(first_digits("is 12 34"), "12");
  EXPECT_TRUE(passkey_correct(" 48213", "48213"));
  EXPECT_FALSE(passkey_correct(" 482130", "48213"));
  EXPECT_FALSE(passkey_correct("", ""));
}

TEST(Passkey, RunsThroughABackendWithAWindow) {
  BackendOptions o;
  o.cache.strategy = CacheStrategy::kSlidingWindow;
  o.cache.window_size = 128;
  o.cache.sink_keep_count = 4;
  auto be = make_cpu_backend(model(), o);
  const PasskeyTask t = make_passkey_task(model()->tokenizer(), 512, 0.5, 1);
  const PasskeyOutcome r = run_passkey(*be, t, 4);
  EXPECT_EQ(r.prompt_tokens, int(t.tokens.size()));
  EXPECT_EQ(r.correct, passkey_correct(r.answer, t.passkey));
  EXPECT_EQ(be->cache_stats().n_cached, 132);
}

}  // namespace
}  // namespace sinkscope
