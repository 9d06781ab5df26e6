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

#include "engine/backend/backend.h"
#include "engine/util/json_io.h"
#include "engine/model/sampler.h"
#include "engine/util/sha256.h"
#include "test_support.h"

namespace sinkscope {
namespace {

constexpr double kMaxLogitDiff = 1e-3;
// Decode with the default integer products (16-bit activations, engine/backend/qgemv_int.h)
// on the quantized models: x is rounded to max|x| / 32767 per block of 32 in each product, which
// these random models (large weights, few layers) turn into logit changes of up to ~3e-3; the
// float-activation path is held to kMaxLogitDiff on the same steps.
constexpr double kMaxLogitDiffInt16Decode = 1e-2;

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

const Json& manifest() {
  static const Json m = Json::parse(read_file(arch_dir() / "manifest.json"));
  return m;
}

const Json* find_case(const std::string& name) {
  for (const auto& c : manifest().at("cases"))
    if (c.at("name").get<std::string>() == name) return &c;
  return nullptr;
}

std::vector<TokenId> ids_of(const Json& arr) {
  std::vector<TokenId> v;
  for (const auto& x : arr) v.push_back(TokenId(x.get<int64_t>()));
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
  for (const auto& c : manifest().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    got.insert(name);
    EXPECT_EQ(sha256_hex(read_file(arch_dir() / c.at("gguf").get<std::string>())), c.at("gguf_sha256").get<std::string>())
        << name;
    EXPECT_EQ(sha256_hex(read_file(arch_dir() / c.at("logits_file").get<std::string>())),
              c.at("logits_sha256").get<std::string>())
        << name;
  }
  EXPECT_EQ(got, want);
}

class ArchGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(ArchGolden, LogitsAndArgmaxMatchTransformers) {
  const std::string name = GetParam();
  const Json* cp = find_case(name);
  ASSERT_NE(cp, nullptr) << name << " missing from manifest.json";
  const Json& c = *cp;
  const Json& prm = c.at("params");

  auto model = Model::load(arch_dir() / c.at("gguf").get<std::string>());
  const ModelConfig& cfg = model->config();

  // The engine must read the same hyper-parameters the oracle used.
  EXPECT_EQ(cfg.architecture, c.at("architecture").get<std::string>());
  EXPECT_EQ(cfg.n_layer, prm.at("n_layer").get<int64_t>());
  EXPECT_EQ(cfg.n_embd, prm.at("d").get<int64_t>());
  EXPECT_EQ(cfg.n_head, prm.at("n_head").get<int64_t>());
  EXPECT_EQ(cfg.n_head_kv, prm.at("n_head_kv").get<int64_t>());
  EXPECT_EQ(cfg.head_dim, c.at("head_dim").get<int64_t>());
  EXPECT_EQ(cfg.n_ff, prm.at("n_ff").get<int64_t>());
  EXPECT_EQ(cfg.tied_embeddings, prm.at("tied").get<bool>());
  EXPECT_EQ(cfg.qkv_bias, cfg.architecture == "qwen2");
  EXPECT_EQ(cfg.rope_neox, cfg.architecture == "qwen2");
  EXPECT_FLOAT_EQ(cfg.rope_theta, float(prm.at("theta").get<double>()));
  if (prm.contains("rope_linear")) {
    EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kLinear);
    EXPECT_FLOAT_EQ(cfg.rope_scale_factor, float(prm.at("rope_linear").get<double>()));
  } else {
    EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kNone);
  }
  if (c.at("rope_freqs").is_null()) {
    EXPECT_TRUE(model->weights().rope_freqs.empty());
  } else {
    const auto& rf = c.at("rope_freqs");
    ASSERT_EQ(model->weights().rope_freqs.size(), rf.size());
    for (size_t i = 0; i < rf.size(); ++i)
      EXPECT_FLOAT_EQ(model->weights().rope_freqs[i], float(rf[i].get<double>())) << "pair " << i;
  }

  const int V = int(c.at("logits_shape")[1].get<int64_t>());
  ASSERT_EQ(cfg.n_vocab, V);
  const auto ids = ids_of(c.at("ids"));
  const auto argmaxes = ids_of(c.at("argmax"));
  ASSERT_EQ(int64_t(ids.size()), c.at("logits_shape")[0].get<int64_t>());
  const std::string bin = read_file(arch_dir() / c.at("logits_file").get<std::string>());
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
  //    and the single-token products straight from the GGUF encoding (qgemv), with float
  //    activations and with the default 16-bit integer ones.
  double decode = 0, decode_float = 0;
  for (QgemvMode mode : {QgemvMode::kFloatActivations, QgemvMode::kInt16Activations}) {
    BackendOptions bo;
    bo.decode_products = mode;
    auto bd = make_cpu_backend(model, bo);
    const size_t n0 = ids.size() / 2;
    std::vector<float> step;
    bd->forward(std::span<const TokenId>(ids.data(), n0), LogitsMode::kAll, step);
    double worst = max_diff(step.data(), ref, n0, V, name + " half prefill");
    int agree_mode = 0;
    for (size_t i = 0; i < n0; ++i)
      agree_mode += argmax(std::span<const float>(step.data() + i * V, size_t(V))) == argmaxes[i];
    for (size_t i = n0; i < ids.size(); ++i) {
      bd->forward(std::span<const TokenId>(&ids[i], 1), LogitsMode::kLast, step);
      ASSERT_EQ(step.size(), size_t(V));
      worst = std::max(worst, max_diff(step.data(), ref + i * V, 1, V, name + " decode"));
      agree_mode += argmax(step) == argmaxes[i];
    }
    const bool is_float = mode == QgemvMode::kFloatActivations;
    EXPECT_LE(worst, is_float ? kMaxLogitDiff : kMaxLogitDiffInt16Decode)
        << name << ": prefill + decode, " << (is_float ? "float" : "int16") << " activations";
    EXPECT_EQ(agree_mode, int(ids.size()))
        << name << ": prefill + decode argmax agreement, " << (is_float ? "float" : "int16");
    (is_float ? decode_float : decode) = worst;
  }

  std::printf("[arch-golden] %-24s %s GQA %d:1 %s: max |dlogit| prefill %.2e, prefill+decode %.2e "
              "(float activations %.2e), argmax %d/%zu\n",
              name.c_str(), cfg.architecture.c_str(), cfg.n_head / cfg.n_head_kv,
              cfg.tied_embeddings ? "tied" : "untied", prefill, decode, decode_float, agree, ids.size());
}

INSTANTIATE_TEST_SUITE_P(Cases, ArchGolden, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace sinkscope
