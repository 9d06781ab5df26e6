// SPDX-License-Identifier: Apache-2.0
// The CPU attention against an independent float64 reference: dense softmax attention, and a
// tile-level oracle of the skip rule written directly from the contract text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/backend/cpu_attention.h"
#include "engine/util/thread_pool.h"
#include "kernels/visibility.h"

namespace sinkscope {
namespace {

struct Problem {
  int n_q, q_pos0, n_head, n_head_kv, d;
  std::vector<float> q, k, v;
  int n_kv() const { return q_pos0 + n_q; }
};

Problem make_problem(int n_q, int q_pos0, int n_head, int n_head_kv, int d, uint32_t seed,
                     float sink_logit = 0.0f) {
  Problem p{n_q, q_pos0, n_head, n_head_kv, d, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  p.q.resize(size_t(n_q) * n_head * d);
  p.k.resize(size_t(p.n_kv()) * n_head_kv * d);
  p.v.resize(p.k.size());
  for (auto& x : p.q) x = nd(rng);
  for (auto& x : p.k) x = nd(rng);
  for (auto& x : p.v) x = nd(rng);
  if (sink_logit != 0.0f) {
    // Make key 0 a strong sink: align it with every query direction's mean by giving it a large
    // component along a shared direction that all queries also carry.
    for (int i = 0; i < n_q; ++i)
      for (int h = 0; h < n_head; ++h) p.q[(size_t(i) * n_head + h) * d] += 5.0f;
    for (int g = 0; g < n_head_kv; ++g) p.k[size_t(g) * d] = sink_logit;
  }
  return p;
}

// float64 dense causal attention.
std::vector<double> reference_dense(const Problem& p, float scale) {
  const int group = p.n_head / p.n_head_kv;
  std::vector<double> out(size_t(p.n_q) * p.n_head * p.d, 0.0);
  for (int i = 0; i < p.n_q; ++i) {
    const int pos = p.q_pos0 + i;
    for (int h = 0; h < p.n_head; ++h) {
      const int g = h / group;
      std::vector<double> s(size_t(pos + 1));
      double mx = -INFINITY;
      for (int j = 0; j <= pos; ++j) {
        double acc = 0;
        for (int t = 0; t < p.d; ++t)
          acc += double(p.q[(size_t(i) * p.n_head + h) * p.d + t]) *
                 p.k[(size_t(j) * p.n_head_kv + g) * p.d + t];
        s[size_t(j)] = acc * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - mx));
      for (int j = 0; j <= pos; ++j)
        for (int t = 0; t < p.d; ++t)
          out[(size_t(i) * p.n_head + h) * p.d + t] +=
              s[size_t(j)] / sum * p.v[(size_t(j) * p.n_head_kv + g) * p.d + t];
    }
  }
  return out;
}

// The contract, tile by tile, in float64: returns the skip decision per (head, qtile, kvtile)
// (-1 not visited, 0 visited, 1 skipped) and the output with skipped tiles left out.
struct SparseRef {
  std::vector<int> decision;  // (head, qtile, kvtile)
  std::vector<double> out;
  std::vector<double> margin;  // max over rows of (m~ - m) - ln(lambda) for each decision
  int n_qtiles, n_kvtiles;
};

// own_window > 0: a query at q sees only keys k > q - own_window (a Gemma local layer); cap > 0:
// scores are cap * tanh(s / cap) (Gemma 2's soft-capping), the rule reading the capped values.
// A tile no row of the query tile sees is not visited; the first visited one is never skipped.
// sinks (n_head, or empty): learned sink logits; each row's running max starts at its head's
// sink and its softmax denominator holds exp(sink - max) (the sink has no value). sink_prob, when
// given, receives per head the sink's probability summed over the rows.
SparseRef reference_sparse(const Problem& p, float scale, int bq, int bk, double lambda,
                           int own_window = 0, double cap = 0,
                           const std::vector<double>& sinks = {},
                           std::vector<double>* sink_prob = nullptr) {
  if (sink_prob) sink_prob->assign(size_t(p.n_head), 0.0);
  const int group = p.n_head / p.n_head_kv;
  SparseRef r;
  r.n_qtiles = (p.n_q + bq - 1) / bq;
  r.n_kvtiles = (p.n_kv() - 1) / bk + 1;
  r.decision.assign(size_t(p.n_head) * r.n_qtiles * r.n_kvtiles, -1);
  r.margin.assign(r.decision.size(), 0.0);
  r.out.assign(size_t(p.n_q) * p.n_head * p.d, 0.0);
  const double ll = std::log(lambda);
  for (int h = 0; h < p.n_head; ++h) {
    const int g = h / group;
    for (int qt = 0; qt < r.n_qtiles; ++qt) {
      const int r0 = qt * bq, r1 = std::min(p.n_q, r0 + bq);
      const int last = p.q_pos0 + r1 - 1;
      // Full score rows for the tile.
      std::vector<std::vector<double>> s(size_t(r1 - r0));
      for (int i = r0; i < r1; ++i) {
        auto& row = s[size_t(i - r0)];
        row.assign(size_t(last + 1), -INFINITY);
        const int pos = p.q_pos0 + i;
        for (int j = own_window > 0 ? std::max(0, pos - own_window + 1) : 0; j <= pos; ++j) {
          double acc = 0;
          for (int t = 0; t < p.d; ++t)
            acc += double(p.q[(size_t(i) * p.n_head + h) * p.d + t]) *
                   p.k[(size_t(j) * p.n_head_kv + g) * p.d + t];
          row[size_t(j)] = cap > 0 ? cap * std::tanh(acc * scale / cap) : acc * scale;
        }
      }
      std::vector<bool> kept(size_t(last + 1), true);
      std::vector<double> m(size_t(r1 - r0), sinks.empty() ? -INFINITY : sinks[size_t(h)]);
      bool first = true;
      for (int t = 0; t * bk <= last; ++t) {
        const int k0 = t * bk, k1 = std::min(last + 1, k0 + bk);
        std::vector<double> tmax(size_t(r1 - r0), -INFINITY);
        bool visible = false;
        for (int i = 0; i < r1 - r0; ++i) {
          for (int j = k0; j < k1; ++j) tmax[size_t(i)] = std::max(tmax[size_t(i)], s[size_t(i)][size_t(j)]);
          visible = visible || tmax[size_t(i)] > -INFINITY;
        }
        if (!visible) continue;  // decision stays -1: not visited
        bool skip = !first;
        first = false;
        double worst = -INFINITY;
        for (int i = 0; i < r1 - r0; ++i) {
          if (tmax[size_t(i)] > -INFINITY) {
            const double diff = tmax[size_t(i)] - m[size_t(i)];
            worst = std::max(worst, diff - ll);
            if (!(diff < ll)) skip = false;
          }
        }
        const size_t idx = (size_t(h) * r.n_qtiles + qt) * r.n_kvtiles + t;
        r.decision[idx] = skip ? 1 : 0;
        r.margin[idx] = worst;
        if (skip) {
          for (int j = k0; j < k1; ++j) kept[size_t(j)] = false;
        } else {
          for (int i = 0; i < r1 - r0; ++i) m[size_t(i)] = std::max(m[size_t(i)], tmax[size_t(i)]);
        }
      }
      for (int i = r0; i < r1; ++i) {
        const auto& row = s[size_t(i - r0)];
        double mx = sinks.empty() ? -INFINITY : sinks[size_t(h)], sum = 0;
        for (int j = 0; j <= p.q_pos0 + i; ++j)
          if (kept[size_t(j)]) mx = std::max(mx, row[size_t(j)]);
        for (int j = 0; j <= p.q_pos0 + i; ++j)
          if (kept[size_t(j)]) sum += std::exp(row[size_t(j)] - mx);
        if (!sinks.empty()) {
          sum += std::exp(sinks[size_t(h)] - mx);
          if (sink_prob) (*sink_prob)[size_t(h)] += std::exp(sinks[size_t(h)] - mx) / sum;
        }
        for (int j = 0; j <= p.q_pos0 + i; ++j) {
          if (!kept[size_t(j)]) continue;
          const double w = std::exp(row[size_t(j)] - mx) / sum;
          for (int t = 0; t < p.d; ++t)
            r.out[(size_t(i) * p.n_head + h) * p.d + t] +=
                w * p.v[(size_t(j) * p.n_head_kv + g) * p.d + t];
        }
      }
    }
  }
  return r;
}

struct AttnRun {
  std::vector<float> out;
  std::vector<TileCounts> counts;
  std::vector<uint8_t> mask;
  int mask_cols = 0;
};

AttnRun run_cpu(const Problem& p, float scale, int bq, int bk, double lambda, ThreadPool* pool,
            int mask_head = -1, bool skip_exp = true, int own_window = 0, float cap = 0,
            const float* sink_logits = nullptr, double* sink_mass = nullptr) {
  AttnRun r;
  r.out.assign(size_t(p.n_q) * p.n_head * p.d, std::nanf(""));  // poison: every row must be written
  r.counts.assign(size_t(p.n_head), {});
  CpuAttentionArgs a;
  a.q = p.q.data();
  a.k = p.k.data();
  a.v = p.v.data();
  a.out = r.out.data();
  a.n_q = p.n_q;
  a.q_pos0 = p.q_pos0;
  a.n_kv = p.n_kv();
  a.n_head = p.n_head;
  a.n_head_kv = p.n_head_kv;
  a.d = p.d;
  a.scale = scale;
  a.block_size = bk;
  a.q_tile = bq;
  a.log_lambda = log_threshold(lambda);
  a.skip_softmax_exp = skip_exp;
  a.own_window = own_window;
  a.softcap = cap;
  a.sink_logits = sink_logits;
  a.sink_mass = sink_mass;
  a.counts = r.counts.data();
  a.mask_head = mask_head;
  a.mask = &r.mask;
  a.mask_cols = &r.mask_cols;
  cpu_attention(a, pool);
  return r;
}

double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

// float32 accumulation over at most a few thousand keys: 1e-5 relative is ample headroom over
// the ~1e-6 observed.
constexpr double kTol = 1e-5;

TEST(CpuAttention, DenseMatchesFloat64ReferenceAcrossShapes) {
  ThreadPool pool(2);
  struct Shape { int n_q, q_pos0, n_head, n_head_kv, d, bk; };
  const Shape shapes[] = {{1, 0, 2, 2, 64, 64},   {7, 0, 3, 1, 64, 64},   {130, 0, 4, 2, 64, 64},
                          {65, 100, 9, 3, 64, 128}, {1, 300, 8, 8, 128, 64}, {200, 0, 4, 1, 32, 128},
                          {1, 1000, 9, 3, 64, 64}};
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    Problem p = make_problem(s.n_q, s.q_pos0, s.n_head, s.n_head_kv, s.d, seed++);
    const float scale = 1.0f / std::sqrt(float(s.d));
    AttnRun r = run_cpu(p, scale, s.bk, s.bk, 0.0, &pool);
    EXPECT_LT(rel_err(r.out, reference_dense(p, scale)), kTol)
        << "n_q=" << s.n_q << " pos0=" << s.q_pos0 << " heads=" << s.n_head << "/" << s.n_head_kv
        << " d=" << s.d;
    for (const auto& c : r.counts) EXPECT_EQ(c.skipped, 0);
  }
}

TEST(CpuAttention, CountsOnlyCausallyVisibleTiles) {
  Problem p = make_problem(128, 0, 1, 1, 16, 5);
  AttnRun r = run_cpu(p, 0.25f, 64, 64, 0.0, nullptr, 0);
  // Query tile 0 sees KV tile 0 only; query tile 1 sees tiles 0 and 1.
  EXPECT_EQ(r.counts[0].visited, 3);
  ASSERT_EQ(r.mask_cols, 2);
  EXPECT_EQ(r.mask, (std::vector<uint8_t>{1, 0, 1, 1}));
}

// The query tile of the contract's rule is kQueryTileRows = 64 rows (engine/backend/attention.h; the CUDA
// kernels use the same, two per 128-row CTA). Hand-built scores, d = 8, scale 1: key 0 is a sink
// (score 10 for every row); the keys of KV tile 1 (positions 64..127) score c_i along a second
// direction, every other key 0. Queries at positions 64..191 (n_q = 128, one 128-row CTA on the
// GPU): query tile 0 (rows 0..63, c = 0) sees KV tiles 0 and 1, query tile 1 (rows 64..127, c = 8)
// sees tiles 0, 1 and 2. lambda = 0.01 (ln = -4.6): tile 1 is 10 below the sink for query tile 0
// (skipped) but only 2 below it for query tile 1 (kept); tile 2 (score 0) is skipped by query
// tile 1. With one 128-row vote the tile would have been kept for all rows.
Problem two_halves_problem() {
  constexpr int d = 8, n_q = 128, pos0 = 64;
  Problem p{n_q, pos0, 1, 1, d, {}, {}, {}};
  p.q.assign(size_t(n_q) * d, 0.0f);
  p.k.assign(size_t(p.n_kv()) * d, 0.0f);
  p.v.assign(size_t(p.n_kv()) * d, 0.0f);
  for (int i = 0; i < n_q; ++i) {
    p.q[size_t(i) * d] = 1.0f;
    p.q[size_t(i) * d + 1] = i < 64 ? 0.0f : 8.0f;
  }
  p.k[0] = 10.0f;
  for (int j = 64; j < 128; ++j) p.k[size_t(j) * d + 1] = 1.0f;
  for (int j = 0; j < p.n_kv(); ++j)
    for (int i = 0; i < d; ++i) p.v[size_t(j) * d + i] = float((j * 7 + i * 3) % 11) - 5.0f;
  return p;
}

TEST(CpuAttention, QueryTileIs64RowsAndItsHalvesDecideAlone) {
  static_assert(kQueryTileRows == 64, "the hand-built case below assumes 64-row query tiles");
  const Problem p = two_halves_problem();
  const double lambda = 0.01;
  AttnRun r = run_cpu(p, 1.0f, kQueryTileRows, 64, lambda, nullptr, 0);
  ASSERT_EQ(r.mask_cols, 3);
  // CPU mask codes: 0 not visible, 1 computed, 2 skipped. Query tile 0 cannot see KV tile 2.
  EXPECT_EQ(r.mask, (std::vector<uint8_t>{1, 2, 0, 1, 1, 2}));
  EXPECT_EQ(r.counts[0].visited, 5);
  EXPECT_EQ(r.counts[0].skipped, 2);
  const SparseRef ref = reference_sparse(p, 1.0f, kQueryTileRows, 64, lambda);
  EXPECT_EQ(ref.decision, (std::vector<int>{0, 1, -1, 0, 0, 1}));
  EXPECT_LT(rel_err(r.out, ref.out), kTol);
  // One vote over all 128 rows (the former query tile): tile 1 kept for every row.
  AttnRun one = run_cpu(p, 1.0f, 128, 64, lambda, nullptr, 0);
  EXPECT_EQ(one.mask, (std::vector<uint8_t>{1, 1, 2}));
  EXPECT_EQ(one.counts[0].visited, 3);
}

// A KV tile fully masked for one query tile but visible to the next (block_size 64, 64-row query
// tiles): not visited, not counted, not skipped for the first, even with a huge lambda that skips
// everything it can; the first tile each query tile sees is never skipped.
TEST(CpuAttention, TileInvisibleToOneQueryTileIsNotCountedThere) {
  static_assert(kQueryTileRows == 64, "the geometry below assumes 64-row query tiles");
  for (int pos0 : {0, 32}) {
    Problem p = make_problem(128, pos0, 1, 1, 16, 11 + uint32_t(pos0));
    AttnRun r = run_cpu(p, 0.25f, kQueryTileRows, 64, 0.99, nullptr, 0);
    if (pos0 == 0) {
      // Query tile 0 (positions 0..63): KV tile 0 only; query tile 1 (64..127): tiles 0, 1.
      ASSERT_EQ(r.mask_cols, 2);
      EXPECT_EQ(r.mask[0], 1);
      EXPECT_EQ(r.mask[1], 0);
      EXPECT_EQ(r.mask[2], 1);
      EXPECT_EQ(r.counts[0].visited, 3);
      EXPECT_EQ(r.counts[0].skipped, r.mask[3] == 2 ? 1 : 0);
    } else {
      // Query tile 0 (32..95): tiles 0, 1; query tile 1 (96..159): tiles 0, 1, 2.
      ASSERT_EQ(r.mask_cols, 3);
      EXPECT_EQ(r.mask[0], 1);
      EXPECT_EQ(r.mask[2], 0);
      EXPECT_EQ(r.mask[3], 1);
      EXPECT_EQ(r.counts[0].visited, 5);
      int64_t sk = 0;
      for (uint8_t m : r.mask) sk += m == 2;
      EXPECT_EQ(r.counts[0].skipped, sk);
    }
    const SparseRef ref = reference_sparse(p, 0.25f, kQueryTileRows, 64, 0.99);
    EXPECT_LT(rel_err(r.out, ref.out), kTol) << "pos0 " << pos0;
  }
}

// A layer's own window and soft-capped scores (Gemma) against the contract oracle: the same
// decisions tile for tile, tiles past every row's window neither visited nor skipped, the same
// output; windows shorter and longer than a tile, queries starting mid-cache.
TEST(CpuAttention, OwnWindowAndSoftCapMatchTheContractOracle) {
  ThreadPool pool(2);
  struct Case { int own_window; float cap; double lambda; int bk; };
  // Strong keys at every 128th position (as key 0 of make_problem's sink): the KV tiles of 64
  // alternate strong / weak, and a query tile whose rows all hold the previous strong key in their
  // window can skip the weak tile after it. A cap of 3 squeezes the strong keys' lead (about 15
  // uncapped) below 1, so lambda 0.05 (ln = -3) skips without the cap and cannot with it: the
  // rule must read the capped scores to agree with the oracle.
  const Case cases[] = {{200, 0.0f, 0.05, 64}, {200, 3.0f, 0.05, 64}, {200, 3.0f, 0.9, 64},
                        {160, 0.0f, 0.05, 64}, {8, 0.0f, 0.9, 64},    {0, 2.0f, 0.9, 128},
                        {40, 1.5f, 0.0, 128}};
  int64_t any_skipped = 0;
  std::vector<int64_t> skips;
  for (const Case& cs : cases) {
    Problem p = make_problem(300, 40, 3, 1, 64, uint32_t(cs.own_window + cs.bk), 30.0f);
    for (int j = 128; j < p.n_kv(); j += 128) p.k[size_t(j) * p.d] = 30.0f;
    const float scale = 0.125f;
    const double lambda = cs.lambda > 0 ? cs.lambda : 1e-300;  // the oracle needs a log
    const SparseRef ref = reference_sparse(p, scale, kQueryTileRows, cs.bk, lambda,
                                           cs.own_window, cs.cap);
    AttnRun r = run_cpu(p, scale, kQueryTileRows, cs.bk, cs.lambda, &pool, 1, true,
                        cs.own_window, cs.cap);
    const std::string what = "window " + std::to_string(cs.own_window) + " cap " +
                             std::to_string(cs.cap) + " lambda " + std::to_string(cs.lambda);
    int64_t visited = 0, skipped = 0;
    for (size_t i = 0; i < ref.decision.size(); ++i) {
      visited += ref.decision[i] >= 0;
      skipped += ref.decision[i] == 1;
    }
    int64_t got_v = 0, got_s = 0;
    for (const TileCounts& c : r.counts) {
      got_v += c.visited;
      got_s += c.skipped;
    }
    EXPECT_EQ(got_v, visited) << what;
    EXPECT_EQ(got_s, skipped) << what;
    if (cs.own_window > 0 && cs.own_window < 64) {
      EXPECT_LT(visited, int64_t(3) * 5 * 6 / 2) << what;
    }
    any_skipped += skipped;
    skips.push_back(skipped);
    // Head 1's mask: 0 exactly where the oracle did not visit.
    ASSERT_EQ(r.mask_cols, ref.n_kvtiles) << what;
    for (int qt = 0; qt < ref.n_qtiles; ++qt)
      for (int t = 0; t < ref.n_kvtiles; ++t) {
        const int d = ref.decision[(size_t(1) * ref.n_qtiles + qt) * ref.n_kvtiles + t];
        EXPECT_EQ(int(r.mask[size_t(qt) * r.mask_cols + t]), d < 0 ? 0 : d + 1)
            << what << " cell (" << qt << ", " << t << ")";
      }
    EXPECT_LT(rel_err(r.out, ref.out), kTol) << what;
  }
  EXPECT_GT(any_skipped, 0) << "no case skipped a tile: the decisions compared nothing";
  // The data does what the cases are for: the uncapped window skips, the capped one not at the
  // same lambda, and does at a looser one.
  EXPECT_GT(skips[0], 0);
  EXPECT_EQ(skips[1], 0);
  EXPECT_GT(skips[2], 0);
}

// Learned sinks (gpt-oss): the sink logit starts each row's running max, so the rule compares
// tile maxima against max(sink, scores so far). Random keys (scores of std ~1, no strong key);
// head 0 has a weak sink (it changes little), head 1 one above most scores, head 2 one far above
// every score: at the same lambda head 2
// skips every tile after the first, which the oracle must agree with tile by tile.
TEST(CpuAttention, LearnedSinksMatchTheContractOracle) {
  ThreadPool pool(2);
  const std::vector<double> sinks = {-2.0, 3.5, 40.0};
  const std::vector<float> sinks_f(sinks.begin(), sinks.end());
  struct Case { double lambda; int own_window; float cap; };
  const Case cases[] = {{0.0, 0, 0.0f}, {0.05, 0, 0.0f}, {0.05, 100, 0.0f}, {0.2, 0, 3.0f}};
  for (const Case& cs : cases) {
    Problem p = make_problem(200, 70, 3, 1, 64, 77);
    const float scale = 0.125f;
    const double lambda = cs.lambda > 0 ? cs.lambda : 1e-300;
    std::vector<double> ref_sink;
    const SparseRef ref = reference_sparse(p, scale, kQueryTileRows, 64, lambda, cs.own_window,
                                           cs.cap, sinks, &ref_sink);
    std::vector<double> got_sink(3, 0.0);
    AttnRun r = run_cpu(p, scale, kQueryTileRows, 64, cs.lambda, &pool, 2, true, cs.own_window,
                        cs.cap, sinks_f.data(), got_sink.data());
    const std::string what = "lambda " + std::to_string(cs.lambda) + " window " +
                             std::to_string(cs.own_window) + " cap " + std::to_string(cs.cap);
    EXPECT_LT(rel_err(r.out, ref.out), kTol) << what;
    for (int h = 0; h < 3; ++h) {
      EXPECT_NEAR(got_sink[size_t(h)], ref_sink[size_t(h)], 1e-4 * p.n_q) << what << " head " << h;
      int64_t v = 0, sk = 0;
      for (int qt = 0; qt < ref.n_qtiles; ++qt)
        for (int t = 0; t < ref.n_kvtiles; ++t) {
          const int dec = ref.decision[(size_t(h) * ref.n_qtiles + qt) * ref.n_kvtiles + t];
          v += dec >= 0;
          sk += dec == 1;
        }
      EXPECT_EQ(r.counts[size_t(h)].visited, v) << what << " head " << h;
      EXPECT_EQ(r.counts[size_t(h)].skipped, sk) << what << " head " << h;
      if (cs.lambda > 0 && h == 2) {
        // The dominant sink: every visited tile but each query tile's first is skipped.
        EXPECT_EQ(sk, v - ref.n_qtiles) << what;
      }
    }
    ASSERT_EQ(r.mask_cols, ref.n_kvtiles);
    for (int qt = 0; qt < ref.n_qtiles; ++qt)
      for (int t = 0; t < ref.n_kvtiles; ++t) {
        const int d = ref.decision[(size_t(2) * ref.n_qtiles + qt) * ref.n_kvtiles + t];
        EXPECT_EQ(int(r.mask[size_t(qt) * r.mask_cols + t]), d < 0 ? 0 : d + 1) << what;
      }
  }
  // Without the sinks the same data at lambda 0.05 skips less on head 2: the sink is what made
  // its tiles skippable.
  Problem p = make_problem(200, 70, 3, 1, 64, 77);
  AttnRun plain = run_cpu(p, 0.125f, kQueryTileRows, 64, 0.05, &pool);
  AttnRun sunk = run_cpu(p, 0.125f, kQueryTileRows, 64, 0.05, &pool, -1, true, 0, 0.0f,
                         sinks_f.data());
  EXPECT_GT(sunk.counts[2].skipped, plain.counts[2].skipped);
}

TEST(CpuAttention, SparseMatchesContractOracle) {
  ThreadPool pool(2);
  for (double lambda : {1e-3, 1e-2, 5e-2, 0.2}) {
    for (int bk : {64, 128}) {
      Problem p = make_problem(300, 40, 3, 1, 64, uint32_t(bk + 1000 * lambda), 30.0f);
      const float scale = 0.125f;
      SparseRef ref = reference_sparse(p, scale, bk, bk, lambda);
      int64_t ref_skipped = 0, ref_visited = 0;
      for (int dec : ref.decision) {
        ref_visited += dec >= 0;
        ref_skipped += dec == 1;
      }
      for (int mh = 0; mh < 3; ++mh) {
        AttnRun r = run_cpu(p, scale, bk, bk, lambda, &pool, mh);
        // Decisions: identical except where the float64 margin is within float32 noise.
        int disagree = 0;
        for (int qt = 0; qt < ref.n_qtiles; ++qt)
          for (int t = 0; t < ref.n_kvtiles; ++t) {
            const size_t idx = (size_t(mh) * ref.n_qtiles + qt) * ref.n_kvtiles + t;
            const int want = ref.decision[idx];
            const int got = int(r.mask[size_t(qt) * r.mask_cols + t]) - 1;
            if (want != got) {
              ++disagree;
              EXPECT_LT(std::abs(ref.margin[idx]), 1e-4) << "lambda " << lambda;
            }
          }
        (void)disagree;
        if (mh == 0) {
          EXPECT_LT(rel_err(r.out, ref.out), kTol) << "lambda " << lambda;
          int64_t sk = 0, vi = 0;
          for (const auto& c : r.counts) {
            sk += c.skipped;
            vi += c.visited;
          }
          EXPECT_EQ(sk, ref_skipped);
          EXPECT_EQ(vi, ref_visited);
        }
      }
      if (lambda >= 5e-2) {
        EXPECT_GT(ref_skipped, 0) << "the sink input should make tiles skippable";
      }
    }
  }
}

TEST(CpuAttention, FirstTileIsNeverSkippedEvenWithHugeLambda) {
  Problem p = make_problem(64, 500, 2, 1, 32, 9, 20.0f);
  AttnRun r = run_cpu(p, 0.2f, 64, 64, 0.999, nullptr, 0);
  ASSERT_GT(r.mask_cols, 1);
  EXPECT_EQ(r.mask[0], 1);  // visited, not skipped
  for (int t = 1; t < r.mask_cols; ++t) EXPECT_NE(r.mask[size_t(t)], 0);
  for (float x : r.out) EXPECT_TRUE(std::isfinite(x));
}

// Decode (one query) where the layer's own window hides the sink tile and every tile before
// q - OW, and a learned sink dominates every score: the first *visible* tile (not tile 0) is the
// first visited one and is never skipped, although its max lies far below the sink; the later
// ones are. The same with a cache window (sinks + window, the live-page list's rule). gpt-oss's
// decode shape: own window 128, cache window 1024 + 4 sinks, block 64, 3000 keys.
TEST(CpuAttention, DecodeFirstVisibleTileUnderOwnWindowIsNotSkippedWithLearnedSink) {
  const Problem p = make_problem(1, 2999, 2, 1, 64, 31);
  const float scale = 0.125f;
  const double lambda = 0.01;
  const std::vector<double> sinks = {40.0, -1.0};  // head 0: the sink dominates; head 1: not
  const std::vector<float> sinks_f(sinks.begin(), sinks.end());
  const SparseRef ref = reference_sparse(p, scale, 1, 64, lambda, 128, 0, sinks);
  const int first = (2999 - 127) / 64;  // tile 44 holds key q - 127, the oldest visible one
  for (const bool cache_window : {false, true}) {
    std::vector<float> out(size_t(p.n_head) * p.d, std::nanf(""));
    std::vector<TileCounts> counts(size_t(p.n_head));
    std::vector<uint8_t> mask;
    int cols = 0;
    CpuAttentionArgs a;
    a.q = p.q.data();
    a.k = p.k.data();
    a.v = p.v.data();
    a.out = out.data();
    a.n_q = 1;
    a.q_pos0 = p.q_pos0;
    a.n_kv = p.n_kv();
    a.n_head = p.n_head;
    a.n_head_kv = p.n_head_kv;
    a.d = p.d;
    a.scale = scale;
    a.block_size = 64;
    a.q_tile = 1;
    a.log_lambda = log_threshold(lambda);
    a.own_window = 128;
    a.sink_count = cache_window ? 4 : 0;
    a.window = cache_window ? 1024 : 0;
    a.sink_logits = sinks_f.data();
    a.counts = counts.data();
    a.mask_head = 0;
    a.mask = &mask;
    a.mask_cols = &cols;
    cpu_attention(a, nullptr);
    const std::string what = cache_window ? "S 4, W 1024, own 128" : "own 128";
    ASSERT_EQ(cols, ref.n_kvtiles) << what;
    for (int t = 0; t < cols; ++t) {
      const int want = t < first ? 0 : t == first ? 1 : 2;  // invisible, visited, skipped
      EXPECT_EQ(int(mask[size_t(t)]), want) << what << " tile " << t;
      EXPECT_EQ(int(mask[size_t(t)]), ref.decision[size_t(t)] + 1) << what << " tile " << t;
    }
    EXPECT_EQ(counts[0].visited, 3) << what;
    EXPECT_EQ(counts[0].skipped, 2) << what;
    EXPECT_EQ(counts[1].visited, 3) << what;
    EXPECT_EQ(counts[1].skipped, 0) << what;  // scores ~N(0, 1): nothing 4.6 below the max
    EXPECT_LT(rel_err(out, ref.out), kTol) << what;
  }
}

TEST(CpuAttention, LambdaZeroIsBitIdenticalToDense) {
  ThreadPool pool(2);
  Problem p = make_problem(150, 30, 4, 2, 64, 77, 8.0f);
  AttnRun dense = run_cpu(p, 0.125f, 64, 64, 0.0, &pool);
  AttentionSettings s;
  s.type = AttentionType::kDynamicSparse;
  s.threshold_prefill = 0.0;
  AttnRun zero = run_cpu(p, 0.125f, 64, 64, effective_lambda(s, false, p.n_kv()), &pool);
  EXPECT_EQ(dense.out, zero.out);
}

TEST(CpuAttention, KeepingExpInDenominatorOnlyDropsPv) {
  // With skip_softmax_exp off, skipped tiles still add to the row sum, so the output norm can
  // only shrink relative to the exp-skipping variant; both stay close to dense for small lambda.
  Problem p = make_problem(128, 64, 2, 1, 64, 3, 30.0f);
  AttnRun a = run_cpu(p, 0.125f, 64, 64, 0.05, nullptr, -1, true);
  AttnRun b = run_cpu(p, 0.125f, 64, 64, 0.05, nullptr, -1, false);
  ASSERT_GT(a.counts[0].skipped + a.counts[1].skipped, 0);
  EXPECT_NE(a.out, b.out);
  const auto dense = reference_dense(p, 0.125f);
  EXPECT_LT(rel_err(b.out, dense), 0.2);
}

// skip_softmax_exp, by hand (docs/config.md; engine/backend/cpu_attention.h): scale 1, q = e0,
// k_j = s_j e0, so the scores are the chosen s_j exactly. KV tiles of 2 keys, scores
//   tile 0 {3, 1} (first: never skipped), tile 1 {-2, -4}: max -2 - 3 = -5 < ln 0.01 -> skipped,
//   tile 2 {0.5, -3}: 0.5 - 3 = -2.5 > ln 0.01 -> computed.
// Rows at positions 4 and 5 share the query (row 4 does not see key 5). For a row seeing keys J
// (S = the skipped keys {2, 3}): out = sum_{J \ S} e^{s_j} v_j / den, den = sum_{J \ S} e^{s_j}
// when true, den = sum_J e^{s_j} (the dense denominator) when false; the mask and counters are
// the same either way.
TEST(CpuAttention, SkipSoftmaxExpRowSumMatchesHandComputedReference) {
  const int d = 8;
  const float sc[6] = {3.0f, 1.0f, -2.0f, -4.0f, 0.5f, -3.0f};
  Problem p{2, 4, 1, 1, d, {}, {}, {}};
  p.q.assign(size_t(2) * d, 0.0f);
  p.q[0] = p.q[d] = 1.0f;
  p.k.assign(size_t(6) * d, 0.0f);
  p.v.assign(size_t(6) * d, 0.0f);
  for (int j = 0; j < 6; ++j) {
    p.k[size_t(j) * d] = sc[j];
    p.v[size_t(j) * d] = float(j + 1);
    p.v[size_t(j) * d + 1] = float((j + 1) * (j + 1));
    p.v[size_t(j) * d + 7] = -float(j);
  }
  auto expect_row = [&](int pos, bool keep_exp, bool dense) {
    std::vector<double> num(d, 0.0);
    double den = 0;
    for (int j = 0; j <= pos; ++j) {
      const bool skipped = !dense && (j == 2 || j == 3);
      const double w = std::exp(double(sc[j]));
      if (!skipped || keep_exp) den += w;
      if (skipped) continue;
      for (int i = 0; i < d; ++i) num[size_t(i)] += w * p.v[size_t(j) * d + i];
    }
    for (auto& x : num) x /= den;
    return num;
  };
  for (int bq : {1, 2}) {  // one query tile per row, or both rows voting together
    for (bool keep_exp : {false, true}) {
      AttnRun r = run_cpu(p, 1.0f, bq, 2, 0.01, nullptr, 0, /*skip_exp=*/!keep_exp);
      EXPECT_EQ(r.counts[0].skipped, bq == 1 ? 2 : 1) << "bq " << bq;
      EXPECT_EQ(r.counts[0].visited, bq == 1 ? 6 : 3);
      ASSERT_EQ(r.mask_cols, 3);
      EXPECT_EQ(r.mask[1], 2);  // tile 1 skipped for (the first) query tile
      for (int row = 0; row < 2; ++row) {
        const auto want = expect_row(4 + row, keep_exp, false);
        for (int i = 0; i < d; ++i)
          EXPECT_NEAR(r.out[size_t(row) * d + i], want[size_t(i)], 1e-5 * (1 + std::fabs(want[size_t(i)])))
              << "row " << row << " i " << i << " keep_exp " << keep_exp << " bq " << bq;
      }
    }
    // The two differ by exactly the denominators' ratio; lambda = 0 is dense either way.
    AttnRun dense = run_cpu(p, 1.0f, bq, 2, 0.0, nullptr, 0, false);
    for (int row = 0; row < 2; ++row) {
      const auto want = expect_row(4 + row, false, true);
      for (int i = 0; i < d; ++i)
        EXPECT_NEAR(dense.out[size_t(row) * d + i], want[size_t(i)], 1e-5 * (1 + std::fabs(want[size_t(i)])));
    }
  }
}

// The debug probes (CpuAttentionArgs::mask_all, tile_stat): every head's mask equals the
// single-head probe, and the statistic decides: stat < ln(lambda) exactly on skipped cells.
TEST(CpuAttention, AllHeadsMaskAndTileStatisticMatchTheRule) {
  ThreadPool pool(2);
  Problem p = make_problem(300, 40, 3, 1, 64, 11, 30.0f);
  const double lambda = 0.02;
  CpuAttentionArgs a;
  std::vector<float> out(size_t(p.n_q) * p.n_head * p.d);
  std::vector<TileCounts> counts(size_t(p.n_head));
  std::vector<uint8_t> all;
  std::vector<float> stat;
  int cols = 0;
  a.q = p.q.data();
  a.k = p.k.data();
  a.v = p.v.data();
  a.out = out.data();
  a.n_q = p.n_q;
  a.q_pos0 = p.q_pos0;
  a.n_kv = p.n_kv();
  a.n_head = p.n_head;
  a.n_head_kv = p.n_head_kv;
  a.d = p.d;
  a.scale = 0.125f;
  a.block_size = 64;
  a.q_tile = 128;
  a.log_lambda = log_threshold(lambda);
  a.counts = counts.data();
  a.mask_all = &all;
  a.tile_stat = &stat;
  a.mask_cols = &cols;
  cpu_attention(a, &pool);
  const int rows = (p.n_q + 127) / 128;
  ASSERT_EQ(all.size(), size_t(p.n_head) * rows * cols);
  ASSERT_EQ(stat.size(), all.size());
  int64_t skipped = 0;
  for (int h = 0; h < p.n_head; ++h) {
    AttnRun single = run_cpu(p, 0.125f, 128, 64, lambda, &pool, h);
    ASSERT_EQ(single.mask_cols, cols);
    for (int qt = 0; qt < rows; ++qt) {
      bool first = true;
      for (int t = 0; t < cols; ++t) {
        const size_t i = (size_t(h) * rows + qt) * cols + t;
        EXPECT_EQ(all[i], single.mask[size_t(qt) * cols + t]);
        if (all[i] == 0 || first) {
          EXPECT_TRUE(std::isnan(stat[i]));
          first = first && all[i] == 0;
          continue;
        }
        EXPECT_EQ(all[i] == 2, stat[i] < a.log_lambda) << "h " << h << " qt " << qt << " t " << t;
        skipped += all[i] == 2;
      }
    }
  }
  EXPECT_GT(skipped, 0);
}

TEST(CpuAttention, DroppedMassBoundHoldsAgainstDenseProbabilities) {
  const double lambda = 0.05;
  const int bk = 64;
  Problem p = make_problem(256, 0, 1, 1, 64, 21, 30.0f);
  const float scale = 0.125f;
  AttnRun r = run_cpu(p, scale, 128, bk, lambda, nullptr, 0);
  ASSERT_GT(r.counts[0].skipped, 0);
  // Dense probabilities of the keys in skipped tiles, per row, in float64.
  double worst_actual = 0;
  int64_t worst_skipped_keys = 0;
  for (int i = 0; i < p.n_q; ++i) {
    std::vector<double> s(size_t(i + 1));
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j <= i; ++j) {
      double acc = 0;
      for (int t = 0; t < p.d; ++t) acc += double(p.q[size_t(i) * p.d + t]) * p.k[size_t(j) * p.d + t];
      s[size_t(j)] = acc * scale;
      mx = std::max(mx, s[size_t(j)]);
    }
    for (double x : s) sum += std::exp(x - mx);
    double dropped = 0;
    int64_t keys = 0;
    for (int j = 0; j <= i; ++j) {
      if (r.mask[size_t(i / 128) * r.mask_cols + j / bk] == 2) {
        dropped += std::exp(s[size_t(j)] - mx) / sum;
        ++keys;
      }
    }
    worst_actual = std::max(worst_actual, dropped);
    worst_skipped_keys = std::max(worst_skipped_keys, keys);
  }
  EXPECT_GT(worst_actual, 0.0);
  EXPECT_LE(worst_actual, r.counts[0].mass_bound_max);
  EXPECT_LE(r.counts[0].mass_bound_max, lambda * double(worst_skipped_keys));
  EXPECT_EQ(r.counts[0].rows, 256);
  EXPECT_GT(r.counts[0].mass_bound_mean(), 0.0);
}

