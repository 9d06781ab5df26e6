// SPDX-License-Identifier: Apache-2.0
// The arithmetic of the CUDA RMSNorm, shared by launch_rms_norm's register kernels
// (kernels/ops.cu) and the norm the decode GEMV forms in its prologue (kernels/qgemv_wide.cuh),
// so both make the same bf16 activation bit for bit: squares summed x, y, z, w per float4 into
// one fp32 partial, and the output bf16((v * scale) * g), the CPU reference's product order.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace sinkscope::kernels::detail {

__device__ __forceinline__ float add_squares(float ss, float4 v) {
  ss += v.x * v.x;
  ss += v.y * v.y;
  ss += v.z * v.z;
  ss += v.w * v.w;
  return ss;
}

// Four values packed two to a word, element 2k in the low half of word k.
__device__ __forceinline__ uint2 norm_pack4(float4 v, float scale, float4 g) {
  const auto b = [](float f) {
    return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(f)));
  };
  return make_uint2(b(v.x * scale * g.x) | (b(v.y * scale * g.y) << 16),
                    b(v.z * scale * g.z) | (b(v.w * scale * g.w) << 16));
}

}  // namespace sinkscope::kernels::detail
