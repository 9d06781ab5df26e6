// SPDX-License-Identifier: Apache-2.0
// The attention kernel selection (kernels/attention_dispatch.h) is a pure host function: tested
// here without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_dispatch.h"

using namespace sinkscope::kernels;

namespace {

AttentionShape prefill_shape() {
  AttentionShape s;
  s.n_q_tokens = 4096;
  s.n_q_heads = 9;
  s.n_kv_heads = 3;
  s.head_dim = 64;
  s.block_size = 64;
  s.kv_len = 4096;
  s.q_start = 0;
  return s;
}

// One decode query (3 query heads per KV head) at the end of a kv_len-key cache.
AttentionShape decode_shape(int n_kv_heads, int head_dim, int block_size, int64_t kv_len,
                            bool device_len) {
  AttentionShape s;
  s.n_q_tokens = 1;
  s.n_q_heads = 3 * n_kv_heads;
  s.n_kv_heads = n_kv_heads;
  s.head_dim = head_dim;
  s.block_size = block_size;
  s.kv_len = kv_len;
  s.q_start = kv_len - 1;
  s.device_len = device_len;
  return s;
}

}  // namespace

TEST(AttentionDispatch, DenseWhenLambdaIsZero) {
  AttentionShape s = prefill_shape();
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kPrefillDense);
  s.log2_lambda = log2_of_lambda(0.0);
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kPrefillDense);
}

TEST(AttentionDispatch, SparseVariantsFollowTheFlags) {
  AttentionShape s = prefill_shape();
  s.log2_lambda = log2_of_lambda(0.01);
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kPrefillSparseLazyV);
  s.skip_value_load = false;
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kPrefillSparse);
  s.log2_lambda = -std::numeric_limits<float>::infinity();
  s.force_sparse_kernel = true;  // lambda = 0 on the sparse kernel (bitwise test)
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kPrefillSparse);
}

TEST(AttentionDispatch, OneTokenIsDecodeUpToGroupEight) {
  AttentionShape s = prefill_shape();
  s.n_q_tokens = 1;
  s.q_start = s.kv_len - 1;
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kDecodeDense);
  s.log2_lambda = log2_of_lambda(1e-3);
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kDecodeSparse);
  s.n_q_heads = 48;  // group 16: the decode CTA packs at most 8 heads, prefill kernel takes it
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kPrefillSparseLazyV);
}

TEST(AttentionDispatch, RejectsWhatNoKernelRuns) {
  AttentionShape s = prefill_shape();
  s.head_dim = 96;
  EXPECT_FALSE(select_attention_kernel(s).ok());
  s = prefill_shape();
  s.block_size = 32;
  EXPECT_FALSE(select_attention_kernel(s).ok());
  s = prefill_shape();
  s.n_kv_heads = 2;  // 9 % 2 != 0
  EXPECT_FALSE(select_attention_kernel(s).ok());
  s = prefill_shape();
  s.q_start = 1;  // queries would run past the cache
  EXPECT_FALSE(select_attention_kernel(s).ok());
  s = prefill_shape();
  s.log2_lambda = 0.f;  // lambda = 1
  EXPECT_FALSE(select_attention_kernel(s).ok());
  s.log2_lambda = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(select_attention_kernel(s).ok());
  s = prefill_shape();
  s.kv_len = 0;
  s.n_q_tokens = 0;
  EXPECT_FALSE(select_attention_kernel(s).ok());
  EXPECT_STRNE(select_attention_kernel(s).reason, "");
}

// A layer's own window (AttentionParams::own_window) rides on the live-page list's mask: it is
// refused without a list (the positional kernels do not apply it) and runs the list kernels.
TEST(AttentionDispatch, OwnWindowNeedsALivePageList) {
  AttentionShape s = prefill_shape();
  s.own_window = 128;
  const AttentionChoice no_list = select_attention_kernel(s);
  EXPECT_FALSE(no_list.ok());
  EXPECT_NE(std::string(no_list.reason).find("own_window"), std::string::npos) << no_list.reason;
  s.list_tiles = int((s.kv_len + s.block_size - 1) / s.block_size);
  const AttentionChoice with_list = select_attention_kernel(s);
  EXPECT_TRUE(with_list.ok()) << with_list.reason;
  EXPECT_FALSE(with_list.warp_specialized);  // the warp-specialised kernels take positional tiles only
  s.own_window = -1;
  EXPECT_FALSE(select_attention_kernel(s).ok());
}

