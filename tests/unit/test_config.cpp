// SPDX-License-Identifier: Apache-2.0
// The config file: defaults, exact round trip, every class of invalid field rejected by name with
// its position, the deployment-guide snippets, and `sinkscope-cli config` end to end. Gates and
// the llama.cpp export: test_config_gates.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/config/config.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace sinkscope;

namespace {

#define REQUIRE_YAML() \
  if (!config_yaml_supported()) GTEST_SKIP() << "built without yaml-cpp"

std::vector<ConfigProblem> errors_of(const ConfigParseResult& r) {
  std::vector<ConfigProblem> out;
  for (const auto& p : r.problems)
    if (p.severity == Severity::kError) out.push_back(p);
  return out;
}

std::string dump(const ConfigParseResult& r) {
  std::string s;
  for (const auto& p : r.problems) s += format_problem(p) + "\n";
  return s;
}

fs::path configs_dir() {
  return fs::path(SINKSCOPE_SOURCE_DIR) / "resources" / "configs";
}
fs::path fixtures_dir() {
  return sinkscope::test::golden_dir() / "configs";
}

// A config with every field away from its default, awkward floats and strings included.
SinkScopeConfig full_config() {
  SinkScopeConfig c;
  c.model = {"/models/My Model \"v2\".gguf", std::string(64, 'a'), "qwen2"};
  c.inference.max_context_length = 32768;
  c.inference.cache = {
      CacheStrategy::kSlidingWindow, 4096, 4, PositionMode::kOriginal, 128, 16384, 8192};
  AttentionSection& a = c.inference.attention;
  a.dtype = AttentionDtype::kFloat16;
  a.type = AttentionType::kDynamicSparse;
  a.threshold_mode = ThresholdMode::kFixed;
  a.threshold_prefill = 0.1 + 0.2;  // 0.30000000000000004
  a.threshold_decode = 1e-300;
  a.min_sequence_length = 1000;
  a.skip_value_load = false;
  a.skip_softmax_exp = false;
  c.inference.quantization = {true, KvQuantDtype::kInt4, 64, false};
  ValidationSection v;
  v.dataset = {"default-v1 (prose, code, dialogue)", 128, std::string(64, 'F')};
  v.results.ppl_delta_pct = 1.0 / 3.0;
  v.results.kl_mean = 0.0123;
  v.results.top1_agreement = 0.97;
  v.results.rouge_l = 0.96;
  v.results.passkey_accuracy = 1.0;
  v.results.baseline_passkey_accuracy = 1.0;
  v.results.sparsity_prefill = 0.71;
  v.results.sparsity_decode = NAN;  // not measured
  v.results.ttft_ms = 123.456;
  v.results.tpot_ms = 5e-3;
  v.results.peak_kv_mib = 49.21875;
  v.gates = {4.5, 0.9};
  v.passed = true;
  c.validation = v;
  c.provenance = {"0.1.0", "cee3b67abcd0", "NVIDIA H200 \xe2\x80\x94 sm_90",
                  "2025-01-02T03:04:05Z"};
  return c;
}

}  // namespace

// --- defaults and round trip --------------------------------------------------------------------

TEST(Config, EmptyFileIsTheDefaults) {
  REQUIRE_YAML();
  for (const char* text : {"", "\n", "# only a comment\n", "---\n"}) {
    const auto r = parse_config(text);
    EXPECT_TRUE(r.problems.empty()) << dump(r);
    EXPECT_EQ(r.config, SinkScopeConfig{});
  }
}

TEST(Config, DefaultsAreTheDocumentedOnes) {
  const SinkScopeConfig c;
  EXPECT_EQ(c.sinkscope_config_version, 1);
  EXPECT_EQ(c.inference.max_context_length, 8192);
  EXPECT_EQ(c.inference.cache.strategy, CacheStrategy::kFull);
  EXPECT_EQ(c.inference.cache.window_size, 4096);
  EXPECT_EQ(c.inference.cache.sink_keep_count, 4);
  EXPECT_EQ(c.inference.cache.block_size, 64);
  EXPECT_EQ(c.inference.attention.type, AttentionType::kDense);
  EXPECT_EQ(c.inference.attention.dtype, AttentionDtype::kBfloat16);
  EXPECT_EQ(c.inference.quantization.enabled, false);
  EXPECT_EQ(c.inference.quantization.group_size, 32);
  EXPECT_FALSE(c.validation.has_value());
  EXPECT_TRUE(check_config(c).empty());
  // The dense default example holds exactly the defaults.
  const auto r = load_config_file(configs_dir() / "dense-default.yaml");
  if (config_yaml_supported()) {
    EXPECT_TRUE(r.problems.empty()) << dump(r);
    EXPECT_EQ(r.config, c);
  }
}

