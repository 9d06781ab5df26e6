// SPDX-License-Identifier: Apache-2.0
// Integer single-token products with 16-bit activations (engine/backend/qgemv_int.h). Block
// layouts as in engine/format/dequant.cpp; every path computes, per block (or sub-block) of the
// weights, an exact int32 Σ code_j * xq_j and adds scale * d_x * that sum in float, plus
// offset * (d_x Σ xq) for the types with a per-block offset (Q4_1, Q5_1, Q4_K, Q5_K).
#include "engine/backend/qgemv_int.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/backend/simd.h"
#include "engine/format/ggml_types.h"

namespace sinkscope::qint {
namespace {

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

// Q4_K / Q5_K: scale and min j (0..7) from the 12 packed bytes.
inline void k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// ---- portable ------------------------------------------------------------------------------
// One group of 32 weights as integer codes: w_j = sc0 * c_j + off (j < 16), sc1 * c_j + off.
struct Group {
  int c[32] = {};
  float sc0 = 0.0f, sc1 = 0.0f, off = 0.0f;
};

// Group g (elements 32g .. 32g + 31) of a row.
void decode_group(GgmlType t, const uint8_t* row, int64_t g, Group& o) {
  o.off = 0.0f;
  switch (t) {
    case GgmlType::kQ4_0: {
      const uint8_t* b = row + g * 18;
      o.sc0 = o.sc1 = half_at(b);
      for (int j = 0; j < 16; ++j) {
        o.c[j] = (b[2 + j] & 15) - 8;
        o.c[j + 16] = (b[2 + j] >> 4) - 8;
      }
      return;
    }
    case GgmlType::kQ4_1: {
      const uint8_t* b = row + g * 20;
      o.sc0 = o.sc1 = half_at(b);
      o.off = half_at(b + 2);
      for (int j = 0; j < 16; ++j) {
        o.c[j] = b[4 + j] & 15;
        o.c[j + 16] = b[4 + j] >> 4;
      }
      return;
    }
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1: {
      const bool one = t == GgmlType::kQ5_1;
      const uint8_t* b = row + g * (one ? 24 : 22);
      o.sc0 = o.sc1 = half_at(b);
      if (one) o.off = half_at(b + 2);
      uint32_t qh;
      std::memcpy(&qh, b + (one ? 4 : 2), 4);
      const uint8_t* qs = b + (one ? 8 : 6);
      const int sub = one ? 0 : 16;
      for (int j = 0; j < 16; ++j) {
        o.c[j] = ((qs[j] & 15) | int(((qh >> j) & 1u) << 4)) - sub;
        o.c[j + 16] = ((qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4)) - sub;
      }
      return;
    }
    case GgmlType::kQ8_0: {
      const uint8_t* b = row + g * 34;
      o.sc0 = o.sc1 = half_at(b);
      for (int j = 0; j < 32; ++j) o.c[j] = int(int8_t(b[2 + j]));
      return;
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const bool five = t == GgmlType::kQ5_K;
      const int64_t sb = g / 8;
      const int s = int(g % 8);
      const uint8_t* b = row + sb * (five ? 176 : 144);
      const float d = half_at(b), dmin = half_at(b + 2);
      int sc, m;
      k_scale_min(s, b + 4, &sc, &m);
      o.sc0 = o.sc1 = d * float(sc);
      o.off = -(dmin * float(m));
      const uint8_t* q = b + (five ? 48 : 16) + 32 * (s / 2);
      const uint8_t* qh = b + 16;
      for (int l = 0; l < 32; ++l) {
        int v = (s % 2) ? q[l] >> 4 : q[l] & 15;
        if (five) v |= ((qh[l] >> s) & 1) << 4;
        o.c[l] = v;
      }
      return;
    }
    case GgmlType::kQ6_K: {
      const int64_t sb = g / 8;
      const int h = int(g % 8) / 4, k = int(g % 4);
      const uint8_t* b = row + sb * 210;
      const uint8_t* ql = b + 64 * h;
      const uint8_t* qh = b + 128 + 32 * h;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * h;
      const float d = half_at(b + 208);
      o.sc0 = d * float(sc[2 * k]);
      o.sc1 = d * float(sc[2 * k + 1]);
      const uint8_t* src = ql + (k % 2) * 32;
      for (int l = 0; l < 32; ++l) {
        const int nib = k < 2 ? src[l] & 15 : src[l] >> 4;
        o.c[l] = (nib | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
      }
      return;
    }
    default:
      return;
  }
}

void rows_portable(const QuantMatrix& w, const XQ16& x, float* y, int64_t r0, int64_t r1) {
  const int64_t ng = w.cols / 32;
  Group gr;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + uint64_t(r) * w.row_bytes;
    float acc = 0.0f, macc = 0.0f;
    for (int64_t g = 0; g < ng; ++g) {
      decode_group(w.type, row, g, gr);
      const int16_t* xq = x.q.data() + g * 32;
      int32_t i0 = 0, i1 = 0;
      for (int j = 0; j < 16; ++j) i0 += gr.c[j] * int32_t(xq[j]);
      for (int j = 16; j < 32; ++j) i1 += gr.c[j] * int32_t(xq[j]);
      const float dx = x.d[size_t(g)];
      acc += gr.sc0 * dx * float(i0) + gr.sc1 * dx * float(i1);
      macc += gr.off * x.s[size_t(g)];
    }
    y[r] = acc + macc;
  }
}

void quantize_portable(const float* x, int64_t n, XQ16& out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float mx = 0.0f;
    for (int j = 0; j < 32; ++j) mx = std::max(mx, std::fabs(xb[j]));
    const float d = mx / 32767.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      float r = std::nearbyint(xb[j] * id);
      if (!(r == r)) r = 0.0f;  // NaN input: 0 rather than an undefined conversion
      r = std::clamp(r, -32767.0f, 32767.0f);
      out.q[size_t(b * 32 + j)] = int16_t(r);
      sum += int32_t(r);
    }
    out.d[size_t(b)] = d;
    out.s[size_t(b)] = d * float(sum);
  }
}

