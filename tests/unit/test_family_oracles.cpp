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

#include "engine/backend/backend.h"
#include "engine/format/gguf_writer.h"
#include "engine/util/json_io.h"
#include "tests/unit/gguf_edit_support.h"
#include "tests/unit/oracle_support.h"
#include "engine/model/sampler.h"
#include "engine/util/sha256.h"
#include "engine/eval/sinks.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using gguf_edit::load_error;
using oracle::ids_of;
using oracle::kMaxLogitDiff;
using oracle::max_diff;
using oracle::read_file;

const char* const kCases[] = {"qwen3_tied_f32", "qwen3_untied_q8_0", "gemma2_tied_f32",
                              "gemma3_tied_q8_0"};

fs::path oracle_dir() { return fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / "oracles"; }

const Json& manifest() {
  static const Json m = Json::parse(read_file(oracle_dir() / "manifest.json"));
  return m;
}

const Json& find_case(const std::string& name) { return oracle::find_case(manifest(), name); }


// A copy of an oracle GGUF with tensors / metadata keys dropped or edited (gguf_edit_support.h).
fs::path copy_gguf(const fs::path& src, const std::string& tag, const std::set<std::string>& drop,
                   const std::function<void(GgufWriter&)>& edit = {},
                   const std::set<std::string>& drop_keys = {}) {
  return gguf_edit::copy_gguf(src, "sinkscope_family_oracles", tag, drop, edit, drop_keys);
}