TEST(Config, FormatIsDeterministicInSchemaOrder) {
  const std::string expected =
      "sinkscope_config_version: 1\n"
      "model:\n"
      "  path: \"\"\n"
      "  sha256: \"\"\n"
      "  architecture: \"llama\"\n"
      "inference:\n"
      "  max_context_length: 8192\n"
      "  cache:\n"
      "    strategy: full\n"
      "    window_size: 4096\n"
      "    sink_keep_count: 4\n"
      "    position_mode: cache\n"
      "    block_size: 64\n"
      "    per_request_limit_tokens: 0\n"
      "    global_cache_limit_mib: 0\n"
      "  attention:\n"
      "    dtype: bfloat16\n"
      "    type: dense\n"
      "    threshold_mode: fixed\n"
      "    threshold_prefill: 0.02\n"
      "    threshold_decode: 0.005\n"
      "    min_sequence_length: 0\n"
      "    skip_value_load: true\n"
      "    skip_softmax_exp: true\n"
      "  quantization:\n"
      "    enabled: false\n"
      "    kv_dtype: int8\n"
      "    group_size: 32\n"
      "    protect_sink_positions: true\n";
  EXPECT_EQ(format_config(SinkScopeConfig{}), expected);  // no validation, no empty provenance
}

TEST(Config, FloatsAreWrittenRoundTrippably) {
  SinkScopeConfig c;
  c.validation.emplace();
  c.validation->gates.ppl_delta_pct_max = 5.0;
  c.validation->results.kl_mean = 1e-5;
  c.validation->results.ttft_ms = 1e20;
  const std::string y = format_config(c);
  EXPECT_NE(y.find("ppl_delta_pct_max: 5.0\n"), std::string::npos) << y;
  EXPECT_NE(y.find("kl_mean: 1.0e-05\n"), std::string::npos) << y;  // YAML 1.1 also reads a float
  EXPECT_NE(y.find("ttft_ms: 1.0e+20\n"), std::string::npos) << y;
  EXPECT_NE(y.find("rouge_l: .nan\n"), std::string::npos) << y;
}

TEST(Config, RoundTripIsExact) {
  REQUIRE_YAML();
  const SinkScopeConfig c = full_config();
  EXPECT_TRUE(check_config(c).empty());
  const std::string y1 = format_config(c);
  const auto r1 = parse_config(y1);
  ASSERT_TRUE(r1.problems.empty()) << dump(r1) << y1;
  EXPECT_EQ(r1.config, c);
  EXPECT_EQ(r1.config.inference.attention.threshold_prefill, 0.1 + 0.2);  // bit-exact
  EXPECT_EQ(r1.config.inference.attention.threshold_decode, 1e-300);
  EXPECT_TRUE(std::isnan(r1.config.validation->results.sparsity_decode));
  const std::string y2 = format_config(r1.config);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(format_config(parse_config(y2).config), y2);
}

TEST(Config, AwkwardStringsRoundTrip) {
  REQUIRE_YAML();
  // Quotes, backslashes, every C0 control, DEL, C1 controls, NBSP, a BOM, multi-byte UTF-8,
  // YAML indicators and words that would read as other types unquoted.
  std::string controls;
  for (int ch = 1; ch < 0x20; ++ch) controls += static_cast<char>(ch);
  const std::vector<std::string> strings = {
      "", "\"q\" \\b\\", controls + "\x7f", "\xc2\x85\xc2\xa0\xef\xbb\xbf",
      "caf\xc3\xa9 \xe6\xa8\xa1\xe5\x9e\x8b \xf0\x9f\x98\x80", "- [a, b]: {c: #d}",
      "true", "null", "~", "0x10", "1.0e-05", ".nan", "  padded  ", "line\nbreak\r\n",
      std::string(300, 'x')};
  for (const std::string& s : strings) {
    SinkScopeConfig c;
    c.model.path = s;
    c.provenance.device = s;
    const std::string y = format_config(c);
    const auto r = parse_config(y);
    ASSERT_TRUE(r.problems.empty()) << dump(r) << y;
    EXPECT_EQ(r.config.model.path, s) << y;
    EXPECT_EQ(r.config.provenance.device, s) << y;
    EXPECT_EQ(format_config(r.config), y);
  }
}

