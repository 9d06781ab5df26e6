// SPDX-License-Identifier: Apache-2.0
// The paged KV cache on its own: eviction order, sinks, capacity, budgets, byte accounting, KV
// quantization bounds, protected rows, and quantized attention against float attention.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_attention.h"
#include "engine/format/ggml_types.h"
#include "engine/cache/kv_cache.h"
#include "engine/cache/kv_quant.h"

namespace sinkscope {
namespace {

constexpr int kHeads = 2, kDim = 32;

// Writes tokens [n_past, n_past + m) whose every K element is the position and V = -position.
void feed(KvCache& c, int m) {
  std::vector<float> k(size_t(m) * kHeads * kDim), v(k.size());
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < kHeads * kDim; ++j) {
      k[size_t(i) * kHeads * kDim + j] = float(c.n_past() + i);
      v[size_t(i) * kHeads * kDim + j] = -float(c.n_past() + i);
    }
  c.reserve(m);
  c.write(0, m, k.data(), v.data());
  c.commit(m);
}

// Positions the cache still exposes (slots not evicted), read back from the view.
std::vector<int> retained(const KvCache& c) {
  const KvLayerView v = c.view(0);
  const int S = c.sinks(), W = c.window();
  const int64_t next = c.n_past();  // the next query's position
  std::vector<int> out;
  for (int t = 0; t < v.n_pages; ++t)
    for (int r = 0; r < v.page_rows[t]; ++r) {
      const int pos = v.page_pos0[t] + r;
      if (W > 0 && pos >= S && pos <= next - 1 - W) continue;  // evicted slot of a live page
      EXPECT_EQ(v.k_f32[t][size_t(r) * kHeads * kDim], float(pos));
      EXPECT_EQ(v.v_f32[t][size_t(r) * kHeads * kDim + 1], -float(pos));
      out.push_back(pos);
    }
  return out;
}

CacheSettings window(int W, int S) {
  CacheSettings s;
  s.strategy = CacheStrategy::kSlidingWindow;
  s.window_size = W;
  s.sink_keep_count = S;
  return s;
}

TEST(KvCache, SlidingWindowKeepsSinksAndTheMostRecentTokens) {
  for (int chunk : {1, 5, 64}) {
    KvCache c(1, kHeads, kDim, 64, 1 << 20, window(100, 4));
    for (int fed = 0; fed < 1000; fed += chunk) feed(c, chunk);
    const int n = int(c.n_past());
    auto pos = retained(c);
    ASSERT_EQ(pos.size(), 104u) << chunk;  // capacity S + W
    for (int i = 0; i < 4; ++i) EXPECT_EQ(pos[size_t(i)], i);  // sinks never evicted, first
    for (int i = 0; i < 100; ++i) EXPECT_EQ(pos[size_t(4 + i)], n - 100 + i);
    EXPECT_EQ(c.stats().n_cached, 104);
    EXPECT_EQ(c.stats().evicted, n - 104);
    // Pages: the sink page + enough for W + 1 tokens across page boundaries.
    EXPECT_LE(c.stats().pages, 1 + (100 + 64) / 64 + 1);
    EXPECT_EQ(c.view(0).page_pos0[0], 0);  // the first tile holds the sinks
  }
}

TEST(KvCache, PlainWindowAndFullCache) {
  KvCache w(1, kHeads, kDim, 64, 1 << 20, window(70, 0));
  for (int i = 0; i < 300; ++i) feed(w, 1);
  auto pos = retained(w);
  ASSERT_EQ(pos.size(), 70u);
  EXPECT_EQ(pos.front(), 230);
  KvCache f(1, kHeads, kDim, 128, 1 << 20, CacheSettings{});
  feed(f, 300);
  EXPECT_EQ(retained(f).size(), 300u);
  EXPECT_EQ(f.stats().pages, 3);
  EXPECT_EQ(f.stats().evicted, 0);
}

TEST(KvCache, TruncateKeepsTheFirstPositionsAndAcceptsNewOnes) {
  KvCache c(1, kHeads, kDim, 64, 1 << 20, CacheSettings{});
  feed(c, 150);  // pages of 64: 0, 64, 128 (22 rows)
  const int64_t bytes150 = c.stats().bytes_allocated;
  ASSERT_TRUE(c.truncate(70));
  EXPECT_EQ(c.n_past(), 70);
  EXPECT_EQ(c.stats().n_cached, 70);
  EXPECT_EQ(c.stats().pages, 2);  // the page at 128 is given back
  EXPECT_LT(c.stats().bytes_allocated, bytes150);
  std::vector<int> want(70);
  for (int i = 0; i < 70; ++i) want[size_t(i)] = i;
  EXPECT_EQ(retained(c), want);
  // Written again from 70 on, the rows are the new ones (feed writes the position's value).
  feed(c, 100);
  want.resize(170);
  for (int i = 0; i < 170; ++i) want[size_t(i)] = i;
  EXPECT_EQ(retained(c), want);
  EXPECT_FALSE(c.truncate(171));  // beyond what is cached
  EXPECT_EQ(c.n_past(), 170);
  ASSERT_TRUE(c.truncate(0));
  EXPECT_TRUE(retained(c).empty());
}

TEST(KvCache, TruncateRefusesAWindowedCache) {
  KvCache c(1, kHeads, kDim, 64, 1 << 20, window(100, 4));
  feed(c, 150);
  EXPECT_FALSE(c.truncate(120));  // positions 4..49 are evicted: nothing to go back to
  EXPECT_EQ(c.n_past(), 150);
}

TEST(KvCache, BudgetsNameTheLimitAndChangeNothing) {
  CacheSettings s;
  s.per_request_limit_tokens = 100;
  KvCache c(1, kHeads, kDim, 64, 1 << 20, s);
  feed(c, 90);
  try {
    feed(c, 11);
    FAIL();
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("per_request_limit_tokens"), std::string::npos);
  }
  EXPECT_EQ(c.n_past(), 90);
  EXPECT_EQ(retained(c).size(), 90u);
  // 1 layer x 2 heads x 32 x 2 x 4 bytes = 512 bytes/token, 32 KiB pages: 1 MiB = 32 pages.
  CacheSettings g;
  g.global_cache_limit_mib = 1;
  KvCache m(1, kHeads, kDim, 64, 1 << 20, g);
  EXPECT_EQ(m.stats().bytes_per_token, 512);
  feed(m, 32 * 64);
  EXPECT_EQ(m.stats().bytes_allocated, 1 << 20);
  try {
    feed(m, 1);
    FAIL();
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("global_cache_limit_mib"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m.n_past(), 32 * 64);
  EXPECT_EQ(m.stats().high_water_bytes, 1 << 20);
  m.reset();
  EXPECT_EQ(m.stats().high_water_bytes, 0);
  EXPECT_THROW(KvCache(1, kHeads, kDim, 64, 1 << 20, [] {
                 auto w = window(100, 4);
                 w.per_request_limit_tokens = 50;
                 return w;
               }()),
               BackendError);
  EXPECT_THROW(KvCache(1, kHeads, kDim, 96, 1 << 20, CacheSettings{}), BackendError);
}

TEST(KvQuant, RoundTripWithinTheDeclaredBound) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int bits : {8, 4})
    for (int group : {16, 32, 64}) {
      KvQuantFormat f{bits, group};
      for (int trial = 0; trial < 200; ++trial) {
        std::vector<float> x(64);
        const float spread = std::pow(10.0f, float(trial % 7) - 3.0f);  // 1e-3 .. 1e3
        for (auto& v : x) v = nd(rng) * spread;
        if (trial == 5) std::fill(x.begin(), x.begin() + group, 0.0f);  // an all-zero group
        std::vector<uint8_t> codes(size_t(f.code_bytes(64)));
        std::vector<uint16_t> sc(size_t(f.scales(64)));
        quantize_kv_row(x.data(), 64, f, codes.data(), sc.data());
        std::vector<float> y(64);
        dequantize_kv_row(codes.data(), sc.data(), 64, f, y.data());
        for (int b = 0; b < 64 / group; ++b) {
          float amax = 0;
          for (int i = 0; i < group; ++i) amax = std::max(amax, std::fabs(x[size_t(b * group + i)]));
          const double bound = kv_quant_error_bound(amax, f);
          EXPECT_GE(double(fp16_to_fp32(sc[size_t(b)])), amax / f.qmax());  // rounded up: no clipping
          for (int i = 0; i < group; ++i) {
            const size_t j = size_t(b * group + i);
            ASSERT_LE(std::fabs(double(x[j]) - y[j]), bound * (1 + 1e-6) + 1e-30)
                << "bits " << bits << " group " << group << " trial " << trial;
          }
        }
      }
    }
}

