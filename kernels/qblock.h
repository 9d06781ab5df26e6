// SPDX-License-Identifier: Apache-2.0
// Decoding of ggml quantized blocks (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K), usable from host C++ and
// from CUDA kernels. The CUDA GEMV / dequantize kernels (kernels/qgemv.cu) and the CPU unit test
// (tests/unit/test_qblock.cpp) call the same functions, and that test proves them equal to the
// engine's dequantize_row (engine/format/dequant.cpp) bit for bit.
//
// The unit of work is a chunk of 8 consecutive elements of one block (the first element a
// multiple of 8). Every layout keeps such a chunk in one sub-block with one scale, so a chunk
// needs one scale computation and a few contiguous bytes. Blocks are packed (18/20/34/144/176/210
// bytes), so no field is assumed aligned: everything is read byte by byte.
//
// Arithmetic follows dequant.cpp's order of operations with every product and sum rounded on its
// own (no fused multiply-add): on the device through __fmul_rn / __fadd_rn, on the host through
// plain operators, which the engine compiles with -ffp-contract=off for dequant.cpp and this
// header's test.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SINKSCOPE_QB_FN __host__ __device__ __forceinline__
#define SINKSCOPE_QB_CONSTEXPR __host__ __device__ constexpr
#else
#define SINKSCOPE_QB_FN inline
#define SINKSCOPE_QB_CONSTEXPR constexpr
#endif

namespace sinkscope::qblock {

// ggml type ids (GgmlType in engine/format/ggml_types.h; kept as plain numbers so this header
// needs nothing from the engine).
enum QType : int { kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14 };

constexpr int kChunk = 8;  // elements decoded per call

SINKSCOPE_QB_CONSTEXPR bool supported(int type) {
  return type == kQ4_0 || type == kQ4_1 || type == kQ8_0 || type == kQ4_K || type == kQ5_K ||
         type == kQ6_K;
}
// Elements per block (0 for an unsupported type).
SINKSCOPE_QB_CONSTEXPR int block_elems(int type) {
  switch (type) {
    case kQ4_0: case kQ4_1: case kQ8_0: return 32;
    case kQ4_K: case kQ5_K: case kQ6_K: return 256;
    default: return 0;
  }
}
// Bytes per block (0 for an unsupported type).
SINKSCOPE_QB_CONSTEXPR int block_bytes(int type) {
  switch (type) {
    case kQ4_0: return 18;
    case kQ4_1: return 20;
    case kQ8_0: return 34;
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    case kQ6_K: return 210;
    default: return 0;
  }
}

// Exactly rounded float operations (no contraction on the device).
SINKSCOPE_QB_FN float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SINKSCOPE_QB_FN float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SINKSCOPE_QB_FN float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

SINKSCOPE_QB_FN float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return __builtin_bit_cast(float, u);
#endif
}

SINKSCOPE_QB_FN uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return __builtin_bit_cast(uint32_t, f);
#endif
}

// IEEE binary16 -> binary32; exact for every input (NaN payloads are kept in the high bits).
SINKSCOPE_QB_FN float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in binary32.
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return bits_to_float(sign | float_to_bits(mag));
  }
  if (exp == 31) return bits_to_float(sign | 0x7f800000u | (mant << 13));
  return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

