// SPDX-License-Identifier: Apache-2.0
// engine/util/json_io.h (what SinkScope asks of nlohmann-json: key order, invalid UTF-8, NaN, errors
// that name the source) and the sweep result schema (engine/eval/sweep_result.h), both ways.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/util/json_io.h"
#include "engine/eval/sweep_result.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;

TEST(JsonIo, KeepsKeysInInsertionOrder) {
  Json j;
  j["zeta"] = 1;
  j["alpha"] = "a";
  j["mid"] = Json::array({1, 2});
  EXPECT_EQ(dump_json(j), R"({"zeta":1,"alpha":"a","mid":[1,2]})");
}

TEST(JsonIo, ReplacesInvalidUtf8InsteadOfThrowing) {
  Json j;
  j["text"] = std::string("ok \xc3\xa9 \xc3");  // valid, then a truncated sequence
  const std::string text = dump_json(j);
  EXPECT_EQ(text, "{\"text\":\"ok \xc3\xa9 \xEF\xBF\xBD\"}");
  EXPECT_EQ(Json::parse(text).at("text").get<std::string>(), "ok \xc3\xa9 \xEF\xBF\xBD");
}

TEST(JsonIo, NanIsNullAndDoublesRoundTrip) {
  Json j;
  j["nan"] = number_or_null(NAN);
  j["inf"] = INFINITY;  // JSON has no spelling for it either
  j["x"] = 0.1 + 0.2;
  j["tiny"] = 1e-300;
  const Json back = Json::parse(dump_json(j));
  EXPECT_TRUE(back.at("nan").is_null());
  EXPECT_TRUE(back.at("inf").is_null());
  EXPECT_TRUE(std::isnan(number_or_nan(back.at("nan"))));
  EXPECT_EQ(back.at("x").get<double>(), 0.1 + 0.2);
  EXPECT_EQ(back.at("tiny").get<double>(), 1e-300);
  EXPECT_EQ(number_or_nan(back.at("x")), 0.1 + 0.2);
}

TEST(JsonIo, PrettyPrints) {
  const Json j = Json::parse(R"({"a":[1],"b":{}})");
  EXPECT_EQ(dump_json(j, 2), "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
}

TEST(JsonIo, ParseErrorsNameTheSourceAndThePlace) {
  try {
    (void)parse_json("{\"a\": 1,}", "m.json");
    FAIL() << "parsed";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("m.json: ", 0), 0u) << what;
    EXPECT_NE(what.find("line 1, column 9"), std::string::npos) << what;
  }
}

TEST(JsonIo, ReadFileNamesThePath) {
  const fs::path dir = fs::temp_directory_path() / "sinkscope_test_json_io";
  fs::create_directories(dir);
  const fs::path bad = dir / "bad.json";
  std::ofstream(bad) << "[1, 2";
  try {
    (void)read_json_file(bad);
    FAIL() << "parsed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad.string() + ": "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("parse error"), std::string::npos) << e.what();
  }
  try {
    (void)read_json_file(dir / "missing.json");
    FAIL() << "read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.json: cannot read"), std::string::npos);
  }
  std::ofstream(dir / "good.json") << R"({"k": [true, null]})";
  EXPECT_EQ(read_json_file(dir / "good.json").at("k").size(), 2u);
  fs::remove_all(dir);
}

SweepResult sample_sweep() {
  SweepResult s;
  s.grid = "lambda=0,0.01;sinks=0,4";
  s.dataset = "unit";
  s.dataset_sha256 = std::string(64, 'a');
  s.samples = 6;
  s.model_sha256 = std::string(64, 'b');
  s.device = "cpu";
  SweepPointResult ok;
  ok.index = 0;
  ok.label = "lambda=0 sinks=0";
  ok.settings = {{"lambda", "0"}, {"sinks", "0"}};
  ok.valid = true;
  ok.passed = true;
  ok.results.kl_mean = 0.004;
  ok.results.sparsity_prefill = 0.3;
  ok.gates = "all gates passed";
  ok.pareto_sparsity = true;
  ok.config_yaml = "version: 1\n";
  SweepPointResult bad;
  bad.index = 1;
  bad.label = "lambda=0.01 sinks=4";
  bad.settings = {{"lambda", "0.01"}, {"sinks", "4"}};
  bad.invalid = "sinks > window";
  bad.config_yaml = "version: 1\n";
  s.points = {ok, bad};
  return s;
}

