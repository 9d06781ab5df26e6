// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "engine/eval/calibration.h"
#include "engine/format/gguf_writer.h"
#include "engine/util/json_io.h"
#include "test_support.h"

namespace sinkscope {
namespace {

TEST(CalibrationFit, RecoversExponentialModelExactly) {
  // Points generated from lambda * L = 0.3 * exp(9 s).
  std::vector<CalibrationPoint> pts;
  for (int L : {1024, 4096})
    for (double s : {0.2, 0.4, 0.6, 0.8}) pts.push_back({L, 0.3 * std::exp(9 * s) / L, s});
  const CalibrationFit f = fit_calibration(pts);
  EXPECT_NEAR(f.a, 0.3, 1e-9);
  EXPECT_NEAR(f.b, 9.0, 1e-9);
  EXPECT_NEAR(f.r2, 1.0, 1e-12);
  EXPECT_EQ(f.n_points, 8);
  EXPECT_NEAR(f.c_for(0.5), 0.3 * std::exp(4.5), 1e-9);
}

TEST(CalibrationFit, IgnoresSaturatedPointsAndRejectsDegenerateInput) {
  std::vector<CalibrationPoint> pts = {{1024, 1e-4, 0.0}, {1024, 0.5, 1.0}};
  EXPECT_THROW(fit_calibration(pts), std::invalid_argument);
  pts.push_back({1024, 1e-3, 0.3});
  pts.push_back({2048, 1e-3, 0.3});
  EXPECT_THROW(fit_calibration(pts), std::invalid_argument);  // no spread in s
  pts.push_back({2048, 1e-2, 0.6});
  const CalibrationFit f = fit_calibration(pts);
  EXPECT_EQ(f.n_points, 3);
  EXPECT_GT(f.b, 0);
}

TEST(Calibrate, RejectsBadOptionsBeforeRunning) {
  TestModelShape shape;
  shape.n_ctx = 1024;
  const auto path = std::filesystem::temp_directory_path() / "sinkscope_calib_model.gguf";
  make_random_llama(shape, 5).write(path);
  auto model = Model::load(path);
  auto be = make_cpu_backend(model, {});
  std::vector<TokenId> tokens(600, 7);
  CalibrationOptions o;
  o.lengths = {256};
  o.target_sparsity = 1.0;
  EXPECT_THROW(calibrate(*be, tokens, o), BackendError);
  o.target_sparsity = 0.5;
  o.lengths = {2000};  // longer than the text
  EXPECT_THROW(calibrate(*be, tokens, o), BackendError);
  o.lengths = {100};  // shorter than two tiles
  EXPECT_THROW(calibrate(*be, tokens, o), BackendError);
  o.lengths = {256};
  o.lambdas = {1.0};
  EXPECT_THROW(calibrate(*be, tokens, o), BackendError);
}

// The token ids of the golden "long" prompt (tests/golden/logits/manifest.json).
std::vector<TokenId> long_prompt_ids() {
  std::ifstream mf(test::golden_dir() / "logits" / "manifest.json");
  std::stringstream ss;
  ss << mf.rdbuf();
  const auto manifest = Json::parse(ss.str());
  std::vector<TokenId> tokens;
  for (const auto& p : manifest.at("prompts"))
    if (p.at("name").get<std::string>() == "long")
      for (const auto& id : p.at("ids")) tokens.push_back(TokenId(id.get<int64_t>()));
  return tokens;
}

// On the real model (attention sinks make skipping real): sparsity grows with lambda, the fit
// is usable, and the length-scaled check lands near the target.
TEST(Calibrate, FitsTheDefaultModelOnRealText) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(path);
  const std::vector<TokenId> tokens = long_prompt_ids();
  ASSERT_GE(tokens.size(), 1024u);
  auto model = Model::load(path);
  auto be = make_cpu_backend(model, {});
  CalibrationOptions o;
  o.lengths = {512, 1024};
  o.lambdas = {1e-2, 1e-1, 3e-1};
  o.target_sparsity = 0.15;
  int calls = 0;
  const CalibrationResult r = calibrate(*be, tokens, o, [&](const CalibrationProgress& p) {
    ++calls;
    EXPECT_LE(p.done, p.total);
  });
  ASSERT_EQ(r.points.size(), 6u);
  EXPECT_EQ(calls, 8);
  for (size_t i = 0; i < r.points.size(); ++i) {
    std::printf("[calibrate] L=%d lambda=%g sparsity=%.3f\n", r.points[i].length,
                r.points[i].lambda, r.points[i].sparsity);
    if (i % 3 != 0) {
      EXPECT_GT(r.points[i].sparsity, r.points[i - 1].sparsity);
    }
  }
  EXPECT_GE(r.fit.n_points, 3);
  EXPECT_GT(r.fit.b, 0);
  ASSERT_EQ(r.verification.size(), 2u);
  for (const auto& v : r.verification) {
    std::printf("[calibrate] check L=%d lambda=%g sparsity=%.3f (target 0.15)\n", v.length,
                v.lambda, v.sparsity);
    // One exponential over two lengths is a coarse model at these short lengths: the check
    // lands in the right range, not on the target.
    if (v.lambda < 1) {
      EXPECT_GT(v.sparsity, 0.03);
      EXPECT_LT(v.sparsity, 0.4);
    } else {
      EXPECT_TRUE(std::isnan(v.sparsity));
    }
  }
  EXPECT_EQ(be->attention().type, AttentionType::kDense);  // restored
}

// The oracle for the solver: one more prefill at the returned lambda, run here.
double measured_sparsity(Backend& be, const std::vector<TokenId>& tokens, int L, double lambda) {
  AttentionSettings s;
  s.type = AttentionType::kDynamicSparse;
  s.threshold_mode = ThresholdMode::kFixed;
  s.threshold_prefill = lambda;
  be.set_attention(s);
  be.reset();
  std::vector<float> logits;
  be.forward(std::span<const TokenId>(tokens.data(), size_t(L)), LogitsMode::kLast, logits);
  return be.probes().total(false).sparsity();
}

// Probes sorted by lambda: the measured share does not fall by more than `slack` (skips in one
// layer change the next layer's scores, so exact monotonicity holds per layer, not in total).
void expect_monotone(std::vector<CalibrationPoint> probes, double slack) {
  std::sort(probes.begin(), probes.end(), [](const CalibrationPoint& a, const CalibrationPoint& b) {
    return a.lambda < b.lambda;
  });
  for (size_t i = 1; i < probes.size(); ++i)
    EXPECT_GE(probes[i].sparsity, probes[i - 1].sparsity - slack)
        << "lambda " << probes[i - 1].lambda << " -> " << probes[i].lambda;
}

struct RandomModelFixture {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Backend> be;
  std::vector<TokenId> tokens;
  RandomModelFixture() {
    TestModelShape shape;
    shape.n_ctx = 4096;
    const auto path = std::filesystem::temp_directory_path() / "sinkscope_solve_model.gguf";
    make_random_llama(shape, 11).write(path);
    model = Model::load(path);
    be = make_cpu_backend(model, {});
    std::mt19937 rng(3);
    for (int i = 0; i < 4096; ++i) tokens.push_back(TokenId(rng() % 256));
  }
};

TEST(SolveFixedLambda, RejectsBadOptionsClearly) {
  RandomModelFixture f;
  LambdaSolveOptions o;
  o.length = 256;
  auto message_of = [&](const LambdaSolveOptions& opt) -> std::string {
    try {
      solve_fixed_lambda(*f.be, f.tokens, opt);
    } catch (const BackendError& e) {
      return e.what();
    }
    return "no error";
  };
  for (double bad : {0.0, 1.0, -0.2, 1.5, std::nan("")}) {
    o.target_sparsity = bad;
    EXPECT_NE(message_of(o).find("target sparsity must be in (0, 1)"), std::string::npos) << bad;
  }
  o.target_sparsity = 0.3;
  o.tolerance = 0;
  EXPECT_NE(message_of(o).find("tolerance"), std::string::npos);
  o.tolerance = 0.01;
  o.max_iterations = 0;
  EXPECT_NE(message_of(o).find("max iterations"), std::string::npos);
  o.max_iterations = 14;
  o.lambda_max = 1.0;
  EXPECT_NE(message_of(o).find("lambda_max < 1"), std::string::npos);
  o.lambda_max = 0.999;
  o.length = 100;
  EXPECT_NE(message_of(o).find("shorter than two tiles"), std::string::npos);
  o.length = 5000;
  EXPECT_NE(message_of(o).find("fewer than the length 5000"), std::string::npos);
  EXPECT_EQ(f.be->attention().type, AttentionType::kDense);
}

// Random weights give no attention sinks: a KV tile is skipped only where all 64 rows of the
// query tile have seen a larger score before, which with iid scores after k tiles happens with
// probability ~ (k / (k + 1))^64, and only for lambda close to 1 (where a bisection in
// ln(lambda) alone would crawl). At 4096 tokens lambda -> 1 skips ~9 % of the tiles here.
TEST(SolveFixedLambda, HitsTheTargetOnARandomModel) {
  RandomModelFixture f;
  const AttentionSettings before = f.be->attention();
  LambdaSolveOptions o;
  o.length = 4096;
  o.target_sparsity = 0.05;
  o.tolerance = 0.01;
  int calls = 0;
  const LambdaSolveResult r =
      solve_fixed_lambda(*f.be, f.tokens, o, [&](const CalibrationProgress&) { ++calls; });
  for (const auto& p : r.probes)
    std::printf("[solve] random L=%d lambda=%.9g sparsity=%.4f\n", p.length, p.lambda, p.sparsity);
  ASSERT_TRUE(r.reached) << r.note;
  EXPECT_TRUE(r.note.empty());
  EXPECT_LE(std::abs(r.sparsity - o.target_sparsity), o.tolerance);
  EXPECT_GT(r.lambda, 0);
  EXPECT_LT(r.lambda, 1);
  EXPECT_EQ(r.iterations, int(r.probes.size()));
  EXPECT_LE(r.iterations, o.max_iterations + 1);
  EXPECT_EQ(calls, r.iterations);
  EXPECT_EQ(f.be->attention(), before);  // restored
  expect_monotone(r.probes, 0.02);
  const double again = measured_sparsity(*f.be, f.tokens, o.length, r.lambda);
  EXPECT_NEAR(again, r.sparsity, 1e-12);
  EXPECT_LE(std::abs(again - o.target_sparsity), o.tolerance);
}

TEST(SolveFixedLambda, SaysWhenTheTargetIsOutOfReach) {
  RandomModelFixture f;
  LambdaSolveOptions o;
  o.length = 1024;  // lambda -> 1 skips ~1 % of the tiles (see above)
  o.target_sparsity = 0.5;
  const LambdaSolveResult r = solve_fixed_lambda(*f.be, f.tokens, o);
  for (const auto& p : r.probes)
    std::printf("[solve] random L=%d lambda=%.9g sparsity=%.4f\n", p.length, p.lambda, p.sparsity);
  std::printf("[solve] %s\n", r.note.c_str());
  EXPECT_FALSE(r.reached);
  // 0.5 (s = 0), then lambda_max: the next midpoint (0.99900099) lies above 0.999.
  EXPECT_EQ(r.iterations, 2);
  EXPECT_DOUBLE_EQ(r.probes.back().lambda, o.lambda_max);
  // Only at the end of the probes (one of them) does the reach check come after them.
  o.max_iterations = 1;
  const LambdaSolveResult r1 = solve_fixed_lambda(*f.be, f.tokens, o);
  EXPECT_EQ(r1.iterations, 2);
  EXPECT_EQ(r1.note.rfind("out of reach: lambda -> 1", 0), 0u) << r1.note;
  EXPECT_EQ(r.note.rfind("out of reach: lambda -> 1", 0), 0u) << r.note;
  EXPECT_DOUBLE_EQ(r.lambda, o.lambda_max);
  EXPECT_LT(r.sparsity, 0.1);
  expect_monotone(r.probes, 0.02);
}

// The real model at 1K tokens, starting from the global fit's c / L as the CLI does.
TEST(SolveFixedLambda, HitsTheTargetOnTheDefaultModel) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(path);
  const std::vector<TokenId> tokens = long_prompt_ids();
  ASSERT_GE(tokens.size(), 1024u);
  auto model = Model::load(path);
  auto be = make_cpu_backend(model, {});
  LambdaSolveOptions o;
  o.length = 1024;
  o.target_sparsity = 0.3;
  o.start_lambda = 0.05;
  const LambdaSolveResult r = solve_fixed_lambda(*be, tokens, o);
  for (const auto& p : r.probes)
    std::printf("[solve] SmolLM2 L=%d lambda=%.6g sparsity=%.4f\n", p.length, p.lambda, p.sparsity);
  ASSERT_TRUE(r.reached) << r.note;
  EXPECT_DOUBLE_EQ(r.probes.front().lambda, 0.05);
  EXPECT_LE(std::abs(r.sparsity - o.target_sparsity), o.tolerance);
  expect_monotone(r.probes, 0.01);
  const double again = measured_sparsity(*be, tokens, o.length, r.lambda);
  EXPECT_NEAR(again, r.sparsity, 1e-12);
}

}  // namespace
}  // namespace sinkscope
