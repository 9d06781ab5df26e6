// SPDX-License-Identifier: Apache-2.0
// gpt-oss against HF transformers: a tiny random-weight GptOssForCausalLM (learned attention
// sinks, 4 experts with 2 used in MXFP4, YaRN, a local layer of window 8 then a global one),
// written as GGUF in llama.cpp's layout by tests/oracle/make_family_oracles.py (case
// gpt_oss_mxfp4), run by the CPU backend on the oracle's token-id prompts.
// Tolerance: that of every family oracle (oracle_support.h, kMaxLogitDiff = 1e-3 on logits of
// std ~3) and the same argmax everywhere. The HF model ran on the values the gguf package's MXFP4
// dequantizer gives, so the logits also check SinkScope's MXFP4 dequantizer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
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
using oracle::ids_of;
using oracle::kMaxLogitDiff;
using oracle::read_file;

constexpr const char* kCase = "gpt_oss_mxfp4";

fs::path oracle_dir() { return fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / "oracles"; }

const Json& the_case() {
  static const Json m = Json::parse(read_file(oracle_dir() / "manifest.json"));
  return oracle::find_case(m, kCase);
}

fs::path gguf_path() { return oracle_dir() / the_case().at("gguf").get<std::string>(); }

// A copy of the oracle GGUF with tensors / metadata keys dropped or edited (gguf_edit_support.h).
fs::path copy_gguf(const std::string& tag, const std::set<std::string>& drop,
                   const std::function<void(GgufWriter&)>& edit = {},
                   const std::set<std::string>& drop_keys = {}) {
  return gguf_edit::copy_gguf(gguf_path(), "sinkscope_gpt_oss", tag, drop, edit, drop_keys);
}

// Max |dlogit| against the oracle over every prompt (prefill + decode), and argmax agreement.
oracle::PromptAgreement run_oracle(const std::shared_ptr<const Model>& model) {
  const Json& c = the_case();
  const int V = model->config().n_vocab;
  const std::string bin = read_file(oracle_dir() / c.at("logits_file").get<std::string>());
  const float* ref = reinterpret_cast<const float*>(bin.data());
  size_t rows = 0;
  for (const auto& pr : c.at("prompts")) rows += pr.size();
  EXPECT_EQ(bin.size(), rows * size_t(V) * sizeof(float)) << "logits file is truncated";
  BackendOptions opt;
  opt.n_threads = 2;
  auto be = make_cpu_backend(model, opt);
  oracle::PromptAgreement g;
  size_t row0 = 0;
  for (size_t pi = 0; pi < c.at("prompts").size(); ++pi) {
    const auto ids = ids_of(c.at("prompts")[pi]);
    oracle::check_prompt(*be, ids, ids_of(c.at("argmax")[pi]), ref + row0 * V, V, kCase, g);
    row0 += ids.size();
  }
  return g;
}

TEST(GptOss, ConfigIsTheOraclesOne) {
  const Json& p = the_case().at("params");
  auto model = Model::load(gguf_path());
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.architecture, "gpt-oss");
  EXPECT_EQ(architecture_family(c.architecture), "gpt-oss");
  EXPECT_TRUE(c.gpt_oss);
  EXPECT_TRUE(c.attn_sinks);
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.o_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_EQ(c.n_expert, p.at("n_expert").get<int64_t>());
  EXPECT_EQ(c.n_expert_used, p.at("n_expert_used").get<int64_t>());
  EXPECT_EQ(c.n_ff, p.at("n_ff").get<int64_t>());
  EXPECT_EQ(c.head_dim, p.at("head_dim").get<int64_t>());
  EXPECT_EQ(c.rope_scaling, RopeScalingType::kYarn);
  EXPECT_FLOAT_EQ(c.rope_scale_factor, float(p.at("yarn_factor").get<double>()));
  EXPECT_EQ(c.rope_orig_ctx, p.at("yarn_orig_ctx").get<int64_t>());
  EXPECT_FALSE(c.yarn_truncate);
  EXPECT_FALSE(c.tied_embeddings);
  // Local first, then global (HF's layer_types for gpt-oss).
  EXPECT_EQ(c.layer_window(0), p.at("window").get<int64_t>());
  EXPECT_EQ(c.layer_window(1), 0);
  for (const LayerWeights& L : model->weights().layers) {
    EXPECT_EQ(L.sinks.size(), size_t(c.n_head));
    EXPECT_EQ(L.bo.size(), size_t(c.n_embd));
    ASSERT_EQ(L.exp_gate.size(), size_t(c.n_expert));
    EXPECT_EQ(L.exp_gate[0].type, GgmlType::kMXFP4);
    EXPECT_EQ(L.exp_gate[1].rows, c.n_ff);
    EXPECT_EQ(L.exp_down[1].rows, c.n_embd);
    EXPECT_EQ(L.exp_down[1].cols, c.n_ff);
    EXPECT_EQ(L.exp_gate[1].data, L.exp_gate[0].data + uint64_t(c.n_ff) * L.exp_gate[0].row_bytes);
  }
  EXPECT_EQ(model->weight_summary().by_type.at("MXFP4"), 3 * c.n_layer);
}

