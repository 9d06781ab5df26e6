// SPDX-License-Identifier: Apache-2.0
// GpuWeights::kAuto's rule (engine/backend/gpu_weights_choice.h) on the byte counts of an 8B
// Q4_K_M model: bf16 when it fits with a second backend's KV and scratch, native when not,
// and whatever is already uploaded for the model.
#include <gtest/gtest.h>

#include "engine/backend/gpu_weights_choice.h"

namespace sinkscope {
namespace {

constexpr uint64_t GiB = uint64_t(1) << 30;
// Llama-3.1-8B: 15 GiB of bf16 weights against 4.6 GiB as Q4_K_M (+ bf16 embeddings and head);
// a 32K bf16 KV cache is 4 GiB, scratch about 1 GiB.
const GpuMemoryNeed kBf16{15 * GiB, 5 * GiB};
const GpuMemoryNeed kNative{6 * GiB, 6 * GiB};

TEST(GpuWeightsChoice, Bf16WhenItFitsWithASecondBackend) {
  const GpuWeightsChoice c = choose_gpu_weights(kBf16, kNative, true, 130 * GiB, std::nullopt);
  EXPECT_EQ(c.mode, GpuWeights::kBf16);
  EXPECT_NE(c.why.find("fit"), std::string::npos) << c.why;
  // Exactly the need (weights + two backends) still fits.
  EXPECT_EQ(choose_gpu_weights(kBf16, kNative, true, 25 * GiB, std::nullopt).mode,
            GpuWeights::kBf16);
}

TEST(GpuWeightsChoice, NativeWhenBf16WouldNotLeaveRoom) {
  // A 24 GB card: bf16 + one backend would fit (20 GiB), bf16 + two would not.
  const GpuWeightsChoice c = choose_gpu_weights(kBf16, kNative, true, 22 * GiB, std::nullopt);
  EXPECT_EQ(c.mode, GpuWeights::kNative);
  EXPECT_NE(c.why.find("quantized"), std::string::npos) << c.why;
  EXPECT_NE(c.why.find("22.00 GiB free"), std::string::npos) << c.why;
  EXPECT_EQ(choose_gpu_weights(kBf16, kNative, true, 25 * GiB - 1, std::nullopt).mode,
            GpuWeights::kNative);
}

TEST(GpuWeightsChoice, Bf16WhenNothingCanStayQuantized) {
  // E.g. an F16 or Q5_0 file: native would be bf16 anyway; the memory check reports the rest.
  const GpuWeightsChoice c = choose_gpu_weights(kBf16, kBf16, false, 10 * GiB, std::nullopt);
  EXPECT_EQ(c.mode, GpuWeights::kBf16);
  EXPECT_NE(c.why.find("no projection"), std::string::npos) << c.why;
}

TEST(GpuWeightsChoice, FollowsWeightsAlreadyUploaded) {
  // Another backend of the model holds native weights: reuse them even with room for bf16.
  GpuWeightsChoice c = choose_gpu_weights(kBf16, kNative, true, 130 * GiB, GpuWeights::kNative);
  EXPECT_EQ(c.mode, GpuWeights::kNative);
  EXPECT_NE(c.why.find("already"), std::string::npos) << c.why;
  c = choose_gpu_weights(kBf16, kNative, true, 1 * GiB, GpuWeights::kBf16);
  EXPECT_EQ(c.mode, GpuWeights::kBf16);
}

}  // namespace
}  // namespace sinkscope