SINKSCOPE_QB_FN float load_half(const uint8_t* p) {
  return half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed scale bytes q.
SINKSCOPE_QB_FN void k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Decodes elements e0 .. e0+7 of the block at blk (e0 a multiple of 8, below block_elems(type))
// into out. Unsupported types write zeros (callers check supported() first).
SINKSCOPE_QB_FN void decode8(int type, const uint8_t* blk, int e0, float* out) {
  switch (type) {
    case kQ4_0: {
      // {fp16 d; u8 qs[16]}: element j < 16 is the low nibble of qs[j], j >= 16 the high nibble
      // of qs[j-16]; value = (q - 8) * d.
      const float d = load_half(blk);
      const uint8_t* qs = blk + 2 + (e0 & 15);
      const int shift = e0 >= 16 ? 4 : 0;
      for (int i = 0; i < 8; ++i) out[i] = mul(static_cast<float>(((qs[i] >> shift) & 15) - 8), d);
      return;
    }
    case kQ4_1: {
      // {fp16 d; fp16 m; u8 qs[16]}; value = q * d + m.
      const float d = load_half(blk);
      const float m = load_half(blk + 2);
      const uint8_t* qs = blk + 4 + (e0 & 15);
      const int shift = e0 >= 16 ? 4 : 0;
      for (int i = 0; i < 8; ++i) out[i] = add(mul(static_cast<float>((qs[i] >> shift) & 15), d), m);
      return;
    }
    case kQ8_0: {
      // {fp16 d; i8 qs[32]}; value = q * d.
      const float d = load_half(blk);
      const uint8_t* qs = blk + 2 + e0;
      for (int i = 0; i < 8; ++i) out[i] = mul(static_cast<float>(static_cast<int8_t>(qs[i])), d);
      return;
    }
    case kQ4_K:
    case kQ5_K: {
      // {fp16 d; fp16 dmin; u8 scales[12]; (Q5_K: u8 qh[32];) u8 qs[128]}. Sub-block s = e / 32
      // uses the nibbles (low for even s, high for odd s) of qs[32 * (s / 2) + l], l = e % 32;
      // Q5_K's bit 4 is bit s of qh[l]. value = (d * sc) * q - (dmin * m).
      const int s = e0 >> 5;
      const int l0 = e0 & 31;
      int sc, mn;
      k_scale_min(s, blk + 4, &sc, &mn);
      const float d1 = mul(load_half(blk), static_cast<float>(sc));
      const float m1 = mul(load_half(blk + 2), static_cast<float>(mn));
      const int shift = (s & 1) ? 4 : 0;
      if (type == kQ4_K) {
        const uint8_t* qs = blk + 16 + 32 * (s >> 1) + l0;
        for (int i = 0; i < 8; ++i) {
          out[i] = sub(mul(d1, static_cast<float>((qs[i] >> shift) & 15)), m1);
        }
      } else {
        const uint8_t* qh = blk + 16 + l0;
        const uint8_t* qs = blk + 48 + 32 * (s >> 1) + l0;
        for (int i = 0; i < 8; ++i) {
          const int v = ((qs[i] >> shift) & 15) | (((qh[i] >> s) & 1) << 4);
          out[i] = sub(mul(d1, static_cast<float>(v)), m1);
        }
      }
      return;
    }
    case kQ6_K: {
      // {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}. Element e: half h = e / 128, quarter
      // k = (e % 128) / 32, l = e % 32. Low 4 bits: nibble (k >= 2 ? high : low) of
      // ql[64 h + l + 32 (k & 1)]; high 2 bits: bits 2k..2k+1 of qh[32 h + l]; scale
      // scales[8 h + l / 16 + 2 k]. value = (d * scale) * (q - 32).
      const int h = e0 >> 7;
      const int k = (e0 >> 5) & 3;
      const int l0 = e0 & 31;
      const uint8_t* ql = blk + 64 * h + l0 + ((k & 1) ? 32 : 0);
      const uint8_t* qh = blk + 128 + 32 * h + l0;
      const int scale = static_cast<int8_t>(blk[192 + 8 * h + (l0 >> 4) + 2 * k]);
      const float ds = mul(load_half(blk + 208), static_cast<float>(scale));
      const int nshift = k >= 2 ? 4 : 0;
      const int hshift = 2 * k;
      for (int i = 0; i < 8; ++i) {
        const int q = (((ql[i] >> nshift) & 15) | (((qh[i] >> hshift) & 3) << 4)) - 32;
        out[i] = mul(ds, static_cast<float>(q));
      }
      return;
    }
    default:
      for (int i = 0; i < 8; ++i) out[i] = 0.0f;
      return;
  }
}

// Decodes a whole block into out[block_elems(type)].
SINKSCOPE_QB_FN void decode_block(int type, const uint8_t* blk, float* out) {
  const int n = block_elems(type);
  for (int e0 = 0; e0 < n; e0 += kChunk) decode8(type, blk, e0, out + e0);
}

}  // namespace sinkscope::qblock
