// SPDX-License-Identifier: Apache-2.0
// Memory floor for the decode benchmark (bench_floor.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sinkscope::bench {
// Streams `bytes` (a multiple of 16) from src; PDL launch on `stream`.
cudaError_t launch_read_floor(const void* src, uint64_t bytes, unsigned* sink, int n_sms,
                              cudaStream_t stream);
}  // namespace sinkscope::bench
