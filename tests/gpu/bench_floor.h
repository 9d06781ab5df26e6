// SPDX-License-Identifier: Apache-2.0
// Memory floor for the decode benchmark (bench_floor.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention_dispatch.h"
#include "kernels/attention_params.h"

namespace sinkscope::bench {
// Streams `bytes` (a multiple of 16) from src; PDL launch on `stream`.
cudaError_t launch_read_floor(const void* src, uint64_t bytes, unsigned* sink, int n_sms,
                              cudaStream_t stream);

// The stream floor of the split decode (bench_floor.cu): the decode's K + V stream on its split
// plan and early-load schedule, nothing else.
struct SplitStreamArgs {
  const void* kv = nullptr;  // [n_kv_heads][n_tiles][64 keys of K then V, head_dim bf16 each]
  unsigned* sink = nullptr;
  int head_dim = 64, n_kv_heads = 1, n_tiles = 0, tiles_per_split = 1, n_splits = 1;
  float* part_o = nullptr;   // set by launch_split_stream_combine: write the partials there
  float* part_ml = nullptr;
  int group = 1;
  unsigned* tickets = nullptr;  // split_stream_ticket: [n_kv_heads] arrival counters, zeroed once
  float* out = nullptr;         // split_stream_ticket: [n_q_heads][head_dim]
  int tail_ctas = 1;            // split_stream_ticket: CTAs per KV head that merge
  int part = 0;  // 0 K + V of every tile; 1 K only; 2 V of tiles 3 t % 10 < 3 only, after the wait
};
// One call (one PDL launch) on `stream`.
cudaError_t launch_split_stream(const SplitStreamArgs& a, cudaStream_t stream);
// The stream, each split writing its partial into p's decode workspace, then the decode's own
// combine kernel (PDL) on p: the two-kernel structure of the dense decode without its attention
// arithmetic, page table or Q.
cudaError_t launch_split_stream_combine(SplitStreamArgs a, const kernels::AttentionParams& p,
                                        const kernels::DecodeSplitPlan& plan,
                                        const kernels::DecodeWorkspaceLayout& wl,
                                        cudaStream_t stream);
// The sparse decode's structure at 70 % skipped tiles: a K-only stream of every tile (pass 1), a
// stream of the kept tiles' V (tile t kept when 3 t % 10 < 3, spread so that no split keeps
// more than ceil(0.3 x its tiles); nothing before the wait) writing the partials (pass 2), and
// the decode's combine: the three kernels of the sparse decode without scores, decisions or
// arithmetic, so no sparse decode of this structure on this plan, at 30 % kept tiles spread
// evenly, can be faster.
cudaError_t launch_sparse_stream_combine(SplitStreamArgs a, const kernels::AttentionParams& p,
                                         const kernels::DecodeSplitPlan& plan,
                                         const kernels::DecodeWorkspaceLayout& wl,
                                         cudaStream_t stream);
// The one-kernel structure: the stream, each split writing its partial into p's decode workspace,
// an arrival ticket per KV head, and the last a.tail_ctas arrivals of each head merging the
// partials into a.out (bench_floor.cu, split_stream_ticket_kernel).
cudaError_t launch_split_stream_ticket(SplitStreamArgs a, const kernels::AttentionParams& p,
                                       const kernels::DecodeWorkspaceLayout& wl, cudaStream_t stream);
// The cluster floor: one cluster of `cluster_ctas` (8 or 16) CTAs per KV head streams the head's
// tiles (a 192 KB bulk-copy ring per CTA, all of it issued before the PDL wait) and reduces G = `group` partials over
// distributed shared memory into a.out (bench_floor.cu, cluster_stream_kernel).
cudaError_t launch_cluster_stream(SplitStreamArgs a, int cluster_ctas, int group, cudaStream_t stream);
}  // namespace sinkscope::bench
