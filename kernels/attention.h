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

// Variants of the warp-specialised SPARSE prefill (attention_prefill_ws.cuh, kWsVar* bit flags:
// 1 no ping-pong turns between the consumer warpgroups, 2 late V wait for skipped tiles, 4 three
// consumer warpgroups (192-row CTAs, 512 threads; no ping-pong, so 4 and 5, 6 and 7 are the same
// kernel; d = 64 only, d = 128 runs variant & 3); all give the same outputs, masks and counters
// bit for bit): the value of
// SINKSCOPE_WS_SPARSE_VARIANT (read once per process; unset, or outside 0 .. kWsSparseVariants-1:
// kWsSparseDefaultVariant), unless set_ws_sparse_variant() overrode it (tests and benchmarks; -1
// returns to the environment's value). Read at each launch. The default is 1: without the
// ping-pong turns a warpgroup whose tile is skipped does not wait for the other's GEMM turn
// (H200, run k: 1.01-1.06x variant 0 at 70-90 % skipped; `bench_attention OUT
// --ws-sparse-variants`). The dense kernel keeps its ping-pong.
inline constexpr int kWsSparseVariants = 8;
inline constexpr int kWsSparseDefaultVariant = 1;
int ws_sparse_variant();
void set_ws_sparse_variant(int v);

// Enqueues the attention on `stream` (cudaStream_t, nullptr = legacy default stream). When
// p.skip_mask is set, its tiles are first filled with kMaskNotVisible. Asynchronous: errors of
// the kernels themselves show at the next synchronisation.
AttentionStatus launch_attention(const AttentionParams& p, void* stream);

}  // namespace sinkscope::kernels