TEST(Config, StringsThatAreNotUtf8AreRefused) {
  REQUIRE_YAML();
  // YAML text is Unicode; such a string could not be written back byte for byte.
  for (const char* bad : {"\xff", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    const auto r = parse_config(std::string("model:\n  path: \"") + bad + "\"\n");
    const auto errs = errors_of(r);
    ASSERT_EQ(errs.size(), 1u) << dump(r);
    EXPECT_EQ(errs[0].key, "model.path");
    EXPECT_EQ(errs[0].line, 2);
    EXPECT_NE(errs[0].message.find("not valid UTF-8"), std::string::npos) << errs[0].message;
  }
  EXPECT_TRUE(parse_config("model:\n  path: \"\xf4\x8f\xbf\xbf\"\n").ok());  // U+10FFFF
}

TEST(Config, ExamplesAndFixturesRoundTrip) {
  REQUIRE_YAML();
  int n = 0;
  for (const fs::path& dir : {configs_dir(), fixtures_dir()}) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".yaml" ||
          entry.path().filename().string().rfind("invalid", 0) == 0)
        continue;
      ++n;
      const auto r = load_config_file(entry.path());
      ASSERT_TRUE(r.ok()) << entry.path() << "\n" << dump(r);
      const std::string y = format_config(r.config);
      const auto again = parse_config(y);
      EXPECT_TRUE(again.problems.empty()) << entry.path() << "\n" << dump(again);
      EXPECT_EQ(again.config, r.config) << entry.path();
      EXPECT_EQ(format_config(again.config), y) << entry.path();
    }
  }
  EXPECT_GE(n, 7);
}

TEST(Config, PartialFileTakesDefaultsElsewhere) {
  REQUIRE_YAML();
  const auto r =
      parse_config("inference:\n  cache:\n    strategy: sliding_window\n    window_size: 512\n");
  ASSERT_TRUE(r.problems.empty()) << dump(r);
  SinkScopeConfig expected;
  expected.inference.cache.strategy = CacheStrategy::kSlidingWindow;
  expected.inference.cache.window_size = 512;
  EXPECT_EQ(r.config, expected);
  // A null section is an empty one.
  const auto r2 = parse_config("inference:\n  cache:\n  attention:\n");
  EXPECT_TRUE(r2.problems.empty()) << dump(r2);
  EXPECT_EQ(r2.config, SinkScopeConfig{});
}

