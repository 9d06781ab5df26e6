// SPDX-License-Identifier: Apache-2.0
// KV quantization of one (token, kv head) vector; format in engine/cache/kv_layout.h.
//
// Error bound (per element, group with absolute maximum a): the scale s is a / qmax rounded up
// to fp16, so s <= a / qmax * (1 + 2^-10) for normal fp16 scales (a / qmax >= 2^-14) and
// s <= a / qmax + 2^-24 below that. No code clips (|x| / s <= qmax), so rounding is the only
// error:  |x - x'| <= s / 2  ~=  a / 254 (int8)  or  a / 14 (int4).
// Scales above fp16's range (a / qmax > 65504) are not representable: quantize_kv_row throws.
#pragma once

#include <cstdint>

#include "engine/cache/kv_layout.h"

namespace sinkscope {

// codes: fmt.code_bytes(d) bytes; scales: fmt.scales(d) fp16 values. d % group == 0, and
// for int4 group % 2 == 0.
void quantize_kv_row(const float* x, int d, const KvQuantFormat& fmt, uint8_t* codes,
                     uint16_t* scales);
// out[i * stride] = dequantized x[i] (stride 1 for a row, the tile's leading dimension for a
// transposed K tile).
void dequantize_kv_row(const uint8_t* codes, const uint16_t* scales, int d,
                       const KvQuantFormat& fmt, float* out, int64_t stride = 1);

// The bound above for one group's absolute maximum.
double kv_quant_error_bound(double group_amax, const KvQuantFormat& fmt);

}  // namespace sinkscope