// ---- AVX2 ----------------------------------------------------------------------------------
#ifdef SINKSCOPE_X86

using simd::hsum;
using simd::h2f;

SINKSCOPE_AVX2 inline __m128i load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

SINKSCOPE_AVX2 inline __m256i xload(const int16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Σ over 32 elements: w0 holds elements 0..15, w1 16..31, as 8 int32 partial sums.
SINKSCOPE_AVX2 inline __m256i dot32(__m256i w0, __m256i w1, const int16_t* xq) {
  return _mm256_add_epi32(_mm256_madd_epi16(w0, xload(xq)), _mm256_madd_epi16(w1, xload(xq + 16)));
}

SINKSCOPE_AVX2 inline __m256 fma_block(float scale, __m256i isum, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(isum), acc);
}

// Bits 0..15 of `bits` as 16-bit lanes holding 16 where the bit is set (Q5_0 / Q5_1's 5th bit).
SINKSCOPE_AVX2 inline __m256i bit4_lanes(uint32_t bits) {
  const __m256i sel = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                        8192, 16384, int16_t(-32768));
  const __m256i v = _mm256_and_si256(_mm256_set1_epi16(int16_t(uint16_t(bits))), sel);
  return _mm256_and_si256(_mm256_cmpeq_epi16(v, sel), _mm256_set1_epi16(16));
}