TEST(Config, FlowStyleAndYaml11BooleansRead) {
  REQUIRE_YAML();
  const auto r = parse_config(
      "model: {path: m.gguf, sha256: ~, architecture: llama}\n"
      "inference:\n  quantization: {enabled: yes, kv_dtype: int4, group_size: 32, "
      "protect_sink_positions: off}\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config.model.path, "m.gguf");
  EXPECT_EQ(r.config.model.sha256, "");
  EXPECT_TRUE(r.config.inference.quantization.enabled);
  EXPECT_FALSE(r.config.inference.quantization.protect_sink_positions);
  EXPECT_EQ(r.config.inference.quantization.kv_dtype, KvQuantDtype::kInt4);
}

// --- invalid fields: one test per class, each must be the only error, named, with its position --

struct BadCase {
  const char* yaml;
  const char* key;      // the full key path the error names
  const char* message;  // a part of the message
  int line;
  int column;
};

void expect_single_error(const BadCase& c) {
  const auto r = parse_config(c.yaml);
  const auto errs = errors_of(r);
  ASSERT_EQ(errs.size(), 1u) << c.yaml << "\n" << dump(r);
  EXPECT_EQ(errs[0].key, c.key) << c.yaml;
  EXPECT_NE(errs[0].message.find(c.message), std::string::npos)
      << "message: " << errs[0].message << "\nexpected to contain: " << c.message;
  EXPECT_EQ(errs[0].line, c.line) << c.yaml << dump(r);
  EXPECT_EQ(errs[0].column, c.column) << c.yaml << dump(r);
}

TEST(ConfigInvalid, UnknownKeysNameTheFullPathAndSuggest) {
  REQUIRE_YAML();
  for (const BadCase& c : std::vector<BadCase>{
           {"inference:\n  attention:\n    treshold_prefill: 0.1\n",
            "inference.attention.treshold_prefill", "unknown key (did you mean threshold_prefill?)",
            3, 5},
           {"inference:\n  attention:\n    window_size: 8\n", "inference.attention.window_size",
            "did you mean inference.cache.window_size?", 3, 5},
           {"modle:\n  path: x\n", "modle", "did you mean model?", 1, 1},
           {"validation:\n  results:\n    bogus_metric: 1\n", "validation.results.bogus_metric",
            "unknown key (expected one of: ppl_delta_pct", 3, 5},
       })
    expect_single_error(c);
}

TEST(ConfigInvalid, IntegerFields) {
  REQUIRE_YAML();
  for (const BadCase& c : std::vector<BadCase>{
           {"inference:\n  max_context_length: 0\n", "inference.max_context_length",
            "0 is out of range [1, 16777216]", 2, 23},
           {"inference:\n  max_context_length: \"4096\"\n", "inference.max_context_length",
            "expected an integer, got the string \"4096\"", 2, 23},
           {"inference:\n  max_context_length: 4096.5\n", "inference.max_context_length",
            "expected an integer, got '4096.5'", 2, 23},
           {"inference:\n  max_context_length: 99999999999999999999\n",
            "inference.max_context_length", "out of range", 2, 23},
           {"inference:\n  cache:\n    window_size: 0\n", "inference.cache.window_size",
            "0 is out of range [1, 16777216]", 3, 18},
           {"inference:\n  cache:\n    window_size: [1, 2]\n", "inference.cache.window_size",
            "expected an integer, got a list", 3, 18},
           {"inference:\n  cache:\n    sink_keep_count: 2000\n  max_context_length: 8192\n",
            "inference.cache.sink_keep_count", "2000 is out of range [0, 1024]", 3, 22},
           {"inference:\n  cache:\n    sink_keep_count: -1\n", "inference.cache.sink_keep_count",
            "-1 is out of range [0, 1024]", 3, 22},
           {"inference:\n  cache:\n    window_size: 8\n    sink_keep_count: 9\n",
            "inference.cache.sink_keep_count", "may not exceed window_size (8)", 4, 22},
           {"inference:\n  max_context_length: 1024\n  cache:\n    per_request_limit_tokens: "
            "1025\n",
            "inference.cache.per_request_limit_tokens", "1025 is out of range [0, 1024]", 4, 31},
           {"inference:\n  cache:\n    global_cache_limit_mib: -5\n",
            "inference.cache.global_cache_limit_mib", "-5 is out of range", 3, 29},
           {"inference:\n  attention:\n    min_sequence_length: -1\n",
            "inference.attention.min_sequence_length", "-1 is out of range", 3, 26},
           {"validation:\n  dataset:\n    samples: -3\n", "validation.dataset.samples",
            "-3 is out of range", 3, 14},
       })
    expect_single_error(c);
}

TEST(ConfigInvalid, SetValuedFields) {
  REQUIRE_YAML();
  for (const BadCase& c : std::vector<BadCase>{
           {"sinkscope_config_version: 2\n", "sinkscope_config_version",
            "2 is not supported (allowed: 1)", 1, 27},
           {"sinkscope_config_version: \"1\"\n", "sinkscope_config_version", "expected an integer",
            1, 27},
           {"inference:\n  cache:\n    block_size: 96\n", "inference.cache.block_size",
            "96 is not allowed (allowed: 64, 128)", 3, 17},
           {"inference:\n  cache:\n    block_size: 9999999999\n", "inference.cache.block_size",
            "allowed: 64, 128", 3, 17},
           {"inference:\n  quantization:\n    group_size: 48\n",
            "inference.quantization.group_size", "48 is not allowed (allowed: 32, 64, 128)", 3, 17},
       })
    expect_single_error(c);
}

TEST(ConfigInvalid, Thresholds) {
  REQUIRE_YAML();
  for (const BadCase& c : std::vector<BadCase>{
           {"inference:\n  attention:\n    threshold_prefill: 1.0\n",
            "inference.attention.threshold_prefill",
            "1 is out of range [0, 1) for threshold_mode fixed", 3, 24},
           {"inference:\n  attention:\n    threshold_decode: -0.001\n",
            "inference.attention.threshold_decode", "-0.001 is out of range [0, 1)", 3, 23},
           {"inference:\n  attention:\n    threshold_decode: .nan\n",
            "inference.attention.threshold_decode", "NaN is not a finite number", 3, 23},
           {"inference:\n  attention:\n    threshold_mode: length_scaled\n    threshold_prefill: "
            "-2\n",
            "inference.attention.threshold_prefill", "for threshold_mode length_scaled", 4, 24},
           {"inference:\n  attention:\n    threshold_prefill: lots\n",
            "inference.attention.threshold_prefill", "expected a number, got 'lots'", 3, 24},
       })
    expect_single_error(c);
  // In range: just below 1 for fixed; c well above 1 for length_scaled.
  EXPECT_TRUE(parse_config("inference:\n  attention:\n    threshold_prefill: 0.999\n").ok());
  EXPECT_TRUE(parse_config("inference:\n  attention:\n    threshold_mode: length_scaled\n"
                           "    threshold_prefill: 40\n    threshold_decode: 0\n")
                  .ok());
}

TEST(ConfigInvalid, BooleansEnumsAndStrings) {
  REQUIRE_YAML();
  for (const BadCase& c : std::vector<BadCase>{
           {"inference:\n  attention:\n    skip_value_load: maybe\n",
            "inference.attention.skip_value_load", "expected true or false, got 'maybe'", 3, 22},
           {"inference:\n  quantization:\n    enabled: \"true\"\n",
            "inference.quantization.enabled", "expected true or false, got the string \"true\"", 3,
            14},
           {"inference:\n  cache:\n    strategy: sliding\n", "inference.cache.strategy",
            "'sliding' is not one of: full, sliding_window (did you mean sliding_window?)", 3, 15},
           {"inference:\n  cache:\n    position_mode: orignal\n", "inference.cache.position_mode",
            "(did you mean original?)", 3, 20},
           {"inference:\n  attention:\n    dtype: fp8\n", "inference.attention.dtype",
            "is not one of: bfloat16, float16, float32", 3, 12},
           {"inference:\n  attention:\n    type: sparse\n", "inference.attention.type",
            "is not one of: dense, dynamic_sparse", 3, 11},
           {"inference:\n  attention:\n    threshold_mode: scaled\n",
            "inference.attention.threshold_mode", "is not one of: fixed, length_scaled", 3, 21},
           {"inference:\n  quantization:\n    kv_dtype: int3\n", "inference.quantization.kv_dtype",
            "is not one of: int8, int4", 3, 15},
           {"model:\n  sha256: abc\n", "model.sha256", "expected 64 hex digits", 2, 11},
           {"model:\n  path: {a: 1}\n", "model.path", "expected a string, got a mapping", 2, 9},
           {"validation:\n  baseline: sparse\n", "validation.baseline", "is not one of: dense", 2,
            13},
       })
    expect_single_error(c);
}

TEST(ConfigInvalid, StructureAndSyntax) {
  REQUIRE_YAML();
  for (const BadCase& c : std::vector<BadCase>{
           {"inference:\n  cache: 5\n", "inference.cache", "expected a mapping of keys, got '5'", 2,
            10},
           {"inference:\n  cache:\n    window_size: 8\n    window_size: 9\n",
            "inference.cache.window_size", "duplicate key", 4, 5},
           {"- 1\n- 2\n", "", "expected a mapping of keys, got a list", 1, 1},
           {"attention:\n  type: dense\ninference:\n  attention:\n    type: dense\n",
            "inference.attention", "also given at the top level", 4, 3},
       })
    expect_single_error(c);
  // Syntax errors carry the position yaml-cpp found them at.
  const auto r = parse_config("inference:\n  cache: {window_size: 8\n");
  const auto errs = errors_of(r);
  ASSERT_EQ(errs.size(), 1u) << dump(r);
  EXPECT_NE(errs[0].message.find("invalid YAML"), std::string::npos);
  EXPECT_GT(errs[0].line, 0);
  const auto two = parse_config("inference: {}\n---\ninference: {}\n");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(errors_of(two)[0].message.find("2 YAML documents"), std::string::npos);
}

TEST(ConfigInvalid, ValidationBlock) {
  REQUIRE_YAML();
  for (const BadCase& c : std::vector<BadCase>{
           {"validation:\n  results:\n    rouge_l: 1.5\n", "validation.results.rouge_l",
            "1.5 is out of range [0, 1]", 3, 14},
           {"validation:\n  results:\n    kl_mean: -0.1\n", "validation.results.kl_mean",
            "out of range", 3, 14},
           {"validation:\n  results:\n    ttft_ms: .inf\n", "validation.results.ttft_ms",
            "inf is out of range", 3, 14},
           {"validation:\n  gates:\n    similarity_min: 2\n", "validation.gates.similarity_min",
            "2 is out of range [0, 1]", 3, 21},
           {"validation:\n  gates:\n    ppl_delta_pct_max: -1\n",
            "validation.gates.ppl_delta_pct_max", "out of range [0, 1000]", 3, 24},
           {"validation:\n  results:\n    ppl_delta_pct: 7.5\n    rouge_l: 0.99\n"
            "    top1_agreement: 0.99\n    passkey_accuracy: 1.0\n"
            "    baseline_passkey_accuracy: 1.0\n  passed: true\n",
            "validation.passed", "ppl_delta_pct 7.5 > ppl_delta_pct_max 5", 8, 11},
       })
    expect_single_error(c);
  // passed: true with unmeasured results is an unsupported claim too.
  const auto r = parse_config("validation:\n  passed: true\n");
  ASSERT_EQ(errors_of(r).size(), 1u) << dump(r);
  EXPECT_NE(errors_of(r)[0].message.find("NaN"), std::string::npos);
}

TEST(ConfigInvalid, EveryProblemIsCollected) {
  REQUIRE_YAML();
  const auto r = load_config_file(fixtures_dir() / "invalid-every-class.yaml");
  std::vector<std::string> keys;
  for (const auto& p : errors_of(r)) {
    keys.push_back(p.key);
    EXPECT_GT(p.line, 0) << p.key;
  }
  const std::vector<std::string> expected = {"sinkscope_config_version",
                                             "model.sha256",
                                             "inference.cache.strategy",
                                             "inference.cache.window_size",
                                             "inference.cache.sink_keep_count",
                                             "inference.cache.block_size",
                                             "inference.cache.per_request_limit_tokens",
                                             "inference.attention.treshold_prefill",
                                             "inference.attention.threshold_decode",
                                             "inference.attention.skip_value_load",
                                             "inference.quantization.enabled",
                                             "inference.quantization.kv_dtype",
                                             "inference.quantization.group_size",
                                             "inference.extra"};
  EXPECT_EQ(keys, expected) << dump(r);  // sorted by position in the file
}

TEST(Config, MutatedInputNeverThrows) {
  REQUIRE_YAML();
  // Deterministic byte mutations of a valid file: every outcome is problems, never a throw or a
  // crash (run under the sanitizers with SINKSCOPE_SANITIZE=ON).
  const std::string base = format_config(full_config());
  const std::string alphabet = ":-{}[]\"'#&*!|>%@` \n\t.0123456789aeinrtxyz_~";
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  const auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int i = 0; i < 3000; ++i) {
    std::string t = base;
    const int edits = 1 + int(next() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = next() % t.size();
      switch (next() % 3) {
        case 0:
          t[at] = alphabet[next() % alphabet.size()];
          break;
        case 1:
          t.insert(at, 1, alphabet[next() % alphabet.size()]);
          break;
        default:
          t.erase(at, 1 + next() % 8);
      }
    }
    EXPECT_NO_THROW(parse_config(t)) << t;
  }
  EXPECT_NO_THROW(parse_config(std::string(5000, '[')));  // deep nesting
  EXPECT_NO_THROW(parse_config(std::string("\0\xff\xfe", 3)));
}

