// SPDX-License-Identifier: Apache-2.0
#include "engine/backend/qgemv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "engine/backend/linalg.h"
#include "engine/backend/qgemv_int.h"
#include "engine/backend/simd.h"
#include "engine/util/thread_pool.h"


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

// Rows [r0, r1) through dequantize_rows (bit-identical to dequantize_row) into a scratch row.
void rows_generic(const QuantMatrix& w, const float* x, float* y, int64_t r0, int64_t r1) {
  thread_local std::vector<float> row;
  row.resize(size_t(w.cols));
  for (int64_t r = r0; r < r1; ++r) {
    dequantize_rows(w, r, 1, row.data());
    y[r] = dot_generic(row.data(), x, w.cols);
  }
}

#ifdef SINKSCOPE_X86

using simd::hsum;
using simd::h2f;

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

// ---- 8-bit activations ----------------------------------------------------------------------
// The activation row is quantized once per product to blocks of 32 int8 values with a float
// scale (d = max|x| / 127, q = round(x / d)) and the block's d * Σ q; the weight blocks are then
// multiplied in integers (maddubs: u8 x s8 -> s16 pairs, madd -> s32), one float FMA per block.
struct XQ8 {
  std::vector<int8_t> q;
  std::vector<float> d, s;
};

SINKSCOPE_AVX2 void quantize_x(const float* x, int64_t n, XQ8& out) {
  const int64_t nb = n / 32;
  out.q.resize(size_t(n));
  out.d.resize(size_t(nb));
  out.s.resize(size_t(nb));
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * 32;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(xb + 8 * k);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float mx = _mm_cvtss_f32(m);
    const float d = mx / 127.0f;
    const __m256 id = _mm256_set1_ps(d > 0 ? 1.0f / d : 0.0f);
    __m256i i32[4];
    for (int k = 0; k < 4; ++k)
      i32[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id),
                                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // Σ q over the block, then pack 32-bit -> 8-bit in element order.
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_hadd_epi32(s4, s4);
    s4 = _mm_hadd_epi32(s4, s4);
    const __m256i p01 = _mm256_packs_epi32(i32[0], i32[1]);  // lanes interleave: fixed below
    const __m256i p23 = _mm256_packs_epi32(i32[2], i32[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q.data() + b * 32), p);
    out.d[size_t(b)] = d;
    out.s[size_t(b)] = d * float(_mm_cvtsi128_si32(s4));
  }
}

// 32 nibbles of a Q4 block as bytes 0..15 (low nibbles: elements 0..15) and 16..31 (high
// nibbles: elements 16..31), ggml's order.
SINKSCOPE_AVX2 inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_insertf128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Σ a_j b_j as 8 int32 partial sums, a unsigned (0..255), b signed.
SINKSCOPE_AVX2 inline __m256 dot_u8s8(__m256i a, __m256i b) {
  const __m256i p16 = _mm256_maddubs_epi16(a, b);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

// Σ a_j b_j, both signed: |a| against b with a's sign.
SINKSCOPE_AVX2 inline __m256 dot_s8s8(__m256i a, __m256i b) {
  return dot_u8s8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

SINKSCOPE_AVX2 void rows_q4_1_q8(const QuantMatrix& w, const XQ8& x, float* y, int64_t r0,
                                 int64_t r1) {
  const int64_t nb = w.cols / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = w.data + uint64_t(r) * w.row_bytes;
    __m256 acc = _mm256_setzero_ps();
    float macc = 0.0f;
    for (int64_t b = 0; b < nb; ++b, p += 20) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + b * 32));
      const __m256 qx = dot_u8s8(nibbles32(p + 4), xq);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(p) * x.d[size_t(b)]), qx, acc);
      macc += h2f(p + 2) * x.s[size_t(b)];
    }
    y[r] = hsum(acc) + macc;
  }
}

SINKSCOPE_AVX2 void rows_q4_0_q8(const QuantMatrix& w, const XQ8& x, float* y, int64_t r0,
                                 int64_t r1) {
  const int64_t nb = w.cols / 32;
  const __m256i eight = _mm256_set1_epi8(8);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = w.data + uint64_t(r) * w.row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, p += 18) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + b * 32));
      const __m256 qx = dot_s8s8(_mm256_sub_epi8(nibbles32(p + 2), eight), xq);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(p) * x.d[size_t(b)]), qx, acc);
    }
    y[r] = hsum(acc);
  }
}

