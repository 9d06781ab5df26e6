// SPDX-License-Identifier: Apache-2.0
// The CPU forward on random-weight models of several Llama shapes, against a float64 reference
// written from the architecture definitions, plus the backend's state rules (incremental decode,
// chunked prefill, overflow, cancel, threads).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <random>

#include "engine/backend/attention.h"
#include "engine/backend/backend.h"
#include "engine/backend/qgemv.h"
#include "engine/format/gguf_writer.h"
#include "engine/model/sampler.h"
#include "engine/model/session.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const Model> write_and_load(const TestModelShape& shape, uint64_t seed,
                                            const std::string& tag) {
  fs::path dir = fs::temp_directory_path() / "sinkscope_test_models";
  fs::create_directories(dir);
  fs::path p = dir / (tag + ".gguf");
  make_random_llama(shape, seed).write(p);
  return Model::load(p);
}

// Post-RoPE q (T, Q) and k (T, KV) of one layer of the reference forward.
struct RefQK {
  int layer = -1;
  std::vector<std::vector<double>> q, k;
};

// Straight from the definitions, in double: no tiles, no caches, no shared code with the engine
// beyond the dequantized weights. With window > 0, key j is visible to query t iff j <= t and
// (j < sinks or j > t - window) (the sink-retaining window's rule over a full cache); *qk gets
// the post-RoPE q/k of qk->layer.
std::vector<double> reference_logits(const Model& m, const std::vector<TokenId>& ids,
                                     int sinks = 0, int window = 0, RefQK* qk = nullptr) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  // The weights as float32 (the model keeps them in their GGUF encoding).
  const std::vector<float> embd = dequantize(w.tok_embd), head_w = dequantize(w.lm_head());
  const int T = int(ids.size()), D = c.n_embd, H = c.n_head, HK = c.n_head_kv, hd = c.head_dim;
  const int Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  auto matvec = [](const std::vector<float>& W, const std::vector<double>& x, int out, int in) {
    std::vector<double> y(static_cast<size_t>(out), 0.0);
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i) y[size_t(o)] += double(W[size_t(o) * in + i]) * x[size_t(i)];
    return y;
  };
  auto norm = [&](const std::vector<double>& x, const std::vector<float>& g) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / double(x.size()) + double(c.rms_eps));
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * g[i];
    return y;
  };
  auto rope = [&](std::vector<double>& v, int off, int pos) {
    const int half = hd / 2;
    for (int i = 0; i < half; ++i) {
      double theta = double(pos) * std::pow(double(c.rope_theta), -2.0 * i / double(hd));
      int a = c.rope_neox ? i : 2 * i, b = c.rope_neox ? i + half : 2 * i + 1;
      double x0 = v[size_t(off + a)], x1 = v[size_t(off + b)];
      v[size_t(off + a)] = x0 * std::cos(theta) - x1 * std::sin(theta);
      v[size_t(off + b)] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  };
  std::vector<std::vector<double>> x(static_cast<size_t>(T), std::vector<double>(static_cast<size_t>(D)));
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < D; ++i) x[size_t(t)][size_t(i)] = embd[size_t(ids[size_t(t)]) * D + i];
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    const std::vector<float> wq = dequantize(L.wq), wk = dequantize(L.wk), wv = dequantize(L.wv),
                             wo = dequantize(L.wo), w_gate = dequantize(L.w_gate),
                             w_up = dequantize(L.w_up), w_down = dequantize(L.w_down);
    std::vector<std::vector<double>> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) {
      auto xn = norm(x[size_t(t)], L.attn_norm);
      q[size_t(t)] = matvec(wq, xn, Q, D);
      k[size_t(t)] = matvec(wk, xn, KV, D);
      v[size_t(t)] = matvec(wv, xn, KV, D);
      if (c.qkv_bias) {
        for (int i = 0; i < Q; ++i) q[size_t(t)][size_t(i)] += L.bq[size_t(i)];
        for (int i = 0; i < KV; ++i) {
          k[size_t(t)][size_t(i)] += L.bk[size_t(i)];
          v[size_t(t)][size_t(i)] += L.bv[size_t(i)];
        }
      }
      if (c.qk_norm) {  // each head RMS-normalised over its own width, before RoPE
        auto head_norm = [&](std::vector<double>& v, int off, const std::vector<float>& g) {
          const std::vector<double> y = norm({v.begin() + off, v.begin() + off + hd}, g);
          std::copy(y.begin(), y.end(), v.begin() + off);
        };
        for (int h = 0; h < H; ++h) head_norm(q[size_t(t)], h * hd, L.q_norm);
        for (int h = 0; h < HK; ++h) head_norm(k[size_t(t)], h * hd, L.k_norm);
      }
      for (int h = 0; h < H; ++h) rope(q[size_t(t)], h * hd, t);
      for (int h = 0; h < HK; ++h) rope(k[size_t(t)], h * hd, t);
    }
    if (qk && qk->layer == l) {
      qk->q = q;
      qk->k = k;
    }
    for (int t = 0; t < T; ++t) {
      std::vector<double> att(size_t(Q), 0.0);
      for (int h = 0; h < H; ++h) {
        const int g = h / (H / HK);
        std::vector<double> s(size_t(t + 1));
        double mx = -INFINITY;
        for (int j = 0; j <= t; ++j) {
          if (window > 0 && j >= sinks && j <= t - window) {
            s[size_t(j)] = -INFINITY;
            continue;
          }
          double acc = 0;
          for (int i = 0; i < hd; ++i) acc += q[size_t(t)][size_t(h * hd + i)] * k[size_t(j)][size_t(g * hd + i)];
          s[size_t(j)] = acc / std::sqrt(double(hd));
          mx = std::max(mx, s[size_t(j)]);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::exp(e - mx));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < hd; ++i)
            att[size_t(h * hd + i)] += s[size_t(j)] / sum * v[size_t(j)][size_t(g * hd + i)];
      }
      auto o = matvec(wo, att, D, Q);
      for (int i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
      auto xn = norm(x[size_t(t)], L.ffn_norm);
      auto gate = matvec(w_gate, xn, F, D);
      auto up = matvec(w_up, xn, F, D);
      for (int i = 0; i < F; ++i) gate[size_t(i)] = gate[size_t(i)] / (1 + std::exp(-gate[size_t(i)])) * up[size_t(i)];
      auto down = matvec(w_down, gate, D, F);
      for (int i = 0; i < D; ++i) x[size_t(t)][size_t(i)] += down[size_t(i)];
    }
  }
  std::vector<double> out;
  const std::vector<float>& head = head_w;
  for (int t = 0; t < T; ++t) {
    auto y = matvec(head, norm(x[size_t(t)], w.output_norm), V, D);
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    m = std::max(m, std::abs(double(a[i]) - b[i]));
  }
  return m;
}

