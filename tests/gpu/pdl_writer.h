// SPDX-License-Identifier: Apache-2.0
// A stand-in for the kernel the engine runs in front of a decode step (the fused norm + QKV +
// RoPE + append kernel), for test_attention_gpu's "decode after a PDL predecessor": it lets its
// PDL successor start at once and writes its cache row only later, while the successor runs.
// Host-only C++ plus the CUDA runtime (the kernel is in pdl_writer.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sinkscope::testing {

struct PdlRowWrite {
  // The paged pool and page table of the decode (kernels/attention_params.h layout:
  // pages[page][kv_head][slot][head_dim]); the table is read on the device, as the append
  // kernel reads it.
  uint16_t* k_pages = nullptr;
  uint16_t* v_pages = nullptr;
  const int32_t* page_table = nullptr;
  // The row written at position `pos`: [n_kv_heads][head_dim] bf16 (device memory).
  const uint16_t* k_row = nullptr;
  const uint16_t* v_row = nullptr;
  int64_t pos = 0;
  int n_kv_heads = 0, head_dim = 0, block_size = 0;
  // Device pointer of a host-mapped flag (cudaHostAllocMapped): the writer waits until it is
  // non-zero (at most ~1 s) before it counts spin_cycles, so that the host can say when the
  // successor has been enqueued. nullptr: no wait.
  const int* go = nullptr;
  long long spin_cycles = 20000;  // ~10 us at the H200's clock
};

// Enqueues the writer on `stream` as ONE CTA, launched without the PDL attribute (its
// predecessors are host copies). It executes griddepcontrol.launch_dependents first, so a
// kernel launched next on `stream` with the PDL attribute may start while it still runs; then it
// waits for *go, spins, and writes the row. Returns the launch's error.
cudaError_t launch_pdl_row_writer(const PdlRowWrite& w, cudaStream_t stream);

}  // namespace sinkscope::testing
