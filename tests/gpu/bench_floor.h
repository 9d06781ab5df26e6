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
}  // namespace sinkscope::bench