std::vector<TokenId> random_ids(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<TokenId> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = TokenId(rng() % uint32_t(vocab));
  return ids;
}

struct ShapeCase {
  const char* tag;
  TestModelShape shape;
};

std::vector<ShapeCase> shape_cases() {
  std::vector<ShapeCase> v;
  TestModelShape llama;  // GQA 2:1, tied
  v.push_back({"llama_tied", llama});
  TestModelShape untied = llama;
  untied.tied_embeddings = false;
  untied.n_head = 4;
  untied.n_head_kv = 4;  // plain multi-head
  v.push_back({"llama_untied_mha", untied});
  TestModelShape qwen = llama;
  qwen.architecture = "qwen2";
  qwen.n_head = 6;
  qwen.n_head_kv = 2;
  qwen.n_embd = 96;
  v.push_back({"qwen2_bias", qwen});
  TestModelShape q4 = llama;
  q4.weight_type = GgmlType::kQ4_1;
  v.push_back({"llama_q4_1", q4});
  TestModelShape q8 = llama;
  q8.weight_type = GgmlType::kQ8_0;
  q8.tied_embeddings = false;
  v.push_back({"llama_q8_0", q8});
  TestModelShape qwen3 = llama;  // per-head Q/K norms; head_dim 32 != 64 / 4, so Q is 128 wide
  qwen3.architecture = "qwen3";
  qwen3.head_dim = 32;
  qwen3.tied_embeddings = false;
  v.push_back({"qwen3_qk_norm", qwen3});
  return v;
}

