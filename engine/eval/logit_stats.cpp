// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/logit_stats.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/simd.h"

namespace sinkscope {

namespace {

#ifdef SINKSCOPE_X86
// The AVX2 bodies cover the leading multiple of 8 (4 for probabilities) and return how far they
// got; the callers finish the tail with the portable loops.
SINKSCOPE_AVX2 int row_max_avx2(const float* row, int n, float* mx) {
  int v = 0;
  __m256 m8 = _mm256_set1_ps(-INFINITY);
  for (; v + 8 <= n; v += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(row + v));
  float buf[8];
  _mm256_storeu_ps(buf, m8);
  for (float b : buf) *mx = std::max(*mx, b);
  return v;
}

SINKSCOPE_AVX2 int exp_sum_avx2(const float* row, int n, float mx, double* s) {
  int v = 0;
  const __m256d m4 = _mm256_set1_pd(double(mx));
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (; v + 8 <= n; v += 8) {
    const __m256 x = _mm256_loadu_ps(row + v);
    s0 = _mm256_add_pd(s0, simd::exp4d(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), m4)));
    s1 = _mm256_add_pd(s1, simd::exp4d(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), m4)));
  }
  double buf[4];
  _mm256_storeu_pd(buf, _mm256_add_pd(s0, s1));
  *s = (buf[0] + buf[1]) + (buf[2] + buf[3]);
  return v;
}

SINKSCOPE_AVX2 int probabilities_avx2(const float* row, int n, double lse, float* out) {
  int v = 0;
  const __m256d l4 = _mm256_set1_pd(lse);
  for (; v + 4 <= n; v += 4)
    _mm_storeu_ps(out + v, _mm256_cvtpd_ps(simd::exp4d(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(row + v)), l4))));
  return v;
}

SINKSCOPE_AVX2 int dot_f64_avx2(const float* a, const float* b, int n, double* s) {
  int v = 0;
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  for (; v + 8 <= n; v += 8) {
    const __m256 x = _mm256_loadu_ps(a + v), y = _mm256_loadu_ps(b + v);
    a0 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)),
                         _mm256_cvtps_pd(_mm256_castps256_ps128(y)), a0);
    a1 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)),
                         _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)), a1);
  }
  double buf[4];
  _mm256_storeu_pd(buf, _mm256_add_pd(a0, a1));
  *s = (buf[0] + buf[1]) + (buf[2] + buf[3]);
  return v;
}
#endif

}  // namespace

float row_max(const float* row, int n) {
  int v = 0;
  float mx = -INFINITY;
#ifdef SINKSCOPE_X86
  if (simd::have_avx2()) v = row_max_avx2(row, n, &mx);
#endif
  for (; v < n; ++v) mx = std::max(mx, row[v]);
  return mx;
}

int row_argmax(const float* row, int n) { return int(std::max_element(row, row + n) - row); }

double log_sum_exp(const float* row, int n) {
  const float mx = row_max(row, n);
  double s = 0;
  int v = 0;
#ifdef SINKSCOPE_X86
  if (simd::have_avx2()) v = exp_sum_avx2(row, n, mx, &s);
#endif
  for (; v < n; ++v) s += std::exp(double(row[v]) - mx);
  return double(mx) + std::log(s);
}

void row_probabilities(const float* row, int n, double lse, float* out) {
  int v = 0;
#ifdef SINKSCOPE_X86
  if (simd::have_avx2()) v = probabilities_avx2(row, n, lse, out);
#endif
  for (; v < n; ++v) out[v] = float(std::exp(double(row[v]) - lse));
}

double dot_f64(const float* a, const float* b, int n) {
  int v = 0;
  double s = 0;
#ifdef SINKSCOPE_X86
  if (simd::have_avx2()) v = dot_f64_avx2(a, b, n, &s);
#endif
  for (; v < n; ++v) s += double(a[v]) * double(b[v]);
  return s;
}

double row_kl(const float* p, double lse_p, const float* q, double lse_q, int n) {
  double kl = 0;
  for (int v = 0; v < n; ++v) {
    const double logp = double(p[v]) - lse_p;
    kl += std::exp(logp) * (logp - (double(q[v]) - lse_q));
  }
  return std::max(kl, 0.0);
}

}  // namespace sinkscope