TEST(Config, MissingFileIsAClearError) {
  try {
    load_config_file("/nonexistent/dir/x.yaml");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read /nonexistent/dir/x.yaml"), std::string::npos);
  }
  EXPECT_THROW(load_config_file(fs::temp_directory_path()), std::runtime_error);
}

TEST(Config, LoadOrThrowListsEveryError) {
  REQUIRE_YAML();
  try {
    load_config_or_throw(fixtures_dir() / "invalid-every-class.yaml");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.problems().size(), 14u);
    EXPECT_NE(std::string(e.what()).find("inference.extra: unknown key"), std::string::npos);
  }
}

// --- deployment guides --------------------------------------------------------------------------

TEST(ConfigGuides, SinkCacheSnippetLoads) {
  REQUIRE_YAML();
  const auto r = load_config_file(fixtures_dir() / "guide-sink-cache.yaml");
  ASSERT_TRUE(r.ok()) << dump(r);
  const SinkScopeConfig& c = r.config;
  EXPECT_EQ(c.inference.max_context_length, 32768);
  EXPECT_EQ(c.inference.cache.strategy, CacheStrategy::kSlidingWindow);
  EXPECT_EQ(c.inference.cache.window_size, 4096);
  EXPECT_EQ(c.inference.cache.sink_keep_count, 4);
  EXPECT_EQ(c.inference.cache.global_cache_limit_mib, 0);  // the placeholder sets no limit...
  ASSERT_EQ(r.problems.size(), 1u);                        // ...and says so
  EXPECT_EQ(r.problems[0].key, "inference.cache.global_cache_limit");
  EXPECT_EQ(r.problems[0].severity, Severity::kWarning);
  EXPECT_EQ(c.inference.attention.dtype, AttentionDtype::kBfloat16);
  EXPECT_TRUE(c.inference.quantization.enabled);
  EXPECT_TRUE(c.inference.quantization.protect_sink_positions);
}

