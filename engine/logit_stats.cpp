// SPDX-License-Identifier: Apache-2.0
#include "engine/logit_stats.h"

#include <algorithm>
#include <cmath>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace sinkscope {

namespace {

#if defined(__AVX2__) && defined(__FMA__)
// exp of 4 doubles, 2^k e^r with r = x - k ln2 (ln2 split in two) and the degree-13 Taylor
// polynomial of e^r on |r| <= ln2 / 2 (truncation < 2e-16 relative): within ~2 ulp of glibc's
// exp. Inputs below -708 give 0 (here they are logits 708 nats under the row's max: terms
// under 1e-307 in a sum >= 1).
inline __m256d exp4d(__m256d x) {
  const __m256d lo = _mm256_set1_pd(-708.0);
  const __m256d under = _mm256_cmp_pd(x, lo, _CMP_LT_OQ);
  x = _mm256_max_pd(x, lo);
  const __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(6.93147180369123816490e-01), x);
  r = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), r);
  static constexpr double kInvFact[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
                                        1.0 / 3628800.0,    1.0 / 362880.0,    1.0 / 40320.0,
                                        1.0 / 5040.0,       1.0 / 720.0,       1.0 / 120.0,
                                        1.0 / 24.0,         1.0 / 6.0,         0.5,
                                        1.0,                1.0};
  __m256d p = _mm256_set1_pd(kInvFact[0]);
  for (int i = 1; i < 14; ++i) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kInvFact[i]));
  const __m128i ki = _mm256_cvtpd_epi32(k);
  const __m256i e = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_cvtepi32_epi64(ki), _mm256_set1_epi64x(1023)), 52);
  return _mm256_andnot_pd(under, _mm256_mul_pd(p, _mm256_castsi256_pd(e)));
}
#endif

}  // namespace

float row_max(const float* row, int n) {
  int v = 0;
  float mx = -INFINITY;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 m8 = _mm256_set1_ps(-INFINITY);
  for (; v + 8 <= n; v += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(row + v));
  float buf[8];
  _mm256_storeu_ps(buf, m8);
  for (float b : buf) mx = std::max(mx, b);
#endif
  for (; v < n; ++v) mx = std::max(mx, row[v]);
  return mx;
}

int row_argmax(const float* row, int n) { return int(std::max_element(row, row + n) - row); }

double log_sum_exp(const float* row, int n) {
  const float mx = row_max(row, n);
  double s = 0;
  int v = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const __m256d m4 = _mm256_set1_pd(double(mx));
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (; v + 8 <= n; v += 8) {
    const __m256 x = _mm256_loadu_ps(row + v);
    s0 = _mm256_add_pd(s0, exp4d(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)), m4)));
    s1 = _mm256_add_pd(s1, exp4d(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)), m4)));
  }
  double buf[4];
  _mm256_storeu_pd(buf, _mm256_add_pd(s0, s1));
  s = (buf[0] + buf[1]) + (buf[2] + buf[3]);
#endif
  for (; v < n; ++v) s += std::exp(double(row[v]) - mx);
  return double(mx) + std::log(s);
}

void row_probabilities(const float* row, int n, double lse, float* out) {
  int v = 0;
#if defined(__AVX2__) && defined(__FMA__)
  const __m256d l4 = _mm256_set1_pd(lse);
  for (; v + 4 <= n; v += 4)
    _mm_storeu_ps(out + v, _mm256_cvtpd_ps(exp4d(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(row + v)), l4))));
#endif
  for (; v < n; ++v) out[v] = float(std::exp(double(row[v]) - lse));
}

double dot_f64(const float* a, const float* b, int n) {
  int v = 0;
  double s = 0;
#if defined(__AVX2__) && defined(__FMA__)
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
  s = (buf[0] + buf[1]) + (buf[2] + buf[3]);
#endif
  for (; v < n; ++v) s += double(a[v]) * double(b[v]);
  return s;
}

}  // namespace sinkscope