TEST(SweepResultJson, WritesTheDocumentInSchemaOrder) {
  const std::string text = dump_json(Json(sample_sweep()));
  EXPECT_EQ(text.rfind(R"({"grid":"lambda=0,0.01;sinks=0,4","dataset":"unit","dataset_sha256":")", 0),
            0u)
      << text;
  EXPECT_NE(text.find(R"({"index":0,"label":"lambda=0 sinks=0","settings":{"lambda":"0","sinks":"0"},"valid":true,"passed":true,"results":{"ppl_delta_pct":null,"kl_mean":0.004,)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"("valid":false,"invalid":"sinks > window","pareto_sparsity":false,)"),
            std::string::npos)
      << text;
}

TEST(SweepResultJson, RoundTrips) {
  const SweepResult s = sample_sweep();
  const SweepResult back = Json::parse(dump_json(Json(s))).get<SweepResult>();
  EXPECT_EQ(back.grid, s.grid);
  EXPECT_EQ(back.dataset_sha256, s.dataset_sha256);
  EXPECT_EQ(back.samples, 6);
  ASSERT_EQ(back.points.size(), 2u);
  EXPECT_EQ(back.points[0].settings, s.points[0].settings);
  EXPECT_TRUE(back.points[0].results == s.points[0].results);  // NaN members compare equal
  EXPECT_TRUE(back.points[0].pareto_sparsity);
  EXPECT_FALSE(back.points[1].valid);
  EXPECT_EQ(back.points[1].invalid, "sinks > window");
  EXPECT_EQ(back.points[1].index, 1);
}

std::string sweep_error(const std::string& text) {
  try {
    (void)Json::parse(text).get<SweepResult>();
  } catch (const SweepFormatError& e) {
    return e.what();
  }
  return "(read)";
}

TEST(SweepResultJson, ProblemsNameTheMember) {
  EXPECT_NE(sweep_error("[1]").find("expected a JSON object"), std::string::npos);
  EXPECT_EQ(sweep_error(R"({"grid": "x"})").rfind("points: missing", 0), 0u);
  EXPECT_EQ(sweep_error(R"({"points": {}})").rfind("points: expected an array", 0), 0u);
  EXPECT_EQ(sweep_error(R"({"points": [3]})"), "points[0]: expected an object");
  EXPECT_EQ(sweep_error(R"({"points": [{"label": 5}]})"), "points[0].label: expected a string");
  EXPECT_EQ(sweep_error(R"({"points": [{"label": "a", "valid": true, "config_yaml": ""}]})"),
            "points[0].results: missing on a valid point");
  EXPECT_EQ(
      sweep_error(
          R"({"points": [{"label": "a", "valid": true, "config_yaml": "", "results": {"kl_mean": "x"}}]})"),
      "points[0].results.kl_mean: expected a number or null");
  EXPECT_EQ(sweep_error(R"({"points": [{"label": "a", "valid": "yes"}]})"),
            "points[0].valid: expected true or false");
  // What the GUI can do without may be absent: index (the position), samples, flags.
  const SweepResult r =
      Json::parse(R"({"points": [{"label": "a", "valid": false, "config_yaml": ""}]})")
          .get<SweepResult>();
  EXPECT_EQ(r.points.at(0).index, 0);
  EXPECT_EQ(r.samples, 0);
}

}  // namespace
}  // namespace sinkscope
