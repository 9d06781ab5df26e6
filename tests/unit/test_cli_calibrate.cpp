// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli calibrate --solve-at: the built binary, on a small random-weight model and a
// random-letter text, prints in JSON the fixed lambda that reaches the target at a length, and
// a prefill at that lambda run here (the oracle) measures the same share; bad --solve-* values
// are usage errors (status 2) that name the option.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cli_test_support.h"
#include "engine/backend/backend.h"
#include "engine/format/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/util/json_io.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using test::run_binary;

struct Files {
  fs::path dir, model, text;
  Files() {
    dir = fs::temp_directory_path() / ("sinkscope_cli_calib_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    model = dir / "random.gguf";
    text = dir / "letters.txt";
    TestModelShape shape;
    shape.n_ctx = 4096;
    make_random_llama(shape, 11).write(model);
    // Random lowercase words: the byte-level vocabulary gives about one token per 1-3 bytes.
    std::mt19937 rng(5);
    std::ofstream f(text);
    for (int i = 0; i < 24000; ++i) f << char(rng() % 6 == 0 ? ' ' : 'a' + rng() % 26);
  }
  ~Files() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

TEST(CliCalibrate, SolveAtPrintsTheFixedLambdaThatReachesTheTarget) {
  Files f;
  // A random model skips tiles only for lambda near 1, and more at longer lengths: ~9 % of
  // the tiles at 4096 tokens for lambda -> 1 (test_calibration.cpp).
  const auto r = run_binary({"calibrate", "--model", f.model.string(), "--file", f.text.string(),
                             "--backend", "cpu", "--target-sparsity", "0.05", "--lengths",
                             "2048,4096", "--lambdas", "0.999,0.9999,0.999999", "--no-verify",
                             "--solve-at", "4096", "--solve-tol", "0.01", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const Json j = Json::parse(r.out);
  ASSERT_TRUE(j.contains("solved")) << r.out;
  const Json& s = j.at("solved");
  EXPECT_DOUBLE_EQ(s.at("tolerance").get<double>(), 0.01);
  EXPECT_EQ(s.at("threshold_mode").get<std::string>(), "fixed");
  ASSERT_EQ(s.at("lengths").size(), 1u);
  const Json& e = s.at("lengths")[0];
  EXPECT_EQ(e.at("length").get<int>(), 4096);
  ASSERT_TRUE(e.at("reached").get<bool>()) << e.dump();
  const double lambda = e.at("lambda").get<double>(), sp = e.at("sparsity").get<double>();
  EXPECT_LE(std::abs(sp - 0.05), 0.01);
  EXPECT_EQ(e.at("iterations").get<int>(), int(e.at("probes").size()));
  EXPECT_FALSE(e.contains("note"));

  // Independent check: the first 4096 tokens of the text at that fixed lambda, run here.
  auto model = Model::load(f.model);
  std::ifstream in(f.text);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto tokens = model->tokenizer().encode(text);
  ASSERT_GE(tokens.size(), 4096u);
  auto be = make_cpu_backend(model, {});
  AttentionSettings a;
  a.type = AttentionType::kDynamicSparse;
  a.threshold_prefill = lambda;
  be->set_attention(a);
  std::vector<float> logits;
  be->forward(std::span<const TokenId>(tokens.data(), 4096), LogitsMode::kLast, logits);
  EXPECT_NEAR(be->probes().total(false).sparsity(), sp, 1e-9);
}

// A grid whose fit is poor and whose target no checked length reaches still exits 0, but the
// text output says which points the fit left out and stderr warns about both.
TEST(CliCalibrate, PoorFitAndUnreachableTargetAreNamed) {
  Files f;
  const auto r = run_binary({"calibrate", "--model", f.model.string(), "--file", f.text.string(),
                             "--backend", "cpu", "--target-sparsity", "0.5", "--lengths",
                             "2048,4096", "--lambdas", "0.001,0.999,0.999999"});
  ASSERT_EQ(r.status, 0) << r.err;
  const bool left_out = r.out.find("points left out: their sparsity is outside") != std::string::npos;
  const bool out_of_reach = r.out.find("out of reach") != std::string::npos;
  EXPECT_TRUE(left_out) << r.out;
  EXPECT_TRUE(out_of_reach) << r.out;
  EXPECT_NE(r.err.find("warning: c / L is >= 1 at every checked length"), std::string::npos)
      << r.out << r.err;
}

TEST(CliCalibrate, BadSolveOptionsAreUsageErrors) {
  struct Case {
    std::vector<std::string> extra;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--solve-at", "100"}, "--solve-at: length 100 is shorter than two tiles"},
      {{"--solve-at", "x"}, "--solve-at"},
      {{"--solve-tol", "0.6"}, "--solve-tol"},
      {{"--solve-tol", "0"}, "--solve-tol"},
      {{"--solve-max-iter", "0"}, "--solve-max-iter"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"calibrate", "--file", "/nonexistent-never-read.txt",
                                     "--target-sparsity", "0.5"};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const auto r = run_binary(args);
    EXPECT_EQ(r.status, 2) << c.extra[0] << " " << c.extra[1] << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace sinkscope
