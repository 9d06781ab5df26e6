// SPDX-License-Identifier: Apache-2.0
// Architecture variants against the independent oracle: tiny random-weight GGUF models (qwen2
// with QKV bias and NeoX rotary pairs, untied output.weight, GQA 1:1 / 2:1 / 4:1, Q8_0 and Q4_0
// projections, linear rope scaling, Llama-3 rope_freqs factors), each loaded by HF transformers
// (float32) and by the engine. Golden data: tests/golden/arch, written by
// tests/oracle/make_arch_golden.py.
// Tolerance: these are float32 models with logits of a few units, so both implementations should
// agree to float32 rounding; max |dlogit| <= 1e-3 over every position and vocabulary entry, and
// argmax agreement 100 % (the smallest top-2 gap in the golden data is ~1.6e-3).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/backend.h"
#include "engine/json.h"
#include "engine/sampler.h"
#include "engine/sha256.h"
#include "test_support.h"

namespace sinkscope {
namespace {

constexpr double kMaxLogitDiff = 1e-3;

const char* const kCases[] = {
    "qwen2_tied_gqa2_f32",    "qwen2_untied_gqa4_q8_0", "llama_untied_gqa4_f32",
    "llama_mha_q4_0",         "llama_rope_linear2_f32", "llama3_rope_freqs_f32",
};

std::filesystem::path arch_dir() { return test::golden_dir() / "arch"; }

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const json::Value& manifest() {
  static const json::Value m = json::parse(read_file(arch_dir() / "manifest.json"));
  return m;
}

const json::Value* find_case(const std::string& name) {
  for (const auto& c : manifest()["cases"].as_array())
    if (c["name"].as_string() == name) return &c;
  return nullptr;
}

std::vector<TokenId> ids_of(const json::Value& arr) {
  std::vector<TokenId> v;
  for (const auto& x : arr.as_array()) v.push_back(TokenId(x.as_int()));
  return v;
}

// Max |ours - ref| over rows [0, n_rows) of width V; fails on non-finite values.
double max_diff(const float* ours, const float* ref, size_t n_rows, int V, const std::string& what) {
  double worst = 0;
  for (size_t i = 0; i < n_rows * size_t(V); ++i) {
    if (!std::isfinite(ours[i])) {
      ADD_FAILURE() << what << ": non-finite logit at row " << i / size_t(V);
      return INFINITY;
    }
    worst = std::max(worst, std::abs(double(ours[i]) - double(ref[i])));
  }
  return worst;
}

TEST(ArchGolden, ManifestListsTheCasesAndFilesAreIntact) {
  std::set<std::string> want(std::begin(kCases), std::end(kCases)), got;
  uint64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(arch_dir())) total += e.file_size();
  EXPECT_LT(total, 3u * 1000 * 1000) << "tests/golden/arch should stay under 3 MB";
  for (const auto& c : manifest()["cases"].as_array()) {
    const std::string name = c["name"].as_string();
    got.insert(name);
    EXPECT_EQ(sha256_hex(read_file(arch_dir() / c["gguf"].as_string())), c["gguf_sha256"].as_string())
        << name;
    EXPECT_EQ(sha256_hex(read_file(arch_dir() / c["logits_file"].as_string())),
              c["logits_sha256"].as_string())
        << name;
  }
  EXPECT_EQ(got, want);
}

class ArchGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(ArchGolden, LogitsAndArgmaxMatchTransformers) {
  const std::string name = GetParam();
  const json::Value* cp = find_case(name);
  ASSERT_NE(cp, nullptr) << name << " missing from manifest.json";
  const json::Value& c = *cp;
  const json::Value& prm = c["params"];

  auto model = Model::load(arch_dir() / c["gguf"].as_string());
  const ModelConfig& cfg = model->config();

