// SPDX-License-Identifier: Apache-2.0
// Model families against HF transformers: tiny random-weight models of each family, built by
// transformers from a config, written as GGUF in llama.cpp's layout (tests/data/oracles, written
// by tests/oracle/make_family_oracles.py), run by the CPU backend on the oracle's token-id prompts.
// Tolerance: float32 models with logits of a few units (std ~2-3), so both sides agree to float32
// rounding: max |dlogit| <= 1e-3 over every position and vocabulary entry of every prompt, and the
// same argmax everywhere (the smallest top-2 gap in the data is recorded in the manifest).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "engine/backend.h"
#include "engine/gguf_writer.h"
#include "engine/json_io.h"
#include "engine/sampler.h"
#include "engine/sha256.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;

constexpr double kMaxLogitDiff = 1e-3;
const char* const kCases[] = {"qwen3_tied_f32", "qwen3_untied_q8_0"};

fs::path oracle_dir() { return fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / "oracles"; }

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const Json& manifest() {
  static const Json m = Json::parse(read_file(oracle_dir() / "manifest.json"));
  return m;
}

const Json& find_case(const std::string& name) {
  for (const auto& c : manifest().at("cases"))
    if (c.at("name").get<std::string>() == name) return c;
  throw std::runtime_error(name + " missing from manifest.json");
}

std::vector<TokenId> ids_of(const Json& arr) {
  std::vector<TokenId> v;
  for (const auto& x : arr) v.push_back(TokenId(x.get<int64_t>()));
  return v;
}

double max_diff(const float* ours, const float* ref, size_t n, const std::string& what) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(ours[i])) {
      ADD_FAILURE() << what << ": non-finite logit at " << i;
      return INFINITY;
    }
    worst = std::max(worst, std::abs(double(ours[i]) - double(ref[i])));
  }
  return worst;
}

// A copy of a GGUF file without the tensors in `drop`, its metadata changed by `edit`.
fs::path copy_gguf(const fs::path& src, const std::string& tag, const std::set<std::string>& drop,
                   const std::function<void(GgufWriter&)>& edit = {}) {
  const auto f = GgufFile::open(src);
  GgufWriter w(f->version(), f->alignment());
  for (const auto& [k, v] : f->metadata())
    if (k != "general.alignment") w.set_value(k, v);
  for (const GgufTensorInfo& t : f->tensors())
    if (!drop.count(t.name))
      w.add_raw_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  if (edit) edit(w);
  const fs::path dir = fs::temp_directory_path() / "sinkscope_family_oracles";
  fs::create_directories(dir);
  const fs::path out = dir / (tag + ".gguf");
  w.write(out);
  return out;
}

std::string load_error(const fs::path& p) {
  try {
    Model::load(p);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(loaded without error)";
}

TEST(FamilyOracles, ManifestListsTheCasesAndFilesAreIntact) {
  std::set<std::string> want(std::begin(kCases), std::end(kCases)), got;
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(oracle_dir())) total += e.file_size();
  EXPECT_LT(total, 1000u * 1000) << "tests/data/oracles should stay under 1 MB";
  for (const auto& c : manifest().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    got.insert(name);
    EXPECT_EQ(sha256_hex(read_file(oracle_dir() / c.at("gguf").get<std::string>())),
              c.at("gguf_sha256").get<std::string>())
        << name;
    EXPECT_EQ(sha256_hex(read_file(oracle_dir() / c.at("logits_file").get<std::string>())),
              c.at("logits_sha256").get<std::string>())
        << name;
  }
  EXPECT_EQ(got, want);
}

class FamilyOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(FamilyOracle, ConfigIsTheOraclesOne) {
  const Json& c = find_case(GetParam());
  const Json& p = c.at("params");
  auto model = Model::load(oracle_dir() / c.at("gguf").get<std::string>());
  const ModelConfig& cfg = model->config();
  EXPECT_EQ(cfg.architecture, c.at("architecture").get<std::string>());
  EXPECT_EQ(architecture_family(cfg.architecture), "Qwen3");
  EXPECT_EQ(cfg.n_layer, p.at("n_layer").get<int64_t>());
  EXPECT_EQ(cfg.n_embd, p.at("d").get<int64_t>());
  EXPECT_EQ(cfg.n_head, p.at("n_head").get<int64_t>());
  EXPECT_EQ(cfg.n_head_kv, p.at("n_head_kv").get<int64_t>());
  EXPECT_EQ(cfg.n_ff, p.at("n_ff").get<int64_t>());
  EXPECT_EQ(cfg.n_vocab, c.at("n_vocab").get<int64_t>());
  EXPECT_EQ(cfg.n_ctx_train, p.at("n_ctx").get<int64_t>());
  // Qwen3's head width is its own key, not n_embd / n_head: 32 here against 64 / 4 = 16.
  EXPECT_EQ(cfg.head_dim, p.at("head_dim").get<int64_t>());
  EXPECT_NE(cfg.head_dim, cfg.n_embd / cfg.n_head);
  EXPECT_EQ(cfg.q_dim(), cfg.n_head * cfg.head_dim);
  EXPECT_EQ(cfg.kv_dim(), cfg.n_head_kv * cfg.head_dim);
  EXPECT_EQ(cfg.rope_dim, cfg.head_dim);
  EXPECT_TRUE(cfg.rope_neox);
  EXPECT_TRUE(cfg.qk_norm);
  EXPECT_FALSE(cfg.qkv_bias);
  EXPECT_EQ(cfg.tied_embeddings, p.at("tied").get<bool>());
  EXPECT_FLOAT_EQ(cfg.rope_theta, float(p.at("theta").get<double>()));
  EXPECT_FLOAT_EQ(cfg.rms_eps, float(p.at("eps").get<double>()));
  EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kNone);
  // The oracle's minimal byte-level vocabulary loads, and its learnt merges apply.
  EXPECT_EQ(model->tokenizer().vocab_size(), cfg.n_vocab);
  const auto toks = model->tokenizer().encode("the quick fox");
  EXPECT_LT(toks.size(), std::string("the quick fox").size());
  std::string back;
  for (TokenId t : toks) back += model->tokenizer().token_to_piece(t);
  EXPECT_EQ(back, "the quick fox");
  for (const LayerWeights& L : model->weights().layers) {
    EXPECT_EQ(L.q_norm.size(), size_t(cfg.head_dim));
    EXPECT_EQ(L.k_norm.size(), size_t(cfg.head_dim));
    EXPECT_TRUE(L.bq.empty());
    EXPECT_EQ(L.wq.rows, cfg.q_dim());
    EXPECT_EQ(L.wo.cols, cfg.q_dim());
    EXPECT_EQ(L.wo.rows, cfg.n_embd);
  }
}

TEST_P(FamilyOracle, LogitsAndArgmaxMatchTransformers) {
  const std::string name = GetParam();
  const Json& c = find_case(name);
  auto model = Model::load(oracle_dir() / c.at("gguf").get<std::string>());
  const int V = model->config().n_vocab;
  const std::string bin = read_file(oracle_dir() / c.at("logits_file").get<std::string>());
  size_t rows = 0;
  for (const auto& pr : c.at("prompts")) rows += pr.size();
  ASSERT_EQ(bin.size(), rows * size_t(V) * sizeof(float)) << "logits file is truncated";
  const float* ref = reinterpret_cast<const float*>(bin.data());

  BackendOptions opt;
  opt.n_threads = 2;
  auto be = make_cpu_backend(model, opt);
  double prefill = 0, decode = 0;
  int agree = 0, agree_dec = 0, total = 0;
  size_t row0 = 0;
  for (size_t pi = 0; pi < c.at("prompts").size(); ++pi) {
    const auto ids = ids_of(c.at("prompts")[pi]);
    const auto want = ids_of(c.at("argmax")[pi]);
    const float* r = ref + row0 * V;
    const size_t n = ids.size();
    // 1) One prefill over the prompt (batched products over dequantized tiles).
    be->reset();
    std::vector<float> logits;
    be->forward(ids, LogitsMode::kAll, logits);
    ASSERT_EQ(logits.size(), n * size_t(V));
    prefill = std::max(prefill, max_diff(logits.data(), r, n * V, name + " prefill"));
    for (size_t i = 0; i < n; ++i)
      agree += argmax(std::span<const float>(logits.data() + i * V, size_t(V))) == want[i];
    // 2) Half the prompt, then one token at a time: the cache, positions > 0 in a fresh call and
    //    the single-token products (qgemv) with the Q/K norms.
    be->reset();
    const size_t n0 = n / 2;
    be->forward(std::span<const TokenId>(ids.data(), n0), LogitsMode::kAll, logits);
    decode = std::max(decode, max_diff(logits.data(), r, n0 * V, name + " half prefill"));
    for (size_t i = 0; i < n0; ++i)
      agree_dec += argmax(std::span<const float>(logits.data() + i * V, size_t(V))) == want[i];
    for (size_t i = n0; i < n; ++i) {
      be->forward(std::span<const TokenId>(&ids[i], 1), LogitsMode::kLast, logits);
      ASSERT_EQ(logits.size(), size_t(V));
      decode = std::max(decode, max_diff(logits.data(), r + i * V, V, name + " decode"));
      agree_dec += argmax(logits) == want[i];
    }
    total += int(n);
    row0 += n;
  }
  EXPECT_LE(prefill, kMaxLogitDiff) << name << ": prefill";
  EXPECT_LE(decode, kMaxLogitDiff) << name << ": prefill + decode";
  EXPECT_EQ(agree, total) << name << ": argmax agreement (prefill)";
  EXPECT_EQ(agree_dec, total) << name << ": argmax agreement (prefill + decode)";
  std::printf("[family-oracle] %-20s max |dlogit| prefill %.2e, prefill+decode %.2e, argmax %d/%d\n",
              name.c_str(), prefill, decode, agree, total);
}