// float32 forward vs float64 reference over ~100 positions of a 2-layer model: logits are O(1);
// 2e-4 absolute leaves a wide margin over the ~1e-5 seen, while any indexing or RoPE mistake
// gives errors of order 1.
constexpr double kLogitTol = 2e-4;

TEST(CpuBackend, MatchesFloat64ReferenceOnRandomModels) {
  for (const auto& sc : shape_cases()) {
    auto model = write_and_load(sc.shape, 11, sc.tag);
    BackendOptions opt;
    opt.n_threads = 2;
    auto be = make_cpu_backend(model, opt);
    auto ids = random_ids(100, model->config().n_vocab, 3);
    std::vector<float> logits;
    be->forward(ids, LogitsMode::kAll, logits);
    EXPECT_LT(max_abs_diff(logits, reference_logits(*model, ids)), kLogitTol) << sc.tag;
  }
}

TEST(CpuBackend, IncrementalDecodeAndChunkedPrefillEqualOneShot) {
  for (const auto& sc : shape_cases()) {
    auto model = write_and_load(sc.shape, 12, sc.tag);
    auto be = make_cpu_backend(model, {});
    const int V = model->config().n_vocab;
    auto ids = random_ids(90, V, 4);
    std::vector<float> all, part;
    be->forward(ids, LogitsMode::kAll, all);
    be->reset();
    std::vector<TokenId> a(ids.begin(), ids.begin() + 37), b(ids.begin() + 37, ids.begin() + 80);
    be->forward(a, LogitsMode::kAll, part);
    be->forward(b, LogitsMode::kLast, part);
    for (int i = 0; i < V; ++i) EXPECT_NEAR(part[size_t(i)], all[size_t(79) * V + i], 1e-4) << sc.tag;
    for (int t = 80; t < 90; ++t) {  // single-token steps take the quantized gemv path
      const TokenId one[1] = {ids[size_t(t)]};
      be->forward(one, LogitsMode::kLast, part);
      double m = 0;
      for (int i = 0; i < V; ++i) m = std::max(m, double(std::abs(part[size_t(i)] - all[size_t(t) * V + i])));
      EXPECT_LT(m, 1e-4) << sc.tag << " position " << t;
    }
    EXPECT_EQ(be->n_past(), 90);
  }
}

TEST(CpuBackend, OverflowIsAnErrorAndLeavesStateIntact) {
  auto model = write_and_load(shape_cases()[0].shape, 13, "overflow");
  BackendOptions opt;
  opt.max_context = 64;
  auto be = make_cpu_backend(model, opt);
  std::vector<float> logits;
  be->forward(random_ids(60, model->config().n_vocab, 1), LogitsMode::kLast, logits);
  try {
    be->forward(random_ids(5, model->config().n_vocab, 2), LogitsMode::kLast, logits);
    FAIL() << "expected a context-full error";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("capacity of 64"), std::string::npos) << e.what();
  }
  EXPECT_EQ(be->n_past(), 60);
  const TokenId bad[1] = {model->config().n_vocab};
  EXPECT_THROW(be->forward(bad, LogitsMode::kLast, logits), BackendError);
  EXPECT_EQ(be->n_past(), 60);
}

TEST(CpuBackend, CancelThrowsAndTheBackendStaysUsable) {
  auto model = write_and_load(shape_cases()[0].shape, 14, "cancel");
  auto be = make_cpu_backend(model, {});
  auto ids = random_ids(40, model->config().n_vocab, 5);
  std::vector<float> before, after;
  be->forward(ids, LogitsMode::kLast, before);
  const int past = be->n_past();
  std::atomic<bool> cancel{true};
  be->set_cancel_flag(&cancel);
  const TokenId one[1] = {7};
  EXPECT_THROW(be->forward(one, LogitsMode::kLast, after), Cancelled);
  EXPECT_EQ(be->n_past(), past);
  cancel = false;
  be->reset();
  be->forward(ids, LogitsMode::kLast, after);
  EXPECT_EQ(before, after);
}

