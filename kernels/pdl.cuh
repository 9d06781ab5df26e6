// SPDX-License-Identifier: Apache-2.0
// Programmatic Dependent Launch (PDL, sm_90+) for the small kernels of a decode step.
//
// A kernel launched through launch_pdl() carries cudaLaunchAttributeProgrammaticStreamSerialization:
// its CTAs may be scheduled before the previous kernel in the stream has finished (once every CTA
// of that kernel has executed pdl_trigger() or exited), so launch latency and prologue overlap
// the predecessor's tail. Correctness rule used by EVERY kernel launched this way: the first
// statement is pdl_wait() (griddepcontrol.wait), which blocks until all prerequisite grids have
// completed and their memory is visible, so nothing is read or written before the predecessor is
// done; pdl_trigger() then lets the successor's CTAs be scheduled early. Both instructions are
// no-ops for a kernel launched without the attribute, so the kernel code is the same either way.
//
// Switch: GpuTuning::pdl = false (SINKSCOPE_PDL=0) turns the attribute off (plain <<<>>> launches); set_pdl_enabled(false)
// does the same at run time (the backend calls it when a graph with PDL edges fails to capture
// or instantiate). A launch whose attribute is rejected falls back to a plain launch and turns
// PDL off for the process.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/ops.h"

namespace sinkscope::kernels::detail {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Launches kernel<<<grid, block, smem, stream>>>(args...), with the PDL attribute when `pdl` and
// pdl_enabled(). Returns the launch's error (already cleared from the runtime's sticky slot only
// on the fallback path; callers still check cudaGetLastError).
template <typename... KParams, typename... Args>
cudaError_t launch_pdl(bool pdl, void (*kernel)(KParams...), dim3 grid, dim3 block, size_t smem,
                       cudaStream_t stream, Args&&... args) {
  if (pdl && pdl_enabled()) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
    if (e == cudaSuccess) return cudaSuccess;
    (void)cudaGetLastError();  // rejected: plain launches from now on
    set_pdl_enabled(false);
  }
  kernel<<<grid, block, smem, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
}

}  // namespace sinkscope::kernels::detail
