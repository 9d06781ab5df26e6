// SPDX-License-Identifier: Apache-2.0
#include "engine/cache/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/format/ggml_types.h"

namespace sinkscope {
namespace {

// Smallest fp16 value >= x (x >= 0, finite, <= 65504).
uint16_t fp16_round_up(float x) {
  uint16_t h = fp32_to_fp16(x);
  if (fp16_to_fp32(h) < x) ++h;  // positive halves are ordered like their bit patterns
  return h;
}

}  // namespace

void quantize_kv_row(const float* x, int d, const KvQuantFormat& fmt, uint8_t* codes,
                     uint16_t* scales) {
  const int g = fmt.group, qmax = fmt.qmax();
  for (int b = 0; b < d / g; ++b) {
    const float* xb = x + b * g;
    float amax = 0.0f;
    for (int i = 0; i < g; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float want = amax / float(qmax);
    if (!(want <= 65504.0f))
      throw std::runtime_error("KV quantization: a group's scale (" + std::to_string(want) +
                               ") is outside fp16's range");
    const uint16_t hs = fp16_round_up(want);
    scales[b] = hs;
    const float s = fp16_to_fp32(hs);
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    for (int i = 0; i < g; ++i) {
      // x * inv may exceed qmax by an ulp when s == want exactly; clamp keeps codes in range
      // (the value stays within s / 2 of x since |x| <= qmax * s).
      int c = int(std::lrint(xb[i] * inv));
      c = std::clamp(c, -qmax, qmax);
      const int idx = b * g + i;
      if (fmt.bits == 8) {
        codes[idx] = uint8_t(int8_t(c));
      } else if (idx % 2 == 0) {
        codes[idx / 2] = uint8_t(c + 8);
      } else {
        codes[idx / 2] = uint8_t(codes[idx / 2] | uint8_t((c + 8) << 4));
      }
    }
  }
}

void dequantize_kv_row(const uint8_t* codes, const uint16_t* scales, int d,
                       const KvQuantFormat& fmt, float* out, int64_t stride) {
  const int g = fmt.group;
  for (int b = 0; b < d / g; ++b) {
    const float s = fp16_to_fp32(scales[b]);
    if (fmt.bits == 8) {
      const int8_t* c = reinterpret_cast<const int8_t*>(codes) + b * g;
      for (int i = 0; i < g; ++i) out[int64_t(b * g + i) * stride] = float(c[i]) * s;
    } else {
      const uint8_t* c = codes + b * g / 2;
      for (int i = 0; i < g; i += 2) {
        out[int64_t(b * g + i) * stride] = float(int(c[i / 2] & 15) - 8) * s;
        out[int64_t(b * g + i + 1) * stride] = float(int(c[i / 2] >> 4) - 8) * s;
      }
    }
  }
}

double kv_quant_error_bound(double group_amax, const KvQuantFormat& fmt) {
  const double want = group_amax / fmt.qmax();
  const double s = want >= std::ldexp(1.0, -14) ? want * (1.0 + std::ldexp(1.0, -10))
                                                : want + std::ldexp(1.0, -24);
  return s / 2.0;
}

}  // namespace sinkscope