TEST(GptOss, LogitsAndArgmaxMatchTransformers) {
  const oracle::PromptAgreement g = run_oracle(Model::load(gguf_path()));
  EXPECT_LE(g.prefill, kMaxLogitDiff) << "prefill";
  EXPECT_LE(g.decode, kMaxLogitDiff) << "prefill + decode";
  EXPECT_EQ(g.agree, g.total) << "argmax agreement (prefill)";
  EXPECT_EQ(g.agree_dec, g.total) << "argmax agreement (prefill + decode)";
  std::printf("[gpt-oss oracle] max |dlogit| prefill %.2e, prefill+decode %.2e, argmax %d/%d\n",
              g.prefill, g.decode, g.agree, g.total);
}

// The learned sinks matter: the same model with every sink logit at -1e4 (no sink) is far from
// the oracle, so the test above would catch a forward that ignored them.
TEST(GptOss, WithoutItsSinksTheLogitsMoveFarPastTheTolerance) {
  auto model = Model::load(gguf_path());
  const ModelConfig& c = model->config();
  std::set<std::string> drop;
  for (int l = 0; l < c.n_layer; ++l) drop.insert("blk." + std::to_string(l) + ".attn_sinks.weight");
  const fs::path p = copy_gguf("no_sinks", drop, [&](GgufWriter& w) {
    for (int l = 0; l < c.n_layer; ++l)
      w.add_tensor("blk." + std::to_string(l) + ".attn_sinks.weight", {c.n_head}, GgmlType::kF32,
                   std::vector<float>(size_t(c.n_head), -1e4f));
  });
  const oracle::PromptAgreement g = run_oracle(Model::load(p));
  EXPECT_GT(g.prefill, 100 * kMaxLogitDiff);
}

// YaRN and the expert routing matter too: without the YaRN keys (plain RoPE), or with one expert
// per token instead of two, the logits leave the tolerance by far.
TEST(GptOss, YarnAndTopKRoutingEachMoveTheLogits) {
  const oracle::PromptAgreement no_yarn = run_oracle(Model::load(copy_gguf(
      "no_yarn", {}, {},
      {"gpt-oss.rope.scaling.type", "gpt-oss.rope.scaling.factor",
       "gpt-oss.rope.scaling.original_context_length"})));
  EXPECT_GT(no_yarn.prefill, 100 * kMaxLogitDiff);
  const oracle::PromptAgreement top1 = run_oracle(Model::load(copy_gguf(
      "top1", {}, [](GgufWriter& w) { w.set_u32("gpt-oss.expert_used_count", 1); },
      {"gpt-oss.expert_used_count"})));
  EXPECT_GT(top1.prefill, 100 * kMaxLogitDiff);
}

// Every query's probability splits between the keys it sees and the sink: with the column-mass
// probe covering every position, mean column mass summed over keys + mean sink mass = 1 for each
// (layer, head), and the sink takes a real share (|sink logits| ~ 1.5 in the oracle).
TEST(GptOss, SinkMassAndKeyMassSumToOne) {
  auto model = Model::load(gguf_path());
  const ModelConfig& c = model->config();
  BackendOptions opt;
  opt.n_threads = 2;
  auto be = make_cpu_backend(model, opt);
  const auto ids = ids_of(the_case().at("prompts")[0]);
  const int n = int(ids.size());
  be->request_column_mass(n);
  be->reset();
  std::vector<float> logits;
  be->forward(ids, LogitsMode::kLast, logits);
  const AttentionProbes& pr = be->probes();
  ASSERT_EQ(pr.sink_mass.size(), size_t(c.n_layer) * c.n_head);
  ASSERT_EQ(pr.sink_queries, n);
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head; ++h) {
      const size_t lh = size_t(l) * c.n_head + size_t(h);
      double keys = 0;
      for (int k = 0; k < n; ++k) keys += pr.col_mass[lh * size_t(n) + size_t(k)];
      const double sink = pr.sink_mass[lh];
      EXPECT_NEAR((keys + sink) / n, 1.0, 1e-5) << "layer " << l << " head " << h;
      EXPECT_GT(sink / n, 1e-3) << "layer " << l << " head " << h;
    }
}