TEST(ConfigGuides, SizedSnippetReadsTheBudget) {
  REQUIRE_YAML();
  const auto r = load_config_file(fixtures_dir() / "guide-sink-cache-sized.yaml");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config.inference.cache.global_cache_limit_mib, 24 * 1024);
  EXPECT_EQ(r.config.inference.attention.type, AttentionType::kDynamicSparse);
  for (const auto& [text, mib] :
       std::vector<std::pair<const char*, int64_t>>{{"8192", 8192},
                                                    {"\"8GiB\"", 8192},
                                                    {"\"8 GiB\"", 8192},
                                                    {"\"512MiB\"", 512},
                                                    {"\"1GB\"", 953},
                                                    {"\"2T\"", 2 * 1024 * 1024}}) {
    const auto s =
        parse_config(std::string("inference:\n  cache:\n    global_cache_limit: ") + text + "\n");
    EXPECT_TRUE(s.ok()) << text << dump(s);
    EXPECT_EQ(s.config.inference.cache.global_cache_limit_mib, mib) << text;
  }
}

TEST(ConfigGuides, DynamicSparseSnippetLoads) {
  REQUIRE_YAML();
  const auto r = load_config_file(fixtures_dir() / "guide-dynamic-sparse.yaml");
  ASSERT_TRUE(r.ok()) << dump(r);
  const SinkScopeConfig& c = r.config;
  EXPECT_EQ(c.inference.attention.type, AttentionType::kDynamicSparse);
  EXPECT_EQ(c.inference.attention.threshold_prefill, 0.01);
  EXPECT_EQ(c.inference.attention.threshold_decode, 0.01);
  EXPECT_EQ(c.inference.cache.block_size, 128);
  EXPECT_EQ(r.problems.size(), 4u) << dump(r);  // each guide spelling is pointed out
  // Normalised output uses only schema keys.
  const std::string y = format_config(c);
  EXPECT_EQ(y.find("threshold:"), std::string::npos);
  EXPECT_EQ(y.find("enable:"), std::string::npos);
}

