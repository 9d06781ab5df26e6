// SPDX-License-Identifier: Apache-2.0
// Phi-3 against HF transformers: tiny random-weight Phi3ForCausalLM models (fused qkv_proj and
// gate_up_proj, LongRoPE with long and short factors and its attention factor, partial rotary,
// a sliding window on every layer), as GGUF in llama.cpp's layout (tests/data/oracles, case
// phi3_longrope_q8_0, tests/oracle/make_family_oracles.py) and as a safetensors checkpoint
// (tests/data/hf, case phi3_bf16, tests/oracle/make_hf_oracles.py), run by the CPU backend on
// the oracles' prompts. Tolerance: that of every family oracle (oracle_support.h, kMaxLogitDiff =
// 1e-3 on logits of std ~3) and the same argmax everywhere.
//
// Which LongRoPE factors run: transformers picks them per forward from the sequence length
// (long past original_max_position_embeddings), llama.cpp and SinkScope from the context the
// backend holds (BackendOptions::max_context). The GGUF case's original context (16) lies
// between its prompts' lengths (9 and 30), so each prompt runs on a backend whose context is
// its own length (at least 16): the short prompt checks the short factors, the long one the
// long factors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "engine/backend/backend.h"
#include "engine/format/gguf_writer.h"
#include "engine/util/json_io.h"
#include "tests/unit/gguf_edit_support.h"
#include "tests/unit/oracle_support.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using gguf_edit::load_error;
using oracle::kMaxLogitDiff;
using oracle::read_file;

fs::path data_dir(const char* sub) { return fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / sub; }

const Json& gguf_case() {
  static const Json m = Json::parse(read_file(data_dir("oracles") / "manifest.json"));
  return oracle::find_case(m, "phi3_longrope_q8_0");
}

const Json& hf_case() {
  static const Json m = Json::parse(read_file(data_dir("hf") / "manifest.json"));
  return oracle::find_case(m, "phi3_bf16");
}

fs::path gguf_path() { return data_dir("oracles") / gguf_case().at("gguf").get<std::string>(); }

fs::path copy_gguf(const std::string& tag, const std::set<std::string>& drop,
                   const std::function<void(GgufWriter&)>& edit = {},
                   const std::set<std::string>& drop_keys = {}) {
  return gguf_edit::copy_gguf(gguf_path(), "sinkscope_phi3", tag, drop, edit, drop_keys);
}

// A backend holding `context` positions (which picks the LongRoPE factors). Decode products
// with float activations: the default 16-bit activation blocks move this Q8_0 model's decode
// logits by up to ~1e-3 (as for the other Q8_0 oracles, ~6e-4), too close to the tolerance to
// say anything about Phi-3; the prefill, which checks the same weights, is exact either way.
std::function<BackendOptions(size_t)> context_of(std::function<int(size_t)> f) {
  return [f](size_t n) {
    BackendOptions o;
    o.n_threads = 2;
    o.max_context = f(n);
    o.decode_products = QgemvMode::kFloatActivations;
    return o;
  };
}

// The factor lists make_family_oracles.py writes (phi3_factors: 1 .. top over the pairs).
std::vector<float> factors(int n, double top) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i)
    v.push_back(float(std::round((1.0 + (top - 1.0) * i / std::max(n - 1, 1)) * 1e4) / 1e4));
  return v;
}