TEST(CpuBackend, ThreadCountDoesNotChangeResults) {
  auto model = write_and_load(shape_cases()[2].shape, 15, "threads");
  auto ids = random_ids(130, model->config().n_vocab, 6);
  std::vector<float> l1, l2;
  BackendOptions one;
  one.n_threads = 1;
  BackendOptions two;
  two.n_threads = 2;
  make_cpu_backend(model, one)->forward(ids, LogitsMode::kAll, l1);
  make_cpu_backend(model, two)->forward(ids, LogitsMode::kAll, l2);
  ASSERT_EQ(l1.size(), l2.size());
  for (size_t i = 0; i < l1.size(); ++i) ASSERT_NEAR(l1[i], l2[i], 1e-5);
}

TEST(CpuBackend, SparseSettingsReachTheAttentionAndCountTiles) {
  auto model = write_and_load(shape_cases()[0].shape, 16, "sparse");
  auto ids = random_ids(200, model->config().n_vocab, 7);
  auto be = make_cpu_backend(model, {});
  std::vector<float> dense, zero, sparse;
  be->forward(ids, LogitsMode::kAll, dense);
  EXPECT_GT(be->probes().total(false).visited, 0);
  EXPECT_EQ(be->probes().total(false).skipped, 0);
  AttentionSettings s;
  s.type = AttentionType::kDynamicSparse;  // lambda 0: exactly dense
  s.threshold_prefill = s.threshold_decode = 0.0;
  be->set_attention(s);
  be->reset();
  be->forward(ids, LogitsMode::kAll, zero);
  EXPECT_EQ(dense, zero);
  s.threshold_prefill = 0.9;  // aggressive: random models have flat attention, little to skip
  be->set_attention(s);
  be->reset();
  be->forward(ids, LogitsMode::kAll, sparse);
  const TileCounts t = be->probes().total(false);
  // 200 tokens: query tiles of 64 rows (kQueryTileRows) see KV tiles of 64: tile 0 -> 1,
  // tile 1 -> 2, tile 2 -> 3, tile 3 (rows 192-199) -> 4 = 10 per head and layer.
  static_assert(kQueryTileRows == 64, "the counts below assume 64-row query tiles");
  EXPECT_EQ(t.visited, int64_t(10) * model->config().n_head * model->config().n_layer);
  // The requested skip mask covers the prefill's tiles of one (layer, head).
  be->request_skip_mask(1, 2);
  be->reset();
  be->forward(ids, LogitsMode::kAll, sparse);
  const SkipMask& m = be->probes().mask;
  EXPECT_EQ(m.rows, 4);
  EXPECT_EQ(m.cols, 4);
  ASSERT_EQ(m.cells.size(), 16u);
  EXPECT_EQ(m.cells[0], 1);  // first tile always computed
  EXPECT_EQ(m.cells[1], 0);  // query tile 0 (rows 0-63) cannot see KV tile 1 (keys 64-127)
  EXPECT_EQ(m.cells[4], 1);  // query tile 1's first tile
  EXPECT_EQ(m.cells[7], 0);  // query tile 1 (rows 64-127) cannot see KV tile 3 (keys 192-255)
  EXPECT_THROW(be->request_skip_mask(2, 0), BackendError);
  EXPECT_THROW(be->request_skip_mask(0, -1), BackendError);
  s.block_size = 96;
  EXPECT_THROW(be->set_attention(s), BackendError);
}

