// SPDX-License-Identifier: Apache-2.0
// SIMD building blocks of the CPU kernels (attention, quantized products, logit statistics):
// the attribute that compiles a function for AVX2 + FMA + F16C inside a portable binary, the
// run-time check that picks those functions, and the vector exp of each precision. Kernels keep
// a portable path beside every AVX2 one and choose with `simd::have_avx2()`.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define SINKSCOPE_X86 1
#define SINKSCOPE_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

// The AVX-512 kernels' targets (engine/backend/qgemv_int_avx512.cpp).
#define SINKSCOPE_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx2,fma,f16c"
#define SINKSCOPE_AVX512VNNI_TARGET "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"

namespace sinkscope::simd {

// Decode's products stream their weights from L3 / memory once per token; the hardware
// prefetchers alone leave a single core at ~2-4 GB/s on the (Xeon, 480 MiB L3) development
// machine. The kernels ask for the bytes this far ahead of the block they multiply, into L2
// (bench_qgemv: the 576 x 576 Q4_1 product from outside the caches in ~28 vs ~80 µs).
inline constexpr int kPrefetchBytes = 2048;

#ifdef SINKSCOPE_X86
// Asks for the cache lines of [p + kPrefetchBytes, + n) into L2 (n <= 64: one line).
inline void prefetch_ahead(const uint8_t* p, int n = 64) {
  for (int o = 0; o < n; o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p) + kPrefetchBytes + o, _MM_HINT_T1);
}
#endif

// True when this CPU runs AVX2, FMA and F16C (false off x86).
bool have_avx2();
// True when this CPU (and OS) runs AVX-512 F, BW and VL, and have_avx2().
bool have_avx512();
// True when have_avx512() and the CPU has AVX512_VNNI.
bool have_avx512_vnni();

#ifdef SINKSCOPE_X86
// exp of 8 floats: 2^n p(r) with r = x - n ln2 (ln2 split in two for precision) and a degree-6
// polynomial (Cephes expf coefficients); ~2 ulp. Inputs below -87.3 give exactly 0.
SINKSCOPE_AVX2 inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f);
  const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), _mm256_set1_ps(88.3762626647949f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(under, y);
}

// exp of 4 doubles: 2^k e^r with r = x - k ln2 (ln2 split in two) and the degree-13 Taylor
// polynomial of e^r on |r| <= ln2 / 2 (truncation < 2e-16 relative): within ~2 ulp of glibc's
// exp. Inputs below -708 give 0.
SINKSCOPE_AVX2 inline __m256d exp4d(__m256d x) {
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
// The sum of v's eight lanes.
SINKSCOPE_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The fp16 value at p (ggml block scales; unaligned).
SINKSCOPE_AVX2 inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

#endif

}  // namespace sinkscope::simd
