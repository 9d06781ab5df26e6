// SPDX-License-Identifier: Apache-2.0
// Host launcher API of the attention kernel family. Includers need no CUDA headers: the stream
// is an opaque cudaStream_t passed as void*. Nothing here exits or throws: failures come back
// as a status with a message naming the CUDA call, file and line.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/attention_dispatch.h"
#include "kernels/attention_params.h"

namespace sinkscope::kernels {

struct AttentionStatus {
  bool ok = true;
  std::string message;  // empty when ok
  static AttentionStatus error(std::string m) { return {false, std::move(m)}; }
};

// Whether launch_attention() can run these parameters (shape checks only, no GPU needed).
AttentionStatus attention_supported(const AttentionParams& p);

// Bytes of AttentionParams::workspace the call needs on the current device (0 for prefill).
// Asks the device for its multiprocessor count (cached), so it needs a CUDA device.
uint64_t attention_workspace_bytes(const AttentionParams& p);

// The variant launch_attention() would run (for logs and benchmarks).
AttentionVariant attention_variant(const AttentionParams& p);
// Whether a prefill call runs the Hopper wgmma kernels on the current device.
bool attention_uses_wgmma(const AttentionParams& p);
// Whether a prefill call runs the warp-specialised kernel (attention_prefill_ws.cuh, dense or
// sparse) on the current device (positional, bf16 pages, sm_90, prefer_ws,
// SINKSCOPE_PREFILL_WS != 0).
bool attention_uses_warp_specialized(const AttentionParams& p);

// Variants of the warp-specialised SPARSE prefill (attention_prefill_ws.cuh, kWsVar* bit flags;
// all give the same outputs, masks and counters bit for bit; docs/architecture.md, "The
// warp-specialised prefill (sm_90)"):
//   1  no ping-pong turns between the consumer warpgroups;
//   2  late V wait for tiles skipped whole;
//   4  three consumer warpgroups (192-row CTAs, 512 threads; no ping-pong, so 4 and 5, 6 and 7 are
//      the same kernel; d = 64 only, d = 128 runs variant & 3): more warps per SM hide the vote
//      chain on long prompts, while on short ones fewer, larger CTAs leave SMs idle;
//   8  (kWsVarNoEmptyGroup) no empty P V commit group after a tile skipped whole, one wgmma
//      sequence per decision; only as 13 (= 5 | 8, d = 64) and 9 (= 1 | 8, d = 128); d = 128 runs
//      13 as 9, d = 64 runs 9 as 1;
//   16 (kWsVarArriveVote) a warp that keeps both units of a tile (its own rows decide that the
//      query tile keeps them) posts its vote and arrives on the vote barrier without waiting; only
//      warps voting to skip a unit wait and read the four votes. Only as 29 (= 13 | 16, d = 64)
//      and 25 (= 9 | 16, d = 128); d = 128 runs 29 as 25, d = 64 runs 25 as 1. Opt-in: a warp that
//      only arrives may go on to the next tile's vote, and the barrier stays per-generation only
//      if a warpgroup's wgmma (S of the next tile) completes once all four warps issued it, which
//      the PTX ISA does not promise.
// ws_sparse_variant(p): the override of set_ws_sparse_variant() (tests and benchmarks; -1 returns
// to the environment), else SINKSCOPE_WS_SPARSE_VARIANT (read once; 0 .. kWsSparseVariants-1 or
// 9 / 13 / 25 / 29, ws_sparse_variant_valid(); any other value is ignored), else by size: 13 from
// kWsThreeConsumerRowsSparse query rows (n_q_heads x n_q_tokens) on, 9 below (d = 64 runs 9 as 1).
inline constexpr int kWsSparseVariants = 8;
inline constexpr int kWsSparseNoEmptyGroupD64 = 13, kWsSparseNoEmptyGroupD128 = 9;
inline constexpr int kWsSparseArriveVoteD64 = 29, kWsSparseArriveVoteD128 = 25;
// Every accepted variant number, in order (what the tests and benchmarks iterate over).
inline constexpr int kWsSparseVariantList[] = {
    0, 1, 2, 3, 4, 5, 6, 7, kWsSparseNoEmptyGroupD128, kWsSparseNoEmptyGroupD64,
    kWsSparseArriveVoteD128, kWsSparseArriveVoteD64};
constexpr bool ws_sparse_variant_valid(int v) {
  return (v >= 0 && v < kWsSparseVariants) || v == kWsSparseNoEmptyGroupD64 ||
         v == kWsSparseNoEmptyGroupD128 || v == kWsSparseArriveVoteD64 ||
         v == kWsSparseArriveVoteD128;
}
inline constexpr int64_t kWsThreeConsumerRowsSparse = 9 * 4096;
int ws_sparse_variant(const AttentionParams& p);
void set_ws_sparse_variant(int v);
// Consumer warpgroups of the warp-specialised DENSE prefill at d = 64: 2 (the ping-ponged kernel)
// or 3 (kWsVarThreeConsumers: 192-row CTAs, no ping-pong; the same float operations per row, so
// the same outputs bit for bit). The override of set_ws_dense_consumers() (tests, benchmarks; -1
// returns to the environment), else SINKSCOPE_WS_DENSE_CONSUMERS (read once; 2 or 3), else by
// size: 3 from kWsThreeConsumerRowsDense query rows on (below it the fewer, larger CTAs leave SMs
// idle; `bench_attention OUT --consumers` times both). d = 128 always runs 2.
inline constexpr int64_t kWsThreeConsumerRowsDense = 9 * 8192;
int ws_dense_consumers(const AttentionParams& p);
void set_ws_dense_consumers(int n);
// How the decode cuts its KV tiles into splits (DecodeSplitPolicy, attention_dispatch.h: the
// CTAs per SM its grid aims at, up to how many a long sequence may take while every split keeps
// min_tiles tiles): the override of set_decode_split_policy() (benchmarks; a ctas_per_sm of -1
// returns to the environment), else SINKSCOPE_DECODE_CTAS_PER_SM (read once; 1 ..
// kDecodeMaxCtasPerSm: exactly that many per SM), else decode_default_policy(head_dim,
// block_size). set_decode_ctas_per_sm(n) is set_decode_split_policy({n, 0, 0}). The workspace
// follows it (attention_workspace_bytes()), so a workspace sized before a change may be too
// small for the next launch, which then fails with that message.
inline constexpr int kDecodeMaxCtasPerSm = 8;
DecodeSplitPolicy decode_split_policy(int head_dim, int block_size);
void set_decode_split_policy(DecodeSplitPolicy pol);
void set_decode_ctas_per_sm(int n);
// The decode's split combine folded into the decode kernel (1) or a separate kernel (0; -1
// returns to SINKSCOPE_FUSED_COMBINE, default off). Tests and benchmarks; outputs are the same
// bit for bit either way for a visible length >= 1 (with a device-side length of 0 no split runs,
// and only the separate combine writes the output: zeros).
void set_decode_fused_combine(int on);

// Enqueues the attention on `stream` (cudaStream_t, nullptr = legacy default stream). When
// p.skip_mask is set, its tiles are first filled with kMaskNotVisible. Asynchronous: errors of
// the kernels themselves show at the next synchronisation.
AttentionStatus launch_attention(const AttentionParams& p, void* stream);

}  // namespace sinkscope::kernels
