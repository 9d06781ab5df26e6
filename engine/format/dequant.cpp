// SPDX-License-Identifier: Apache-2.0
// CPU dequantizers and reference quantizers (quantize_row, declared in gguf_writer.h), one pair
// per block layout, so each layout's encoding and decoding sit side by side. Layouts follow ggml's
// block structs (ggml-common.h); all multi-byte fields are little-endian and blocks are packed (no
// padding), so fields are read with memcpy: tensor data in a GGUF with a small alignment need not
// be aligned in memory.
//
// The arithmetic is written in the same order as ggml's reference dequantizers (scale first, then
// multiply, then add/subtract the min), so results match gguf-py bit for bit on hardware without
// fused multiply-add contraction.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/format/ggml_types.h"
#include "engine/format/gguf_writer.h"

static_assert(std::endian::native == std::endian::little, "GGUF blocks are read as little-endian");

namespace sinkscope {

namespace {

constexpr int kQK4 = 32;  // elements per Q4_0/Q4_1/Q5_x/Q8_0 block
constexpr int kQK = 256;  // elements per K-quant super-block

inline float load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

// Q4_0: {fp16 d; u8 qs[16]}. Element j is the low nibble of qs[j], element j+16 the high nibble;
// value = (q - 8) * d.
void dq_q4_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 18, y += kQK4) {
    const float d = load_half(src);
    const uint8_t* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
      y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

// Q4_1: {fp16 d; fp16 m; u8 qs[16]}; value = q * d + m (same nibble order as Q4_0).
void dq_q4_1(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 20, y += kQK4) {
    const float d = load_half(src);
    const float m = load_half(src + 2);
    const uint8_t* qs = src + 4;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
      y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

// Q5_0: {fp16 d; u8 qh[4]; u8 qs[16]}. Bit j of the little-endian u32 qh is bit 4 of element j.
// value = (q - 16) * d.
void dq_q5_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 22, y += kQK4) {
    const float d = load_half(src);
    uint32_t qh;
    std::memcpy(&qh, src + 2, 4);
    const uint8_t* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

// Q5_1: {fp16 d; fp16 m; u8 qh[4]; u8 qs[16]}; value = q * d + m.
void dq_q5_1(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 24, y += kQK4) {
    const float d = load_half(src);
    const float m = load_half(src + 2);
    uint32_t qh;
    std::memcpy(&qh, src + 4, 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const int lo = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      y[j] = static_cast<float>(lo) * d + m;
      y[j + 16] = static_cast<float>(hi) * d + m;
    }
  }
}

// Q8_0: {fp16 d; i8 qs[32]}; value = q * d.
void dq_q8_0(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 34, y += kQK4) {
    const float d = load_half(src);
    const int8_t* qs = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
  }
}

// MXFP4 (OCP microscaling, gpt-oss experts): {u8 e; u8 qs[16]}; element j < 16 is the low
// nibble of qs[j], element j + 16 the high nibble. Each nibble is an E2M1 code; ggml keeps the
// E2M1 values doubled (kMxfp4Doubled) and halves the E8M0 scale instead, so
// value = kMxfp4Doubled[code] * 2^(e - 128).
constexpr int8_t kMxfp4Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
void dq_mxfp4(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 17, y += 32) {
    const float d = std::ldexp(1.0f, int(src[0]) - 128);
    const uint8_t* qs = src + 1;
    for (int j = 0; j < 16; ++j) {
      y[j] = float(kMxfp4Doubled[qs[j] & 0x0F]) * d;
      y[j + 16] = float(kMxfp4Doubled[qs[j] >> 4]) * d;
    }
  }
}

