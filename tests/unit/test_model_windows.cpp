// SPDX-License-Identifier: Apache-2.0
// The model's own sliding window outside Gemma and gpt-oss, against HF transformers: a tiny
// MistralForCausalLM with sliding_window 6 on every layer (safetensors, and as GGUF: arch llama
// with llama.attention.sliding_window) and a Qwen2ForCausalLM with use_sliding_window whose
// layer_types make layer 0 full and layer 1 sliding (tests/data/hf, written by
// tests/oracle/make_hf_oracles.py). Tolerance: that of every oracle (oracle_support.h,
// kMaxLogitDiff = 1e-3 on logits of std ~3), the same argmax everywhere.
//
// Composition with SinkScope's cache window (architecture.md, "Windows of the model's own and
// SinkScope's"): a key is visible iff the cache keeps it in view (a kept sink or inside the
// cache window) and it lies inside the layer's own window. So a cache window at least as wide
// as the model's changes nothing on a layer whose every query is windowed, and its kept sinks
// stay invisible there.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/backend/backend.h"
#include "engine/format/hf_checkpoint.h"
#include "engine/util/json_io.h"
#include "tests/unit/oracle_support.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using oracle::kMaxLogitDiff;
using oracle::read_file;

fs::path hf_dir() { return fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / "hf"; }

const Json& find_case(const std::string& name) {
  static const Json m = Json::parse(read_file(hf_dir() / "manifest.json"));
  return oracle::find_case(m, name);
}

std::function<BackendOptions(size_t)> with(const CacheSettings& cache) {
  return [cache](size_t) {
    BackendOptions o;
    o.n_threads = 2;
    o.cache = cache;
    return o;
  };
}

CacheSettings sink_window(int64_t window, int64_t sinks) {
  CacheSettings s;
  s.strategy = CacheStrategy::kSlidingWindow;
  s.window_size = window;
  s.sink_keep_count = sinks;
  return s;
}

TEST(ModelWindows, MistralCheckpointWindowsEveryLayer) {
  const Json& c = find_case("mistral_f16_window");
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>());
  const ModelConfig& cfg = model->config();
  EXPECT_EQ(cfg.architecture, "llama");
  EXPECT_EQ(cfg.sliding_window, 6);
  for (int l = 0; l < cfg.n_layer; ++l) EXPECT_EQ(cfg.layer_window(l), 6) << "layer " << l;
  oracle::expect_agreement(oracle::check_case(model, c, hf_dir(), with({})), "mistral_f16_window");
}

// The same weights as GGUF, as llama.cpp's converter writes Mistral (arch llama, Q/K rows
// permuted for adjacent-pair RoPE) plus llama.attention.sliding_window: transformers' logits.
TEST(ModelWindows, MistralGgufWithAWindowKeyMatchesTransformers) {
  const Json& c = find_case("mistral_f16_window");
  auto model = Model::load(hf_dir() / c.at("gguf").get<std::string>());
  const ModelConfig& cfg = model->config();
  EXPECT_EQ(model->format(), ModelFormat::kGguf);
  EXPECT_FALSE(cfg.rope_neox);
  for (int l = 0; l < cfg.n_layer; ++l) EXPECT_EQ(cfg.layer_window(l), 6) << "layer " << l;
  oracle::expect_agreement(oracle::check_case(model, c, hf_dir(), with({})),
                           "mistral_f16_window.gguf");
}

TEST(ModelWindows, Qwen2LayerTypesPickTheSlidingLayers) {
  const Json& c = find_case("qwen2_window_f32");
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>());
  const ModelConfig& cfg = model->config();
  EXPECT_EQ(cfg.sliding_window, 6);
  EXPECT_EQ(cfg.layer_window(0), 0);
  EXPECT_EQ(cfg.layer_window(1), 6);
  oracle::expect_agreement(oracle::check_case(model, c, hf_dir(), with({})), "qwen2_window_f32");
}

// Without max_window_layers' layer_types (transformers 4 configs), layers from
// max_window_layers on are sliding.
TEST(ModelWindows, Qwen2MaxWindowLayersWithoutLayerTypes) {
  const Json& c = find_case("qwen2_window_f32");
  Json j = Json::parse(read_file(hf_dir() / c.at("dir").get<std::string>() / "config.json"));
  j.erase("layer_types");
  ModelConfig cfg = read_hf_config(j.dump(), "config.json");
  EXPECT_EQ(cfg.layer_window(0), 0);
  EXPECT_EQ(cfg.layer_window(1), 6);
  j["max_window_layers"] = 0;
  cfg = read_hf_config(j.dump(), "config.json");
  EXPECT_TRUE(cfg.local_layers.empty());  // every layer: the plain rule
  EXPECT_EQ(cfg.layer_window(0), 6);
  j["max_window_layers"] = 2;
  EXPECT_EQ(read_hf_config(j.dump(), "config.json").sliding_window, 0);  // no sliding layer
  j["use_sliding_window"] = false;
  j["max_window_layers"] = 0;
  EXPECT_EQ(read_hf_config(j.dump(), "config.json").sliding_window, 0);
}

// SinkScope's cache window composes with the model's: as wide as the model's window or wider,
// with kept sinks, it leaves a fully windowed model exactly as transformers runs it (the sinks
// are outside every query's own window by then); narrower, it cuts into the model's window.
TEST(ModelWindows, CacheWindowComposesWithTheModelWindow) {
  const Json& c = find_case("mistral_f16_window");
  auto model = Model::load(hf_dir() / c.at("dir").get<std::string>());
  const auto same = oracle::check_case(model, c, hf_dir(), with(sink_window(8, 4)));
  EXPECT_LE(same.prefill, kMaxLogitDiff);
  EXPECT_LE(same.decode, kMaxLogitDiff);
  const auto narrow = oracle::check_case(model, c, hf_dir(), with(sink_window(3, 1)));
  EXPECT_GT(narrow.decode, 50 * kMaxLogitDiff) << "a cache window of 3 did not act";
  // On the Qwen2 model the full layer 0 sees the cache's window, not the whole prompt.
  const Json& q = find_case("qwen2_window_f32");
  auto qwen = Model::load(hf_dir() / q.at("dir").get<std::string>());
  const auto cut = oracle::check_case(qwen, q, hf_dir(), with(sink_window(8, 4)));
  EXPECT_GT(cut.decode, 50 * kMaxLogitDiff) << "the full layer ignored the cache window";
}

// Without its window the model is another function: transformers' logits are far away.
TEST(ModelWindows, DroppingTheWindowChangesTheLogits) {
  const Json& c = find_case("mistral_f16_window");
  const fs::path src = hf_dir() / c.at("dir").get<std::string>();
  const fs::path dst = fs::temp_directory_path() / "sinkscope_model_windows_nowin";
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  Json j = Json::parse(read_file(dst / "config.json"));
  j["sliding_window"] = nullptr;
  std::ofstream(dst / "config.json", std::ios::trunc) << j.dump();
  auto model = Model::load(dst);
  EXPECT_EQ(model->config().sliding_window, 0);
  const auto g = oracle::check_case(model, c, hf_dir(), with({}));
  EXPECT_GT(g.prefill, 50 * kMaxLogitDiff);
  fs::remove_all(dst);
}

}  // namespace
}  // namespace sinkscope