TEST(FamilyOracles, ManifestListsTheCasesAndFilesAreIntact) {
  std::set<std::string> want(std::begin(kCases), std::end(kCases)), got;
  want.insert("gpt_oss_mxfp4");       // tested by test_gpt_oss.cpp (its own config and probes)
  want.insert("phi3_longrope_q8_0");  // tested by test_phi3.cpp (LongRoPE's two factor sets)
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(oracle_dir())) total += e.file_size();
  EXPECT_LT(total, 1500u * 1000) << "tests/data/oracles should stay under 1.5 MB";
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
  const std::string fam = c.at("family").get<std::string>();
  const bool gemma = fam == "gemma2" || fam == "gemma3";
  EXPECT_EQ(cfg.architecture, c.at("architecture").get<std::string>());
  EXPECT_EQ(architecture_family(cfg.architecture),
            fam == "qwen3" ? "Qwen3" : fam == "gemma2" ? "Gemma 2" : "Gemma 3");
  EXPECT_EQ(cfg.n_layer, p.at("n_layer").get<int64_t>());
  EXPECT_EQ(cfg.n_embd, p.at("d").get<int64_t>());
  EXPECT_EQ(cfg.n_head, p.at("n_head").get<int64_t>());
  EXPECT_EQ(cfg.n_head_kv, p.at("n_head_kv").get<int64_t>());
  EXPECT_EQ(cfg.n_ff, p.at("n_ff").get<int64_t>());
  EXPECT_EQ(cfg.n_vocab, c.at("n_vocab").get<int64_t>());
  EXPECT_EQ(cfg.n_ctx_train, p.at("n_ctx").get<int64_t>());
  // The head width is its own key, not n_embd / n_head: 32 against 64 / 4 = 16 (qwen3), 16
  // against 32 / 4 = 8 (gemma).
  EXPECT_EQ(cfg.head_dim, p.at("head_dim").get<int64_t>());
  EXPECT_NE(cfg.head_dim, cfg.n_embd / cfg.n_head);
  EXPECT_EQ(cfg.q_dim(), cfg.n_head * cfg.head_dim);
  EXPECT_EQ(cfg.kv_dim(), cfg.n_head_kv * cfg.head_dim);
  EXPECT_EQ(cfg.rope_dim, cfg.head_dim);
  EXPECT_TRUE(cfg.rope_neox);
  EXPECT_EQ(cfg.qk_norm, fam != "gemma2");
  EXPECT_FALSE(cfg.qkv_bias);
  EXPECT_EQ(cfg.tied_embeddings, p.at("tied").get<bool>());
  EXPECT_FLOAT_EQ(cfg.rope_theta, float(p.at("theta").get<double>()));
  EXPECT_FLOAT_EQ(cfg.rms_eps, float(p.at("eps").get<double>()));
  EXPECT_EQ(cfg.gemma, gemma);
  // llama.cpp's query scale for every size but 27B: 1/sqrt(head_dim).
  EXPECT_FLOAT_EQ(cfg.attention_scale(), 1.0f / std::sqrt(float(cfg.head_dim)));
  if (gemma) {
    EXPECT_EQ(cfg.sliding_window, p.at("window").get<int64_t>());
    for (int l = 0; l < cfg.n_layer; ++l) {
      // gemma2 alternates local/global starting local; gemma3 has five local to one global.
      const bool local = fam == "gemma2" ? l % 2 == 0 : l % 6 != 5;
      EXPECT_EQ(cfg.layer_window(l), local ? cfg.sliding_window : 0) << "layer " << l;
      EXPECT_EQ(model->weights().layers[size_t(l)].attn_post_norm.size(), size_t(cfg.n_embd));
      EXPECT_EQ(model->weights().layers[size_t(l)].ffn_post_norm.size(), size_t(cfg.n_embd));
    }
  } else {
    EXPECT_EQ(cfg.sliding_window, 0);
  }
  if (fam == "gemma2") {
    EXPECT_FLOAT_EQ(cfg.attn_softcap, float(p.at("attn_cap").get<double>()));
    EXPECT_FLOAT_EQ(cfg.final_softcap, float(p.at("final_cap").get<double>()));
    EXPECT_EQ(cfg.rope_theta_local, 0.0f);
    EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kNone);
  } else if (fam == "gemma3") {
    EXPECT_EQ(cfg.attn_softcap, 0.0f);
    EXPECT_EQ(cfg.final_softcap, 0.0f);
    EXPECT_FLOAT_EQ(cfg.rope_theta_local, 10000.0f);
    EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kLinear);
    EXPECT_FLOAT_EQ(cfg.rope_scale_factor, float(p.at("rope_linear").get<double>()));
  } else {
    EXPECT_EQ(cfg.rope_scaling, RopeScalingType::kNone);
  }
  // The oracle's minimal byte-level vocabulary loads, and its learnt merges apply.
  EXPECT_EQ(model->tokenizer().vocab_size(), cfg.n_vocab);
  const auto toks = model->tokenizer().encode("the quick fox");
  EXPECT_LT(toks.size(), std::string("the quick fox").size());
  std::string back;
  for (TokenId t : toks) back += model->tokenizer().token_to_piece(t);
  EXPECT_EQ(back, "the quick fox");
  for (const LayerWeights& L : model->weights().layers) {
    EXPECT_EQ(L.q_norm.size(), cfg.qk_norm ? size_t(cfg.head_dim) : 0u);
    EXPECT_EQ(L.k_norm.size(), cfg.qk_norm ? size_t(cfg.head_dim) : 0u);
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
  oracle::PromptAgreement g;
  size_t row0 = 0;
  for (size_t pi = 0; pi < c.at("prompts").size(); ++pi) {
    const auto ids = ids_of(c.at("prompts")[pi]);
    oracle::check_prompt(*be, ids, ids_of(c.at("argmax")[pi]), ref + row0 * V, V, name, g);
    if (::testing::Test::HasFatalFailure()) return;
    row0 += ids.size();
  }
  EXPECT_LE(g.prefill, kMaxLogitDiff) << name << ": prefill";
  EXPECT_LE(g.decode, kMaxLogitDiff) << name << ": prefill + decode";
  EXPECT_EQ(g.agree, g.total) << name << ": argmax agreement (prefill)";
  EXPECT_EQ(g.agree_dec, g.total) << name << ": argmax agreement (prefill + decode)";
  std::printf("[family-oracle] %-20s max |dlogit| prefill %.2e, prefill+decode %.2e, argmax %d/%d\n",
              name.c_str(), g.prefill, g.decode, g.agree, g.total);
}

