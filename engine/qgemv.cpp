// SPDX-License-Identifier: Apache-2.0
#include "engine/qgemv.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/thread_pool.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#include <immintrin.h>
#define SINKSCOPE_X86 1
#endif

namespace sinkscope {
namespace {

float dot_generic(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Rows [r0, r1) through dequantize_row into a scratch row.
void rows_generic(const QuantMatrix& w, const float* x, float* y, int64_t r0, int64_t r1) {
  thread_local std::vector<float> row;
  row.resize(size_t(w.cols));
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_row(w.type, w.data + uint64_t(r) * w.row_bytes, row.data(), w.cols);
    y[r] = dot_generic(row.data(), x, w.cols);
  }
}

#ifdef SINKSCOPE_X86
#define SINKSCOPE_AVX2 __attribute__((target("avx2,fma,f16c")))

SINKSCOPE_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

SINKSCOPE_AVX2 inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Σ q_j x_j over one block of 32 4-bit values: byte j holds element j (low nibble) and
// element j + 16 (high nibble), as in ggml.
SINKSCOPE_AVX2 inline __m256 nibble_block_dot(const uint8_t* qs, const float* x, __m256 offset) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(raw, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
  __m256 q0 = _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), offset);
  __m256 q1 = _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), offset);
  __m256 q2 = _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), offset);
  __m256 q3 = _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), offset);
  __m256 acc = _mm256_mul_ps(q0, _mm256_loadu_ps(x));
  acc = _mm256_fmadd_ps(q1, _mm256_loadu_ps(x + 8), acc);
  acc = _mm256_fmadd_ps(q2, _mm256_loadu_ps(x + 16), acc);
  acc = _mm256_fmadd_ps(q3, _mm256_loadu_ps(x + 24), acc);
  return acc;
}

// Q4_1: {fp16 d, fp16 m, u8 qs[16]}: w = d q + m, so Σ w x = d Σ q x + m Σ x; Σ x per block is
// computed once per call (xsum).
SINKSCOPE_AVX2 void rows_q4_1(const QuantMatrix& w, const float* x, const float* xsum, float* y,
                              int64_t r0, int64_t r1) {
  const int64_t nb = w.cols / 32;
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = w.data + uint64_t(r) * w.row_bytes;
    __m256 acc = _mm256_setzero_ps();
    float macc = 0.0f;
    for (int64_t b = 0; b < nb; ++b, p += 20) {
      const __m256 qx = nibble_block_dot(p + 4, x + b * 32, zero);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(p)), qx, acc);
      macc += h2f(p + 2) * xsum[b];
    }
    y[r] = hsum(acc) + macc;
  }
}

// Q4_0: {fp16 d, u8 qs[16]}: w = d (q - 8).
SINKSCOPE_AVX2 void rows_q4_0(const QuantMatrix& w, const float* x, float* y, int64_t r0,
                              int64_t r1) {
  const int64_t nb = w.cols / 32;
  const __m256 minus8 = _mm256_set1_ps(-8.0f);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = w.data + uint64_t(r) * w.row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, p += 18) {
      const __m256 qx = nibble_block_dot(p + 2, x + b * 32, minus8);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(p)), qx, acc);
    }
    y[r] = hsum(acc);
  }
}

// Q8_0: {fp16 d, i8 qs[32]}: w = d q.
SINKSCOPE_AVX2 void rows_q8_0(const QuantMatrix& w, const float* x, float* y, int64_t r0,
                              int64_t r1) {
  const int64_t nb = w.cols / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = w.data + uint64_t(r) * w.row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, p += 34) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
      const __m128i q01 = _mm256_castsi256_si128(q), q23 = _mm256_extracti128_si256(q, 1);
      const float* xb = x + b * 32;
      __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q01)), _mm256_loadu_ps(xb));
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q01, 8))),
                          _mm256_loadu_ps(xb + 8), s);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q23)), _mm256_loadu_ps(xb + 16), s);
      s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q23, 8))),
                          _mm256_loadu_ps(xb + 24), s);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(p)), s, acc);
    }
    y[r] = hsum(acc);
  }
}

SINKSCOPE_AVX2 void rows_f32(const QuantMatrix& w, const float* x, float* y, int64_t r0,
                             int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* row = reinterpret_cast<const float*>(w.data + uint64_t(r) * w.row_bytes);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= w.cols; i += 16) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(row + i), _mm256_loadu_ps(x + i), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(row + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; i < w.cols; ++i) s += row[i] * x[i];
    y[r] = s;
  }
}

bool cpu_has_avx2() {
  // F16C is read from CPUID directly: clang before 15 rejects __builtin_cpu_supports("f16c").
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  return ok;
}
#endif

}  // namespace

void qgemv_reference(const QuantMatrix& w, const float* x, float* y) {
  rows_generic(w, x, y, 0, w.rows);
}

void qgemv(const QuantMatrix& w, const float* x, float* y, ThreadPool* pool) {
  std::vector<float> xsum;
  auto run = [&](int64_t r0, int64_t r1) {
#ifdef SINKSCOPE_X86
    if (cpu_has_avx2() && w.cols % 32 == 0) {
      switch (w.type) {
        case GgmlType::kQ4_1: return rows_q4_1(w, x, xsum.data(), y, r0, r1);
        case GgmlType::kQ4_0: return rows_q4_0(w, x, y, r0, r1);
        case GgmlType::kQ8_0: return rows_q8_0(w, x, y, r0, r1);
        case GgmlType::kF32: return rows_f32(w, x, y, r0, r1);
        default: break;
      }
    }
#endif
    rows_generic(w, x, y, r0, r1);
  };
  if (w.type == GgmlType::kQ4_1) {
    xsum.resize(size_t(w.cols / 32));
    for (size_t b = 0; b < xsum.size(); ++b) {
      float s = 0;
      for (int j = 0; j < 32; ++j) s += x[b * 32 + size_t(j)];
      xsum[b] = s;
    }
  }
  // Chunks of 64 rows: enough work per item to hide hand-out costs, enough items to balance.
  constexpr int64_t kChunk = 64;
  const int64_t n_chunks = (w.rows + kChunk - 1) / kChunk;
  if (!pool || pool->size() == 1 || n_chunks == 1) {
    run(0, w.rows);
    return;
  }
  pool->parallel_for(n_chunks, [&](int64_t c) {
    run(c * kChunk, std::min(w.rows, (c + 1) * kChunk));
  });
}

}  // namespace sinkscope