// Soft-capping (AttentionParams::softcap) is applied by the decode and mma.sync / wgmma prefill
// kernels, not by the warp-specialised prefill: the dispatch passes that one over.
TEST(AttentionDispatch, SoftcapSkipsTheWarpSpecializedPrefill) {
  AttentionShape s = prefill_shape();
  s.wgmma_ok = true;
  s.prefer_ws = true;
  ASSERT_TRUE(select_attention_kernel(s).warp_specialized);
  s.softcap = true;
  const AttentionChoice c = select_attention_kernel(s);
  EXPECT_TRUE(c.ok()) << c.reason;
  EXPECT_FALSE(c.warp_specialized);
}

// Learned sinks (AttentionParams::sinks, gpt-oss) likewise: applied by the decode and mma.sync /
// wgmma prefill kernels, the warp-specialised prefill passed over, dense and sparse.
TEST(AttentionDispatch, LearnedSinksSkipTheWarpSpecializedPrefill) {
  AttentionShape s = prefill_shape();
  s.wgmma_ok = true;
  s.prefer_ws = true;
  ASSERT_TRUE(select_attention_kernel(s).warp_specialized);
  s.learned_sinks = true;
  AttentionChoice c = select_attention_kernel(s);
  EXPECT_TRUE(c.ok()) << c.reason;
  EXPECT_FALSE(c.warp_specialized);
  EXPECT_TRUE(c.wgmma);
  s.log2_lambda = -6.6f;  // sparse
  c = select_attention_kernel(s);
  EXPECT_TRUE(c.ok()) << c.reason;
  EXPECT_FALSE(c.warp_specialized);
  AttentionParams p;
  p.n_q_tokens = 1;
  EXPECT_FALSE(shape_of(p).learned_sinks);
  const float sink = 1.0f;
  p.sinks = &sink;
  EXPECT_TRUE(shape_of(p).learned_sinks);
}

TEST(AttentionDispatch, PrefillTileConfigCoversTheQueryTile) {
  for (int d : {64, 128})
    for (int bc : {64, 128})
      for (bool wgmma : {false, true}) {
        const PrefillTileConfig c = prefill_tile_config(d, bc, wgmma);
        EXPECT_EQ(c.warps * 16 * c.m_tiles, kPrefillCtaRows);
        // Each query tile (half of the CTA) is a whole number of warps: the per-half vote.
        EXPECT_EQ(kPrefillCtaRows, kPrefillTilesPerCta * kPrefillQueryTile);
        EXPECT_EQ(kPrefillQueryTile % (16 * c.m_tiles), 0);
        EXPECT_EQ(c.warps % kPrefillTilesPerCta, 0);
        if (wgmma) {
          EXPECT_EQ(c.warps % 4, 0);  // whole warpgroups of 64 rows = one query tile each
          EXPECT_EQ(kPrefillQueryTile, 64);
        }
      }
}

TEST(AttentionDispatch, WgmmaOnlyForPrefillWhenAllowed) {
  AttentionShape s = prefill_shape();
  EXPECT_FALSE(select_attention_kernel(s).wgmma);
  s.wgmma_ok = true;
  EXPECT_TRUE(select_attention_kernel(s).wgmma);
  s.log2_lambda = log2_of_lambda(0.01);
  EXPECT_TRUE(select_attention_kernel(s).wgmma);
  s.n_q_tokens = 1;
  s.q_start = s.kv_len - 1;
  EXPECT_FALSE(select_attention_kernel(s).wgmma);  // decode has its own kernel
}