// The Q/K capture holds the normalised heads: at position 0 RoPE is the identity, so each
// captured head divided by its gain has mean square 1 (the RMSNorm's output, eps aside).
TEST_P(FamilyOracle, QkCaptureSeesTheNormalisedHeads) {
  const Json& c = find_case(GetParam());
  auto model = Model::load(oracle_dir() / c.at("gguf").get<std::string>());
  const ModelConfig& cfg = model->config();
  if (!cfg.qk_norm) GTEST_SKIP() << "no Q/K norm in " << cfg.architecture;
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

ModelConfig config_of(const fs::path& p) { return read_model_config(*GgufFile::open(p)); }

// What llama.cpp derives where the file says nothing: Gemma 2's window 4096 and caps 50 / 30;
// Gemma 3 without a window has no local layers (and one RoPE); the 27B sizes (46 / 62 layers)
// scale queries by 1/sqrt(n_embd / n_head) instead of 1/sqrt(head_dim).
TEST(FamilyOracles, GemmaDefaultsAndQueryScaleAreLlamaCpps) {
  const fs::path g2 = oracle_dir() / "gemma2_tied_f32.gguf";
  const fs::path g3 = oracle_dir() / "gemma3_tied_q8_0.gguf";
  ModelConfig c = config_of(copy_gguf(g2, "gemma2_bare", {}, {},
                                      {"gemma2.attention.sliding_window",
                                       "gemma2.attn_logit_softcapping",
                                       "gemma2.final_logit_softcapping"}));
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.layer_window(0), 4096);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_FLOAT_EQ(c.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.0f);
  c = config_of(copy_gguf(g3, "gemma3_no_window", {}, {}, {"gemma3.attention.sliding_window"}));
  EXPECT_EQ(c.sliding_window, 0);
  for (int l = 0; l < c.n_layer; ++l) EXPECT_EQ(c.layer_window(l), 0) << "layer " << l;
  EXPECT_EQ(c.rope_theta_local, 0.0f);
  // 32 wide, 4 heads: 1/sqrt(8) at 27B sizes, 1/sqrt(head_dim = 16) otherwise.
  c = config_of(copy_gguf(g2, "gemma2_46", {}, [](GgufWriter& w) {
    w.set_u32("gemma2.block_count", 46);
  }));
  EXPECT_FLOAT_EQ(c.attention_scale(), 1.0f / std::sqrt(8.0f));
  c = config_of(copy_gguf(g3, "gemma3_62", {}, [](GgufWriter& w) {
    w.set_u32("gemma3.block_count", 62);
  }));
  EXPECT_FLOAT_EQ(c.attention_scale(), 1.0f / std::sqrt(8.0f));
  // Five local to one global: layer 59 (59 % 6 == 5) is global, 60 and 61 are local.
  EXPECT_FALSE(c.layer_local(59));
  EXPECT_TRUE(c.layer_local(60) && c.layer_local(61));
  c = config_of(copy_gguf(g3, "gemma3_26", {}, [](GgufWriter& w) {
    w.set_u32("gemma3.block_count", 26);
  }));
  EXPECT_FLOAT_EQ(c.attention_scale(), 0.25f);
  // A negative cap is named.
  std::string err;
  try {
    config_of(copy_gguf(g2, "gemma2_bad_cap", {}, [](GgufWriter& w) {
      w.set_f32("gemma2.attn_logit_softcapping", -1.0f);
    }));
  } catch (const ModelError& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("'gemma2.attn_logit_softcapping' = -1"), std::string::npos) << err;
}

// Max |dlogit| of a (possibly edited) oracle model's prefill against the oracle's logits.
double prefill_diff(const fs::path& gguf, const Json& c) {
  auto model = Model::load(gguf);
  const int V = model->config().n_vocab;
  const std::string bin = read_file(oracle_dir() / c.at("logits_file").get<std::string>());
  const float* ref = reinterpret_cast<const float*>(bin.data());
  auto be = make_cpu_backend(model, {});
  double worst = 0;
  size_t row0 = 0;
  for (const auto& pr : c.at("prompts")) {
    const auto ids = ids_of(pr);
    std::vector<float> logits;
    be->reset();
    be->forward(ids, LogitsMode::kAll, logits);
    worst = std::max(worst, max_diff(logits.data(), ref + row0 * V, ids.size() * V, "edited"));
    row0 += ids.size();
  }
  return worst;
}