TEST(ConfigGuides, AliasesGiveWayOrConflict) {
  REQUIRE_YAML();
  // Explicit per-phase thresholds win over the guide's single threshold.
  auto r =
      parse_config("inference:\n  attention:\n    threshold: 0.01\n    threshold_decode: 0.002\n");
  ASSERT_TRUE(r.ok()) << dump(r);
  EXPECT_EQ(r.config.inference.attention.threshold_prefill, 0.01);
  EXPECT_EQ(r.config.inference.attention.threshold_decode, 0.002);
  // enable: false means dense whatever the type says.
  r = parse_config("inference:\n  attention:\n    type: dynamic_sparse\n    enable: false\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.config.inference.attention.type, AttentionType::kDense);
  for (const BadCase& c : std::vector<BadCase>{
           {"inference:\n  attention:\n    type: dense\n    enable: true\n",
            "inference.attention.enable", "contradicts type: dense", 4, 5},
           {"inference:\n  cache:\n    block_size: 64\n  attention:\n    block_size: 128\n",
            "inference.attention.block_size", "contradicts inference.cache.block_size", 5, 17},
       })
    expect_single_error(c);
  // A bad guide threshold is reported for both phases it sets, at the guide key's value.
  r = parse_config("inference:\n  attention:\n    threshold: 1.5\n");
  const auto errs = errors_of(r);
  ASSERT_EQ(errs.size(), 2u) << dump(r);
  EXPECT_EQ(errs[0].key, "inference.attention.threshold_prefill");
  EXPECT_EQ(errs[1].key, "inference.attention.threshold_decode");
  EXPECT_EQ(errs[0].line, 3);
  EXPECT_EQ(errs[0].column, 16);
}

// --- engine settings, model checks --------------------------------------------------------------

TEST(Config, ToAttentionSettings) {
  SinkScopeConfig c = full_config();
  c.inference.attention.threshold_mode = ThresholdMode::kLengthScaled;
  const AttentionSettings s = to_attention_settings(c);
  EXPECT_EQ(s.type, AttentionType::kDynamicSparse);
  EXPECT_EQ(s.threshold_mode, ThresholdMode::kLengthScaled);
  EXPECT_EQ(s.threshold_prefill, 0.1 + 0.2);
  EXPECT_EQ(s.threshold_decode, 1e-300);
  EXPECT_EQ(s.min_sequence_length, 1000);
  EXPECT_EQ(s.block_size, 128);
  EXPECT_FALSE(s.skip_value_load);
  EXPECT_FALSE(s.skip_softmax_exp);
  // The default config is exactly dense attention.
  EXPECT_EQ(effective_lambda(to_attention_settings(SinkScopeConfig{}), false, 4096), 0.0);
}

TEST(Config, ChecksAgainstTheModel) {
  SinkScopeConfig c;
  c.inference.quantization.enabled = true;
  c.inference.quantization.group_size = 128;
  auto p = check_against_model(c, 64, 8192);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].key, "inference.quantization.group_size");
  EXPECT_NE(p[0].message.find("does not divide the model's head_dim (64)"), std::string::npos);
  c.inference.quantization.group_size = 64;
  c.inference.max_context_length = 32768;
  p = check_against_model(c, 64, 8192);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].severity, Severity::kWarning);
  EXPECT_EQ(p[0].key, "inference.max_context_length");
}

