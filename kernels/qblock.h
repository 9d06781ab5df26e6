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

// Row layouts of the device only (not ggml types, ids far from theirs): the blocks of a row taken
// apart into one array per field, so that the 16-byte loads of the decode GEMV land on 16-byte
// boundaries (ggml's Q8_0 and Q6_K blocks are 34 and 210 bytes, so every other block of a row
// starts at 2-byte alignment). Same bytes per row as the file's layout. For a row of nb blocks:
//   kQ8_0R: qs[32 nb] (block b's 32 quants at 32 b), then d[nb] (fp16).
//   kQ6_KR: ql[128 nb], qh[64 nb], scales[16 nb], d[nb] (block b's fields at 128 b, 64 b, 16 b, b).
// The CUDA backend repacks a matrix into them at upload when its rows allow 16-byte loads
// (repack_fits); repack_row / decode8_in_row below are the definition.
enum RowLayout : int { kQ8_0R = 1008, kQ6_KR = 1014 };

constexpr int kChunk = 8;  // elements decoded per call

SINKSCOPE_QB_CONSTEXPR bool supported(int type) {
  return type == kQ4_0 || type == kQ4_1 || type == kQ8_0 || type == kQ4_K || type == kQ5_K ||
         type == kQ6_K;
}
SINKSCOPE_QB_CONSTEXPR bool repacked(int type) { return type == kQ8_0R || type == kQ6_KR; }
// The ggml type whose blocks a row layout holds (the type itself for a ggml type).
SINKSCOPE_QB_CONSTEXPR int file_type(int type) {
  return type == kQ8_0R ? kQ8_0 : type == kQ6_KR ? kQ6_K : type;
}
// The repacked layout of a ggml type (the type itself when it has none).
SINKSCOPE_QB_CONSTEXPR int repacked_type(int type) {
  return type == kQ8_0 ? kQ8_0R : type == kQ6_K ? kQ6_KR : type;
}
// Elements per block (0 for a type without a device decode); a row layout counts its file type's.
SINKSCOPE_QB_CONSTEXPR int block_elems(int type) {
  switch (file_type(type)) {
    case kQ4_0: case kQ4_1: case kQ8_0: return 32;
    case kQ4_K: case kQ5_K: case kQ6_K: return 256;
    default: return 0;
  }
}
// Bytes per block (0 for a type without a device decode); a row layout counts its file type's.
SINKSCOPE_QB_CONSTEXPR int block_bytes(int type) {
  switch (file_type(type)) {
    case kQ4_0: return 18;
    case kQ4_1: return 20;
    case kQ8_0: return 34;
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    case kQ6_K: return 210;
    default: return 0;
  }
}
// True when rows of cols elements of ggml type `type` have a repacked layout whose fields all
// start 16-byte aligned in every row of a 16-byte aligned matrix: the row's bytes a multiple of
// 16 (Q8_0: cols % 256 == 0; Q6_K: cols % 2048 == 0).
SINKSCOPE_QB_CONSTEXPR bool repack_fits(int type, long long cols) {
  const int be = block_elems(type);
  return repacked_type(type) != type && cols > 0 && be > 0 && cols % be == 0 &&
         (cols / be * block_bytes(type)) % 16 == 0;
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

// Q8_0's decode from its fields: qs the block's 32 quants, d its fp16 scale; value = q * d.
SINKSCOPE_QB_FN void decode8_q8_0(const uint8_t* qs, const uint8_t* d_at, int e0, float* out) {
  const float d = load_half(d_at);
  for (int i = 0; i < 8; ++i) {
    out[i] = mul(static_cast<float>(static_cast<int8_t>(qs[e0 + i])), d);
  }
}

// Q6_K's decode from its fields: ql[128], qh[64], scales[16] (int8), d (fp16). Element e: half
// h = e / 128, quarter k = (e % 128) / 32, l = e % 32. Low 4 bits: nibble (k >= 2 ? high : low)
// of ql[64 h + l + 32 (k & 1)]; high 2 bits: bits 2k..2k+1 of qh[32 h + l]; scale
// scales[8 h + l / 16 + 2 k]. value = (d * scale) * (q - 32).
SINKSCOPE_QB_FN void decode8_q6_k(const uint8_t* ql0, const uint8_t* qh0, const uint8_t* sc,
                                  const uint8_t* d_at, int e0, float* out) {
  const int h = e0 >> 7;
  const int k = (e0 >> 5) & 3;
  const int l0 = e0 & 31;
  const uint8_t* ql = ql0 + 64 * h + l0 + ((k & 1) ? 32 : 0);
  const uint8_t* qh = qh0 + 32 * h + l0;
  const int scale = static_cast<int8_t>(sc[8 * h + (l0 >> 4) + 2 * k]);
  const float ds = mul(load_half(d_at), static_cast<float>(scale));
  const int nshift = k >= 2 ? 4 : 0;
  const int hshift = 2 * k;
  for (int i = 0; i < 8; ++i) {
    const int q = (((ql[i] >> nshift) & 15) | (((qh[i] >> hshift) & 3) << 4)) - 32;
    out[i] = mul(ds, static_cast<float>(q));
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
    case kQ8_0:
      // {fp16 d; i8 qs[32]}
      decode8_q8_0(blk + 2, blk, e0, out);
      return;
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
    case kQ6_K:
      // {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}
      decode8_q6_k(blk, blk + 128, blk + 192, blk + 208, e0, out);
      return;
    default:
      for (int i = 0; i < 8; ++i) out[i] = 0.0f;
      return;
  }
}

// Elements e0 .. e0+7 of block b of a row of nb blocks at row, in ggml type `type` or a row
// layout (kQ8_0R, kQ6_KR): the same values as decode8 of the block before the repack.
SINKSCOPE_QB_FN void decode8_in_row(int type, const uint8_t* row, long long nb, long long b, int e0,
                                    float* out) {
  if (type == kQ8_0R) {
    decode8_q8_0(row + 32 * b, row + 32 * nb + 2 * b, e0, out);
  } else if (type == kQ6_KR) {
    decode8_q6_k(row + 128 * b, row + 128 * nb + 64 * b, row + 192 * nb + 16 * b,
                 row + 208 * nb + 2 * b, e0, out);
  } else {
    decode8(type, row + b * block_bytes(type), e0, out);
  }
}

// Block b of a row of nb ggml blocks of type `type` (Q8_0 or Q6_K) from src into its places in
// the row of repacked_type(type) at dst (a whole row: one call per block, src and dst apart).
SINKSCOPE_QB_FN void repack_block(int type, const uint8_t* src, long long nb, long long b,
                                  uint8_t* dst) {
  const uint8_t* blk = src + b * block_bytes(type);
  if (type == kQ8_0) {
    for (int i = 0; i < 32; ++i) dst[32 * b + i] = blk[2 + i];
    dst[32 * nb + 2 * b] = blk[0];
    dst[32 * nb + 2 * b + 1] = blk[1];
  } else if (type == kQ6_K) {
    for (int i = 0; i < 128; ++i) dst[128 * b + i] = blk[i];
    for (int i = 0; i < 64; ++i) dst[128 * nb + 64 * b + i] = blk[128 + i];
    for (int i = 0; i < 16; ++i) dst[192 * nb + 16 * b + i] = blk[192 + i];
    dst[208 * nb + 2 * b] = blk[208];
    dst[208 * nb + 2 * b + 1] = blk[209];
  }
}

// Decodes a whole block into out[block_elems(type)].
SINKSCOPE_QB_FN void decode_block(int type, const uint8_t* blk, float* out) {
  const int n = block_elems(type);
  for (int e0 = 0; e0 < n; e0 += kChunk) decode8(type, blk, e0, out + e0);
}

}  // namespace sinkscope::qblock
