// SPDX-License-Identifier: Apache-2.0
#include "engine/backend/gpu_weights_choice.h"

#include "engine/cache/capacity.h"

namespace sinkscope {

GpuWeightsChoice choose_gpu_weights(const GpuMemoryNeed& bf16, const GpuMemoryNeed& native,
                                    bool native_differs, uint64_t free_bytes,
                                    std::optional<GpuWeights> uploaded) {
  GpuWeightsChoice c;
  if (uploaded && *uploaded != GpuWeights::kAuto) {
    c.mode = *uploaded;
    c.why = std::string("auto: the model's ") + gpu_weights_name(*uploaded) +
            " weights are already on the device";
    return c;
  }
  const uint64_t want = bf16.weights + 2 * bf16.per_backend;
  if (want <= free_bytes || !native_differs) {
    c.mode = GpuWeights::kBf16;
    c.why = want <= free_bytes
                ? "auto: bf16 weights fit (" + format_bytes(int64_t(want)) +
                      " with room for a second backend, " + format_bytes(int64_t(free_bytes)) +
                      " free)"
                : "auto: bf16 (no projection of this model can stay quantized on the GPU)";
    return c;
  }
  c.mode = GpuWeights::kNative;
  c.why = "auto: quantized weights, " + format_bytes(int64_t(native.weights)) +
          " instead of bf16's " + format_bytes(int64_t(bf16.weights)) + " (bf16 with room for a "
          "second backend needs " + format_bytes(int64_t(want)) + ", " +
          format_bytes(int64_t(free_bytes)) + " free)";
  return c;
}

}  // namespace sinkscope
