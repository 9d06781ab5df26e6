// SPDX-License-Identifier: Apache-2.0
// Device-wide memory figures through the CUDA runtime (cudaMemGetInfo), for the soak benchmark
// and diagnostics. The driver API (libcuda) is not linked.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_backend.h"

namespace sinkscope::gpu {

bool memory_info(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why) {
  size_t f = 0, t = 0;
  const cudaError_t e = cudaMemGetInfo(&f, &t);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why)
      *why = std::string("cudaMemGetInfo failed: ") + cudaGetErrorName(e) + " (" +
             cudaGetErrorString(e) + ")";
    return false;
  }
  if (free_bytes) *free_bytes = f;
  if (total_bytes) *total_bytes = t;
  return true;
}

}  // namespace sinkscope::gpu