TEST(Config, SaveAndLoad) {
  REQUIRE_YAML();
  const fs::path dir = fs::temp_directory_path() / ("sinkscope_cfg_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path f = dir / "validated.yaml";
  save_config(f, full_config());
  const auto r = load_config_file(f);
  EXPECT_TRUE(r.problems.empty()) << dump(r);
  EXPECT_EQ(r.config, full_config());
  fs::remove_all(dir);
}

// --- sinkscope-cli config, end to end -----------------------------------------------------------

namespace {

// The CLI binary next to this test's build tree (tests/ and app/cli/ share the build root).
fs::path cli_path() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  const fs::path p = self.parent_path().parent_path() / "app" / "cli" / "sinkscope-cli";
  return fs::exists(p, ec) ? p : fs::path();
}

struct CliResult {
  int status = -1;
  std::string out;
};

CliResult run_cli(const std::string& args) {
  CliResult r;
  // stderr joins stdout unless the arguments redirect it themselves.
  const std::string cmd =
      cli_path().string() + " " + args + (args.find("2>") == std::string::npos ? " 2>&1" : "");
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

#define REQUIRE_CLI() \
  REQUIRE_YAML();     \
  if (cli_path().empty()) GTEST_SKIP() << "sinkscope-cli is not built next to the tests"

}  // namespace

TEST(ConfigCli, CheckReportsEveryProblemAndExitsTwo) {
  REQUIRE_CLI();
  const std::string bad = (fixtures_dir() / "invalid-every-class.yaml").string();
  CliResult r = run_cli("config check " + bad);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(bad + ":16:5: error: inference.attention.treshold_prefill: unknown key "
                             "(did you mean threshold_prefill?)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("invalid (14 errors, 0 warnings)"), std::string::npos) << r.out;
  r = run_cli("config check --json " + bad);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("\"valid\":false,\"errors\":14"), std::string::npos) << r.out;
  r = run_cli("config check " + (configs_dir() / "dynamic-sparse.yaml").string());
  EXPECT_EQ(r.status, 0) << r.out;
  r = run_cli("config check /nonexistent.yaml");  // a missing file is a usage error, as elsewhere
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("file not found: /nonexistent.yaml"), std::string::npos) << r.out;
  EXPECT_EQ(run_cli("config check").status, 2);
  EXPECT_EQ(run_cli("config frobnicate x.yaml").status, 2);
}

TEST(ConfigCli, ShowExportCapacity) {
  REQUIRE_CLI();
  const std::string guide = (fixtures_dir() / "guide-dynamic-sparse.yaml").string();
  CliResult r = run_cli("config show " + guide + " 2>/dev/null");
  EXPECT_EQ(r.status, 0);
  const auto shown = parse_config(r.out);
  EXPECT_TRUE(shown.problems.empty()) << r.out;
  EXPECT_EQ(shown.config.inference.cache.block_size, 128);
  r = run_cli("config export-llamacpp " +
              (configs_dir() / "int8-kv-protected-sinks.yaml").string());
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("--keep 4 --context-shift -fa on -ctk q8_0 -ctv q8_0"), std::string::npos)
      << r.out;
  r = run_cli("config capacity " + (configs_dir() / "int8-kv-protected-sinks.yaml").string() +
              " --batch 2 --budget-mib 8192 --json");
  EXPECT_EQ(r.status, 0) << r.out;
  // 30 layers, 3 KV heads, head dim 64 whichever source the shape came from (SmolLM2).
  EXPECT_NE(r.out.find("\"bytes_per_request\":51609600"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"max_batch\":166"), std::string::npos) << r.out;
  EXPECT_EQ(run_cli("config capacity " + guide + " --batch 0").status, 2);
}

TEST(ConfigCli, ExportToServingEngines) {
  REQUIRE_CLI();
  const std::string cfg = (configs_dir() / "int8-kv-protected-sinks.yaml").string();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "sinkscope_export";
  std::filesystem::create_directories(dir);
  for (const char* engine : {"trtllm", "vllm", "sglang", "llamacpp"}) {
    const std::filesystem::path out = dir / (std::string(engine) + ".txt");
    std::filesystem::remove(out);
    CliResult r = run_cli("config export " + cfg + " --to " + engine + " --out " + out.string());
    EXPECT_EQ(r.status, 0) << engine << ": " << r.out;
    EXPECT_NE(r.out.find("wrote " + out.string()), std::string::npos) << r.out;
    std::ifstream f(out);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // The int8 cache with 16-bit sinks is named in every engine's file.
    EXPECT_NE(text.find(std::string(engine) == "llamacpp" ? "protect_sink_positions"
                                                          : "KV quantization int8"),
              std::string::npos)
        << engine << ":\n" << text;
    r = run_cli("config export " + cfg + " --to " + engine + " --json");
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.out.find(std::string("\"engine\":\"") + engine + "\""), std::string::npos) << r.out;
  }
  std::filesystem::remove_all(dir);
  // Usage errors: no engine, an unknown one, --out with --json; a bad config is exit 2 too.
  EXPECT_EQ(run_cli("config export " + cfg).status, 2);
  CliResult r = run_cli("config export " + cfg + " --to tensorrt");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("unknown engine 'tensorrt'"), std::string::npos) << r.out;
  EXPECT_EQ(run_cli("config export " + cfg + " --to vllm --json --out x.yaml").status, 2);
  EXPECT_EQ(run_cli("config export " + (fixtures_dir() / "invalid-every-class.yaml").string() +
                    " --to vllm").status,
            2);
}
