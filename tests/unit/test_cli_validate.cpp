// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli validate and sweep, end to end on a random-weight model and a small dataset:
// statuses, the validated config on disk, gate failures, usage errors, CSV/JSON of a sweep.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_test_support.h"
#include "engine/config/config.h"
#include "engine/util/json_io.h"
#include "validation_fixture.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using test::fixture;
using test::run_binary;
using test::slurp;

fs::path write_config(const std::string& name, const std::string& yaml) {
  const fs::path p = fixture().dir / name;
  test::write_file(p, yaml);
  return p;
}

std::vector<std::string> common_args() {
  return {"--model", fixture().model_path.string(), "--dataset", fixture().manifest.string(),
          "--gen-tokens", "8", "--stream-chunk", "64", "--threads", "1"};
}

TEST(CliValidate, WritesAPassingValidatedConfig) {
  if (!config_yaml_supported()) GTEST_SKIP() << "built without yaml-cpp";
  const fs::path cfg = write_config("dense.yaml", "inference: {max_context_length: 1024}\n");
  const fs::path out = fixture().dir / "dense.validated.yaml";
  fs::remove(out);
  auto args = std::vector<std::string>{"validate", "--config", cfg.string(), "--out", out.string(),
                                       "--samples-csv", (fixture().dir / "samples.csv").string()};
  for (const auto& a : common_args()) args.push_back(a);
  const auto r = run_binary(args);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("PASSED"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("6/6 samples"), std::string::npos) << r.err;
  const ConfigParseResult back = load_config_file(out);
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE(back.config.validation.has_value());
  EXPECT_TRUE(back.config.validation->passed);
  EXPECT_EQ(back.config.validation->dataset.samples, 6);
  EXPECT_EQ(back.config.validation->results.kl_mean, 0.0);
  EXPECT_EQ(back.config.model.sha256, fixture().model->sha256());
  EXPECT_FALSE(back.config.provenance.created.empty());
  const std::string csv = slurp(fixture().dir / "samples.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7) << csv;  // header + 6 samples
}

TEST(CliValidate, AFailedGateExitsThreeAndSaysWhy) {
  if (!config_yaml_supported()) GTEST_SKIP() << "built without yaml-cpp";
  const fs::path cfg = write_config(
      "lossy.yaml",
      "inference:\n  max_context_length: 1024\n"
      "  cache: {strategy: sliding_window, window_size: 64, sink_keep_count: 0}\n"
      "  quantization: {enabled: true, kv_dtype: int4, group_size: 32, protect_sink_positions: false}\n"
      "validation:\n  gates: {ppl_delta_pct_max: 0.0001, similarity_min: 0.9999}\n");
  const fs::path out = fixture().dir / "lossy.validated.yaml";
  auto args = std::vector<std::string>{"validate", "--config", cfg.string(), "--out", out.string(), "--json"};
  for (const auto& a : common_args()) args.push_back(a);
  const auto r = run_binary(args);
  ASSERT_EQ(r.status, 3) << r.err << r.out;
  const Json j = Json::parse(r.out);
  EXPECT_FALSE(j.at("passed").get<bool>());
  // int4 keys in a 64-token window cannot keep top-1 agreement at 99.99 %.
  bool top1_failed = false;
  for (const auto& g : j.at("gates"))
    if (g.at("name").get<std::string>() == "top1_agreement") {
      top1_failed = !g.at("passed").get<bool>();
      EXPECT_NE(g.at("reason").get<std::string>().find("similarity_min 0.9999"), std::string::npos) << r.out;
    }
  EXPECT_TRUE(top1_failed) << r.out;
  const ConfigParseResult back = load_config_file(out);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back.config.validation->passed);
  EXPECT_EQ(back.config.validation->gates.ppl_delta_pct_max, 0.0001);
}

TEST(CliValidate, UsageAndInputErrorsAreNamed) {
  auto r = run_binary({"validate", "--out", "x.yaml"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--config is required"), std::string::npos) << r.err;
  if (config_yaml_supported()) {
    const fs::path bad = write_config("bad.yaml", "inference: {attention: {threshold_prefill: 1.5}}\n");
    r = run_binary({"validate", "--config", bad.string(), "--out", "x.yaml"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("threshold_prefill"), std::string::npos) << r.err;
  }
  const fs::path ok = write_config("ok.yaml", "inference: {max_context_length: 1024}\n");
  r = run_binary({"validate", "--config", ok.string(), "--out", "x.yaml", "--dataset",
                  (fixture().dir / "none.json").string()});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot read the dataset manifest"), std::string::npos) << r.err;
  r = run_binary({"validate", "--config", ok.string(), "--out", "x.yaml"},
                 "env -u SINKSCOPE_DATASET SINKSCOPE_CACHE_DIR=/nonexistent/cache");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("setup.sh --eval-data"), std::string::npos) << r.err;
  r = run_binary({"validate", "--config", ok.string(), "--out", "x.yaml", "--dataset",
                  fixture().manifest.string(), "--classes", "tiny"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("unknown sample class 'tiny'"), std::string::npos) << r.err;
}

TEST(CliSweep, WritesCsvJsonAndMarksTheFronts) {
  const fs::path csv = fixture().dir / "sweep.csv";
  const fs::path js = fixture().dir / "sweep.json";
  auto args = std::vector<std::string>{"sweep", "--grid", "lambda=0,0.999;window=full,64;sinks=0,4",
                                       "--csv", csv.string(), "--json-out", js.string(),
                                       "--classes", "short,very_long"};
  for (const auto& a : common_args()) args.push_back(a);
  const auto r = run_binary(args);
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const std::string c = slurp(csv);
  EXPECT_EQ(std::count(c.begin(), c.end(), '\n'), 9) << c;  // header + 8 points
  EXPECT_EQ(c.rfind("point,lambda,window,sinks,valid,passed,", 0), 0u) << c;
  const Json j = Json::parse(slurp(js));
  ASSERT_EQ(j.at("points").size(), 8u);
  int front = 0;
  double dense_kl = -1;
  for (const auto& p : j.at("points")) {
    ASSERT_TRUE(p.at("valid").get<bool>()) << p.at("label").get<std::string>();
    front += p.at("pareto_sparsity").get<bool>();
    if (p.at("label").get<std::string>() == "lambda=0 window=full sinks=0") dense_kl = p.at("results").at("kl_mean").get<double>();
    // Each point carries its validated config; it parses back.
    if (config_yaml_supported()) {
      EXPECT_TRUE(parse_config(p.at("config_yaml").get<std::string>()).ok());
    }
  }
  EXPECT_EQ(dense_kl, 0.0);
  EXPECT_GE(front, 1);
  EXPECT_NE(r.out.find("front:"), std::string::npos);
  const auto bad = run_binary({"sweep", "--grid", "lambda=0.1;colour=red"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("unknown key 'colour'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace sinkscope
