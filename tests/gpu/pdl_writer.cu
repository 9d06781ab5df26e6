// SPDX-License-Identifier: Apache-2.0
// The late cache-row writer of test_attention_gpu (pdl_writer.h).
#include "kernels/pdl.cuh"
#include "kernels/rope_pair.cuh"
#include "tests/gpu/pdl_writer.h"

namespace sinkscope::testing {
namespace {

constexpr int kWriterThreads = 256;
// Bound of the wait for the host's flag: a host that cannot set it in time (a successor's first
// launch that, with lazy module loading, waits for the device to go idle, i.e. for this kernel)
// costs ~1 s instead of a hang. The row is written either way.
constexpr long long kGoTimeoutCycles = 1LL << 31;

__global__ void __launch_bounds__(kWriterThreads) pdl_row_writer_kernel(const PdlRowWrite w) {
  // The trigger comes first, as at the start of the engine's append kernel (which waits for its
  // own predecessor just before; this one has none): from here on the successor's CTAs may be
  // scheduled, and they run their pre-wait part (page table, early cache tiles) while this CTA
  // still spins below. The row written at the end is visible to the successor only after its
  // griddepcontrol.wait, which waits for this grid to complete.
  kernels::detail::pdl_trigger();
  if (threadIdx.x == 0) {
    const long long t0 = clock64();
    if (w.go)
      while (*static_cast<const volatile int*>(w.go) == 0 && clock64() - t0 < kGoTimeoutCycles) {
      }
    const long long t1 = clock64();
    while (clock64() - t1 < w.spin_cycles) {
    }
  }
  __syncthreads();
  const int64_t page = w.page_table[w.pos / w.block_size];
  const int slot = static_cast<int>(w.pos % w.block_size);
  for (int i = threadIdx.x; i < w.n_kv_heads * w.head_dim; i += kWriterThreads) {
    const int h = i / w.head_dim, d = i - h * w.head_dim;
    // The append kernel's own index (kernels/rope_pair.cuh), so the row lands where it would.
    const int64_t dst =
        kernels::detail::paged_kv_index(page, w.n_kv_heads, h, w.block_size, slot, w.head_dim, d);
    w.k_pages[dst] = w.k_row[i];
    w.v_pages[dst] = w.v_row[i];
  }
}

}  // namespace

cudaError_t launch_pdl_row_writer(const PdlRowWrite& w, cudaStream_t stream) {
  pdl_row_writer_kernel<<<1, kWriterThreads, 0, stream>>>(w);
  return cudaGetLastError();
}

}  // namespace sinkscope::testing