SINKSCOPE_AVX2 void rows_q8_0_q8(const QuantMatrix& w, const XQ8& x, float* y, int64_t r0,
                                 int64_t r1) {
  const int64_t nb = w.cols / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = w.data + uint64_t(r) * w.row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, p += 34) {
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q.data() + b * 32));
      const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(p) * x.d[size_t(b)]), dot_s8s8(wq, xq), acc);
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

// F16 / BF16 rows (safetensors checkpoints): 8 values at a time widened to float (F16C, or a
// 16-bit shift for BF16) and multiplied with x in float, as rows_f32 does.
template <bool kBf16>
SINKSCOPE_AVX2 void rows_half(const QuantMatrix& w, const float* x, float* y, int64_t r0,
                              int64_t r1) {
  auto load8 = [](const uint8_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (kBf16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  };
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + uint64_t(r) * w.row_bytes;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= w.cols; i += 16) {
      a0 = _mm256_fmadd_ps(load8(row + 2 * i), _mm256_loadu_ps(x + i), a0);
      a1 = _mm256_fmadd_ps(load8(row + 2 * i + 16), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; i < w.cols; ++i) {
      uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      s += (kBf16 ? bf16_to_fp32(h) : fp16_to_fp32(h)) * x[i];
    }
    y[r] = s;
  }
}

// Rows of Q4_0 / Q4_1 / Q8_0 blocks to float with AVX2: the same operations as dequantize_row
// (an int-to-float conversion, one multiply, for Q4_1 one add; no fused multiply-add), so the
// values are bit-identical to it. Prefill dequantizes every weight once per projection.
// 32 unsigned bytes -> floats: y = scale * float(q) - sub (lanes 0-15 with the first scale and
// sub, 16-31 with the second), as dq_q4_k / dq_q6_k compute them.
SINKSCOPE_AVX2 inline void bytes32_to_float(__m256i q, bool is_signed, float s0, float s1,
                                            float m0, float m1, float* y) {
  const __m128i halves[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
  for (int h = 0; h < 2; ++h) {
    const __m256 sc = _mm256_set1_ps(h ? s1 : s0), mn = _mm256_set1_ps(h ? m1 : m0);
    for (int e = 0; e < 2; ++e) {
      const __m128i q8 = e ? _mm_srli_si128(halves[h], 8) : halves[h];
      const __m256i q32 = is_signed ? _mm256_cvtepi8_epi32(q8) : _mm256_cvtepu8_epi32(q8);
      const __m256 f = _mm256_mul_ps(sc, _mm256_cvtepi32_ps(q32));
      _mm256_storeu_ps(y + h * 16 + e * 8, _mm256_sub_ps(f, mn));
    }
  }
}

// Q4_K / Q6_K super-blocks of 256 (layouts in engine/format/dequant.cpp), same operations as there.
SINKSCOPE_AVX2 void dq_kquant_rows_avx2(const QuantMatrix& w, int64_t r0, int64_t n, float* dst) {
  const int64_t nb = w.cols / 256;
  const __m256i low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(3);
  auto half = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  };
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* src = w.data + uint64_t(r0 + r) * w.row_bytes;
    float* y = dst + r * w.cols;
    for (int64_t b = 0; b < nb; ++b) {
      if (w.type == GgmlType::kQ4_K) {
        const uint8_t* blk = src + b * 144;
        const float d = half(blk), dmin = half(blk + 2);
        const uint8_t* sc = blk + 4;
        const uint8_t* q = blk + 16;
        for (int c = 0; c < 4; ++c, q += 32, y += 64) {
          float dd[2], mm[2];
          for (int k = 0; k < 2; ++k) {
            const int j = 2 * c + k;
            const uint8_t s = j < 4 ? sc[j] & 63 : uint8_t((sc[j + 4] & 0x0f) | ((sc[j - 4] >> 6) << 4));
            const uint8_t m = j < 4 ? sc[j + 4] & 63 : uint8_t((sc[j + 4] >> 4) | ((sc[j] >> 6) << 4));
            dd[k] = d * s;
            mm[k] = dmin * m;
          }
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
          bytes32_to_float(_mm256_and_si256(v, low4), false, dd[0], dd[0], mm[0], mm[0], y);
          bytes32_to_float(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), false, dd[1], dd[1],
                           mm[1], mm[1], y + 32);
        }
      } else {  // Q6_K
        const uint8_t* blk = src + b * 210;
        const uint8_t* ql = blk;
        const uint8_t* qh = blk + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
        const float d = half(blk + 208);
        const __m256i k32 = _mm256_set1_epi8(32);
        for (int hf = 0; hf < 2; ++hf, ql += 64, qh += 32, sc += 8, y += 128) {
          const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
          const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
          const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
          auto bits2 = [&](int shift) {
            return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, shift), low2), 4);
          };
          const __m256i nib_a_lo = _mm256_and_si256(a, low4), nib_c_lo = _mm256_and_si256(c, low4);
          const __m256i nib_a_hi = _mm256_and_si256(_mm256_srli_epi16(a, 4), low4);
          const __m256i nib_c_hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), low4);
          const __m256i qs[4] = {
              _mm256_sub_epi8(_mm256_or_si256(nib_a_lo, bits2(0)), k32),
              _mm256_sub_epi8(_mm256_or_si256(nib_c_lo, bits2(2)), k32),
              _mm256_sub_epi8(_mm256_or_si256(nib_a_hi, bits2(4)), k32),
              _mm256_sub_epi8(_mm256_or_si256(nib_c_hi, bits2(6)), k32)};
          for (int k = 0; k < 4; ++k)
            bytes32_to_float(qs[k], true, d * float(sc[2 * k]), d * float(sc[2 * k + 1]), 0.0f,
                             0.0f, y + 32 * k);
        }
      }
    }
  }
}