// The 12 scale bytes of Q4_K/Q5_K hold eight 6-bit scales and eight 6-bit mins:
//   bytes 0..3 : low 6 bits = scale j (j<4),  top 2 bits = bits 4..5 of scale j+4
//   bytes 4..7 : low 6 bits = min j   (j<4),  top 2 bits = bits 4..5 of min j+4
//   bytes 8..11: low nibble = bits 0..3 of scale j+4, high nibble = bits 0..3 of min j+4
inline void k_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K: {fp16 d; fp16 dmin; u8 scales[12]; u8 qs[128]}; 8 sub-blocks of 32. Each 32-byte group of
// qs serves two sub-blocks: low nibbles the first, high nibbles the second.
// value = (d * sc) * q - (dmin * m).
// Q5_K: {fp16 d; fp16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}. As Q4_K, plus bit s of qh[l]
// is bit 4 of element l of sub-block s.
template <bool kFive>
void dq_q45_k(const uint8_t* src, float* y, int64_t nb) {
  constexpr int kBytes = kFive ? 176 : 144;
  for (int64_t b = 0; b < nb; ++b, src += kBytes) {
    const float d = load_half(src);
    const float dmin = load_half(src + 2);
    const uint8_t* scales = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* q = src + (kFive ? 48 : 16);
    for (int c = 0; c < 4; ++c, q += 32, y += 64) {
      for (int half = 0; half < 2; ++half) {
        const int s = 2 * c + half;
        uint8_t sc, m;
        k_scale_min(s, scales, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        const int shift = 4 * half;
        float* out = y + 32 * half;
        for (int l = 0; l < 32; ++l) {
          int v = (q[l] >> shift) & 0x0f;
          if constexpr (kFive) v |= ((qh[l] >> s) & 1) << 4;
          out[l] = d1 * static_cast<float>(v) - m1;
        }
      }
    }
  }
}

// Q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}; 16 sub-blocks of 16, value =
// (d * scale) * (q - 32). Each half of 128 elements uses 64 ql bytes and 32 qh bytes; the four
// 32-element quarters interleave nibbles and 2-bit fields as listed in the loop.
void dq_q6_k(const uint8_t* src, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 210) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192);
    const float d = load_half(src + 208);
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        // k = 0: low nibble of ql[l],    qh bits 0..1
        // k = 1: low nibble of ql[l+32], qh bits 2..3
        // k = 2: high nibble of ql[l],   qh bits 4..5
        // k = 3: high nibble of ql[l+32], qh bits 6..7
        const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

}  // namespace

void dequantize_row(GgmlType t, const void* src_v, float* dst, int64_t n) {
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
  if (!tr || !tr->can_dequantize) {
    throw std::invalid_argument(std::string("dequantize_row: no CPU dequantizer for type ") +
                                (tr ? tr->name : std::to_string(static_cast<uint32_t>(t))));
  }
  if (n < 0 || n % tr->block_elems != 0) {
    throw std::invalid_argument(std::string("dequantize_row: ") + std::to_string(n) +
                                " elements is not a multiple of the " + tr->name + " block size " +
                                std::to_string(tr->block_elems));
  }
  const auto* src = static_cast<const uint8_t*>(src_v);
  const int64_t nb = n / tr->block_elems;
  switch (t) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_half(src + 2 * i);
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = bf16_to_fp32(h);
      }
      return;
    case GgmlType::kQ4_0:
      return dq_q4_0(src, dst, nb);
    case GgmlType::kQ4_1:
      return dq_q4_1(src, dst, nb);
    case GgmlType::kQ5_0:
      return dq_q5_0(src, dst, nb);
    case GgmlType::kQ5_1:
      return dq_q5_1(src, dst, nb);
    case GgmlType::kQ8_0:
      return dq_q8_0(src, dst, nb);
    case GgmlType::kMXFP4:
      return dq_mxfp4(src, dst, nb);
    case GgmlType::kQ4_K:
      return dq_q45_k<false>(src, dst, nb);
    case GgmlType::kQ5_K:
      return dq_q45_k<true>(src, dst, nb);
    case GgmlType::kQ6_K:
      return dq_q6_k(src, dst, nb);
    default:
      throw std::invalid_argument(std::string("dequantize_row: no CPU dequantizer for type ") +
                                  tr->name);
  }
}