TEST(KvQuant, ProtectedSinksStayBitExactAndAttentionStaysClose) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int n = 200, H = 4;
  std::vector<float> k(size_t(n) * kHeads * kDim), v(k.size()), q(size_t(n) * H * kDim);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (auto& x : q) x = nd(rng);
  for (int g = 0; g < kHeads; ++g) k[size_t(g) * kDim] = 30.0f;  // key 0: a strong sink
  auto run = [&](const CacheSettings& s, std::vector<float>& out, KvCache** keep = nullptr) {
    static std::vector<std::unique_ptr<KvCache>> caches;
    caches.push_back(std::make_unique<KvCache>(1, kHeads, kDim, 64, 1 << 20, s));
    KvCache& c = *caches.back();
    c.reserve(n);
    c.write(0, n, k.data(), v.data());
    c.commit(n);
    const KvLayerView view = c.view(0);
    CpuAttentionArgs a;
    a.q = q.data();
    a.kv = &view;
    out.assign(q.size(), 0.0f);
    a.out = out.data();
    a.n_q = n;
    a.n_kv = n;
    a.n_head = H;
    a.n_head_kv = kHeads;
    a.d = kDim;
    a.scale = 1.0f / std::sqrt(float(kDim));
    a.block_size = 64;
    a.q_tile = 64;
    cpu_attention(a, nullptr);
    if (keep) *keep = &c;
  };
  std::vector<float> ref;
  run(CacheSettings{}, ref);
  std::vector<double> errs;
  for (auto dt : {KvQuantDtype::kInt8, KvQuantDtype::kInt4})
    for (bool protect : {false, true}) {
      CacheSettings s;
      s.sink_keep_count = 4;  // protected positions with the full strategy
      s.quantization.enabled = true;
      s.quantization.kv_dtype = dt;
      s.quantization.protect_sink_positions = protect;
      s.protected_positions = {100};  // e.g. flagged by the sink detector
      std::vector<float> out;
      KvCache* c = nullptr;
      run(s, out, &c);
      const KvLayerView view = c->view(0);
      if (protect) {
        ASSERT_EQ(view.n_prot, 5);
        EXPECT_EQ(view.prot_pos[4], 100);
        for (int p = 0; p < 5; ++p)
          for (int j = 0; j < kHeads * kDim; ++j)
            EXPECT_EQ(view.prot_k[size_t(p) * kHeads * kDim + j],
                      k[size_t(view.prot_pos[p]) * kHeads * kDim + j]);  // bit-exact
        EXPECT_EQ(c->stats().protected_rows, 5);
      } else {
        EXPECT_EQ(view.n_prot, 0);
      }
      double err = 0;
      for (size_t i = 0; i < out.size(); ++i) err = std::max(err, double(std::abs(out[i] - ref[i])));
      // Outputs are convex combinations of N(0,1) values; the rounding error of a key moves
      // scores by <= |q| * |dk| * scale. Unprotected, the 30-sigma sink sets its group's scale
      // (amax/qmax), so the sink's own key -- which carries most of the attention -- and its
      // group neighbours lose the most; protected, only ordinary groups are rounded.
      const double tol = dt == KvQuantDtype::kInt8 ? (protect ? 0.05 : 0.2) : (protect ? 0.6 : 3.0);
      EXPECT_LT(err, tol) << int(dt) << " protect " << protect;
      EXPECT_GT(err, 0.0);
      errs.push_back(err);
    }
  // Protection must help: protected error below unprotected, for int8 and int4.
  EXPECT_LT(errs[1], errs[0]);
  EXPECT_LT(errs[3], errs[2]);
}

}  // namespace
}  // namespace sinkscope
