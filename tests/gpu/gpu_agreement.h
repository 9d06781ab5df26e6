// SPDX-License-Identifier: Apache-2.0
// Logit agreement between a reference run (the CPU backend) and a GPU run, for the GPU checks:
// KL(ref || test) per row in double from log-softmax, top-1 agreement, max |dlogit|, and
// whether every test logit is finite.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace sinkscope::gpu_test {

struct Agreement {
  int rows = 0;
  double mean_kl = 0, max_kl = 0, top1 = 0, max_abs = 0;
  bool finite = true;
  std::string str() const {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%d positions, mean KL %.3g, max KL %.3g, top-1 %.2f %%, max |dlogit| %.3g%s",
                  rows, mean_kl, max_kl, 100.0 * top1, max_abs, finite ? "" : ", NON-FINITE");
    return buf;
  }
};

// KL(ref || test) per row in double from log-softmax; top-1 agreement; max abs logit diff.
inline Agreement compare(const std::vector<float>& ref, const std::vector<float>& test, int V) {
  Agreement a;
  if (ref.size() != test.size() || ref.empty()) {
    a.finite = false;
    return a;
  }
  a.rows = int(ref.size() / size_t(V));
  int agree = 0;
  for (int r = 0; r < a.rows; ++r) {
    const float* p = &ref[size_t(r) * V];
    const float* q = &test[size_t(r) * V];
    double mp = -INFINITY, mq = -INFINITY;
    int ap = 0, aq = 0;
    for (int i = 0; i < V; ++i) {
      if (!std::isfinite(q[i])) a.finite = false;
      if (p[i] > mp) mp = p[i], ap = i;
      if (q[i] > mq) mq = q[i], aq = i;
      a.max_abs = std::max(a.max_abs, double(std::fabs(p[i] - q[i])));
    }
    double sp = 0, sq = 0;
    for (int i = 0; i < V; ++i) {
      sp += std::exp(double(p[i]) - mp);
      sq += std::exp(double(q[i]) - mq);
    }
    const double lzp = mp + std::log(sp), lzq = mq + std::log(sq);
    double kl = 0;
    for (int i = 0; i < V; ++i) {
      const double lp = double(p[i]) - lzp, lq = double(q[i]) - lzq;
      kl += std::exp(lp) * (lp - lq);
    }
    a.mean_kl += kl;
    a.max_kl = std::max(a.max_kl, kl);
    agree += ap == aq;
  }
  a.mean_kl /= a.rows;
  a.top1 = double(agree) / a.rows;
  return a;
}

// Random-weight models have near-ties: the argmax must agree only on the rows where the
// reference's top-2 gap is at least `gap` logits. Returns the agreeing share of those rows.
inline double confident_top1(const std::vector<float>& ref, const std::vector<float>& test, int V,
                             double gap, int* rows_out) {
  int rows = 0, agree = 0;
  for (size_t r = 0; r + 1 <= ref.size() / size_t(V) && ref.size() == test.size(); ++r) {
    const float* p = &ref[r * V];
    const float* q = &test[r * V];
    const int a = int(std::max_element(p, p + V) - p);
    float second = -INFINITY;
    for (int i = 0; i < V; ++i)
      if (i != a) second = std::max(second, p[i]);
    if (p[a] - second < gap) continue;
    ++rows;
    agree += int(std::max_element(q, q + V) - q) == a;
  }
  *rows_out = rows;
  return rows ? double(agree) / rows : 1.0;
}

// A backend's per-row statistics (Backend::last_row_stats) against the same rows recomputed
// here from the logits it returned: log-sum-exp in double, argmax = first index of the max.
struct RowStatsDiff {
  int rows = 0;             // rows compared
  double max_lse_diff = 0;  // max |lse - recomputed|
  int top1_mismatch = 0;
  std::string str() const {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%d rows, max |dlse| %.3g, argmax mismatches %d", rows,
                  max_lse_diff, top1_mismatch);
    return buf;
  }
};

inline RowStatsDiff row_stats_diff(const std::vector<float>& logits, int V,
                                   const std::vector<double>& lse, const std::vector<int>& top1) {
  RowStatsDiff d;
  const size_t rows = logits.size() / size_t(V);
  if (lse.size() != rows || top1.size() != rows) {
    d.rows = -1;
    return d;
  }
  for (size_t r = 0; r < rows; ++r) {
    const float* x = logits.data() + r * size_t(V);
    const int arg = int(std::max_element(x, x + V) - x);
    double s = 0;
    for (int i = 0; i < V; ++i) s += std::exp(double(x[i]) - double(x[arg]));
    const double l = double(x[arg]) + std::log(s);
    d.max_lse_diff = std::max(d.max_lse_diff, std::abs(l - lse[r]));
    d.top1_mismatch += arg != top1[r];
    ++d.rows;
  }
  return d;
}

}  // namespace sinkscope::gpu_test