// ---------------------------------------------------------------------------------------------
// Reference quantizers: plain round-to-nearest, written for clarity and a provable error bound,
// not for quality. Each encodes with the fp16-rounded scale the decoder will use, so the only
// error is the rounding of x / step (at most half a step) plus the clamping noted per type.

namespace {

inline void store_half(uint8_t* p, float f) {
  const uint16_t h = fp32_to_fp16(f);
  std::memcpy(p, &h, 2);
}
inline float half_round(float f) {
  return fp16_to_fp32(fp32_to_fp16(f));
}
// Smallest fp16 value >= f (f >= 0 finite): scales rounded up keep every value in range.
inline float half_ceil(float f) {
  uint16_t h = fp32_to_fp16(f);
  if (fp16_to_fp32(h) < f) ++h;
  return fp16_to_fp32(h);
}
// Clamps to [lo, hi] (NaN to lo), then rounds to nearest, ties to even, with ggml's
// nearest_int trick: adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits.
// Much cheaper than std::lround, which dominated the quantizers' time.
inline int round_clamp(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) v = static_cast<float>(lo);
  if (v > static_cast<float>(hi)) v = static_cast<float>(hi);
  const float biased = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &biased, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Q4_0 / Q5_0 follow ggml's choice: d = (signed value of largest magnitude) / -2^(bits-1), so that
// value maps exactly to the most negative code. |error| <= d/2, except values of the opposite sign
// near -max, which clamp: |error| <= d = amax / 2^(bits-1).
void q_sym_0(const float* x, uint8_t* out, int64_t nb, int bits) {
  const int levels = 1 << bits, zero = levels / 2;
  const size_t bsz = bits == 4 ? 18 : 22;
  for (int64_t b = 0; b < nb; ++b, x += kQK4, out += bsz) {
    float max = 0.0f;
    for (int j = 0; j < kQK4; ++j) {
      if (std::fabs(x[j]) > std::fabs(max)) max = x[j];
    }
    const float d = half_round(max / static_cast<float>(-zero));
    store_half(out, d);
    int q[kQK4];
    for (int j = 0; j < kQK4; ++j) {
      q[j] = d == 0.0f ? zero : round_clamp(x[j] / d, -zero, zero - 1) + zero;
    }
    uint8_t* qs = out + (bits == 4 ? 2 : 6);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
      qh |= static_cast<uint32_t>(q[j] >> 4) << j;
      qh |= static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
    }
    if (bits == 5) std::memcpy(out + 2, &qh, 4);
  }
}

// Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), m = min. |error| <= d/2 plus the fp16 rounding of
// m and d (about 2^-11 of |min| and of the range).
void q_affine_1(const float* x, uint8_t* out, int64_t nb, int bits) {
  const int top = (1 << bits) - 1;
  const size_t bsz = bits == 4 ? 20 : 24;
  for (int64_t b = 0; b < nb; ++b, x += kQK4, out += bsz) {
    const auto [mn_it, mx_it] = std::minmax_element(x, x + kQK4);
    const float m = half_round(*mn_it);
    const float d = half_round((*mx_it - *mn_it) / static_cast<float>(top));
    store_half(out, d);
    store_half(out + 2, m);
    int q[kQK4];
    for (int j = 0; j < kQK4; ++j) q[j] = d == 0.0f ? 0 : round_clamp((x[j] - m) / d, 0, top);
    uint8_t* qs = out + (bits == 4 ? 4 : 8);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
      qh |= static_cast<uint32_t>(q[j] >> 4) << j;
      qh |= static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
    }
    if (bits == 5) std::memcpy(out + 4, &qh, 4);
  }
}