TEST(Phi3, GgufConfigAndFusedWeights) {
  const Json& p = gguf_case().at("params");
  auto model = Model::load(gguf_path());
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.architecture, "phi3");
  EXPECT_EQ(architecture_family(c.architecture), "Phi-3");
  EXPECT_EQ(c.head_dim, p.at("head_dim").get<int>());
  EXPECT_EQ(c.rope_dim, int(c.head_dim * p.at("partial").get<double>()));  // partial rotary
  EXPECT_TRUE(c.rope_neox);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_TRUE(c.long_rope);
  EXPECT_EQ(c.rope_orig_ctx, p.at("orig_ctx").get<int>());
  EXPECT_EQ(c.n_ctx_train, p.at("n_ctx").get<int>());
  // sqrt(1 + ln(256 / 16) / ln 16) = sqrt(2).
  EXPECT_NEAR(c.rope_attn_factor, std::sqrt(2.0), 1e-6);
  EXPECT_EQ(c.sliding_window, p.at("window").get<int>());
  for (int l = 0; l < c.n_layer; ++l) EXPECT_EQ(c.layer_window(l), c.sliding_window) << l;
  const ModelWeights& w = model->weights();
  EXPECT_EQ(w.rope_factors_long, factors(c.rope_dim / 2, 6.0));
  EXPECT_EQ(w.rope_factors_short, factors(c.rope_dim / 2, 1.5));
  EXPECT_EQ(w.rope_freqs, w.rope_factors_short);
  EXPECT_EQ(&w.rope_factors_for(c.rope_orig_ctx, c.rope_orig_ctx), &w.rope_freqs);
  EXPECT_EQ(&w.rope_factors_for(c.rope_orig_ctx + 1, c.rope_orig_ctx), &w.rope_factors_long);
  // attn_qkv and ffn_up are split into row views of the one tensor each, nothing copied.
  for (const LayerWeights& L : w.layers) {
    EXPECT_EQ(L.wq.rows, c.q_dim());
    EXPECT_EQ(L.wk.rows, c.kv_dim());
    EXPECT_EQ(L.wv.rows, c.kv_dim());
    EXPECT_EQ(L.wk.data, L.wq.data + uint64_t(c.q_dim()) * L.wq.row_bytes);
    EXPECT_EQ(L.wv.data, L.wk.data + uint64_t(c.kv_dim()) * L.wk.row_bytes);
    EXPECT_EQ(L.w_gate.rows, c.n_ff);
    EXPECT_EQ(L.w_up.data, L.w_gate.data + uint64_t(c.n_ff) * L.w_gate.row_bytes);
    EXPECT_EQ(L.wq.type, GgmlType::kQ8_0);
  }
}

TEST(Phi3, GgufLogitsMatchTransformersOnBothFactorSets) {
  const int orig = gguf_case().at("params").at("orig_ctx").get<int>();
  auto model = Model::load(gguf_path());
  const auto& prompts = gguf_case().at("prompts");
  ASSERT_LT(prompts[1].size(), size_t(orig));  // short factors
  ASSERT_GT(prompts[0].size(), size_t(orig));  // long factors
  const auto g = oracle::check_case(model, gguf_case(), data_dir("oracles"), context_of([&](size_t n) {
    return int(std::max(n, size_t(orig)));
  }));
  oracle::expect_agreement(g, "phi3_longrope_q8_0");
}

double prefill_diff(const std::shared_ptr<const Model>& model, int context, size_t prompt) {
  const Json& c = gguf_case();
  const std::string bin = read_file(data_dir("oracles") / c.at("logits_file").get<std::string>());
  const float* ref = reinterpret_cast<const float*>(bin.data());
  const int V = model->config().n_vocab;
  for (size_t i = 0; i < prompt; ++i) ref += c.at("prompts")[i].size() * size_t(V);
  BackendOptions o;
  o.max_context = context;
  auto be = make_cpu_backend(model, o);
  const auto ids = oracle::ids_of(c.at("prompts")[prompt]);
  std::vector<float> logits;
  be->forward(ids, LogitsMode::kAll, logits);
  return oracle::max_diff(logits.data(), ref, logits.size(), "phi3");
}

// Each ingredient matters: the short prompt on the long factors, the file without its
// attention factor or without its window all move the logits far past the tolerance.
TEST(Phi3, FactorSetAttentionFactorAndWindowEachChangeTheLogits) {
  auto model = Model::load(gguf_path());
  EXPECT_LE(prefill_diff(model, 16, 1), kMaxLogitDiff);
  EXPECT_GT(prefill_diff(model, 256, 1), 50 * kMaxLogitDiff) << "long factors on a short run";
  auto no_factor = Model::load(copy_gguf("no_attn_factor", {}, {}, {"phi3.rope.scaling.attn_factor"}));
  EXPECT_FLOAT_EQ(no_factor->config().rope_attn_factor, 1.0f);
  EXPECT_GT(prefill_diff(no_factor, 30, 0), 50 * kMaxLogitDiff) << "attention factor ignored";
  auto no_window = Model::load(copy_gguf("no_window", {}, {}, {"phi3.attention.sliding_window"}));
  EXPECT_EQ(no_window->config().layer_window(0), 0);
  EXPECT_GT(prefill_diff(no_window, 30, 0), 50 * kMaxLogitDiff) << "window ignored";
}

