// SPDX-License-Identifier: Apache-2.0
#include "engine/backend/cpu_attention.h"

#include "kernels/visibility.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "engine/cache/kv_quant.h"
#include "engine/backend/simd.h"
#include "engine/util/thread_pool.h"

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

#ifdef SINKSCOPE_X86
using simd::exp8;

// out[0..64) = init[0..64) (zeros when null) + sum over r < n of (coef[r] * mul) *
// rows[r * stride + 0..64): the 64-wide FMA chain that scores and P V share. Eight named
// accumulators stay in registers: an __m256 array indexed by a loop with a variable bound made
// GCC spill all eight to the stack on every step (twice the time). Each lane is one FMA chain
// over r in order (bit-identical to a scalar loop of fmaf).
SINKSCOPE_AVX2 inline __attribute__((always_inline)) void fma_rows64(
    const float* coef, float mul, const float* rows, int64_t stride, int n, const float* init,
    float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  if (init) {
    a0 = _mm256_loadu_ps(init);
    a1 = _mm256_loadu_ps(init + 8);
    a2 = _mm256_loadu_ps(init + 16);
    a3 = _mm256_loadu_ps(init + 24);
    a4 = _mm256_loadu_ps(init + 32);
    a5 = _mm256_loadu_ps(init + 40);
    a6 = _mm256_loadu_ps(init + 48);
    a7 = _mm256_loadu_ps(init + 56);
  }
  for (int r = 0; r < n; ++r, rows += stride) {
    const __m256 b = _mm256_set1_ps(coef[r] * mul);
    a0 = _mm256_fmadd_ps(b, _mm256_loadu_ps(rows), a0);
    a1 = _mm256_fmadd_ps(b, _mm256_loadu_ps(rows + 8), a1);
    a2 = _mm256_fmadd_ps(b, _mm256_loadu_ps(rows + 16), a2);
    a3 = _mm256_fmadd_ps(b, _mm256_loadu_ps(rows + 24), a3);
    a4 = _mm256_fmadd_ps(b, _mm256_loadu_ps(rows + 32), a4);
    a5 = _mm256_fmadd_ps(b, _mm256_loadu_ps(rows + 40), a5);
    a6 = _mm256_fmadd_ps(b, _mm256_loadu_ps(rows + 48), a6);
    a7 = _mm256_fmadd_ps(b, _mm256_loadu_ps(rows + 56), a7);
  }
  _mm256_storeu_ps(out, a0);
  _mm256_storeu_ps(out + 8, a1);
  _mm256_storeu_ps(out + 16, a2);
  _mm256_storeu_ps(out + 24, a3);
  _mm256_storeu_ps(out + 32, a4);
  _mm256_storeu_ps(out + 40, a5);
  _mm256_storeu_ps(out + 48, a6);
  _mm256_storeu_ps(out + 56, a7);
}

// sr[0..nk) = scale * q . kt[:, j] for a transposed K tile kt (d, ld). nk % 8 == 0.
SINKSCOPE_AVX2 void scores_avx2(const float* q, const float* kt, int d, int ld, int nk,
                                float scale, float* sr) {
  int j0 = 0;
  for (; j0 + 64 <= nk; j0 += 64)  // the common full tile
    fma_rows64(q, scale, kt + j0, ld, d, nullptr, sr + j0);
  for (; j0 < nk; j0 += 8) {  // a partial tile: eight keys at a time
    __m256 a = _mm256_setzero_ps();
    const float* kr = kt + j0;
    for (int i = 0; i < d; ++i, kr += ld) a = _mm256_fmadd_ps(_mm256_set1_ps(q[i] * scale), _mm256_loadu_ps(kr), a);
    _mm256_storeu_ps(sr + j0, a);
  }
}