// The warp-specialised kernel (attention_prefill_ws.cuh): positional bf16 prefill, dense or
// sparse, on the wgmma path, unless AttentionParams::prefer_ws (or SINKSCOPE_PREFILL_WS=0) says no.
TEST(AttentionDispatch, WarpSpecializedOnlyForPositionalBf16Wgmma) {
  AttentionShape s = prefill_shape();
  EXPECT_FALSE(select_attention_kernel(s).warp_specialized);  // no wgmma
  s.wgmma_ok = true;
  AttentionChoice c = select_attention_kernel(s);
  EXPECT_TRUE(c.warp_specialized);
  EXPECT_TRUE(c.wgmma);
  EXPECT_EQ(c.variant, AttentionVariant::kPrefillDense);
  for (int d : {64, 128})
    for (int bc : {64, 128}) {
      AttentionShape t = s;
      t.head_dim = d;
      t.block_size = bc;
      t.q_start = 1000;  // chunked prefill
      t.n_q_tokens = 77;
      EXPECT_TRUE(select_attention_kernel(t).warp_specialized) << d << " " << bc;
    }
  AttentionShape t = s;
  t.prefer_ws = false;  // AttentionParams::prefer_ws / SINKSCOPE_PREFILL_WS=0
  c = select_attention_kernel(t);
  EXPECT_FALSE(c.warp_specialized);
  EXPECT_TRUE(c.wgmma);  // falls back to the wgmma kernel
  // Sparse, both V modes, both head dims and page sizes: the one WS sparse kernel (it loads V
  // whatever the vote) wherever ws_sparse_prefill_head_dim() says so (64-row query tiles: d = 64
  // and 128); the variant names the wgmma kernel prefer_ws = false (or prefer_ws_sparse = false)
  // runs.
  // The wgmma sparse kernel (not warp-specialised) of V mode `lazy`.
  const auto expect_wgmma_sparse = [](const AttentionChoice& ch, bool lazy) {
    EXPECT_FALSE(ch.warp_specialized);
    EXPECT_TRUE(ch.wgmma);
    EXPECT_EQ(ch.variant, lazy ? AttentionVariant::kPrefillSparseLazyV
                               : AttentionVariant::kPrefillSparse);
  };
  for (bool lazy : {true, false})
    for (int d : {64, 128})
      for (int bc : {64, 128}) {
        t = s;
        t.head_dim = d;
        t.block_size = bc;
        t.log2_lambda = log2_of_lambda(0.01);
        t.skip_value_load = lazy;
        c = select_attention_kernel(t);
        EXPECT_EQ(c.warp_specialized, ws_sparse_prefill_head_dim(d)) << lazy << " " << d << " " << bc;
        EXPECT_TRUE(c.warp_specialized) << lazy << " " << d << " " << bc;
        EXPECT_TRUE(c.wgmma);
        EXPECT_EQ(c.variant, lazy ? AttentionVariant::kPrefillSparseLazyV
                                  : AttentionVariant::kPrefillSparse);
        // prefer_ws_sparse = false (SINKSCOPE_PREFILL_WS_SPARSE=0): the wgmma sparse kernels
        // (lazy V for the bench's comparison rows); the dense prefill keeps the WS kernel.
        AttentionShape u = t;
        u.prefer_ws_sparse = false;
        expect_wgmma_sparse(select_attention_kernel(u), lazy);
        u.log2_lambda = log2_of_lambda(0.0);
        EXPECT_TRUE(select_attention_kernel(u).warp_specialized);
        u.force_sparse_kernel = true;  // lambda = 0 but forced sparse: the sparse choice
        EXPECT_FALSE(select_attention_kernel(u).warp_specialized);
        t.prefer_ws = false;
        expect_wgmma_sparse(select_attention_kernel(t), lazy);
      }
  for (int d : {64, 128}) {
    t = s;
    t.head_dim = d;
    t.force_sparse_kernel = true;  // lambda = 0, forced sparse: the WS sparse kernel too
    c = select_attention_kernel(t);
    EXPECT_TRUE(c.warp_specialized) << d;
    EXPECT_NE(c.variant, AttentionVariant::kPrefillDense);
  }
  EXPECT_TRUE(ws_sparse_prefill_head_dim(64));
  EXPECT_TRUE(ws_sparse_prefill_head_dim(128));
  EXPECT_FALSE(ws_sparse_prefill_head_dim(96));
  t.wgmma_ok = false;  // not sm_90 (or prefer_wgmma = false): the mma.sync kernels
  c = select_attention_kernel(t);
  EXPECT_FALSE(c.warp_specialized);
  EXPECT_FALSE(c.wgmma);
  for (bool sparse : {false, true}) {
    t = s;
    if (sparse) t.log2_lambda = log2_of_lambda(0.01);
    t.kv_bits = 8;  // quantized pages: mma.sync
    EXPECT_FALSE(select_attention_kernel(t).warp_specialized) << sparse;
    t.kv_bits = 0;
    t.list_tiles = 12;  // live-page list
    EXPECT_FALSE(select_attention_kernel(t).warp_specialized) << sparse;
    t.sink_queries = true;  // cache position mode (needs the list)
    EXPECT_FALSE(select_attention_kernel(t).warp_specialized) << sparse;
  }
  t = s;
  t.n_q_tokens = 1;
  t.q_start = t.kv_len - 1;  // decode
  EXPECT_FALSE(select_attention_kernel(t).warp_specialized);
  t.log2_lambda = log2_of_lambda(0.01);  // sparse decode
  EXPECT_FALSE(select_attention_kernel(t).warp_specialized);
  AttentionParams p;
  EXPECT_TRUE(p.prefer_ws);  // on by default
  EXPECT_TRUE(shape_of(p).prefer_ws);
  p.prefer_ws = false;
  EXPECT_FALSE(shape_of(p).prefer_ws);
  EXPECT_TRUE(p.prefer_ws_sparse);  // on by default
  EXPECT_TRUE(shape_of(p).prefer_ws_sparse);
  p.prefer_ws_sparse = false;
  EXPECT_FALSE(shape_of(p).prefer_ws_sparse);
}