// The local layers' own window is applied: the same weights with a window wider than the prompt
// give logits far from transformers' (the oracle prompts are longer than the window).
TEST(FamilyOracles, GemmaLocalWindowChangesTheLogits) {
  for (const char* name : {"gemma2_tied_f32", "gemma3_tied_q8_0"}) {
    const Json& c = find_case(name);
    const fs::path src = oracle_dir() / c.at("gguf").get<std::string>();
    const std::string arch = c.at("architecture").get<std::string>();
    EXPECT_LE(prefill_diff(src, c), kMaxLogitDiff) << name;
    const fs::path wide = copy_gguf(src, std::string(name) + "_wide", {}, [&](GgufWriter& w) {
      w.set_u32(arch + ".attention.sliding_window", 1024);
    });
    ASSERT_EQ(Model::load(wide)->config().sliding_window, 1024);
    EXPECT_GT(prefill_diff(wide, c), 50 * kMaxLogitDiff) << name << ": the window is ignored";
  }
}

// Gemma 2's soft-caps are applied: a cap too large to bite moves the logits away.
TEST(FamilyOracles, Gemma2SoftCapsChangeTheLogits) {
  const Json& c = find_case("gemma2_tied_f32");
  const fs::path src = oracle_dir() / c.at("gguf").get<std::string>();
  for (const char* key : {"gemma2.attn_logit_softcapping", "gemma2.final_logit_softcapping"}) {
    const fs::path loose = copy_gguf(src, std::string("gemma2_cap_") + key, {},
                                     [&](GgufWriter& w) { w.set_f32(key, 1e6f); });
    EXPECT_GT(prefill_diff(loose, c), 50 * kMaxLogitDiff) << key << " is ignored";
  }
}

// Keys outside a local layer's own window are invisible, not skipped: with a threshold that
// skips every tile it may, a local layer (window 8 < the 64-key tiles) visits only the tiles
// its rows' windows reach and skips none of them (each query tile's first visited tile is the
// one its first rows' windows start in, and its other rows have no running max there yet),
// while a global layer visits the whole causal triangle and skips all but the first tile.
TEST(FamilyOracles, GemmaKeysOutsideTheLayerWindowAreNotSkippedTiles) {
  const Json& c = find_case("gemma2_tied_f32");
  auto model = Model::load(oracle_dir() / c.at("gguf").get<std::string>());
  const ModelConfig& cfg = model->config();
  ASSERT_EQ(cfg.layer_window(0), 8);
  ASSERT_EQ(cfg.layer_window(1), 0);
  BackendOptions opt;
  opt.n_threads = 2;
  opt.attention.type = AttentionType::kDynamicSparse;
  opt.attention.threshold_prefill = 1e30;  // skip whatever the rule allows
  auto be = make_cpu_backend(model, opt);
  const int n = 256, tiles = n / 64;
  std::vector<TokenId> ids;
  for (int i = 0; i < n; ++i) ids.push_back(TokenId((i * 37 + 11) % 300));
  be->request_skip_mask(0, 1);
  std::vector<float> logits;
  be->forward(ids, LogitsMode::kLast, logits);
  const AttentionProbes& pr = be->probes();
  const int causal = tiles * (tiles + 1) / 2;  // 10
  const int windowed = tiles + (tiles - 1);     // the diagonal and the tile before it: 7
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head; ++h) {
      const TileCounts& t = pr.prefill[size_t(l) * cfg.n_head + h];
      if (cfg.layer_window(l) > 0) {
        EXPECT_EQ(t.visited, windowed) << "layer " << l << " head " << h;
        EXPECT_EQ(t.skipped, 0) << "layer " << l << " head " << h;
      } else {
        EXPECT_EQ(t.visited, causal) << "layer " << l << " head " << h;
        EXPECT_EQ(t.skipped, causal - tiles) << "layer " << l << " head " << h;
      }
    }
  // The local layer's mask: cells outside the window are 0 (not visible), never 2 (skipped).
  const SkipMask& m = pr.mask;
  ASSERT_EQ(m.rows, tiles);
  ASSERT_EQ(m.cols, tiles);
  for (int r = 0; r < tiles; ++r)
    for (int t = 0; t < tiles; ++t)
      EXPECT_EQ(int(m.cells[size_t(r) * tiles + t]), (t == r || t == r - 1) ? 1 : 0)
          << "cell (" << r << ", " << t << ")";
}