// rewind() (the workbench resumes a prefill when only decode settings change): decoding after
// a rewind gives exactly the logits and tile counts of a fresh prefill + decode, on the float
// and the quantized full cache; a windowed cache refuses and keeps its state.
TEST(CpuBackend, RewindToThePrefillEqualsAFreshRun) {
  auto model = write_and_load(shape_cases()[0].shape, 17, "rewind");
  const int V = model->config().n_vocab;
  auto ids = random_ids(150, V, 8);
  const TokenId steps[] = {3, 9, 27, 81, 5};
  for (bool quantized : {false, true}) {
    BackendOptions opt;
    opt.n_threads = 2;
    opt.cache.quantization.enabled = quantized;
    opt.cache.quantization.group_size = 16;  // the test model's head_dim
    AttentionSettings s;
    s.type = AttentionType::kDynamicSparse;
    s.threshold_prefill = 0.5;
    s.threshold_decode = 0.9;
    opt.attention = s;
    auto be = make_cpu_backend(model, opt);
    be->request_column_mass(32);
    be->reset();
    std::vector<float> logits, resumed, fresh;
    be->forward(ids, LogitsMode::kAll, logits);
    const AttentionProbes afterPrefill = be->probes();
    for (TokenId t : steps) be->forward(std::span<const TokenId>(&t, 1), LogitsMode::kLast, logits);
    ASSERT_TRUE(be->rewind(150, afterPrefill));
    EXPECT_EQ(be->n_past(), 150);
    s.threshold_decode = 0.2;  // another decode lambda, as the workbench's control change
    be->set_attention(s);
    for (TokenId t : steps) {
      be->forward(std::span<const TokenId>(&t, 1), LogitsMode::kLast, logits);
      resumed.insert(resumed.end(), logits.begin(), logits.end());
    }
    const AttentionProbes resumedProbes = be->probes();

    opt.attention = s;
    auto ref = make_cpu_backend(model, opt);
    ref->request_column_mass(32);
    ref->reset();
    ref->forward(ids, LogitsMode::kAll, logits);
    for (TokenId t : steps) {
      ref->forward(std::span<const TokenId>(&t, 1), LogitsMode::kLast, logits);
      fresh.insert(fresh.end(), logits.begin(), logits.end());
    }
    EXPECT_EQ(resumed, fresh) << (quantized ? "int8 cache" : "float cache");
    const TileCounts a = resumedProbes.total(true), b = ref->probes().total(true);
    EXPECT_EQ(a.visited, b.visited);
    EXPECT_EQ(a.skipped, b.skipped);
    EXPECT_EQ(resumedProbes.col_mass, ref->probes().col_mass);
    EXPECT_EQ(resumedProbes.col_queries, ref->probes().col_queries);
    EXPECT_EQ(be->cache_stats().n_past, 155);
    EXPECT_FALSE(be->rewind(200, afterPrefill));  // beyond what was run
  }
  BackendOptions win;
  win.cache.strategy = CacheStrategy::kSlidingWindow;
  win.cache.window_size = 64;
  win.cache.sink_keep_count = 4;
  auto w = make_cpu_backend(model, win);
  std::vector<float> logits;
  w->forward(ids, LogitsMode::kLast, logits);
  const AttentionProbes p = w->probes();
  EXPECT_FALSE(w->rewind(100, p));
  EXPECT_EQ(w->n_past(), 150);
}