TEST(AttentionDispatch, DecodeSplitPlanCoversEveryTileOnce) {
  for (int64_t keys : {1, 63, 64, 65, 4096, 32768, 65536, 1 << 22})
    for (int kv : {1, 3, 8, 64})
      for (int bc : {64, 128}) {
        const DecodeSplitPlan p = decode_split_plan(keys, bc, kv, 132);
        ASSERT_EQ(p.n_tiles, (keys + bc - 1) / bc);
        ASSERT_GE(p.n_splits, 1);
        ASSERT_LE(p.tiles_per_split, kDecodeMaxTilesPerSplit);
        // Every split non-empty, together exactly n_tiles.
        ASSERT_GE(p.n_splits * p.tiles_per_split, p.n_tiles);
        ASSERT_LT((p.n_splits - 1) * p.tiles_per_split, p.n_tiles);
      }
  // Enough CTAs to fill 132 SMs twice when the sequence allows it.
  const DecodeSplitPlan p = decode_split_plan(32768, 64, 8, 132);
  EXPECT_GE(p.n_splits * 8, 2 * 132 - 8);
}

TEST(AttentionDispatch, WorkspaceLayoutIsAlignedAndSized) {
  AttentionShape s = prefill_shape();
  s.n_q_tokens = 1;
  s.q_start = s.kv_len - 1;
  const DecodeSplitPlan plan = decode_split_plan(decode_visible_keys(s), 64, 3, 132);
  const DecodeWorkspaceLayout dense = decode_workspace_layout(s, plan, false);
  const DecodeWorkspaceLayout sparse = decode_workspace_layout(s, plan, true);
  EXPECT_EQ(dense.part_ml % 256, 0u);
  EXPECT_GE(dense.part_ml, uint64_t(9) * plan.n_splits * 64 * 4);
  EXPECT_GT(sparse.total, dense.total);
  EXPECT_EQ(sparse.scores % 256, 0u);
  EXPECT_GE(sparse.tmax - sparse.scores, uint64_t(9) * plan.n_tiles * 64 * 4);
  EXPECT_EQ(sparse.smax % 256, 0u);
  EXPECT_GE(sparse.smax - sparse.tmax, uint64_t(9) * plan.n_tiles * 4);
  EXPECT_GE(sparse.total - sparse.smax, uint64_t(9) * plan.n_splits * 4);
  EXPECT_EQ(decode_visible_keys(s), s.kv_len);
}