TEST(GptOss, MissingOrMisshapenTensorsAreNamed) {
  EXPECT_NE(load_error(copy_gguf("no_sinks_tensor", {"blk.1.attn_sinks.weight"}))
                .find("missing tensor 'blk.1.attn_sinks.weight'"),
            std::string::npos);
  EXPECT_NE(load_error(copy_gguf("no_router", {"blk.0.ffn_gate_inp.bias"}))
                .find("missing tensor 'blk.0.ffn_gate_inp.bias'"),
            std::string::npos);
  EXPECT_NE(load_error(copy_gguf("no_down_exps", {"blk.0.ffn_down_exps.weight"}))
                .find("missing tensor 'blk.0.ffn_down_exps.weight'"),
            std::string::npos);
  const std::string bad = load_error(copy_gguf("short_sinks", {"blk.0.attn_sinks.weight"},
      [](GgufWriter& w) {
        w.add_tensor("blk.0.attn_sinks.weight", {3}, GgmlType::kF32, std::vector<float>(3, 0.0f));
      }));
  EXPECT_NE(bad.find("'blk.0.attn_sinks.weight' has shape [3], expected [4]"), std::string::npos)
      << bad;
}

TEST(GptOss, MetadataErrorsAreNamed) {
  const std::string used = load_error(copy_gguf(
      "too_many_used", {}, [](GgufWriter& w) { w.set_u32("gpt-oss.expert_used_count", 9); },
      {"gpt-oss.expert_used_count"}));
  EXPECT_NE(used.find("expert_used_count 9 exceeds expert_count 4"), std::string::npos) << used;
  const std::string no_experts = load_error(copy_gguf("no_expert_count", {}, {},
                                                      {"gpt-oss.expert_count"}));
  EXPECT_NE(no_experts.find("missing metadata key 'gpt-oss.expert_count'"), std::string::npos)
      << no_experts;
  const std::string no_orig = load_error(copy_gguf("no_yarn_ctx", {}, {},
      {"gpt-oss.rope.scaling.original_context_length"}));
  EXPECT_NE(no_orig.find("YaRN needs metadata key 'gpt-oss.rope.scaling.original_context_length'"),
            std::string::npos)
      << no_orig;
}

// ---- the MXFP4-packed Hugging Face checkpoint ----------------------------------------------

// gpt-oss as the released checkpoints store it: experts as *_blocks / *_scales (U8), repacked
// into GGUF's MXFP4 blocks at load and read by the same decoder and products as a GGUF file
// (tests/data/hf, case gpt_oss_mxfp4, tests/oracle/make_hf_oracles.py: the packing was checked
// there against transformers' own unpacker). Same tolerance as every oracle.
fs::path hf_dir() { return fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / "hf"; }

const Json& hf_case() {
  static const Json m = Json::parse(read_file(hf_dir() / "manifest.json"));
  return oracle::find_case(m, "gpt_oss_mxfp4");
}

TEST(GptOss, Mxfp4PackedCheckpointMatchesTransformers) {
  const Json& c = hf_case();
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>());
  const ModelConfig& cfg = model->config();
  EXPECT_EQ(model->format(), ModelFormat::kSafetensors);
  EXPECT_EQ(cfg.n_expert, 4);
  for (const LayerWeights& L : model->weights().layers) {
    ASSERT_EQ(L.exp_gate.size(), size_t(cfg.n_expert));
    for (const auto* v : {&L.exp_gate, &L.exp_up, &L.exp_down})
      for (const QuantMatrix& q : *v) EXPECT_EQ(q.type, GgmlType::kMXFP4);
    EXPECT_EQ(L.exp_gate[1].rows, cfg.n_ff);
    EXPECT_EQ(L.exp_gate[1].cols, cfg.n_embd);
    EXPECT_EQ(L.exp_down[1].rows, cfg.n_embd);
    EXPECT_EQ(L.exp_down[1].cols, cfg.n_ff);
    EXPECT_EQ(L.exp_gate_b.size(), size_t(cfg.n_expert * cfg.n_ff));
  }
  EXPECT_EQ(model->weight_summary().by_type.at("U8"), 4 * cfg.n_layer);  // blocks + scales
  BackendOptions o;
  o.n_threads = 2;
  oracle::expect_agreement(oracle::check_case(model, c, hf_dir(), [&](size_t) { return o; }),
                           "gpt_oss_mxfp4 (safetensors)");
}

}  // namespace
}  // namespace sinkscope