  // The engine must read the same hyper-parameters the oracle used.
  EXPECT_EQ(cfg.architecture, c["architecture"].as_string());
  EXPECT_EQ(cfg.n_layer, prm["n_layer"].as_int());
  EXPECT_EQ(cfg.n_embd, prm["d"].as_int());
  EXPECT_EQ(cfg.n_head, prm["n_head"].as_int());
  EXPECT_EQ(cfg.n_head_kv, prm["n_head_kv"].as_int());
  EXPECT_EQ(cfg.head_dim, c["head_dim"].as_int());
  EXPECT_EQ(cfg.n_ff, prm["n_ff"].as_int());
  EXPECT_EQ(cfg.tied_embeddings, prm["tied"].as_bool());
  EXPECT_EQ(cfg.qkv_bias, cfg.architecture == "qwen2");
  EXPECT_EQ(cfg.rope_neox, cfg.architecture == "qwen2");
  EXPECT_FLOAT_EQ(cfg.rope_theta, float(prm["theta"].as_number()));
  if (prm.find("rope_linear")) {
    EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kLinear);
    EXPECT_FLOAT_EQ(cfg.rope_scale_factor, float(prm["rope_linear"].as_number()));
  } else {
    EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kNone);
  }
  if (c["rope_freqs"].is_null()) {
    EXPECT_TRUE(model->weights().rope_freqs.empty());
  } else {
    const auto& rf = c["rope_freqs"].as_array();
    ASSERT_EQ(model->weights().rope_freqs.size(), rf.size());
    for (size_t i = 0; i < rf.size(); ++i)
      EXPECT_FLOAT_EQ(model->weights().rope_freqs[i], float(rf[i].as_number())) << "pair " << i;
  }

  const int V = int(c["logits_shape"][1].as_int());
  ASSERT_EQ(cfg.n_vocab, V);
  const auto ids = ids_of(c["ids"]);
  const auto argmaxes = ids_of(c["argmax"]);
  ASSERT_EQ(int64_t(ids.size()), c["logits_shape"][0].as_int());
  const std::string bin = read_file(arch_dir() / c["logits_file"].as_string());
  ASSERT_EQ(bin.size(), ids.size() * size_t(V) * sizeof(float)) << "logits file is truncated";
  const float* ref = reinterpret_cast<const float*>(bin.data());

  // 1) One prefill over all positions (float32 sgemm path).
  auto be = make_cpu_backend(model, {});
  std::vector<float> logits;
  be->forward(ids, LogitsMode::kAll, logits);
  ASSERT_EQ(logits.size(), ids.size() * size_t(V));
  const double prefill = max_diff(logits.data(), ref, ids.size(), V, name + " prefill");
  int agree = 0;
  for (size_t i = 0; i < ids.size(); ++i)
    agree += argmax(std::span<const float>(logits.data() + i * V, size_t(V))) == argmaxes[i];
  EXPECT_LE(prefill, kMaxLogitDiff) << name << ": prefill";
  EXPECT_EQ(agree, int(ids.size())) << name << ": argmax agreement " << agree << "/" << ids.size();

  // 2) A shorter prefill, then one token at a time: the KV cache, positions > 0 in a fresh call,
  //    and the single-token products straight from the GGUF encoding (qgemv).
  be->reset();
  const size_t n0 = ids.size() / 2;
  std::vector<float> step;
  be->forward(std::span<const TokenId>(ids.data(), n0), LogitsMode::kAll, step);
  double decode = max_diff(step.data(), ref, n0, V, name + " half prefill");
  int agree_dec = 0;
  for (size_t i = 0; i < n0; ++i)
    agree_dec += argmax(std::span<const float>(step.data() + i * V, size_t(V))) == argmaxes[i];
  for (size_t i = n0; i < ids.size(); ++i) {
    be->forward(std::span<const TokenId>(&ids[i], 1), LogitsMode::kLast, step);
    ASSERT_EQ(step.size(), size_t(V));
    decode = std::max(decode, max_diff(step.data(), ref + i * V, 1, V, name + " decode"));
    agree_dec += argmax(step) == argmaxes[i];
  }
  EXPECT_LE(decode, kMaxLogitDiff) << name << ": prefill + decode";
  EXPECT_EQ(agree_dec, int(ids.size())) << name << ": prefill + decode argmax agreement";

  std::printf("[arch-golden] %-24s %s GQA %d:1 %s: max |dlogit| prefill %.2e, prefill+decode %.2e, "
              "argmax %d/%zu\n",
              name.c_str(), cfg.architecture.c_str(), cfg.n_head / cfg.n_head_kv,
              cfg.tied_embeddings ? "tied" : "untied", prefill, decode, agree, ids.size());
}

INSTANTIATE_TEST_SUITE_P(Cases, ArchGolden, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace sinkscope