// kt (d, ld) = the transpose of nk key rows k_j = k + j * stride (d floats each), in 8 x 8
// blocks (nk % 8 == 0, d % 8 == 0): a scalar scatter with stride ld cost a fifth of the
// attention time. Pure data movement.
SINKSCOPE_AVX2 void transpose_tile_avx2(const float* k, int64_t stride, int nk, int d,
                                        float* kt, int ld) {
  for (int j = 0; j < nk; j += 8) {
    for (int i = 0; i < d; i += 8) {
      __m256 r0 = _mm256_loadu_ps(k + (j + 0) * stride + i);
      __m256 r1 = _mm256_loadu_ps(k + (j + 1) * stride + i);
      __m256 r2 = _mm256_loadu_ps(k + (j + 2) * stride + i);
      __m256 r3 = _mm256_loadu_ps(k + (j + 3) * stride + i);
      __m256 r4 = _mm256_loadu_ps(k + (j + 4) * stride + i);
      __m256 r5 = _mm256_loadu_ps(k + (j + 5) * stride + i);
      __m256 r6 = _mm256_loadu_ps(k + (j + 6) * stride + i);
      __m256 r7 = _mm256_loadu_ps(k + (j + 7) * stride + i);
      const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
      const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      r0 = _mm256_permute2f128_ps(u0, u4, 0x20);
      r1 = _mm256_permute2f128_ps(u1, u5, 0x20);
      r2 = _mm256_permute2f128_ps(u2, u6, 0x20);
      r3 = _mm256_permute2f128_ps(u3, u7, 0x20);
      r4 = _mm256_permute2f128_ps(u0, u4, 0x31);
      r5 = _mm256_permute2f128_ps(u1, u5, 0x31);
      r6 = _mm256_permute2f128_ps(u2, u6, 0x31);
      r7 = _mm256_permute2f128_ps(u3, u7, 0x31);
      float* o = kt + size_t(i) * ld + j;
      _mm256_storeu_ps(o, r0);
      _mm256_storeu_ps(o + ld, r1);
      _mm256_storeu_ps(o + 2 * ld, r2);
      _mm256_storeu_ps(o + 3 * ld, r3);
      _mm256_storeu_ps(o + 4 * ld, r4);
      _mm256_storeu_ps(o + 5 * ld, r5);
      _mm256_storeu_ps(o + 6 * ld, r6);
      _mm256_storeu_ps(o + 7 * ld, r7);
    }
  }
}

// p[j] = exp(s[j] - m) in place over nk entries (-inf gives 0); returns the sum.
SINKSCOPE_AVX2 float exp_sum_avx2(float* s, int nk, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  __m256 sum = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= nk; j += 8) {
    const __m256 p = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
    _mm256_storeu_ps(s + j, p);
    sum = _mm256_add_ps(sum, p);
  }
  float buf[8];
  _mm256_storeu_ps(buf, sum);
  float t = ((buf[0] + buf[1]) + (buf[2] + buf[3])) + ((buf[4] + buf[5]) + (buf[6] + buf[7]));
  for (; j < nk; ++j) t += (s[j] = std::exp(s[j] - m));
  return t;
}

// acc[0..d) += sum_j p[j] v_j, v_j = v + j * stride; d % 8 == 0. 64 lanes of acc stay in
// registers across the key loop (named accumulators, as in scores_avx2; one FMA chain per
// lane, so the sum order is fixed).
SINKSCOPE_AVX2 void pv_avx2(const float* p, const float* v, int64_t stride, int nk, int d,
                            float* acc) {
  int c0 = 0;
  for (; c0 + 64 <= d; c0 += 64) fma_rows64(p, 1.0f, v + c0, stride, nk, acc + c0, acc + c0);
  for (; c0 < d; c0 += 8) {  // d not a multiple of 64: eight lanes at a time
    __m256 a = _mm256_loadu_ps(acc + c0);
    const float* vr = v + c0;
    for (int j = 0; j < nk; ++j, vr += stride) a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(vr), a);
    _mm256_storeu_ps(acc + c0, a);
  }
}
#endif

void scores_generic(const float* q, const float* kt, int d, int ld, int nk, float scale,
                    float* __restrict sr) {
  for (int j = 0; j < nk; ++j) sr[j] = 0.0f;
  for (int i = 0; i < d; ++i) {
    const float qv = q[i] * scale;
    const float* __restrict kr = kt + size_t(i) * ld;
    for (int j = 0; j < nk; ++j) sr[j] += qv * kr[j];
  }
}