// Q8_0: d = amax / 127; |error| <= d/2.
void q_q8_0(const float* x, uint8_t* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK4, out += 34) {
    float amax = 0.0f;
    for (int j = 0; j < kQK4; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = half_round(amax / 127.0f);
    store_half(out, d);
    const float id = d == 0.0f ? 0.0f : 1.0f / d;
    auto* qs = reinterpret_cast<int8_t*>(out + 2);
    for (int j = 0; j < kQK4; ++j) {
      qs[j] = static_cast<int8_t>(d == 0.0f ? 0 : round_clamp(x[j] * id, -127, 127));
    }
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32, each value = (d*sc_j) * q - (dmin*m_j) with 6-bit sc_j, m_j.
// The effective minimum -dmin*m_j is rounded down (m_j = ceil) and the step d*sc_j up
// (sc_j = ceil), both with fp16 super-scales rounded up, so [min, max] of every sub-block lies in
// the representable range and |error| <= step_j / 2, where step_j <= (range_j + dmin)/top + d.
void q_k_affine(const float* x, uint8_t* out, int64_t nb, int bits) {
  const int top = (1 << bits) - 1;
  const size_t bsz = bits == 4 ? 144 : 176;
  for (int64_t b = 0; b < nb; ++b, x += kQK, out += bsz) {
    std::memset(out, 0, bsz);
    float neg_min[8], maxv[8];
    float neg_min_max = 0.0f;
    for (int j = 0; j < 8; ++j) {
      const auto [mn, mx] = std::minmax_element(x + 32 * j, x + 32 * j + 32);
      neg_min[j] = std::max(0.0f, -*mn);  // K-quants only subtract a min, so it is <= 0
      maxv[j] = *mx;
      neg_min_max = std::max(neg_min_max, neg_min[j]);
    }
    const float dmin = half_ceil(neg_min_max / 63.0f);
    int mq[8], sq[8];
    float m1[8], scale[8];
    float scale_max = 0.0f;
    for (int j = 0; j < 8; ++j) {
      mq[j] = dmin == 0.0f ? 0 : std::min(63, static_cast<int>(std::ceil(neg_min[j] / dmin)));
      m1[j] = dmin * static_cast<float>(mq[j]);
      scale[j] = std::max(0.0f, maxv[j] + m1[j]) / static_cast<float>(top);
      scale_max = std::max(scale_max, scale[j]);
    }
    const float d = half_ceil(scale_max / 63.0f);
    for (int j = 0; j < 8; ++j) {
      sq[j] = d == 0.0f ? 0 : std::min(63, static_cast<int>(std::ceil(scale[j] / d)));
    }
    store_half(out, d);
    store_half(out + 2, dmin);
    uint8_t* sc = out + 4;
    for (int j = 0; j < 8; ++j) {  // inverse of k_scale_min
      if (j < 4) {
        sc[j] |= static_cast<uint8_t>(sq[j]);
        sc[j + 4] |= static_cast<uint8_t>(mq[j]);
      } else {
        sc[j + 4] = static_cast<uint8_t>((sq[j] & 0x0f) | ((mq[j] & 0x0f) << 4));
        sc[j - 4] |= static_cast<uint8_t>((sq[j] >> 4) << 6);
        sc[j] |= static_cast<uint8_t>((mq[j] >> 4) << 6);
      }
    }
    int q[kQK];
    for (int j = 0; j < 8; ++j) {
      const float step = d * static_cast<float>(sq[j]);
      const float istep = step == 0.0f ? 0.0f : 1.0f / step;
      for (int l = 0; l < 32; ++l) {
        q[32 * j + l] = step == 0.0f ? 0 : round_clamp((x[32 * j + l] + m1[j]) * istep, 0, top);
      }
    }
    uint8_t* qh = out + 16;
    uint8_t* qs = out + (bits == 4 ? 16 : 48);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        if (bits == 5)
          qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

// Q6_K: 16 sub-blocks of 16, value = (d*sc_j) * (q - 32) with int8 sc_j. The step d*sc_j is
// rounded up from amax_j / 31, so |x / step| <= 31 and |error| <= step_j / 2.
void q_q6_k(const float* x, uint8_t* out, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += kQK, out += 210) {
    std::memset(out, 0, 210);
    float scale[16];
    float scale_max = 0.0f;
    for (int j = 0; j < 16; ++j) {
      float amax = 0.0f;
      for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * j + l]));
      scale[j] = amax / 31.0f;
      scale_max = std::max(scale_max, scale[j]);
    }
    const float d = half_ceil(scale_max / 127.0f);
    auto* sc = reinterpret_cast<int8_t*>(out + 192);
    int q[kQK];
    for (int j = 0; j < 16; ++j) {
      const int s = d == 0.0f ? 0 : std::min(127, static_cast<int>(std::ceil(scale[j] / d)));
      sc[j] = static_cast<int8_t>(s);
      const float step = d * static_cast<float>(s);
      const float istep = step == 0.0f ? 0.0f : 1.0f / step;
      for (int l = 0; l < 16; ++l) {
        q[16 * j + l] = (step == 0.0f ? 0 : round_clamp(x[16 * j + l] * istep, -32, 31)) + 32;
      }
    }
    store_half(out + 208, d);
    uint8_t* ql = out;
    uint8_t* qh = out + 128;
    for (int half = 0; half < 2; ++half) {
      const int* qq = q + 128 * half;
      for (int l = 0; l < 32; ++l) {
        ql[64 * half + l] = static_cast<uint8_t>((qq[l] & 0x0f) | ((qq[l + 64] & 0x0f) << 4));
        ql[64 * half + l + 32] =
            static_cast<uint8_t>((qq[l + 32] & 0x0f) | ((qq[l + 96] & 0x0f) << 4));
        qh[32 * half + l] =
            static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) |
                                 ((qq[l + 64] >> 4) << 4) | ((qq[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace

std::vector<uint8_t> quantize_row(GgmlType t, const float* src, int64_t n) {
  std::vector<uint8_t> out(ggml_row_bytes(t, n));  // throws for a partial block
  quantize_row_into(t, src, n, out.data());
  return out;
}

void quantize_row_into(GgmlType t, const float* src, int64_t n, uint8_t* o) {
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
  if (!tr || !tr->can_dequantize) {
    throw std::invalid_argument(std::string("quantize_row: no quantizer for type ") +
                                (tr ? tr->name : std::to_string(static_cast<uint32_t>(t))));
  }
  (void)ggml_row_bytes(t, n);  // throws for a partial block
  const int64_t nb = n / tr->block_elems;
  switch (t) {
    case GgmlType::kF32:
      std::memcpy(o, src, static_cast<size_t>(n) * 4);
      break;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t == GgmlType::kF16 ? fp32_to_fp16(src[i]) : fp32_to_bf16(src[i]);
        std::memcpy(o + 2 * i, &h, 2);
      }
      break;
    case GgmlType::kQ4_0:
      q_sym_0(src, o, nb, 4);
      break;
    case GgmlType::kQ5_0:
      q_sym_0(src, o, nb, 5);
      break;
    case GgmlType::kQ4_1:
      q_affine_1(src, o, nb, 4);
      break;
    case GgmlType::kQ5_1:
      q_affine_1(src, o, nb, 5);
      break;
    case GgmlType::kQ8_0:
      q_q8_0(src, o, nb);
      break;
    case GgmlType::kQ4_K:
      q_k_affine(src, o, nb, 4);
      break;
    case GgmlType::kQ5_K:
      q_k_affine(src, o, nb, 5);
      break;
    case GgmlType::kQ6_K:
      q_q6_k(src, o, nb);
      break;
    default:
      throw std::invalid_argument(std::string("quantize_row: no quantizer for type ") + tr->name);
  }
}

}  // namespace sinkscope
