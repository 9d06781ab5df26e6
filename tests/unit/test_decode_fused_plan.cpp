// SPDX-License-Identifier: Apache-2.0
// The fused decode kernels' host plan (kernels/decode_fused_plan.h): which shapes they take,
// why they refuse the others, and the chunks per lane a row length compiles for. No GPU needed.
#include <gtest/gtest.h>

#include "kernels/decode_fused_plan.h"

using namespace sinkscope::kernels;

namespace {

DecodeFusedShape smollm2() {
  DecodeFusedShape s;
  s.n_embd = 576;
  s.n_head = 9;
  s.n_head_kv = 3;
  s.head_dim = 64;
  s.rope_dim = 64;
  s.n_ff = 1536;
  return s;
}

}  // namespace

TEST(DecodeFusedPlan, SupportsTheModelsTheBackendRuns) {
  EXPECT_EQ(decode_fused_unsupported(smollm2()), "");
  DecodeFusedShape qwen2{896, 14, 2, 64, 64, 4864};  // GQA 7
  EXPECT_EQ(decode_fused_unsupported(qwen2), "");
  DecodeFusedShape llama{4096, 32, 8, 128, 128, 14336};  // d 128, GQA 4
  EXPECT_EQ(decode_fused_unsupported(llama), "");
  DecodeFusedShape partial{520, 4, 4, 64, 32, 1000};  // hidden 520 = 8 * 65, partial RoPE
  EXPECT_EQ(decode_fused_unsupported(partial), "");
}

TEST(DecodeFusedPlan, RefusalsNameTheDimension) {
  DecodeFusedShape s = smollm2();
  s.n_embd = 580;
  EXPECT_NE(decode_fused_unsupported(s).find("n_embd = 580 is not a multiple of 8"),
            std::string::npos);
  s = smollm2();
  s.n_ff = 30000;
  EXPECT_NE(decode_fused_unsupported(s).find("n_ff = 30000 exceeds"), std::string::npos);
  s = smollm2();
  s.n_head_kv = 2;
  EXPECT_NE(decode_fused_unsupported(s).find("multiple of n_head_kv"), std::string::npos);
  s = smollm2();
  s.head_dim = 63;
  s.rope_dim = 62;
  EXPECT_NE(decode_fused_unsupported(s).find("odd"), std::string::npos);
  s = smollm2();
  s.rope_dim = 66;
  EXPECT_NE(decode_fused_unsupported(s).find("rope_dim"), std::string::npos);
  s = smollm2();
  s.n_ff = 0;
  EXPECT_NE(decode_fused_unsupported(s), "");
}

TEST(DecodeFusedPlan, ChunksPerLaneCoverTheRowInOnePassUpToEight) {
  EXPECT_EQ(decode_fused_chunks_per_lane(16), 1);    // 2 chunks: most lanes idle
  EXPECT_EQ(decode_fused_chunks_per_lane(256), 1);   // 32 chunks
  EXPECT_EQ(decode_fused_chunks_per_lane(264), 2);   // 33 chunks
  EXPECT_EQ(decode_fused_chunks_per_lane(576), 3);   // SmolLM2 hidden: 72 chunks
  EXPECT_EQ(decode_fused_chunks_per_lane(1024), 4);
  EXPECT_EQ(decode_fused_chunks_per_lane(1536), 6);  // SmolLM2 FFN: 192 chunks
  EXPECT_EQ(decode_fused_chunks_per_lane(1544), 8);
  EXPECT_EQ(decode_fused_chunks_per_lane(2048), 8);
  EXPECT_EQ(decode_fused_chunks_per_lane(11008), kFusedDecodeMaxChunks);  // several passes
  for (int k = 8; k <= kFusedDecodeMaxK; k += 8) {
    const int u = decode_fused_chunks_per_lane(k);
    ASSERT_TRUE(u == 1 || u == 2 || u == 3 || u == 4 || u == 6 || u == 8) << k;
    // One pass when it fits in eight chunks per lane; never more chunks than one pass needs.
    if (k / 8 <= 32 * kFusedDecodeMaxChunks) {
      ASSERT_GE(32 * u, k / 8) << k;
    }
    if (u > 1) {
      ASSERT_LT(32 * (u == 6 ? 4 : u == 8 ? 6 : u - 1), k / 8) << k;
    }
  }
}

TEST(DecodeFusedPlan, OneWarpPerRowPair) {
  EXPECT_EQ(decode_fused_blocks(1), 1);
  EXPECT_EQ(decode_fused_blocks(4), 1);
  EXPECT_EQ(decode_fused_blocks(5), 2);
  EXPECT_EQ(decode_fused_blocks((576 + 2 * 192) / 2), 120);  // SmolLM2 q|k|v pairs
  EXPECT_EQ(decode_fused_blocks(1536), 384);                 // SmolLM2 gate/up pairs
}