SINKSCOPE_AVX2 void dq_rows_avx2(const QuantMatrix& w, int64_t r0, int64_t n, float* dst) {
  const int64_t nb = w.cols / 32;
  const __m128i low4 = _mm_set1_epi8(0x0f);
  auto half = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  };
  // 16 bytes of 4-bit codes -> 32 floats: low nibbles first, then high nibbles.
  auto nibbles = [&](const uint8_t* qs, __m256 sub, __m256 d, __m256 m, bool add, float* y) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m128i parts[2] = {_mm_and_si128(v, low4), _mm_and_si128(_mm_srli_epi16(v, 4), low4)};
    for (int p = 0; p < 2; ++p) {
      const __m128i q = parts[p];
      for (int h = 0; h < 2; ++h) {
        const __m128i q8 = h ? _mm_srli_si128(q, 8) : q;
        __m256 f = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q8)), sub);
        f = _mm256_mul_ps(f, d);
        if (add) f = _mm256_add_ps(f, m);
        _mm256_storeu_ps(y + p * 16 + h * 8, f);
      }
    }
  };
  const __m256 zero = _mm256_setzero_ps(), eight = _mm256_set1_ps(8.0f);
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* src = w.data + uint64_t(r0 + r) * w.row_bytes;
    float* y = dst + r * w.cols;
    for (int64_t b = 0; b < nb; ++b, y += 32) {
      if (w.type == GgmlType::kQ4_0) {
        const uint8_t* blk = src + b * 18;
        nibbles(blk + 2, eight, _mm256_set1_ps(half(blk)), zero, false, y);
      } else if (w.type == GgmlType::kQ4_1) {
        const uint8_t* blk = src + b * 20;
        nibbles(blk + 4, zero, _mm256_set1_ps(half(blk)), _mm256_set1_ps(half(blk + 2)), true, y);
      } else {  // Q8_0
        const uint8_t* blk = src + b * 34;
        const __m256 d = _mm256_set1_ps(half(blk));
        for (int j = 0; j < 32; j += 8) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + j));
          _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
      }
    }
  }
}

// F16 rows to float with F16C (the same values as fp16_to_fp32, NaN payloads aside).
SINKSCOPE_AVX2 void dq_f16_rows_avx2(const QuantMatrix& w, int64_t r0, int64_t n, float* dst) {
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* src = w.data + uint64_t(r0 + r) * w.row_bytes;
    float* y = dst + r * w.cols;
    for (int64_t i = 0; i < w.cols; i += 8)
      _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(src + 2 * i))));
  }
}
#endif

}  // namespace

void qgemv_reference(const QuantMatrix& w, const float* x, float* y) {
  rows_generic(w, x, y, 0, w.rows);
}

void qgemv(const QuantMatrix& w, const float* x, float* y, ThreadPool* pool, QgemvMode mode) {
  const QgemvJob job{&w, y};
  qgemv_many(&job, 1, x, pool, mode);
}

void qgemv_int16_portable(const QuantMatrix& w, const float* x, float* y) {
  qint::XQ16 xq;
  qint::quantize_x(x, w.cols, xq, qint::Isa::kPortable);
  qint::rows(w, xq, y, 0, w.rows, qint::Isa::kPortable);
}

