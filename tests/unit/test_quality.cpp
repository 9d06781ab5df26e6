// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "engine/format/gguf_writer.h"
#include "engine/eval/quality.h"

namespace sinkscope {
namespace {

TEST(Quality, IdenticalLogitsHaveZeroKlAndFullAgreement) {
  std::vector<float> a = {1, 2, 3, 0, 5, -1};
  std::vector<TokenId> next = {2, -1};
  const auto c = compare_logits(a, a, 3, next);
  EXPECT_EQ(c.positions, 2);
  EXPECT_NEAR(c.kl_mean(), 0.0, 1e-15);
  EXPECT_EQ(c.top1_agreement(), 1.0);
  EXPECT_EQ(c.scored, 1);
  EXPECT_NEAR(c.ppl_delta_pct(), 0.0, 1e-12);
}

TEST(Quality, MatchesHandComputedValues) {
  // Row: P = softmax(0, ln 3) = (1/4, 3/4); Q = softmax(ln 3, 0) = (3/4, 1/4).
  const float l3 = std::log(3.0f);
  std::vector<float> p = {0, l3}, q = {l3, 0};
  std::vector<TokenId> next = {1};
  const auto c = compare_logits(p, q, 2, next);
  const double kl = 0.25 * std::log(0.25 / 0.75) + 0.75 * std::log(0.75 / 0.25);
  EXPECT_NEAR(c.kl_mean(), kl, 1e-6);
  EXPECT_EQ(c.top1_agreement(), 0.0);
  EXPECT_NEAR(c.ppl_dense(), 1 / 0.75, 1e-6);
  EXPECT_NEAR(c.ppl_variant(), 1 / 0.25, 1e-6);
  EXPECT_NEAR(c.ppl_delta_pct(), 200.0, 1e-4);
  EXPECT_THROW(compare_logits(p, std::vector<float>{1, 2, 3}, 2, next), std::invalid_argument);
}

TEST(Quality, TeacherForcedLogitsEqualOnePrefillOnRandomModel) {
  TestModelShape shape;
  const auto path = std::filesystem::temp_directory_path() / "sinkscope_quality_model.gguf";
  make_random_llama(shape, 9).write(path);
  auto model = Model::load(path);
  auto be = make_cpu_backend(model, {});
  std::mt19937 rng(4);
  std::vector<TokenId> t(80);
  for (auto& x : t) x = TokenId(rng() % uint32_t(model->config().n_vocab));
  const auto tf = teacher_forced_logits(*be, t, 50);
  std::vector<float> all;
  be->reset();
  be->forward(t, LogitsMode::kAll, all);
  ASSERT_EQ(tf.size(), all.size());
  std::vector<TokenId> next(t.begin() + 1, t.end());
  next.push_back(-1);
  const auto c = compare_logits(all, tf, model->config().n_vocab, next);
  EXPECT_LT(c.kl_max, 1e-8);
  EXPECT_EQ(c.top1_agreement(), 1.0);
  EXPECT_THROW(teacher_forced_logits(*be, t, 0), BackendError);
}

}  // namespace
}  // namespace sinkscope