// One instantiation per type, so the inner loop has no type tests.
template <GgmlType t>
SINKSCOPE_AVX2 void rows_small_avx2(const QuantMatrix& w, const XQ16& x, float* y, int64_t r0,
                                    int64_t r1) {
  const int64_t nb = w.cols / 32;
  const __m128i m4 = _mm_set1_epi8(0x0f);
  constexpr bool has_off = t == GgmlType::kQ4_1 || t == GgmlType::kQ5_1;
  constexpr int bsz = t == GgmlType::kQ4_0 ? 18 : t == GgmlType::kQ4_1 ? 20 : t == GgmlType::kQ5_0 ? 22
                  : t == GgmlType::kQ5_1 ? 24 : 34;
  // Codes are stored unsigned with a bias for Q4_0 (8) and Q5_0 (16).
  const __m256i bias = _mm256_set1_epi16(t == GgmlType::kQ4_0 ? 8 : t == GgmlType::kQ5_0 ? 16 : 0);
  // Σ code * xq of block b as 8 int32 lanes.
  auto block = [&](const uint8_t* p, int64_t b) SINKSCOPE_AVX2 {
    const int16_t* xq = x.q.data() + b * 32;
    __m256i w0, w1;
    if constexpr (t == GgmlType::kQ8_0) {
      w0 = _mm256_cvtepi8_epi16(load16(p + 2));
      w1 = _mm256_cvtepi8_epi16(load16(p + 18));
    } else {
      constexpr int qs_at = t == GgmlType::kQ4_0 ? 2 : t == GgmlType::kQ4_1 ? 4 : t == GgmlType::kQ5_0 ? 6 : 8;
      const __m128i raw = load16(p + qs_at);
      w0 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, m4));
      w1 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
      if constexpr (t == GgmlType::kQ5_0 || t == GgmlType::kQ5_1) {
        uint32_t qh;
        std::memcpy(&qh, p + (t == GgmlType::kQ5_0 ? 2 : 4), 4);
        w0 = _mm256_or_si256(w0, bit4_lanes(qh));
        w1 = _mm256_or_si256(w1, bit4_lanes(qh >> 16));
      }
      if constexpr (t == GgmlType::kQ4_0 || t == GgmlType::kQ5_0) {
        w0 = _mm256_sub_epi16(w0, bias);
        w1 = _mm256_sub_epi16(w1, bias);
      }
    }
    return dot32(w0, w1, xq);
  };
  // Blocks in pairs on two accumulators: the float adds of consecutive blocks overlap.
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = w.data + uint64_t(r) * w.row_bytes;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float macc0 = 0.0f, macc1 = 0.0f;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2, p += 2 * bsz) {
      simd::prefetch_ahead(p, 2 * bsz);
      const __m256i i0 = block(p, b), i1 = block(p + bsz, b + 1);
      acc0 = fma_block(h2f(p) * x.d[size_t(b)], i0, acc0);
      acc1 = fma_block(h2f(p + bsz) * x.d[size_t(b + 1)], i1, acc1);
      if constexpr (has_off) {
        macc0 += h2f(p + 2) * x.s[size_t(b)];
        macc1 += h2f(p + bsz + 2) * x.s[size_t(b + 1)];
      }
    }
    if (b < nb) {
      acc0 = fma_block(h2f(p) * x.d[size_t(b)], block(p, b), acc0);
      if constexpr (has_off) macc0 += h2f(p + 2) * x.s[size_t(b)];
    }
    y[r] = hsum(_mm256_add_ps(acc0, acc1)) + (macc0 + macc1);
  }
}

SINKSCOPE_AVX2 void rows_q45k_avx2(const QuantMatrix& w, const XQ16& x, float* y, int64_t r0,
                                   int64_t r1) {
  const bool five = w.type == GgmlType::kQ5_K;
  const int64_t nsb = w.cols / 256;
  const __m128i m4 = _mm_set1_epi8(0x0f);
  const __m256i one = _mm256_set1_epi16(1);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + uint64_t(r) * w.row_bytes;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // per sub-block parity
    float macc = 0.0f;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* b = row + sb * (five ? 176 : 144);
      simd::prefetch_ahead(b, five ? 176 : 144);
      const float d = h2f(b), dmin = h2f(b + 2);
      const uint8_t* q = b + (five ? 48 : 16);
      __m256i qh0 = _mm256_setzero_si256(), qh1 = qh0;
      if (five) {
        qh0 = _mm256_cvtepu8_epi16(load16(b + 16));
        qh1 = _mm256_cvtepu8_epi16(load16(b + 32));
      }
      for (int c = 0; c < 4; ++c, q += 32) {
        const __m128i a = load16(q), bb = load16(q + 16);
        for (int k = 0; k < 2; ++k) {
          const int s = 2 * c + k;
          __m256i w0 = _mm256_cvtepu8_epi16(_mm_and_si128(k ? _mm_srli_epi16(a, 4) : a, m4));
          __m256i w1 = _mm256_cvtepu8_epi16(_mm_and_si128(k ? _mm_srli_epi16(bb, 4) : bb, m4));
          if (five) {
            const __m128i sh = _mm_cvtsi32_si128(s);
            w0 = _mm256_or_si256(w0, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh0, sh), one), 4));
            w1 = _mm256_or_si256(w1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh1, sh), one), 4));
          }
          int sc, m;
          k_scale_min(s, b + 4, &sc, &m);
          const int64_t g = sb * 8 + s;
          const float dx = x.d[size_t(g)];
          acc[k] = fma_block(d * float(sc) * dx, dot32(w0, w1, x.q.data() + g * 32), acc[k]);
          macc += -(dmin * float(m)) * x.s[size_t(g)];
        }
      }
    }
    y[r] = hsum(_mm256_add_ps(acc[0], acc[1])) + macc;
  }
}