void qgemv_many(const QgemvJob* jobs, int n_jobs, const float* x, ThreadPool* pool,
                QgemvMode mode) {
  if (n_jobs <= 0) return;
  // SINKSCOPE_QGEMV=int16 / int8 / float: that path for every product (the backends' decode,
  // the benchmarks' A/B runs); unset: as the caller asks.
  static const int forced = [] {
    const char* v = std::getenv("SINKSCOPE_QGEMV");
    if (!v) return 0;
    return std::strcmp(v, "int8") == 0 ? 1 : std::strcmp(v, "float") == 0 ? 2
           : std::strcmp(v, "int16") == 0 ? 3 : 0;
  }();
  if (forced == 1) mode = QgemvMode::kInt8Activations;
  if (forced == 2) mode = QgemvMode::kFloatActivations;
  if (forced == 3) mode = QgemvMode::kInt16Activations;
  const int64_t cols = jobs[0].w->cols;
  for (int i = 1; i < n_jobs; ++i)
    if (jobs[i].w->cols != cols) throw std::invalid_argument("qgemv_many: matrices of different widths");
  // Per job: 0 portable/float AVX2 (as the type allows), 1 int8, 2 int16.
  std::vector<int> path(size_t(n_jobs), 0);
  bool need_x8 = false, need_x16 = false, need_xsum = false;
  for (int i = 0; i < n_jobs; ++i) {
    const QuantMatrix& w = *jobs[i].w;
#ifdef SINKSCOPE_X86
    if (mode == QgemvMode::kInt8Activations && simd::have_avx2() && w.cols % 32 == 0 &&
        (w.type == GgmlType::kQ4_0 || w.type == GgmlType::kQ4_1 || w.type == GgmlType::kQ8_0))
      path[size_t(i)] = 1;
#endif
    if (path[size_t(i)] == 0 && mode != QgemvMode::kFloatActivations && qint::supported(w))
      path[size_t(i)] = 2;
    need_x8 |= path[size_t(i)] == 1;
    need_x16 |= path[size_t(i)] == 2;
    need_xsum |= path[size_t(i)] == 0 && w.type == GgmlType::kQ4_1;
  }
  // The caller's buffers, reused across calls; the pool's workers read them through these
  // references (a thread_local named in the lambda would be each worker's own).
  thread_local qint::XQ16 x16_buffer;
  qint::XQ16& x16 = x16_buffer;
  const qint::Isa isa = need_x16 ? qint::default_isa() : qint::Isa::kPortable;
  if (need_x16) qint::quantize_x(x, cols, x16, isa);
#ifdef SINKSCOPE_X86
  thread_local XQ8 xq_buffer;
  XQ8& xq = xq_buffer;
  if (need_x8) quantize_x(x, cols, xq);
#else
  (void)need_x8;
#endif
  std::vector<float> xsum;
  if (need_xsum) {
    xsum.resize(size_t(cols / 32));
    for (size_t b = 0; b < xsum.size(); ++b) {
      float s = 0;
      for (int j = 0; j < 32; ++j) s += x[b * 32 + size_t(j)];
      xsum[b] = s;
    }
  }
  auto run = [&](int i, int64_t r0, int64_t r1) {
    const QuantMatrix& w = *jobs[i].w;
    float* y = jobs[i].y;
    if (path[size_t(i)] == 2) return qint::rows(w, x16, y, r0, r1, isa);
#ifdef SINKSCOPE_X86
    if (path[size_t(i)] == 1) {
      switch (w.type) {
        case GgmlType::kQ4_1: return rows_q4_1_q8(w, xq, y, r0, r1);
        case GgmlType::kQ4_0: return rows_q4_0_q8(w, xq, y, r0, r1);
        default: return rows_q8_0_q8(w, xq, y, r0, r1);
      }
    }
    if (simd::have_avx2() && w.cols % 32 == 0) {
      switch (w.type) {
        case GgmlType::kQ4_1: return rows_q4_1(w, x, xsum.data(), y, r0, r1);
        case GgmlType::kQ4_0: return rows_q4_0(w, x, y, r0, r1);
        case GgmlType::kQ8_0: return rows_q8_0(w, x, y, r0, r1);
        case GgmlType::kF32: return rows_f32(w, x, y, r0, r1);
        case GgmlType::kF16: return rows_half<false>(w, x, y, r0, r1);
        case GgmlType::kBF16: return rows_half<true>(w, x, y, r0, r1);
        default: break;
      }
    }
#endif
    rows_generic(w, x, y, r0, r1);
  };
  // All jobs' rows as one list of chunks handed out together: one fork-join for the set (Q, K
  // and V; gate and up), and small matrices do not leave a thread idle. 32 rows (a few
  // microseconds of work) per chunk; 256 for large matrices (the logits), where hand-outs would
  // otherwise add up. A chunk's rows do not depend on the pool, nor do their values.
  struct Chunk {
    int job;
    int64_t r0, r1;
  };
  thread_local std::vector<Chunk> chunk_buffer;
  std::vector<Chunk>& chunks = chunk_buffer;
  chunks.clear();
  for (int i = 0; i < n_jobs; ++i) {
    const int64_t rows = jobs[i].w->rows;
    const int64_t step = rows >= 8192 ? 256 : 32;
    for (int64_t r = 0; r < rows; r += step) chunks.push_back({i, r, std::min(rows, r + step)});
  }
  if (!pool || pool->size() == 1 || chunks.size() == 1) {
    for (int i = 0; i < n_jobs; ++i) run(i, 0, jobs[i].w->rows);
    return;
  }
  pool->parallel_for(int64_t(chunks.size()), [&](int64_t c) {
    const Chunk& ch = chunks[size_t(c)];
    run(ch.job, ch.r0, ch.r1);
  });
}