// A device-side length (CUDA graphs): the grid and workspace of a bound cover every shorter
// length, and the device re-plan of a length equals the host plan of that length.
TEST(AttentionDispatch, DecodeBoundPlanCoversEveryShorterLength) {
  for (int kv : {1, 3, 8})
    for (int bc : {64, 128})
      for (int64_t bound : {1, 64, 65, 512, 1000, 4096, 5632, 5633, 8192, 65536, 1 << 20}) {
        const DecodeSplitPlan b = decode_bound_plan(bound, bc, kv, 132);
        ASSERT_EQ(b.n_tiles, (bound + bc - 1) / bc);
        ASSERT_EQ(b.target, decode_target_splits(kv, 132));
        const AttentionShape s = decode_shape(kv, 64, bc, bound, true);
        const DecodeWorkspaceLayout wb = decode_workspace_layout(s, b, true);
        EXPECT_EQ(decode_launch_plan(s, 132).n_splits, b.n_splits);
        // Every length up to the bound (all of them while small, then a spread).
        const int64_t step = std::max<int64_t>(1, bound / 4000);
        for (int64_t len = 1; len <= bound; len += (len < 2000 ? 1 : step)) {
          const DecodeSplitPlan host = decode_split_plan(len, bc, kv, 132);
          const DecodeSplitPlan dev = decode_split_plan_tiles(int((len + bc - 1) / bc), b.target);
          ASSERT_EQ(dev.n_splits, host.n_splits);
          ASSERT_EQ(dev.tiles_per_split, host.tiles_per_split);
          ASSERT_LE(host.n_splits, b.n_splits) << "bound " << bound << " len " << len;
          ASSERT_LE(host.n_tiles, b.n_tiles);
          ASSERT_LE(decode_workspace_layout(decode_shape(kv, 64, bc, len, false), host, true).total,
                    wb.total);
        }
      }
}

// The CTAs-per-SM target (kernels::decode_split_policy().ctas_per_sm) scales the grid of a long sequence,
// host and device length alike, and a device length's re-plan still equals the host plan.
TEST(AttentionDispatch, DecodeLaunchPlanFollowsTheCtasPerSmTarget) {
  const AttentionShape s = decode_shape(3, 64, 64, 16384, false);  // 256 tiles per KV head
  int prev_splits = 0;
  for (int c = 1; c <= 4; ++c) {
    const DecodeSplitPlan p = decode_launch_plan(s, 132, c);
    EXPECT_EQ(p.target, (132 * c + 2) / 3) << c;
    EXPECT_GE(p.n_splits * p.tiles_per_split, p.n_tiles);
    EXPECT_LE(p.n_splits, p.target);
    // 44 / 88 / 132 / 176 wanted: 43 splits of 6 tiles, 86 of 3, 128 of 2, 128 of 2.
    EXPECT_GE(p.n_splits, prev_splits) << c;
    prev_splits = p.n_splits;
    const DecodeSplitPlan b = decode_launch_plan(decode_shape(3, 64, 64, 16384, true), 132, c);
    EXPECT_EQ(b.target, p.target);
    EXPECT_GE(b.n_splits, p.n_splits);
    const DecodeSplitPlan re = decode_split_plan_tiles(p.n_tiles, b.target);
    EXPECT_EQ(re.n_splits, p.n_splits);
    EXPECT_EQ(re.tiles_per_split, p.tiles_per_split);
  }
  EXPECT_EQ(decode_launch_plan(s, 132, 1).n_splits, 43);
  EXPECT_EQ(decode_launch_plan(s, 132, 2).n_splits, 86);
  EXPECT_EQ(decode_launch_plan(s, 132).n_splits, 86);  // the default arguments: 2 per SM
  EXPECT_EQ(decode_launch_plan(s, 132, 4).n_splits, 128);
}