// The Q/K capture (the workbench's attention maps come from it): a capture prefill applies the
// request's sink-retaining window over the full cache in every layer, and its captured post-RoPE
// Q/K and logits equal the float64 reference with that rule; one that stops after its layers
// leaves logits NaN and the cache empty, captures the same Q/K, and the backend then runs as
// before; extra layers are kept within the byte budget, the request's own layer always.
TEST(CpuBackend, QkvCaptureMatchesTheWindowedFloat64Reference) {
  const ShapeCase cases[] = {shape_cases()[0], shape_cases()[2], shape_cases()[5]};
  for (const auto& sc : cases) {
    auto model = write_and_load(sc.shape, 11, sc.tag);
    const ModelConfig& c = model->config();
    ASSERT_GE(c.n_layer, 2);
    auto ids = random_ids(100, c.n_vocab, 5);
    const int n = int(ids.size()), sinks = 2, window = 24, layer = 1;
    RefQK ref;
    ref.layer = layer;
    const std::vector<double> ref_logits = reference_logits(*model, ids, sinks, window, &ref);
    const std::vector<double> causal = reference_logits(*model, ids);

    BackendOptions opt;
    opt.n_threads = 2;
    auto be = make_cpu_backend(model, opt);
    QkvCaptureRequest r;
    r.layer = layer;
    r.sink_count = sinks;
    r.window = window;
    r.more_first = 0;
    r.more_last = 0;
    be->request_qkv_capture(r);
    std::vector<float> logits;
    be->forward(ids, LogitsMode::kAll, logits);
    EXPECT_LT(max_abs_diff(logits, ref_logits), kLogitTol) << sc.tag;
    EXPECT_GT(max_abs_diff(logits, causal), 100 * kLogitTol) << sc.tag << ": the window is applied";
    const QkvCapture& cap = be->qkv_capture();
    ASSERT_EQ(cap.layer, layer);
    ASSERT_TRUE(cap.complete());
    ASSERT_EQ(cap.n_q, n);
    EXPECT_EQ(cap.vf.size(), size_t(n) * c.kv_dim());
    double dq = 0, dk = 0;
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < c.q_dim(); ++i)
        dq = std::max(dq, std::abs(cap.q_at(size_t(t) * c.q_dim() + i) - ref.q[size_t(t)][size_t(i)]));
      for (int i = 0; i < c.kv_dim(); ++i)
        dk = std::max(dk, std::abs(cap.k_at(size_t(t) * c.kv_dim() + i) - ref.k[size_t(t)][size_t(i)]));
    }
    EXPECT_LT(dq, 1e-4) << sc.tag;
    EXPECT_LT(dk, 1e-4) << sc.tag;
    ASSERT_NE(be->qkv_capture_of(0), nullptr);
    EXPECT_TRUE(be->qkv_capture_of(0)->vf.empty());
    EXPECT_EQ(be->qkv_capture_of(2), nullptr);
    const std::vector<float> q_full = cap.qf, k_full = cap.kf;

    // Stopping after the layer: the same Q/K, NaN logits, nothing cached.
    be->reset();
    r.stop_after_layer = true;
    be->request_qkv_capture(r);
    be->forward(ids, LogitsMode::kLast, logits);
    EXPECT_TRUE(std::isnan(logits[0]));
    EXPECT_EQ(be->n_past(), 0);
    ASSERT_NE(be->qkv_capture_of(layer), nullptr);
    const QkvCapture& stopped = *be->qkv_capture_of(layer);
    double dd = 0;
    for (size_t i = 0; i < q_full.size(); ++i) dd = std::max(dd, double(std::abs(stopped.qf[i] - q_full[i])));
    for (size_t i = 0; i < k_full.size(); ++i) dd = std::max(dd, double(std::abs(stopped.kf[i] - k_full[i])));
    EXPECT_LT(dd, 1e-6) << sc.tag;

    // A budget for one extra layer's bytes less one: only the request's own layer.
    r.max_bytes = sizeof(float) * size_t(n) * size_t(c.q_dim() + 2 * c.kv_dim()) +
                  sizeof(float) * size_t(n) * size_t(c.q_dim() + c.kv_dim()) - 1;
    be->request_qkv_capture(r);
    be->forward(ids, LogitsMode::kLast, logits);
    EXPECT_NE(be->qkv_capture_of(layer), nullptr);
    EXPECT_EQ(be->qkv_capture_of(0), nullptr);

    // Capture off: a plain forward, as from a fresh backend.
    be->request_qkv_capture({});
    EXPECT_EQ(be->qkv_capture_of(layer), nullptr);
    be->reset();
    be->forward(ids, LogitsMode::kAll, logits);
    EXPECT_LT(max_abs_diff(logits, causal), kLogitTol) << sc.tag;
  }
}

TEST(CpuBackend, QkvCaptureRequestsAreChecked) {
  auto model = write_and_load(shape_cases()[0].shape, 11, "llama_tied");
  const int L = model->config().n_layer;
  auto be = make_cpu_backend(model, {});
  EXPECT_THROW(be->request_qkv_capture({.layer = L}), BackendError);
  EXPECT_THROW(be->request_qkv_capture({.layer = 0, .window = -1}), BackendError);
  EXPECT_THROW(be->request_qkv_capture({.layer = 1, .more_first = 1, .more_last = 0}), BackendError);
  EXPECT_THROW(be->request_qkv_capture({.layer = 1, .more_first = 0, .more_last = L}), BackendError);
  BackendOptions win;
  win.cache.strategy = CacheStrategy::kSlidingWindow;
  win.cache.window_size = 64;
  win.cache.sink_keep_count = 4;
  auto w = make_cpu_backend(model, win);
  EXPECT_THROW(w->request_qkv_capture({.layer = 0}), BackendError);
  EXPECT_NO_THROW(w->request_qkv_capture({}));
}