TEST(EffectiveLambda, ModesAndHybrid) {
  AttentionSettings s;
  s.type = AttentionType::kDynamicSparse;
  s.threshold_prefill = 0.02;
  s.threshold_decode = 0.005;
  EXPECT_DOUBLE_EQ(effective_lambda(s, false, 1000), 0.02);
  EXPECT_DOUBLE_EQ(effective_lambda(s, true, 1000), 0.005);
  s.threshold_mode = ThresholdMode::kLengthScaled;
  s.threshold_prefill = 40.0;
  EXPECT_DOUBLE_EQ(effective_lambda(s, false, 2000), 0.02);
  s.min_sequence_length = 4096;
  EXPECT_DOUBLE_EQ(effective_lambda(s, false, 2000), 0.0);
  s.type = AttentionType::kDense;
  EXPECT_DOUBLE_EQ(effective_lambda(s, false, 100000), 0.0);
  EXPECT_EQ(log_threshold(0.0), -INFINITY);
}

// visibility::tile_in_windows, which the CPU attention and the GPU kernels use to drop tiles
// (neither visited nor skipped), must say exactly whether some key of the tile passes
// key_in_windows: a tile whose sink keys lie past the own window and whose other keys lie past
// the cache window has no visible key (e.g. S 4, W 64, own 200, tile [0, 64) at q 256), and the
// GPU counted it visited where the CPU did not. Monotone in q, as the kernels assume.
TEST(Visibility, TileInWindowsIsExact) {
  int64_t cases = 0;
  for (int bc : {64, 128})
    for (int S : {0, 1, 4, 70, 200})
      for (int W : {0, 64, 100, 256})
        for (int OW : {0, 37, 100, 200, 300})
          for (int64_t q = 0; q < 700; ++q)
            for (int64_t k0 = 0; k0 <= q; k0 += bc) {
              bool any = false;
              for (int64_t k = k0; k < k0 + bc && !any; ++k)
                any = visibility::key_in_windows(k, q, S, W, OW);
              const bool t = visibility::tile_in_windows(k0, k0 + bc - 1, q, S, W, OW);
              ASSERT_EQ(t, any) << "tile " << k0 << " q " << q << " S " << S << " W " << W
                                << " own " << OW;
              if (!t)
                ASSERT_FALSE(visibility::tile_in_windows(k0, k0 + bc - 1, q + 1, S, W, OW));
              ++cases;
            }
  EXPECT_GT(cases, 100000);
  EXPECT_FALSE(visibility::tile_in_windows(0, 63, 256, 4, 64, 200));  // the case above
}

}  // namespace
}  // namespace sinkscope
