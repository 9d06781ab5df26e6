// SPDX-License-Identifier: Apache-2.0
// Gemma 2 and Gemma 3 (text) Hugging Face checkpoints against HF transformers: tiny random-weight
// Gemma2ForCausalLM (BF16; window 6 on layers 0 and 2, soft-caps 5 / 10, query_pre_attn_scalar
// 24 against head_dim 16) and Gemma3ForCausalLM (BF16, model_type gemma3_text; five sliding
// layers of window 6 on RoPE base 10000 to one full layer on base 1e6 with linear scaling 4,
// Q/K norms), saved by save_pretrained (tests/data/hf, tests/oracle/make_hf_oracles.py), run by
// the CPU backend on the oracle's prompts. Tolerance: that of every oracle (oracle_support.h,
// kMaxLogitDiff = 1e-3 on logits of std ~3), the same argmax everywhere.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend/backend.h"
#include "engine/format/hf_checkpoint.h"
#include "engine/util/json_io.h"
#include "tests/unit/oracle_support.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using oracle::read_file;

fs::path hf_dir() { return fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / "hf"; }

const Json& find_case(const std::string& name) {
  static const Json m = Json::parse(read_file(hf_dir() / "manifest.json"));
  return oracle::find_case(m, name);
}

BackendOptions two_threads(size_t) {
  BackendOptions o;
  o.n_threads = 2;
  return o;
}

TEST(GemmaCheckpoints, Gemma2ConfigAndLogitsMatchTransformers) {
  const Json& c = find_case("gemma2_bf16");
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>());
  const ModelConfig& cfg = model->config();
  EXPECT_EQ(cfg.architecture, "gemma2");
  EXPECT_TRUE(cfg.gemma);
  EXPECT_FALSE(cfg.qk_norm);
  EXPECT_TRUE(cfg.tied_embeddings);
  EXPECT_FLOAT_EQ(cfg.attention_scale(), float(1.0 / std::sqrt(24.0)));  // not head_dim's
  EXPECT_FLOAT_EQ(cfg.attn_softcap, 5.0f);
  EXPECT_FLOAT_EQ(cfg.final_softcap, 10.0f);
  EXPECT_EQ(cfg.layer_window(0), 6);
  EXPECT_EQ(cfg.layer_window(1), 0);
  EXPECT_EQ(cfg.layer_window(2), 6);
  EXPECT_EQ(cfg.rope_theta_local, 0.0f);
  const LayerWeights& L = model->weights().layers[0];
  EXPECT_EQ(L.attn_post_norm.size(), size_t(cfg.n_embd));
  EXPECT_EQ(L.ffn_post_norm.size(), size_t(cfg.n_embd));
  oracle::expect_agreement(oracle::check_case(model, c, hf_dir(), two_threads), "gemma2_bf16");
}

TEST(GemmaCheckpoints, Gemma3TextConfigAndLogitsMatchTransformers) {
  const Json& c = find_case("gemma3_bf16");
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>());
  const ModelConfig& cfg = model->config();
  EXPECT_EQ(cfg.architecture, "gemma3");
  EXPECT_TRUE(cfg.qk_norm);
  EXPECT_EQ(cfg.attn_softcap, 0.0f);
  EXPECT_EQ(cfg.final_softcap, 0.0f);
  for (int l = 0; l < cfg.n_layer; ++l) EXPECT_EQ(cfg.layer_window(l), l == 5 ? 0 : 6) << l;
  EXPECT_TRUE(cfg.local_layers.empty());  // layer_types is the five-to-one pattern
  EXPECT_FLOAT_EQ(cfg.rope_theta, 1e6f);
  EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kLinear);
  EXPECT_FLOAT_EQ(cfg.rope_scale_factor, 4.0f);
  EXPECT_FLOAT_EQ(cfg.rope_theta_local, 10000.0f);
  EXPECT_EQ(model->weights().layers[0].q_norm.size(), size_t(cfg.head_dim));
  oracle::expect_agreement(oracle::check_case(model, c, hf_dir(), two_threads), "gemma3_bf16");
}

std::string config_error(const Json& j) {
  try {
    read_hf_config(j.dump(), "config.json");
  } catch (const ModelError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GemmaCheckpoints, UnsupportedGemmaConfigsAreNamed) {
  const Json base =
      Json::parse(read_file(hf_dir() / find_case("gemma3_bf16").at("dir").get<std::string>() /
                            "config.json"));
  Json j = base;
  j["model_type"] = "gemma3";
  EXPECT_NE(config_error(j).find("model_type 'gemma3' (Gemma3ForConditionalGeneration"),
            std::string::npos);
  j = base;
  j["hidden_activation"] = "relu";
  EXPECT_NE(config_error(j).find("hidden_activation 'relu' is not supported"), std::string::npos);
  j = base;
  j["rope_parameters"]["sliding_attention"]["rope_type"] = "linear";
  EXPECT_NE(config_error(j).find("rope_parameters['sliding_attention'] of type 'linear'"),
            std::string::npos);
  // Layer kinds off the five-to-one pattern are taken as written.
  j = base;
  j["layer_types"][0] = "full_attention";
  const ModelConfig c = read_hf_config(j.dump(), "config.json");
  EXPECT_EQ(c.layer_window(0), 0);
  EXPECT_EQ(c.layer_window(1), 6);
  EXPECT_EQ(c.layer_window(5), 0);
  // transformers 4's keys: rope_theta, rope_local_base_freq.
  j = base;
  j.erase("rope_parameters");
  j["rope_theta"] = 1e6;
  j["rope_local_base_freq"] = 5000.0;
  EXPECT_FLOAT_EQ(read_hf_config(j.dump(), "config.json").rope_theta_local, 5000.0f);
}

}  // namespace
}  // namespace sinkscope