// The all-heads probe (the workbench asks for it on every run): every (layer, head)'s mask,
// equal to the single-head probe's cells; the 4-byte-per-cell statistic only when asked for.
TEST(CpuBackend, AllHeadsMasksWithAndWithoutTheStatistic) {
  auto model = write_and_load(shape_cases()[0].shape, 16, "allmasks");
  const ModelConfig& c = model->config();
  auto ids = random_ids(200, c.n_vocab, 7);
  auto be = make_cpu_backend(model, {});
  AttentionSettings s;
  s.type = AttentionType::kDynamicSparse;
  s.threshold_prefill = 0.9;
  be->set_attention(s);
  std::vector<float> logits;
  be->request_skip_mask(1, 2);
  be->request_all_skip_masks(true);
  be->reset();
  be->forward(ids, LogitsMode::kLast, logits);
  const AttentionProbes& p = be->probes();
  ASSERT_EQ(p.all_rows, 4);
  ASSERT_EQ(p.all_cols, 4);
  ASSERT_EQ(p.all_masks.size(), size_t(c.n_layer) * c.n_head * 16);
  EXPECT_TRUE(p.all_stat.empty());  // not asked for
  const auto one = p.all_masks.begin() + ptrdiff_t((size_t(1) * c.n_head + 2) * 16);
  EXPECT_EQ(std::vector<uint8_t>(one, one + 16), p.mask.cells);
  const std::vector<uint8_t> masks = p.all_masks;
  be->request_all_skip_masks(true, /*with_stat=*/true);
  be->reset();
  be->forward(ids, LogitsMode::kLast, logits);
  EXPECT_EQ(be->probes().all_masks, masks);  // the statistic does not change the decisions
  ASSERT_EQ(be->probes().all_stat.size(), masks.size());
  // The statistic decides: skipped iff below ln(lambda); NaN where not visible or first visited.
  size_t stats = 0;
  for (size_t i = 0; i < masks.size(); ++i) {
    const float st = be->probes().all_stat[i];
    if (masks[i] == 0) {
      EXPECT_TRUE(std::isnan(st)) << i;
    } else if (!std::isnan(st)) {
      EXPECT_EQ(masks[i] == 2, st < std::log(0.9f)) << i << " stat " << st;
      ++stats;
    } else {
      EXPECT_EQ(masks[i], 1) << i;
    }
  }
  EXPECT_GT(stats, 0u);
  be->request_all_skip_masks(false);
}

// With a sliding window the prefill runs in chunks over cache pages: the all-heads probe is
// every head's tiles in prompt positions, the same tiles the single-head probe records for that
// head, and no grid. The tile statistic stays a full-cache feature.
TEST(CpuBackend, AllHeadsMasksOfAWindowedCacheAreTiles) {
  auto model = write_and_load(shape_cases()[0].shape, 16, "allmasks_win");
  const ModelConfig& c = model->config();
  auto ids = random_ids(600, c.n_vocab, 7);
  BackendOptions win;
  win.cache.strategy = CacheStrategy::kSlidingWindow;
  win.cache.window_size = 256;
  win.cache.sink_keep_count = 4;
  auto be = make_cpu_backend(model, win);
  AttentionSettings s;
  s.type = AttentionType::kDynamicSparse;
  s.threshold_prefill = 0.9;
  s.min_sequence_length = 0;  // the window keeps L_kv short: skip at every length
  be->set_attention(s);
  EXPECT_THROW(be->request_all_skip_masks(true, /*with_stat=*/true), BackendError);
  be->request_all_skip_masks(true);
  std::vector<float> logits;
  size_t computed = 0;
  for (const auto& [layer, head] : {std::pair{0, 0}, std::pair{1, 2}}) {
    be->request_skip_mask(layer, head);
    be->reset();
    be->forward(ids, LogitsMode::kLast, logits);
    const AttentionProbes& p = be->probes();
    EXPECT_EQ(p.all_rows, 0);
    EXPECT_TRUE(p.all_masks.empty());
    ASSERT_EQ(p.all_tiles.size(), size_t(c.n_layer) * c.n_head);
    const std::vector<MaskTile>& all = p.all_tiles[size_t(layer) * c.n_head + head];
    ASSERT_FALSE(p.mask.tiles.empty());
    ASSERT_EQ(all.size(), p.mask.tiles.size());
    int max_q = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(all[i].q0, p.mask.tiles[i].q0) << i;
      EXPECT_EQ(all[i].q1, p.mask.tiles[i].q1) << i;
      EXPECT_EQ(all[i].k0, p.mask.tiles[i].k0) << i;
      EXPECT_EQ(all[i].k1, p.mask.tiles[i].k1) << i;
      EXPECT_EQ(all[i].state, p.mask.tiles[i].state) << i;
      EXPECT_TRUE(all[i].state == 1 || all[i].state == 2) << i;
      computed += all[i].state == 1;
      max_q = std::max(max_q, all[i].q1);
    }
    EXPECT_EQ(max_q, 600);  // every chunk's queries, not the last chunk's only
  }
  EXPECT_GT(computed, 0u);
  // A decode step keeps the prefill's tiles.
  const size_t before = be->probes().all_tiles[0].size();
  be->forward(std::vector<TokenId>{ids[0]}, LogitsMode::kLast, logits);
  EXPECT_EQ(be->probes().all_tiles[0].size(), before);
  be->request_all_skip_masks(false);
}