TEST(Phi3, GgufErrorsAreNamed) {
  auto has = [](const std::string& e, const std::string& want) {
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  has(load_error(copy_gguf("no_short", {"rope_factors_short.weight"})),
      "missing tensor 'rope_factors_short.weight'");
  has(load_error(copy_gguf("no_orig", {}, {}, {"phi3.rope.scaling.original_context_length"})),
      "need metadata key 'phi3.rope.scaling.original_context_length'");
  has(load_error(copy_gguf("bad_factor", {"rope_factors_long.weight"}, [](GgufWriter& w) {
        w.add_tensor("rope_factors_long.weight", {6}, GgmlType::kF32,
                     std::vector<float>{1, 1, 0, 1, 1, 1});
      })),
      "rope_factors_* hold a factor 0");
  has(load_error(copy_gguf("short_qkv", {"blk.1.attn_qkv.weight"}, [](GgufWriter& w) {
        w.add_tensor("blk.1.attn_qkv.weight", {32, 32}, GgmlType::kF32,
                     std::vector<float>(32 * 32, 0.0f));
      })),
      "tensor 'blk.1.attn_qkv.weight' has shape [32, 32], expected [32, 64]");
  has(load_error(copy_gguf("no_qkv", {"blk.0.attn_qkv.weight"})),
      "missing tensor 'blk.0.attn_q.weight'");
  has(load_error(copy_gguf("bad_attn_factor", {}, [](GgufWriter& w) {
        w.set_f32("phi3.rope.scaling.attn_factor", -1.0f);
      })),
      "rope.scaling.attn_factor' = -1");
}

// ---- the safetensors checkpoint ---------------------------------------------------------------

TEST(Phi3, CheckpointConfigAndLogitsMatchTransformers) {
  const Json& c = hf_case();
  const Json& rs = c.at("params").at("rope_scaling");
  auto model = Model::load(data_dir("hf") / c.at("dir").get<std::string>());
  const ModelConfig& cfg = model->config();
  EXPECT_EQ(cfg.architecture, "phi3");
  EXPECT_EQ(cfg.head_dim, 16);
  EXPECT_EQ(cfg.rope_dim, 8);  // partial_rotary_factor 0.5
  EXPECT_TRUE(cfg.long_rope);
  const int orig = rs.at("original_max_position_embeddings").get<int>();
  EXPECT_EQ(cfg.rope_orig_ctx, orig);
  EXPECT_NEAR(cfg.rope_attn_factor, std::sqrt(1 + std::log(256.0 / orig) / std::log(double(orig))),
              1e-6);
  EXPECT_EQ(cfg.layer_window(0), 12);
  EXPECT_EQ(cfg.layer_window(1), 12);
  std::vector<float> lf, sf;
  for (const auto& v : rs.at("long_factor")) lf.push_back(v.get<float>());
  for (const auto& v : rs.at("short_factor")) sf.push_back(v.get<float>());
  EXPECT_EQ(model->weights().rope_factors_long, lf);
  EXPECT_EQ(model->weights().rope_factors_short, sf);
  const LayerWeights& L = model->weights().layers[0];
  EXPECT_EQ(L.wq.type, GgmlType::kBF16);
  EXPECT_EQ(L.wk.data, L.wq.data + uint64_t(cfg.q_dim()) * L.wq.row_bytes);
  EXPECT_EQ(L.w_up.data, L.w_gate.data + uint64_t(cfg.n_ff) * L.w_gate.row_bytes);
  // Every prompt is shorter than the original context: transformers ran the short factors.
  const auto g = oracle::check_case(model, c, data_dir("hf"),
                                    context_of([&](size_t) { return orig; }));
  oracle::expect_agreement(g, "phi3_bf16");
}

}  // namespace
}  // namespace sinkscope
