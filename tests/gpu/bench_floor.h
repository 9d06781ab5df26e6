// SPDX-License-Identifier: Apache-2.0
// Memory floor for the decode benchmark (bench_floor.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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
};
// One call (one PDL launch) on `stream`.
cudaError_t launch_split_stream(const SplitStreamArgs& a, cudaStream_t stream);
}  // namespace sinkscope::bench