// A policy with max_ctas_per_sm > ctas_per_sm gives a long sequence more splits (up to the
// higher target) while each keeps >= min_tiles tiles; short sequences keep the base plan. Every
// tile is still covered once, the grid of a bound covers every shorter length, and a device
// length's re-plan (which carries target_hi and min_tiles) equals the host plan of that length.
TEST(AttentionDispatch, DecodeSplitsGrowWhileEachKeepsMinTiles) {
  for (int min_tiles : {1, 4, 6, 8})
    for (int kv : {1, 3, 8})
      for (int bc : {64, 128})
        for (int64_t bound : {1, 65, 4096, 16384, 36865, 65536, 1 << 20}) {
          const DecodeSplitPolicy pol{2, 3, min_tiles};
          const DecodeSplitPlan b = decode_bound_plan(bound, bc, kv, 132, pol);
          ASSERT_EQ(b.target, decode_target_splits(kv, 132, 2));
          ASSERT_EQ(b.target_hi, decode_target_splits(kv, 132, 3));
          ASSERT_EQ(b.min_tiles, min_tiles);
          const int64_t step = std::max<int64_t>(1, bound / 1500);
          for (int64_t len = 1; len <= bound; len += (len < 600 ? 1 : step)) {
            const DecodeSplitPlan host = decode_split_plan(len, bc, kv, 132, pol);
            const DecodeSplitPlan base = decode_split_plan(len, bc, kv, 132, 2);
            ASSERT_GE(host.n_splits, 1);
            ASSERT_GE(host.n_splits * host.tiles_per_split, host.n_tiles);
            ASSERT_LT((host.n_splits - 1) * host.tiles_per_split, host.n_tiles);
            ASSERT_GE(host.n_splits, base.n_splits);
            ASSERT_LE(host.n_splits, b.target_hi);
            if (host.n_splits > base.n_splits)  // the extra splits each keep >= min_tiles
              ASSERT_GE(host.n_tiles / host.n_splits, min_tiles) << len;
            else
              ASSERT_EQ(host.tiles_per_split, base.tiles_per_split) << len;
            const DecodeSplitPlan dev =
                decode_split_plan_tiles(host.n_tiles, b.target, b.target_hi, b.min_tiles);
            ASSERT_EQ(dev.n_splits, host.n_splits);
            ASSERT_EQ(dev.tiles_per_split, host.tiles_per_split);
            ASSERT_LE(host.n_splits, b.n_splits) << "bound " << bound << " len " << len;
          }
        }
}

// The default policy (kernels::decode_default_policy): d = 64 over 64-key pages aims at 2 CTAs
// per SM and goes up to 3 while splits keep >= 6 tiles; other shapes stay at 2 per SM.
TEST(AttentionDispatch, DecodeDefaultPolicyByShape) {
  constexpr DecodeSplitPolicy d64 = decode_default_policy(64, 64);
  static_assert(d64.ctas_per_sm == 2 && d64.max_ctas_per_sm == 3 &&
                d64.min_tiles == kDecodeMinTilesD64);
  for (auto [d, bc] : {std::pair{64, 128}, std::pair{128, 64}, std::pair{128, 128}}) {
    const DecodeSplitPolicy pol = decode_default_policy(d, bc);
    EXPECT_EQ(pol.ctas_per_sm, 2) << d << " " << bc;
    EXPECT_EQ(pol.max_ctas_per_sm, 0) << d << " " << bc;
  }
  // SmolLM2's attention shape (3 KV heads) on 132 SMs: the 2-per-SM plan up to 32K keys (16K:
  // 86 splits of 3 tiles; 32K: 86 of 6), 64K: 128 splits of 8 instead of 86 of 12.
  for (auto [keys, splits, per] : {std::tuple{4096, 64, 1}, std::tuple{16384, 86, 3},
                                   std::tuple{32768, 86, 6}, std::tuple{65536, 128, 8}}) {
    const DecodeSplitPlan p = decode_launch_plan(decode_shape(3, 64, 64, keys, false), 132, d64);
    EXPECT_EQ(p.n_splits, splits) << keys;
    EXPECT_EQ(p.tiles_per_split, per) << keys;
    EXPECT_EQ(decode_launch_plan(decode_shape(3, 64, 64, keys, true), 132, d64).target_hi, 132);
  }
  // d = 128, 8 KV heads: 33 wanted per KV head (1,024 tiles: 32 splits of 32).
  const DecodeSplitPlan p128 =
      decode_launch_plan(decode_shape(8, 128, 64, 65536, false), 132, decode_default_policy(128, 64));
  EXPECT_EQ(p128.target, 33);
  EXPECT_EQ(p128.target_hi, 0);
  EXPECT_EQ(p128.n_splits, 32);
}

