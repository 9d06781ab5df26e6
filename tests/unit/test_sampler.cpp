// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "engine/model/sampler.h"

namespace sinkscope {
namespace {

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s({});
  std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f};
  EXPECT_EQ(s.sample(l), 1);
  EXPECT_EQ(argmax(l), 1);
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  std::vector<float> l(100);
  for (int i = 0; i < 100; ++i) l[size_t(i)] = std::sin(float(i));
  auto draw = [&](uint64_t seed) {
    Sampler s({1.0f, 0, 1.0f, seed});
    std::vector<TokenId> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(l));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  std::vector<float> l = {0.5f, 0.4f, 2.0f, 1.9f};
  Sampler k1({5.0f, 1, 1.0f, 7});
  Sampler p0({5.0f, 0, 1e-6f, 7});
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(k1.sample(l), 2);
    EXPECT_EQ(p0.sample(l), 2);
  }
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  // logits ln(1), ln(2), ln(7): probabilities 0.1, 0.2, 0.7 at temperature 1.
  std::vector<float> l = {0.0f, std::log(2.0f), std::log(7.0f)};
  Sampler s({1.0f, 0, 1.0f, 123});
  std::map<TokenId, int> n;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) ++n[s.sample(l)];
  // 5 standard deviations of a binomial at these p: < 0.011.
  EXPECT_NEAR(n[0] / double(draws), 0.1, 0.011);
  EXPECT_NEAR(n[1] / double(draws), 0.2, 0.015);
  EXPECT_NEAR(n[2] / double(draws), 0.7, 0.017);
}

TEST(Sampler, TopKRestrictsSupportAndTopPCutsTail) {
  std::vector<float> l = {3.0f, 2.9f, 2.8f, 0.0f, -1.0f};
  Sampler k2({1.0f, 2, 1.0f, 1});
  Sampler p({1.0f, 0, 0.5f, 2});
  for (int i = 0; i < 2000; ++i) {
    EXPECT_LT(k2.sample(l), 2);
    EXPECT_LT(p.sample(l), 2);  // top two of three near-equal logits carry >= 0.5 together
  }
}

TEST(Sampler, RejectsBadParameters) {
  EXPECT_THROW(Sampler({1.0f, 0, 0.0f, 0}), std::invalid_argument);
  EXPECT_THROW(Sampler({1.0f, 0, 1.5f, 0}), std::invalid_argument);
  EXPECT_THROW(Sampler({1.0f, -1, 1.0f, 0}), std::invalid_argument);
  EXPECT_THROW(Sampler({NAN, 0, 1.0f, 0}), std::invalid_argument);
  Sampler s({});
  EXPECT_THROW(s.sample(std::vector<float>{}), std::invalid_argument);
}

}  // namespace
}  // namespace sinkscope