// Sixteen Q6_K codes minus 32: the low nibble (shifted by nsh) of src and two high bits (shifted
// by hsh) of hb. A function, not a lambda: a lambda does not inherit the target attribute, so
// compilers without -mavx2 (clang) reject the intrinsics inside it.
SINKSCOPE_AVX2 inline __m256i q6k_codes(__m256i src, __m256i hb, __m128i nsh, __m128i hsh) {
  const __m256i m4 = _mm256_set1_epi16(15), three = _mm256_set1_epi16(3);
  const __m256i nib = _mm256_and_si256(_mm256_srl_epi16(src, nsh), m4);
  const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(hb, hsh), three), 4);
  return _mm256_sub_epi16(_mm256_or_si256(nib, hi), _mm256_set1_epi16(32));
}

SINKSCOPE_AVX2 void rows_q6k_avx2(const QuantMatrix& w, const XQ16& x, float* y, int64_t r0,
                                  int64_t r1) {
  const int64_t nsb = w.cols / 256;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.data + uint64_t(r) * w.row_bytes;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // first / second 16 of a group
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* b = row + sb * 210;
      simd::prefetch_ahead(b, 210);
      const float d = h2f(b + 208);
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = b + 64 * h;
        const uint8_t* qhp = b + 128 + 32 * h;
        const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * h;
        const __m256i la0 = _mm256_cvtepu8_epi16(load16(ql)), la1 = _mm256_cvtepu8_epi16(load16(ql + 16));
        const __m256i lc0 = _mm256_cvtepu8_epi16(load16(ql + 32)), lc1 = _mm256_cvtepu8_epi16(load16(ql + 48));
        const __m256i h0 = _mm256_cvtepu8_epi16(load16(qhp)), h1 = _mm256_cvtepu8_epi16(load16(qhp + 16));
        for (int k = 0; k < 4; ++k) {
          const __m128i nsh = _mm_cvtsi32_si128(k < 2 ? 0 : 4), hsh = _mm_cvtsi32_si128(2 * k);
          const __m256i s0 = (k % 2) ? lc0 : la0, s1 = (k % 2) ? lc1 : la1;
          const int64_t g = sb * 8 + h * 4 + k;
          const int16_t* xq = x.q.data() + g * 32;
          const float dx = x.d[size_t(g)];
          acc[0] = fma_block(d * float(sc[2 * k]) * dx, _mm256_madd_epi16(q6k_codes(s0, h0, nsh, hsh), xload(xq)),
                             acc[0]);
          acc[1] = fma_block(d * float(sc[2 * k + 1]) * dx,
                             _mm256_madd_epi16(q6k_codes(s1, h1, nsh, hsh), xload(xq + 16)), acc[1]);
        }
      }
    }
    y[r] = hsum(_mm256_add_ps(acc[0], acc[1]));
  }
}

