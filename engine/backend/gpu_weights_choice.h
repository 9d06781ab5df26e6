// SPDX-License-Identifier: Apache-2.0
// Where the CUDA backend keeps the projections when asked for GpuWeights::kAuto (the default):
// bf16 (the fused decode kernels and the faster prefill) when the bf16 weights fit with room to
// spare, else the file's quantized blocks. Plain C++, so the rule is tested without a GPU; the
// CUDA backend supplies the byte counts from its allocation plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/backend/backend.h"

namespace sinkscope {

// Device bytes of one mode: the model's weights (uploaded once per model and device, shared by
// every backend of the model there) and what each backend adds (KV cache, scratch).
struct GpuMemoryNeed {
  uint64_t weights = 0;
  uint64_t per_backend = 0;
};

struct GpuWeightsChoice {
  GpuWeights mode = GpuWeights::kBf16;
  std::string why;  // one line for the backend's note and the logs
};

// The rule, in order:
//   1. the model's weights are already on the device in one mode (another backend of the same
//      model): that mode, so they are not uploaded twice;
//   2. bf16 weights + two backends' KV and scratch fit in free_bytes: bf16 (room for the dense
//      baseline the workbench and `compare` keep beside the variant);
//   3. some projection can stay quantized (native_differs): native;
//   4. bf16 (the backend's memory check then names what does not fit).
// free_bytes counts what is free now, weights already uploaded not included.
GpuWeightsChoice choose_gpu_weights(const GpuMemoryNeed& bf16, const GpuMemoryNeed& native,
                                    bool native_differs, uint64_t free_bytes,
                                    std::optional<GpuWeights> uploaded);

}  // namespace sinkscope