void dequantize_rows(const QuantMatrix& w, int64_t r0, int64_t n, float* dst) {
#ifdef SINKSCOPE_X86
  if ((w.type == GgmlType::kQ4_0 || w.type == GgmlType::kQ4_1 || w.type == GgmlType::kQ8_0) &&
      w.cols % 32 == 0 && simd::have_avx2()) {
    dq_rows_avx2(w, r0, n, dst);
    return;
  }
  if ((w.type == GgmlType::kQ4_K || w.type == GgmlType::kQ6_K) && w.cols % 256 == 0 &&
      simd::have_avx2()) {
    dq_kquant_rows_avx2(w, r0, n, dst);
    return;
  }
  if (w.type == GgmlType::kF16 && w.cols % 8 == 0 && simd::have_avx2()) {
    dq_f16_rows_avx2(w, r0, n, dst);
    return;
  }
#endif
  for (int64_t r = 0; r < n; ++r)
    dequantize_row(w.type, w.data + uint64_t(r0 + r) * w.row_bytes, dst + r * w.cols, w.cols);
}

std::vector<float> dequantize(const QuantMatrix& w) {
  std::vector<float> out(size_t(w.rows * w.cols));
  if (!w.empty()) dequantize_rows(w, 0, w.rows, out.data());
  return out;
}

void linear_q(const float* x, const QuantMatrix& w, float* y, int64_t m, ThreadPool* pool) {
  const int64_t n = w.rows, k = w.cols;
  if (w.type == GgmlType::kF32 && w.row_bytes == uint64_t(k) * sizeof(float)) {
    linear(x, reinterpret_cast<const float*>(w.data), y, m, n, k, pool);
    return;
  }
  // Rows per tile: a quarter of the matrix (each sgemm call packs x anew, so few, large tiles
  // cost less; four keep two threads busy), a multiple of 16 (sgemm's preferred widths), the
  // scratch within the bound. Not derived from the pool's size: a tile's width can change
  // sgemm's rounding, and results must not depend on the thread count.
  const int64_t fit = kLinearTileBytes / std::max<int64_t>(1, k * int64_t(sizeof(float)));
  constexpr int64_t parts = 4;
  const int64_t want = ((n + parts - 1) / parts + 15) / 16 * 16;
  const int64_t rows = std::max<int64_t>(16, std::min(want, fit / 16 * 16));
  const int64_t tiles = (n + rows - 1) / rows;
  auto tile = [&](int64_t t) {
    thread_local std::vector<float> scratch;
    const int64_t j0 = t * rows, nj = std::min(n, j0 + rows) - j0;
    if (scratch.size() < size_t(nj * k)) scratch.resize(size_t(rows * k));
    dequantize_rows(w, j0, nj, scratch.data());
    gemm_nt(x, scratch.data(), y + j0, m, nj, k, n);
  };
  if (pool && tiles > 1) {
    pool->parallel_for(tiles, tile);
  } else {
    for (int64_t t = 0; t < tiles; ++t) tile(t);
  }
}

}  // namespace sinkscope