TEST(AttentionDispatch, DeviceLengthIsDecodeOnlyAndIgnoresHostQStart) {
  AttentionParams p;
  p.n_q_tokens = 1;
  p.n_q_heads = 9;
  p.n_kv_heads = 3;
  p.head_dim = 64;
  p.block_size = 64;
  p.kv_len = 4096;
  p.q_start = 123456;  // would be rejected with a host length
  const int32_t len = 1;
  p.kv_len_dev = &len;
  AttentionShape s = shape_of(p);
  EXPECT_TRUE(s.device_len);
  EXPECT_EQ(s.q_start, 4095);
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kDecodeDense);
  p.n_q_tokens = 128;  // prefill cannot read its length from the device
  EXPECT_FALSE(select_attention_kernel(shape_of(p)).ok());
  p.n_q_tokens = 1;
  p.kv_len_dev = nullptr;
  const float l2 = -3.f;
  p.log2_lambda_dev = &l2;
  p.q_start = 4095;
  EXPECT_TRUE(select_attention_kernel(shape_of(p)).ok());
  p.n_q_tokens = 2;
  p.q_start = 4094;
  EXPECT_FALSE(select_attention_kernel(shape_of(p)).ok());
}

// Quantized KV pages (AttentionParams::kv_bits): decode as usual; prefill on the mma.sync
// kernels with V loaded with K (the only quantized prefill instantiations); other widths refused.
TEST(AttentionDispatch, QuantizedKvPicksTheInstantiatedKernels) {
  AttentionShape s = prefill_shape();
  s.wgmma_ok = true;
  s.kv_bits = 8;
  AttentionChoice c = select_attention_kernel(s);
  EXPECT_EQ(c.variant, AttentionVariant::kPrefillDense);
  EXPECT_FALSE(c.wgmma);
  s.log2_lambda = log2_of_lambda(0.01);
  c = select_attention_kernel(s);
  EXPECT_EQ(c.variant, AttentionVariant::kPrefillSparse);  // not lazy V
  EXPECT_FALSE(c.wgmma);
  s.kv_bits = 0;
  EXPECT_TRUE(select_attention_kernel(s).wgmma);  // bf16 unchanged
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kPrefillSparseLazyV);
  s.kv_bits = 4;
  s.n_q_tokens = 1;
  s.q_start = 4095;
  EXPECT_EQ(select_attention_kernel(s).variant, AttentionVariant::kDecodeSparse);
  s.kv_bits = 2;
  EXPECT_FALSE(select_attention_kernel(s).ok());
  AttentionParams p;
  p.kv_bits = 4;
  EXPECT_EQ(shape_of(p).kv_bits, 4);
}

// The GPU tuning (kernels/tuning.h): the defaults are what ships, the SINKSCOPE_* variables set
// the fields, and a value out of range leaves the default and is named.

namespace {
constexpr const char* kTuningVars[] = {
    "SINKSCOPE_CUDA_GRAPHS", "SINKSCOPE_FUSED_DECODE", "SINKSCOPE_PDL",
    "SINKSCOPE_PREFILL_WS", "SINKSCOPE_PREFILL_WS_SPARSE", "SINKSCOPE_WS_DENSE_CONSUMERS",
    "SINKSCOPE_WS_SPARSE_CONSUMERS", "SINKSCOPE_DECODE_CTAS_PER_SM", "SINKSCOPE_DECODE_EARLY_LOADS",
    "SINKSCOPE_FUSED_COMBINE", "SINKSCOPE_QGEMV_VARIANT", "SINKSCOPE_QGEMV_PREQUANT",
    "SINKSCOPE_QWEIGHT_REPACK", "SINKSCOPE_QWEIGHT_MERGE", "SINKSCOPE_QGEMV_FUSE"};
struct TuningEnv {
  TuningEnv() {
    for (const char* v : kTuningVars) unsetenv(v);
  }
  ~TuningEnv() {
    for (const char* v : kTuningVars) unsetenv(v);
  }
};
}  // namespace