// The model's window keeps no sinks, whatever the cache keeps: with SinkScope's sink-retaining
// window (S = 4, W = 16) over a 30-token prompt, a local layer (window 8) puts exactly the mass
// the full cache gives on keys 0..7 (only queries 0..7 see them, and those see the same keys in
// both), while the global layer, which loses keys to the cache window, does not.
TEST(FamilyOracles, GemmaLayerWindowComposesWithTheCacheWindow) {
  const Json& c = find_case("gemma2_tied_f32");
  auto model = Model::load(oracle_dir() / c.at("gguf").get<std::string>());
  const ModelConfig& cfg = model->config();
  const auto ids = ids_of(c.at("prompts")[0]);
  ASSERT_EQ(ids.size(), 30u);
  const int cols = 8;
  auto column_mass = [&](const BackendOptions& o) {
    auto be = make_cpu_backend(model, o);
    be->request_column_mass(cols);
    std::vector<float> logits;
    be->forward(ids, LogitsMode::kLast, logits);
    return be->probes().col_mass;
  };
  const std::vector<double> full = column_mass({});
  BackendOptions o;
  o.cache.strategy = CacheStrategy::kSlidingWindow;
  o.cache.window_size = 16;
  o.cache.sink_keep_count = 4;
  const std::vector<double> win = column_mass(o);
  ASSERT_EQ(full.size(), size_t(cfg.n_layer) * cfg.n_head * cols);
  ASSERT_EQ(win.size(), full.size());
  auto layer_diff = [&](int l) {
    double d = 0;
    for (size_t i = size_t(l) * cfg.n_head * cols; i < size_t(l + 1) * cfg.n_head * cols; ++i)
      d = std::max(d, std::abs(full[i] - win[i]));
    return d;
  };
  ASSERT_EQ(cfg.layer_window(0), 8);
  EXPECT_LE(layer_diff(0), 1e-6) << "the local layer saw kept sinks past its own window";
  EXPECT_GT(layer_diff(1), 1e-3) << "the cache window did not act on the global layer";
}

// The sink statistic alpha_k divides a key's column mass by the queries that could see it: on a
// local layer only the window's queries (8 of 30 for key 0), on a global one all of them.
TEST(FamilyOracles, GemmaColumnQueriesCountTheLayerWindow) {
  const Json& c = find_case("gemma2_tied_f32");
  auto model = Model::load(oracle_dir() / c.at("gguf").get<std::string>());
  const ModelConfig& cfg = model->config();
  const auto ids = ids_of(c.at("prompts")[0]);
  const int cols = 4, n = int(ids.size());
  auto be = make_cpu_backend(model, {});
  be->request_column_mass(cols);
  std::vector<float> logits;
  be->forward(ids, LogitsMode::kLast, logits);
  const AttentionProbes& p = be->probes();
  ASSERT_EQ(p.col_queries_layer.size(), size_t(cfg.n_layer) * cols);
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int k = 0; k < cols; ++k) {
      const int want = cfg.layer_window(l) > 0 ? std::min(n - k, cfg.layer_window(l)) : n - k;
      EXPECT_EQ(p.col_queries_layer[size_t(l) * cols + k], want) << "layer " << l << " key " << k;
      EXPECT_EQ(p.col_queries[size_t(k)], n - k);
    }
  // Every local head's probabilities over the window's queries: alpha is a mean, so <= 1, and
  // the mass of key 0 summed over the local layer's heads is 8 queries' worth at most.
  const SinkReport r = analyze_sinks(p.n_layer, p.n_head, cols, p.col_mass, p.alpha_queries());
  EXPECT_EQ(r.n_queries, n);
  for (int h = 0; h < cfg.n_head; ++h) {
    const double mass = p.col_mass[size_t(h) * cols];
    EXPECT_NEAR(r.alpha_at(0, h, 0), mass / 8.0, 1e-12);
    EXPECT_LE(r.alpha_at(0, h, 0), 1.0);
  }
}

}  // namespace
}  // namespace sinkscope
