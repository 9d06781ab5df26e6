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

// Experimental variants of the warp-specialised SPARSE prefill (attention_prefill_ws.cuh,
// kWsVar* bit flags; 0 = the default kernel): the value of SINKSCOPE_WS_SPARSE_VARIANT (read once
// per process; unset, or outside 0 .. kWsSparseVariants-1: 0), unless set_ws_sparse_variant()
// overrode it (tests and benchmarks; -1 returns to the environment's value). Read at each launch.
inline constexpr int kWsSparseVariants = 4;
int ws_sparse_variant();
void set_ws_sparse_variant(int v);

// Enqueues the attention on `stream` (cudaStream_t, nullptr = legacy default stream). When
// p.skip_mask is set, its tiles are first filled with kMaskNotVisible. Asynchronous: errors of
// the kernels themselves show at the next synchronisation.
AttentionStatus launch_attention(const AttentionParams& p, void* stream);

}  // namespace sinkscope::kernels
