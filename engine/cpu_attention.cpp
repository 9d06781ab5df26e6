// SPDX-License-Identifier: Apache-2.0
#include "engine/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "engine/thread_pool.h"

namespace sinkscope {
namespace {

// Eight independent partial sums let the compiler vectorise without reassociating.
inline float dot(const float* a, const float* b, int d) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= d; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < d; ++i) s += a[i] * b[i];
  return s;
}

inline void axpy(float a, const float* x, float* y, int d) {
  for (int i = 0; i < d; ++i) y[i] += a * x[i];
}

struct Task {
  int head;
  int qtile;
};

}  // namespace

void cpu_attention(const CpuAttentionArgs& a, ThreadPool* pool) {
  const int d = a.d, bq = a.q_tile, bk = a.block_size;
  const int group = a.n_head / a.n_head_kv;
  const int n_qtiles = (a.n_q + bq - 1) / bq;
  const int last_pos = a.q_pos0 + a.n_q - 1;
  const int n_kvtiles_total = last_pos / bk + 1;
  const int64_t q_stride = int64_t(a.n_head) * d;    // between query tokens
  const int64_t kv_stride = int64_t(a.n_head_kv) * d;  // between cached positions

  if (a.mask && a.mask_head >= 0) {
    a.mask->assign(size_t(n_qtiles) * n_kvtiles_total, 0);
    if (a.mask_cols) *a.mask_cols = n_kvtiles_total;
  }
  std::vector<TileCounts> local(size_t(a.n_head) * n_qtiles);

  auto run = [&](int64_t task) {
    const int h = int(task / n_qtiles);
    const int qt = int(task % n_qtiles);
    const int g = h / group;
    const int r0 = qt * bq, r1 = std::min(a.n_q, r0 + bq), rows = r1 - r0;
    const int tile_last_pos = a.q_pos0 + r1 - 1;  // furthest key any row of the tile can see
    const int n_kvtiles = tile_last_pos / bk + 1;

    std::vector<float> m(size_t(rows), -INFINITY), l(size_t(rows), 0.0f);
    std::vector<float> acc(size_t(rows) * d, 0.0f);
    std::vector<float> s(size_t(rows) * bk);
    std::vector<float> tile_max(static_cast<size_t>(rows));
    TileCounts& cnt = local[size_t(task)];
    uint8_t* mask_row =
        (a.mask && h == a.mask_head) ? a.mask->data() + size_t(qt) * n_kvtiles_total : nullptr;

    std::vector<float> kt(size_t(d) * bk);  // K tile transposed: (d, bk)
    for (int t = 0; t < n_kvtiles; ++t) {
      const int k0 = t * bk, k1 = std::min(k0 + bk, a.n_kv), nk = k1 - k0;
      // Transpose the K tile once; every row of the query tile reuses it, and the score loop
      // becomes broadcast-FMA over contiguous keys (no horizontal sums).
      for (int j = 0; j < nk; ++j) {
        const float* kj = a.k + int64_t(k0 + j) * kv_stride + int64_t(g) * d;
        for (int i = 0; i < d; ++i) kt[size_t(i) * bk + j] = kj[i];
      }
      // S = q k^T * scale, causally masked. QK^T is always computed (the rule needs it).
      for (int r = 0; r < rows; ++r) {
        const int pos = a.q_pos0 + r0 + r;
        const float* __restrict qr = a.q + int64_t(r0 + r) * q_stride + int64_t(h) * d;
        float* __restrict sr = s.data() + size_t(r) * bk;
        for (int j = 0; j < nk; ++j) sr[j] = 0.0f;
        for (int i = 0; i < d; ++i) {
          const float qv = qr[i] * a.scale;
          const float* __restrict kr = kt.data() + size_t(i) * bk;
          for (int j = 0; j < nk; ++j) sr[j] += qv * kr[j];
        }
        float mx = -INFINITY;
        const int vis = std::min(nk, pos - k0 + 1);  // keys of this tile the row may see
        for (int j = 0; j < vis; ++j) mx = std::max(mx, sr[j]);
        for (int j = std::max(vis, 0); j < nk; ++j) sr[j] = -INFINITY;
        tile_max[size_t(r)] = mx;
      }
      ++cnt.visited;
      // The rule: skip iff every row's tile max lies more than ln(lambda) below its running max.
      // Rows that see no key of this tile (m~ = -inf) agree trivially. Tile 0 is never skipped.
      bool skip = false;
      if (t > 0 && a.log_lambda > -INFINITY) {
        skip = true;
        for (int r = 0; r < rows && skip; ++r)
          if (!(tile_max[size_t(r)] - m[size_t(r)] < a.log_lambda)) skip = false;
      }
      if (mask_row) mask_row[t] = skip ? 2 : 1;
      if (skip) {
        ++cnt.skipped;
        if (!a.skip_softmax_exp) {
          // Denominator stays exact; only the PV product is dropped.
          for (int r = 0; r < rows; ++r) {
            const float* sr = s.data() + size_t(r) * bk;
            float add = 0.0f;
            for (int j = 0; j < k1 - k0; ++j) add += std::exp(sr[j] - m[size_t(r)]);
            l[size_t(r)] += add;
          }
        }
        continue;
      }
      for (int r = 0; r < rows; ++r) {
        const float mt = tile_max[size_t(r)];
        if (mt == -INFINITY) continue;  // row sees nothing here
        const float m_new = std::max(m[size_t(r)], mt);
        const float corr = std::exp(m[size_t(r)] - m_new);  // exp(-inf) = 0 on the first tile
        float* ar = acc.data() + size_t(r) * d;
        if (corr != 1.0f) {
          for (int i = 0; i < d; ++i) ar[i] *= corr;
        }
        float sum = l[size_t(r)] * corr;
        const float* sr = s.data() + size_t(r) * bk;
        for (int j = 0; j < k1 - k0; ++j) {
          if (sr[j] == -INFINITY) continue;
          const float p = std::exp(sr[j] - m_new);
          sum += p;
          axpy(p, a.v + int64_t(k0 + j) * kv_stride + int64_t(g) * d, ar, d);
        }
        l[size_t(r)] = sum;
        m[size_t(r)] = m_new;
      }
    }
    for (int r = 0; r < rows; ++r) {
      float* o = a.out + int64_t(r0 + r) * q_stride + int64_t(h) * d;
      const float inv = l[size_t(r)] > 0 ? 1.0f / l[size_t(r)] : 0.0f;
      const float* ar = acc.data() + size_t(r) * d;
      for (int i = 0; i < d; ++i) o[i] = ar[i] * inv;
    }
  };

  const int64_t n_tasks = int64_t(a.n_head) * n_qtiles;
  // Below ~4M multiply-adds (about a millisecond on one core) waking the pool costs more than
  // it saves: decode over short contexts stays on the calling thread.
  const int64_t work = int64_t(a.n_q) * a.n_kv * a.n_head * d;
  if (pool && work >= (int64_t(1) << 22)) {
    pool->parallel_for(n_tasks, run);
  } else {
    for (int64_t t = 0; t < n_tasks; ++t) run(t);
  }
  if (a.counts) {
    for (int h = 0; h < a.n_head; ++h)
      for (int qt = 0; qt < n_qtiles; ++qt) {
        const TileCounts& c = local[size_t(h) * n_qtiles + qt];
        a.counts[h].visited += c.visited;
        a.counts[h].skipped += c.skipped;
      }
  }
}

}  // namespace sinkscope
