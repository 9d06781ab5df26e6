// SPDX-License-Identifier: Apache-2.0
// ggml tensor types as stored in GGUF, their block geometry and CPU dequantizers.
// Block layouts follow ggml (ggml-common.h); see dequant.cpp for each one.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace sinkscope {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  kMXFP4 = 39,
};

struct GgmlTypeTraits {
  const char* name;
  int64_t block_elems;  // elements per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
  bool can_dequantize;  // a CPU dequantizer exists
};

// nullptr for a type id we do not know (the reader reports it by number).
const GgmlTypeTraits* ggml_type_traits(uint32_t type_id);
const char* ggml_type_name(GgmlType t);

// Bytes for n elements of type t; throws std::invalid_argument when n is not a multiple of the
// block size or the size overflows.
uint64_t ggml_row_bytes(GgmlType t, int64_t n);

// Dequantizes n elements (a multiple of the block size) from src into dst.
// Throws std::invalid_argument for types without a dequantizer.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// fp16 / bf16 <-> fp32 conversions (round to nearest even).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
inline float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }
uint16_t fp32_to_bf16(float f);

}  // namespace sinkscope
