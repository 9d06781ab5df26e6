// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
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

// On the real model (attention sinks make skipping real): sparsity grows with lambda, the fit
// is usable, and the length-scaled check lands near the target.
TEST(Calibrate, FitsTheDefaultModelOnRealText) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(path);
  std::ifstream mf(test::golden_dir() / "logits" / "manifest.json");
  std::stringstream ss;
  ss << mf.rdbuf();
  const auto manifest = Json::parse(ss.str());
  std::vector<TokenId> tokens;
  for (const auto& p : manifest.at("prompts"))
    if (p.at("name").get<std::string>() == "long")
      for (const auto& id : p.at("ids")) tokens.push_back(TokenId(id.get<int64_t>()));
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

}  // namespace
}  // namespace sinkscope
