// SPDX-License-Identifier: Apache-2.0
#include "tests/gpu/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sinkscope::testing {

RefTile reference_query_tile(const HostProblem& p, int head, int64_t row0, int rows,
                             double lambda, const uint8_t* gpu_mask, double margin,
                             bool keep_exp) {
  const ProblemSpec& s = p.spec;
  const int d = s.head_dim, bc = s.block_size;
  const int kvh = head / (s.n_q_heads / s.n_kv_heads);
  const double scale = 1.0 / std::sqrt(double(d));
  const double ninf = -std::numeric_limits<double>::infinity();
  const double ln_lambda = lambda > 0 ? std::log(lambda) : ninf;
  const int64_t last_pos = s.q_start + row0 + rows - 1;
  const int64_t last_key = std::min(last_pos, s.kv_len - 1);
  const int n_t = int(last_key / bc) + 1;
  const int64_t n_keys = int64_t(n_t) * bc;

  // Scores (double from the bf16 inputs), -inf where not causally visible.
  std::vector<double> sc(size_t(rows) * n_keys, ninf);
  const int64_t n_real = std::min<int64_t>(n_keys, s.kv_len);
  std::vector<double> kf(size_t(n_real) * d), vf(size_t(n_real) * d);
  for (int64_t j = 0; j < n_real; ++j)
    for (int i = 0; i < d; ++i) {
      kf[j * d + i] = p.kf(j, kvh, i);
      vf[j * d + i] = p.vf(j, kvh, i);
    }
  for (int r = 0; r < rows; ++r) {
    const int64_t pos = s.q_start + row0 + r;
    std::vector<double> qv(d);
    for (int i = 0; i < d; ++i) qv[i] = p.qf(row0 + r, head, i);
    const int64_t lim = std::min(pos, s.kv_len - 1);
    for (int64_t j = 0; j <= lim; ++j) {
      double acc = 0;
      const double* kr = &kf[j * d];
      for (int i = 0; i < d; ++i) acc += qv[i] * kr[i];
      sc[size_t(r) * n_keys + j] = acc * scale;
    }
  }

  RefTile res;
  res.n_visible_tiles = n_t;
  res.skip.assign(n_t, 0);
  res.ambiguous.assign(n_t, 0);
  std::vector<double> m_run(rows, ninf);
  std::vector<uint8_t> keep(n_t, 1);
  for (int t = 0; t < n_t; ++t) {
    double min_margin = std::numeric_limits<double>::infinity();
    double mscale = 1.0;
    std::vector<double> tm(rows, ninf);
    for (int r = 0; r < rows; ++r) {
      for (int j = t * bc; j < (t + 1) * bc; ++j) tm[r] = std::max(tm[r], sc[size_t(r) * n_keys + j]);
      if (tm[r] == ninf) continue;  // nothing visible in t: this row agrees
      const double mg = m_run[r] == ninf ? -std::numeric_limits<double>::infinity()
                                         : ln_lambda - (tm[r] - m_run[r]);
      if (mg < min_margin) {
        min_margin = mg;
        mscale = std::max(1.0, std::fabs(m_run[r]));
      }
    }
    bool skip = lambda > 0 && t > 0 && min_margin > 0;
    const bool amb = lambda > 0 && t > 0 && std::fabs(min_margin) < margin * mscale;
    res.skip[t] = skip;
    res.ambiguous[t] = amb;
    if (amb && gpu_mask) skip = gpu_mask[t] == 1;
    keep[t] = !skip;
    if (!skip)
      for (int r = 0; r < rows; ++r) m_run[r] = std::max(m_run[r], tm[r]);
  }

  res.out.assign(size_t(rows) * d, 0.0);
  std::vector<double> acc(d);
  for (int r = 0; r < rows; ++r) {
    double mx = ninf;
    for (int t = 0; t < n_t; ++t)
      if (keep[t])
        for (int j = t * bc; j < (t + 1) * bc; ++j) mx = std::max(mx, sc[size_t(r) * n_keys + j]);
    std::fill(acc.begin(), acc.end(), 0.0);
    double den = 0;
    for (int t = 0; t < n_t; ++t) {
      if (!keep[t] && !keep_exp) continue;
      for (int j = t * bc; j < (t + 1) * bc; ++j) {
        const double sv = sc[size_t(r) * n_keys + j];
        if (sv == ninf) continue;
        const double w = std::exp(sv - mx);
        den += w;
        if (!keep[t]) continue;  // keep_exp: in the denominator only
        for (int i = 0; i < d; ++i) acc[i] += w * vf[size_t(j) * d + i];
      }
    }
    for (int i = 0; i < d; ++i) res.out[size_t(r) * d + i] = den > 0 ? acc[i] / den : 0.0;
  }
  return res;
}

}  // namespace sinkscope::testing