TEST(Session, GenerateIsDeterministicAndStopsAtMaxTokens) {
  auto model = write_and_load(shape_cases()[0].shape, 17, "gen");
  auto be = make_cpu_backend(model, {});
  auto prompt = random_ids(12, model->config().n_vocab, 8);
  GenerateOptions o;
  o.max_tokens = 9;
  o.stop_at_eog = false;
  o.sampler = {0.8f, 40, 0.95f, 1234};
  std::vector<TokenId> streamed;
  auto r1 = generate(*be, prompt, o, [&](TokenId t) { streamed.push_back(t); });
  auto r2 = generate(*be, prompt, o);
  EXPECT_EQ(r1.tokens.size(), 9u);
  EXPECT_EQ(r1.tokens, r2.tokens);
  EXPECT_EQ(streamed, r1.tokens);
  EXPECT_EQ(r1.stop_reason, "max_tokens");
  // Greedy generation equals argmax of a full forward at each step.
  o.sampler = {};
  auto g = generate(*be, prompt, o);
  std::vector<TokenId> seq = prompt;
  std::vector<float> logits;
  auto ref = make_cpu_backend(model, {});
  for (TokenId t : g.tokens) {
    ref->reset();
    ref->forward(seq, LogitsMode::kLast, logits);
    EXPECT_EQ(argmax(logits), t);
    seq.push_back(t);
  }
  EXPECT_THROW(generate(*be, {}, o), BackendError);
}

TEST(Session, PerplexityMatchesManualLogSoftmax) {
  auto model = write_and_load(shape_cases()[0].shape, 18, "ppl");
  auto be = make_cpu_backend(model, {});
  auto ids = random_ids(50, model->config().n_vocab, 9);
  auto r = perplexity(*be, ids, 64);
  std::vector<float> logits;
  be->reset();
  be->forward(ids, LogitsMode::kAll, logits);
  const int V = model->config().n_vocab;
  double nll = 0;
  for (int i = 1; i < 50; ++i) {
    double mx = -INFINITY, se = 0;
    for (int v = 0; v < V; ++v) mx = std::max(mx, double(logits[size_t(i - 1) * V + v]));
    for (int v = 0; v < V; ++v) se += std::exp(double(logits[size_t(i - 1) * V + v]) - mx);
    nll -= double(logits[size_t(i - 1) * V + ids[size_t(i)]]) - mx - std::log(se);
  }
  EXPECT_EQ(r.n_predicted, 49);
  EXPECT_NEAR(r.mean_nll, nll / 49, 1e-9);
  EXPECT_NEAR(r.perplexity, std::exp(nll / 49), 1e-6 * r.perplexity);
  // Chunked: 3 chunks of 16, second halves scored.
  auto c = perplexity(*be, ids, 16);
  EXPECT_EQ(c.n_chunks, 3);
  EXPECT_EQ(c.n_predicted, 3 * 8);
  EXPECT_THROW(perplexity(*be, {1}, 16), BackendError);
}

}  // namespace
}  // namespace sinkscope
