// SPDX-License-Identifier: Apache-2.0
// ggml type table (block geometry as stored in GGUF) and fp16/bf16 <-> fp32 conversions.
#include "engine/format/ggml_types.h"

#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace sinkscope {

namespace {

constexpr int64_t kQK = 256;  // K-quant super-block

// Indexed by the GGUF type id. Types we cannot dequantize are still listed so that files holding
// them open (and report a clear error only when someone asks for their values). Sizes follow the
// ggml block structs (ggml-common.h).
struct TypeEntry {
  uint32_t id;
  GgmlTypeTraits traits;
};
constexpr TypeEntry kTypes[] = {
    {0, {"F32", 1, 4, true}},
    {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", 32, 2 + 16, true}},
    {3, {"Q4_1", 32, 2 + 2 + 16, true}},
    {6, {"Q5_0", 32, 2 + 4 + 16, true}},
    {7, {"Q5_1", 32, 2 + 2 + 4 + 16, true}},
    {8, {"Q8_0", 32, 2 + 32, true}},
    {9, {"Q8_1", 32, 4 + 4 + 32, false}},
    {10, {"Q2_K", kQK, 2 + 2 + kQK / 16 + kQK / 4, false}},
    {11, {"Q3_K", kQK, 2 + kQK / 4 + kQK / 8 + 12, false}},
    {12, {"Q4_K", kQK, 2 + 2 + 12 + kQK / 2, true}},
    {13, {"Q5_K", kQK, 2 + 2 + 12 + kQK / 8 + kQK / 2, true}},
    {14, {"Q6_K", kQK, kQK / 2 + kQK / 4 + kQK / 16 + 2, true}},
    {15, {"Q8_K", kQK, 4 + kQK + kQK / 8, false}},
    {16, {"IQ2_XXS", kQK, 2 + kQK / 4, false}},
    {17, {"IQ2_XS", kQK, 2 + kQK / 4 + kQK / 32, false}},
    {18, {"IQ3_XXS", kQK, 2 + kQK / 4 + kQK / 8, false}},
    {19, {"IQ1_S", kQK, 2 + kQK / 8 + kQK / 16, false}},
    {20, {"IQ4_NL", 32, 2 + 16, false}},
    {21, {"IQ3_S", kQK, 2 + kQK / 4 + kQK / 8 + kQK / 32 + 4, false}},
    {22, {"IQ2_S", kQK, 2 + kQK / 4 + kQK / 16, false}},
    {23, {"IQ4_XS", kQK, 2 + 2 + kQK / 2 + kQK / 64, false}},
    {24, {"I8", 1, 1, false}},
    {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},
    {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},
    {29, {"IQ1_M", kQK, kQK / 8 + kQK / 16 + kQK / 32, false}},
    {30, {"BF16", 1, 2, true}},
    {39, {"MXFP4", 32, 1 + 16, true}},
    {34, {"TQ1_0", kQK, 2 + 4 * 13, false}},
    {35, {"TQ2_0", kQK, 2 + 64, false}},
    {39, {"MXFP4", 32, 1 + 16, false}},
};

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t type_id) {
  for (const TypeEntry& e : kTypes) {
    if (e.id == type_id) return &e.traits;
  }
  return nullptr;
}

const char* ggml_type_name(GgmlType t) {
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
  return tr ? tr->name : "unknown";
}

uint64_t ggml_row_bytes(GgmlType t, int64_t n) {
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
  if (!tr) {
    throw std::invalid_argument("ggml_row_bytes: unknown type id " +
                                std::to_string(static_cast<uint32_t>(t)));
  }
  if (n < 0 || n % tr->block_elems != 0) {
    throw std::invalid_argument(std::string("ggml_row_bytes: ") + std::to_string(n) +
                                " elements is not a multiple of the " + tr->name + " block size " +
                                std::to_string(tr->block_elems));
  }
  const uint64_t blocks = static_cast<uint64_t>(n / tr->block_elems);
  const uint64_t bb = static_cast<uint64_t>(tr->block_bytes);
  if (blocks > std::numeric_limits<uint64_t>::max() / bb) {
    throw std::invalid_argument("ggml_row_bytes: byte size overflows");
  }
  return blocks * bb;
}

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // Inf, or NaN keeping its payload
  } else {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x_all = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x_all >> 16) & 0x8000u);
  const uint32_t x = x_all & 0x7fffffffu;
  if (x > 0x7f800000u) {
    // NaN: keep it a (quiet) NaN; the top payload bits survive.
    return static_cast<uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  }
  // 65520 is the midpoint between the largest half (65504, odd mantissa) and 2^16, so it and
  // everything above round to Inf under round-to-nearest-even.
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (x >= 0x38800000u) {
    // Normal half: rebias the exponent, then round the 13 dropped mantissa bits. A carry out of
    // the mantissa correctly bumps the exponent.
    uint32_t h = (x >> 13) - ((127u - 15u) << 10);
    const uint32_t rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Subnormal half (or zero): value / 2^-24 = mant * 2^(e - 126) for a normal float.
  const uint32_t e = x >> 23;
  if (e < 102) return sign;  // below 2^-25: rounds to zero (f32 subnormals included)
  const uint32_t mant = (x & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  // NaN must stay NaN: truncation could clear every payload bit and produce Inf, so force the
  // quiet bit.
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  // Round to nearest even; overflow of the largest finite values correctly lands on Inf.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace sinkscope