TEST(GpuTuning, DefaultsAreWhatShips) {
  TuningEnv clean;
  std::string ignored;
  const GpuTuning t = gpu_tuning_from_environment(&ignored);
  EXPECT_EQ(t, GpuTuning{});
  EXPECT_TRUE(ignored.empty());
  EXPECT_TRUE(t.cuda_graphs && t.fused_decode && t.pdl && t.prefill_ws && t.prefill_ws_sparse &&
              t.decode_early_loads);
  EXPECT_FALSE(t.decode_fused_combine);
  EXPECT_EQ(t.ws_dense_consumers, 0);
  EXPECT_EQ(t.ws_sparse_consumers, 0);
  EXPECT_EQ(t.decode_ctas_per_sm, 0);
  EXPECT_EQ(t.qgemv_variant, -1);
  EXPECT_FALSE(t.qgemv_prequant);
  EXPECT_TRUE(t.qweight_repack);
  EXPECT_TRUE(t.qweight_merge);
  EXPECT_TRUE(t.qgemv_fuse);
}

TEST(GpuTuning, EveryVariableSetsItsField) {
  TuningEnv clean;
  setenv("SINKSCOPE_CUDA_GRAPHS", "0", 1);
  setenv("SINKSCOPE_FUSED_DECODE", "0", 1);
  setenv("SINKSCOPE_PDL", "0", 1);
  setenv("SINKSCOPE_PREFILL_WS", "0", 1);
  setenv("SINKSCOPE_PREFILL_WS_SPARSE", "0", 1);
  setenv("SINKSCOPE_WS_DENSE_CONSUMERS", "3", 1);
  setenv("SINKSCOPE_WS_SPARSE_CONSUMERS", "2", 1);
  setenv("SINKSCOPE_DECODE_CTAS_PER_SM", "4", 1);
  setenv("SINKSCOPE_DECODE_EARLY_LOADS", "0", 1);
  setenv("SINKSCOPE_FUSED_COMBINE", "1", 1);
  setenv("SINKSCOPE_QGEMV_VARIANT", "2", 1);
  setenv("SINKSCOPE_QGEMV_PREQUANT", "1", 1);
  setenv("SINKSCOPE_QWEIGHT_REPACK", "0", 1);
  setenv("SINKSCOPE_QWEIGHT_MERGE", "0", 1);
  setenv("SINKSCOPE_QGEMV_FUSE", "0", 1);
  std::string ignored;
  const GpuTuning t = gpu_tuning_from_environment(&ignored);
  EXPECT_TRUE(ignored.empty()) << ignored;
  EXPECT_FALSE(t.cuda_graphs || t.fused_decode || t.pdl || t.prefill_ws || t.prefill_ws_sparse ||
               t.decode_early_loads);
  EXPECT_TRUE(t.decode_fused_combine);
  EXPECT_EQ(t.ws_dense_consumers, 3);
  EXPECT_EQ(t.ws_sparse_consumers, 2);
  EXPECT_EQ(t.decode_ctas_per_sm, 4);
  EXPECT_EQ(t.qgemv_variant, 2);
  EXPECT_TRUE(t.qgemv_prequant);
  EXPECT_FALSE(t.qweight_repack);
  EXPECT_FALSE(t.qweight_merge);
  EXPECT_FALSE(t.qgemv_fuse);
}

TEST(GpuTuning, OutOfRangeValuesKeepTheDefaultAndAreNamed) {
  TuningEnv clean;
  setenv("SINKSCOPE_WS_SPARSE_CONSUMERS", "4", 1);
  setenv("SINKSCOPE_DECODE_CTAS_PER_SM", "9", 1);
  setenv("SINKSCOPE_PDL", "off", 1);
  setenv("SINKSCOPE_FUSED_DECODE", "", 1);  // empty: unset
  setenv("SINKSCOPE_QGEMV_PREQUANT", "yes", 1);
  std::string ignored;
  const GpuTuning t = gpu_tuning_from_environment(&ignored);
  EXPECT_EQ(t, GpuTuning{});
  EXPECT_NE(ignored.find("SINKSCOPE_WS_SPARSE_CONSUMERS=4"), std::string::npos) << ignored;
  EXPECT_NE(ignored.find("SINKSCOPE_DECODE_CTAS_PER_SM=9"), std::string::npos) << ignored;
  EXPECT_NE(ignored.find("SINKSCOPE_PDL=off"), std::string::npos) << ignored;
  EXPECT_NE(ignored.find("SINKSCOPE_QGEMV_PREQUANT=yes"), std::string::npos) << ignored;
  EXPECT_EQ(ignored.find("FUSED_DECODE"), std::string::npos) << ignored;
}