float exp_sum_generic(float* s, int nk, float m) {
  float t = 0.0f;
  for (int j = 0; j < nk; ++j) t += (s[j] = std::exp(s[j] - m));
  return t;
}

void pv_generic(const float* p, const float* v, int64_t stride, int nk, int d, float* acc) {
  for (int j = 0; j < nk; ++j)
    if (p[j] != 0.0f) axpy(p[j], v + j * stride, acc, d);
}

}  // namespace

void cpu_attention(const CpuAttentionArgs& a, ThreadPool* pool) {
  const int d = a.d, bq = a.q_tile, bk = a.block_size;
  const int group = a.n_head / a.n_head_kv;
  const int n_qtiles = (a.n_q + bq - 1) / bq;
  const int last_pos = a.q_pos0 + a.n_q - 1;
  const KvLayerView* kv = a.kv;
  const int n_kvtiles_total = kv ? kv->n_pages : last_pos / bk + 1;
  const int64_t q_stride = int64_t(a.n_head) * d;    // between query tokens
  const int64_t kv_stride = int64_t(a.n_head_kv) * d;  // between cached positions
  const int S = a.sink_count, W = a.window, OW = a.own_window;
  const float cap = a.softcap, inv_cap = cap > 0 ? 1.0f / cap : 0.0f;
  // Tile geometry: contiguous keys (cache index == position) or the paged view.
  auto tile_pos0 = [&](int t) { return kv ? kv->page_pos0[t] : t * bk; };
  auto tile_keys = [&](int t) {
    return kv ? kv->page_rows[t] : std::min(t * bk + bk, a.n_kv) - t * bk;
  };
  int64_t n_keys = a.n_kv;
  if (kv) {
    n_keys = 0;
    for (int t = 0; t < kv->n_pages; ++t) n_keys += kv->page_rows[t];
  }
  const int col_n = a.col_mass ? a.col_n : 0;

  if (a.mask && a.mask_head >= 0) {
    a.mask->assign(size_t(n_qtiles) * n_kvtiles_total, 0);
    if (a.mask_cols) *a.mask_cols = n_kvtiles_total;
  }
  const size_t all_cells = size_t(a.n_head) * n_qtiles * n_kvtiles_total;
  if (a.mask_all) {
    a.mask_all->assign(all_cells, 0);
    if (a.mask_cols) *a.mask_cols = n_kvtiles_total;
    if (a.tile_stat) a.tile_stat->assign(all_cells, NAN);
  }
  std::vector<TileCounts> local(size_t(a.n_head) * n_qtiles);
  std::vector<double> local_cm(size_t(a.n_head) * n_qtiles * size_t(col_n), 0.0);
  std::vector<double> local_sink(a.sink_mass ? size_t(a.n_head) * n_qtiles : 0, 0.0);
#ifdef SINKSCOPE_X86
  const bool use_avx2 = simd::have_avx2();
#endif

  auto run = [&](int64_t task) {
    const int h = int(task / n_qtiles);
    const int qt = int(task % n_qtiles);
    const int g = h / group;
    const int r0 = qt * bq, r1 = std::min(a.n_q, r0 + bq), rows = r1 - r0;
    const int tile_last_pos = a.q_pos0 + r1 - 1;  // furthest key any row of the tile can see
    const int tile_first_pos = a.q_pos0 + r0;

    std::vector<float> m(size_t(rows), -INFINITY), l(size_t(rows), 0.0f);
    if (a.sink_logits) {  // the learned sink: exp(sink - m) = 1 with m = sink
      std::fill(m.begin(), m.end(), a.sink_logits[h]);
      std::fill(l.begin(), l.end(), 1.0f);
    }
    std::vector<float> acc(size_t(rows) * d, 0.0f);
    std::vector<float> s(size_t(rows) * bk);
    std::vector<float> tile_max(static_cast<size_t>(rows));
    std::vector<double> bound(static_cast<size_t>(rows), 0.0);
    std::vector<float> cm(size_t(rows) * size_t(col_n), -INFINITY);  // raw scores, probe
    TileCounts& cnt = local[size_t(task)];
    uint8_t* mask_row =
        (a.mask && h == a.mask_head) ? a.mask->data() + size_t(qt) * n_kvtiles_total : nullptr;
    const size_t all_row = (size_t(h) * n_qtiles + qt) * n_kvtiles_total;
    uint8_t* mask_all_row = a.mask_all ? a.mask_all->data() + all_row : nullptr;
    float* stat_row = a.mask_all && a.tile_stat ? a.tile_stat->data() + all_row : nullptr;

    std::vector<float> kt(size_t(d) * bk);  // K tile transposed: (d, bk)
    std::vector<float> vbuf;                // dequantized V tile (bk, d), quantized pages only
    const bool quant = kv && kv->fmt.bits != 0;
    if (quant) vbuf.resize(size_t(bk) * d);
    // Protected (unquantized) rows of a page: [first, last) indices into prot_pos.
    auto prot_range = [&](int k0, int nk) {
      const int* b = kv->prot_pos;
      const int* e = b + kv->n_prot;
      return std::pair<int, int>(int(std::lower_bound(b, e, k0) - b),
                                 int(std::lower_bound(b, e, k0 + nk) - b));
    };
    bool first_visit = true;
    for (int t = 0; t < n_kvtiles_total; ++t) {
      const int k0 = tile_pos0(t), nk = tile_keys(t), k1 = k0 + nk;
      if (k0 > tile_last_pos) break;  // tiles are in position order
      // A tile none of whose keys is within the first row's windows (the cache's, the layer's
      // own) is invisible to every row (kernels/visibility.h: the rule the kernels share).
      if (!visibility::tile_in_windows(k0, k1 - 1, tile_first_pos, S, W, OW)) continue;
      // Transpose the K tile once; every row of the query tile reuses it, and the score loop
      // becomes broadcast-FMA over contiguous keys (no horizontal sums).
      if (!quant) {
        const float* k_first = kv ? kv->k_f32[t] + int64_t(g) * d
                                  : a.k + int64_t(k0) * kv_stride + int64_t(g) * d;
#ifdef SINKSCOPE_X86
        if (use_avx2 && nk % 8 == 0 && d % 8 == 0) {
          transpose_tile_avx2(k_first, kv_stride, nk, d, kt.data(), bk);
        } else
#endif
        {
          for (int j = 0; j < nk; ++j) {
            const float* kj = k_first + int64_t(j) * kv_stride;
            for (int i = 0; i < d; ++i) kt[size_t(i) * bk + j] = kj[i];
          }
        }
      } else {
        const int cb = kv->fmt.code_bytes(d), ns = kv->fmt.scales(d);
        for (int j = 0; j < nk; ++j) {
          const int64_t slot = int64_t(j) * a.n_head_kv + g;
          dequantize_kv_row(kv->k_codes[t] + slot * cb, kv->k_scales[t] + slot * ns, d, kv->fmt,
                            kt.data() + j, bk);
        }
        const auto [p0, p1] = prot_range(k0, nk);
        for (int p = p0; p < p1; ++p) {
          const float* kp = kv->prot_k + (int64_t(p) * a.n_head_kv + g) * d;
          const int j = kv->prot_pos[p] - k0;
          for (int i = 0; i < d; ++i) kt[size_t(i) * bk + j] = kp[i];
        }
      }
      // S = q k^T * scale, masked. QK^T is always computed (the rule needs it).
      bool any_visible = false;
      for (int r = 0; r < rows; ++r) {
        const int pos = a.q_pos0 + r0 + r;
        const float* __restrict qr = a.q + int64_t(r0 + r) * q_stride + int64_t(h) * d;
        float* __restrict sr = s.data() + size_t(r) * bk;
#ifdef SINKSCOPE_X86
        if (use_avx2 && nk % 8 == 0)
          scores_avx2(qr, kt.data(), d, bk, nk, a.scale, sr);
        else
#endif
          scores_generic(qr, kt.data(), d, bk, nk, a.scale, sr);
        const int vis = std::min(nk, pos - k0 + 1);  // keys of this tile the row may see (causal)
        if (a.q_sink && k0 < S && cache_position(pos, S, W) != pos) {
          // Cache position mode: sink keys are scored with the query rotated at its cache index.
          const float* qs = a.q_sink + int64_t(r0 + r) * q_stride + int64_t(h) * d;
          for (int j = 0; j < std::min(vis, S - k0); ++j) {
            float acc_s = 0.0f;
            for (int i = 0; i < d; ++i) acc_s += (qs[i] * a.scale) * kt[size_t(i) * bk + j];
            sr[j] = acc_s;
          }
        }
        if (cap > 0)
          for (int j = 0; j < vis; ++j) sr[j] = std::tanh(sr[j] * inv_cap) * cap;
        for (int j = std::max(vis, 0); j < nk; ++j) sr[j] = -INFINITY;
        // The keys of this row for which visibility::key_in_windows is false, as two bands.
        if (W > 0) {  // the evicted band [S, pos - W] of this row
          const int lo = std::max(S, k0), hi = std::min(pos - W, k1 - 1);
          for (int k = lo; k <= hi; ++k) sr[k - k0] = -INFINITY;
        }
        if (OW > 0)  // keys [.., pos - OW] lie outside the layer's own window
          for (int k = k0, hi = std::min(pos - OW, k1 - 1); k <= hi; ++k) sr[k - k0] = -INFINITY;
        float mx = -INFINITY;
        for (int j = 0; j < vis; ++j) mx = std::max(mx, sr[j]);
        tile_max[size_t(r)] = mx;
        any_visible = any_visible || mx > -INFINITY;
        if (k0 < col_n)
          for (int j = 0; j < std::min(nk, col_n - k0); ++j) cm[size_t(r) * col_n + k0 + j] = sr[j];
      }
      if (!any_visible) continue;  // fully masked: not counted
      ++cnt.visited;
      // The rule: skip iff every row's tile max lies more than ln(lambda) below its running max.
      // Rows that see no key of this tile (m~ = -inf) agree trivially. The first visited tile is
      // never skipped.
      bool skip = false;
      if (!first_visit && a.log_lambda > -INFINITY) {
        skip = true;
        for (int r = 0; r < rows && skip; ++r)
          if (!(tile_max[size_t(r)] - m[size_t(r)] < a.log_lambda)) skip = false;
      }
      if (stat_row && !first_visit) {
        float st = -INFINITY;
        for (int r = 0; r < rows; ++r)
          if (tile_max[size_t(r)] > -INFINITY)
            st = std::max(st, m[size_t(r)] > -INFINITY ? tile_max[size_t(r)] - m[size_t(r)] : INFINITY);
        stat_row[t] = st;
      }
      first_visit = false;
      if (mask_row) mask_row[t] = skip ? 2 : 1;
      if (mask_all_row) mask_all_row[t] = skip ? 2 : 1;
      if (skip) {
        ++cnt.skipped;
        for (int r = 0; r < rows; ++r) {
          const float* sr = s.data() + size_t(r) * bk;
          int vis = 0;
          for (int j = 0; j < nk; ++j) vis += sr[j] > -INFINITY ? 1 : 0;
          if (vis > 0) bound[size_t(r)] += double(vis) * std::exp(double(tile_max[size_t(r)]) - m[size_t(r)]);
        }
        if (!a.skip_softmax_exp) {
          // Denominator stays exact; only the PV product is dropped.
          for (int r = 0; r < rows; ++r) {
            const float* sr = s.data() + size_t(r) * bk;
            float add = 0.0f;
            for (int j = 0; j < nk; ++j) add += std::exp(sr[j] - m[size_t(r)]);
            l[size_t(r)] += add;
          }
        }
        continue;
      }
      // V tile: straight from float storage, or dequantized once for all rows (only now, after
      // the skip decision, so a skipped tile never loads V).
      const float* vt;
      int64_t v_stride = kv_stride;
      if (quant) {
        const int cb = kv->fmt.code_bytes(d), ns = kv->fmt.scales(d);
        for (int j = 0; j < nk; ++j) {
          const int64_t slot = int64_t(j) * a.n_head_kv + g;
          dequantize_kv_row(kv->v_codes[t] + slot * cb, kv->v_scales[t] + slot * ns, d, kv->fmt,
                            vbuf.data() + size_t(j) * d);
        }
        const auto [p0, p1] = prot_range(k0, nk);
        for (int p = p0; p < p1; ++p)
          std::copy_n(kv->prot_v + (int64_t(p) * a.n_head_kv + g) * d, d,
                      vbuf.data() + size_t(kv->prot_pos[p] - k0) * d);
        vt = vbuf.data();
        v_stride = d;
      } else {
        vt = kv ? kv->v_f32[t] + int64_t(g) * d : a.v + int64_t(k0) * kv_stride + int64_t(g) * d;
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
        float* sr = s.data() + size_t(r) * bk;
        float add;
#ifdef SINKSCOPE_X86
        if (use_avx2 && d % 8 == 0) {
          add = exp_sum_avx2(sr, nk, m_new);
          pv_avx2(sr, vt, v_stride, nk, d, ar);
        } else
#endif
        {
          add = exp_sum_generic(sr, nk, m_new);
          pv_generic(sr, vt, v_stride, nk, d, ar);
        }
        l[size_t(r)] = l[size_t(r)] * corr + add;
        m[size_t(r)] = m_new;
      }
    }
    for (int r = 0; r < rows; ++r) {
      cnt.mass_bound_max = std::max(cnt.mass_bound_max, bound[size_t(r)]);
      cnt.mass_bound_sum += bound[size_t(r)];
    }
    cnt.rows += rows;
    for (int r = 0; r < rows; ++r) {
      float* o = a.out + int64_t(r0 + r) * q_stride + int64_t(h) * d;
      const float inv = l[size_t(r)] > 0 ? 1.0f / l[size_t(r)] : 0.0f;
      const float* ar = acc.data() + size_t(r) * d;
      for (int i = 0; i < d; ++i) o[i] = ar[i] * inv;
    }
    if (a.sink_logits && a.sink_mass) {
      double sm = 0.0;
      for (int r = 0; r < rows; ++r)
        if (l[size_t(r)] > 0) sm += std::exp(double(a.sink_logits[h]) - m[size_t(r)]) / double(l[size_t(r)]);
      local_sink[size_t(task)] = sm;
    }
    if (col_n > 0) {
      double* dst = local_cm.data() + size_t(task) * col_n;
      for (int r = 0; r < rows; ++r) {
        if (!(l[size_t(r)] > 0)) continue;
        for (int k = 0; k < col_n; ++k) {
          const float sv = cm[size_t(r) * col_n + k];
          if (sv > -INFINITY) dst[k] += std::exp(double(sv) - m[size_t(r)]) / double(l[size_t(r)]);
        }
      }
    }
  };

  const int64_t n_tasks = int64_t(a.n_head) * n_qtiles;
  // Below ~64K multiply-adds (~10 µs on one core) handing tasks to the pool costs more than it
  // saves (its workers spin briefly between a decode step's parallel sections, so a hand-out
  // costs microseconds, not a wake-up): decode over the first few dozen tokens stays on the
  // calling thread, longer contexts split their heads over the pool.
  const int64_t work = int64_t(a.n_q) * n_keys * a.n_head * d;
  if (pool && work >= (int64_t(1) << 16)) {
    pool->parallel_for(n_tasks, run);
  } else {
    for (int64_t t = 0; t < n_tasks; ++t) run(t);
  }
  if (a.counts) {
    for (int h = 0; h < a.n_head; ++h)
      for (int qt = 0; qt < n_qtiles; ++qt) {
        a.counts[h].add(local[size_t(h) * n_qtiles + qt]);
      }
  }
  if (a.sink_logits && a.sink_mass)
    for (int h = 0; h < a.n_head; ++h)
      for (int qt = 0; qt < n_qtiles; ++qt) a.sink_mass[h] += local_sink[size_t(h) * n_qtiles + qt];
  if (col_n > 0)
    for (int h = 0; h < a.n_head; ++h)
      for (int qt = 0; qt < n_qtiles; ++qt)
        for (int k = 0; k < col_n; ++k)
          a.col_mass[size_t(h) * col_n + k] += local_cm[(size_t(h) * n_qtiles + qt) * col_n + k];
}

}  // namespace sinkscope