SINKSCOPE_AVX2 void quantize_avx2(const float* x, int64_t n, XQ16& out) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 lim = _mm256_set1_ps(32767.0f), nlim = _mm256_set1_ps(-32767.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
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
    const float d = _mm_cvtss_f32(m) / 32767.0f;
    const __m256 id = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
    __m256i i32[4];
    for (int k = 0; k < 4; ++k) {
      __m256 r = _mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));  // NaN -> 0, as the portable code
      i32[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, nlim), lim));
    }
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_hadd_epi32(s4, s4);
    s4 = _mm_hadd_epi32(s4, s4);
    // packs works within 128-bit lanes: (a0..3 b0..3 | a4..7 b4..7) -> reorder the 64-bit parts.
    const __m256i p01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i32[0], i32[1]), 0xD8);
    const __m256i p23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(i32[2], i32[3]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q.data() + b * 32), p01);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q.data() + b * 32 + 16), p23);
    out.d[size_t(b)] = d;
    out.s[size_t(b)] = d * float(_mm_cvtsi128_si32(s4));
  }
}
#endif

}  // namespace

bool supported(const QuantMatrix& w) {
  switch (w.type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
      return w.cols % 32 == 0;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return w.cols % 256 == 0;
    default:
      return false;
  }
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Vnni: return "avx512vnni";
  }
  return "?";
}

std::vector<Isa> isas_available() {
  std::vector<Isa> v{Isa::kPortable};
  if (simd::have_avx2()) v.push_back(Isa::kAvx2);
  if (simd::have_avx512()) v.push_back(Isa::kAvx512);
  if (simd::have_avx512_vnni()) v.push_back(Isa::kAvx512Vnni);
  return v;
}

Isa default_isa() {
  static const Isa isa = [] {
    const std::vector<Isa> have = isas_available();
    const char* v = std::getenv("SINKSCOPE_QGEMV_ISA");
    if (!v || !*v) return have.back();
    std::string names;
    for (Isa i : have) {
      if (std::strcmp(v, isa_name(i)) == 0) return i;
      names += std::string(names.empty() ? "" : ", ") + isa_name(i);
    }
    throw std::invalid_argument(std::string("SINKSCOPE_QGEMV_ISA=") + v +
                                ": not an instruction set this CPU runs (it runs: " + names + ")");
  }();
  return isa;
}

void quantize_x(const float* x, int64_t n, XQ16& out, Isa isa) {
  out.q.resize(size_t(n));
  out.d.resize(size_t(n / 32));
  out.s.resize(size_t(n / 32));
#ifdef SINKSCOPE_X86
  if (isa != Isa::kPortable && simd::have_avx2()) return quantize_avx2(x, n, out);
#endif
  (void)isa;
  quantize_portable(x, n, out);
}

void rows(const QuantMatrix& w, const XQ16& x, float* y, int64_t r0, int64_t r1, Isa isa) {
#ifdef SINKSCOPE_X86
  if (isa == Isa::kAvx512Vnni && simd::have_avx512_vnni()) return avx512vnni::rows(w, x, y, r0, r1);
  if (isa == Isa::kAvx512 && simd::have_avx512()) return avx512::rows(w, x, y, r0, r1);
  if (isa != Isa::kPortable && simd::have_avx2()) {
    switch (w.type) {
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
        return rows_q45k_avx2(w, x, y, r0, r1);
      case GgmlType::kQ6_K:
        return rows_q6k_avx2(w, x, y, r0, r1);
      case GgmlType::kQ4_0: return rows_small_avx2<GgmlType::kQ4_0>(w, x, y, r0, r1);
      case GgmlType::kQ4_1: return rows_small_avx2<GgmlType::kQ4_1>(w, x, y, r0, r1);
      case GgmlType::kQ5_0: return rows_small_avx2<GgmlType::kQ5_0>(w, x, y, r0, r1);
      case GgmlType::kQ5_1: return rows_small_avx2<GgmlType::kQ5_1>(w, x, y, r0, r1);
      default: return rows_small_avx2<GgmlType::kQ8_0>(w, x, y, r0, r1);
    }
  }
#endif
  (void)isa;
  rows_portable(w, x, y, r0, r1);
}

}  // namespace sinkscope::qint