// The Q/K capture holds the normalised heads: at position 0 RoPE is the identity, so each
// captured head divided by its gain has mean square 1 (the RMSNorm's output, eps aside).
TEST_P(FamilyOracle, QkCaptureSeesTheNormalisedHeads) {
  const Json& c = find_case(GetParam());
  auto model = Model::load(oracle_dir() / c.at("gguf").get<std::string>());
  const ModelConfig& cfg = model->config();
  const auto ids = ids_of(c.at("prompts")[0]);
  for (int layer = 0; layer < cfg.n_layer; ++layer) {
    auto be = make_cpu_backend(model, {});
    QkvCaptureRequest rq;
    rq.layer = layer;
    be->request_qkv_capture(rq);
    std::vector<float> logits;
    be->forward(ids, LogitsMode::kLast, logits);
    const QkvCapture& cap = be->qkv_capture();
    ASSERT_EQ(cap.layer, layer);
    ASSERT_EQ(cap.head_dim, cfg.head_dim);
    ASSERT_TRUE(cap.complete());
    const LayerWeights& L = model->weights().layers[size_t(layer)];
    auto mean_square = [&](auto at, size_t base, const std::vector<float>& g) {
      double s = 0;
      for (int d = 0; d < cfg.head_dim; ++d) {
        const double v = at(base + size_t(d)) / g[size_t(d)];
        s += v * v;
      }
      return s / cfg.head_dim;
    };
    for (int h = 0; h < cfg.n_head; ++h)
      EXPECT_NEAR(mean_square([&](size_t i) { return cap.q_at(i); }, size_t(h) * cfg.head_dim,
                              L.q_norm),
                  1.0, 1e-4)
          << "layer " << layer << " q head " << h;
    for (int h = 0; h < cfg.n_head_kv; ++h)
      EXPECT_NEAR(mean_square([&](size_t i) { return cap.k_at(i); }, size_t(h) * cfg.head_dim,
                              L.k_norm),
                  1.0, 1e-4)
          << "layer " << layer << " k head " << h;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, FamilyOracle, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

TEST(FamilyOracles, Qwen3WithoutItsQkNormsIsRefused) {
  const fs::path src = oracle_dir() / "qwen3_tied_f32.gguf";
  EXPECT_NE(load_error(copy_gguf(src, "no_q_norm", {"blk.1.attn_q_norm.weight"}))
                .find("missing tensor 'blk.1.attn_q_norm.weight'"),
            std::string::npos);
  EXPECT_NE(load_error(copy_gguf(src, "no_k_norm", {"blk.0.attn_k_norm.weight"}))
                .find("missing tensor 'blk.0.attn_k_norm.weight'"),
            std::string::npos);
  // A norm of the wrong width (n_embd / n_head instead of head_dim) is named too.
  const std::string bad_shape = load_error(copy_gguf(src, "short_q_norm", {"blk.0.attn_q_norm.weight"},
      [](GgufWriter& w) { w.add_tensor("blk.0.attn_q_norm.weight", {16}, GgmlType::kF32,
                                       std::vector<float>(16, 1.0f)); }));
  EXPECT_NE(bad_shape.find("'blk.0.attn_q_norm.weight' has shape [16], expected [32]"),
            std::string::npos)
      << bad_shape;
}

TEST(FamilyOracles, Qwen3ValueWidthMustBeTheKeyWidth) {
  const fs::path src = oracle_dir() / "qwen3_tied_f32.gguf";
  // K and V heads share one width in the engine: a file that says otherwise is refused.
  const std::string e = load_error(copy_gguf(src, "value_length", {}, [](GgufWriter& g) {
    g.set_u32("qwen3.attention.value_length", 16);
  }));
  EXPECT_NE(e.find("attention.value_length 16 differs from the key length 32"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace sinkscope
