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
// returns to the environment's value). Read at each launch. The default is 5: three consumer
// warpgroups at d = 64 (H200, 2026-12-01: 1.38-1.46x the dense kernel at ~70 % skipped against
// 1.11-1.15x for two), and variant 1 at d = 128 (5 & 3): without the ping-pong turns a warpgroup
// whose tile is skipped does not wait for the other's GEMM turn (run k: 1.01-1.06x variant 0;
// `bench_attention OUT --ws-sparse-variants`). The dense kernel keeps its ping-pong.
inline constexpr int kWsSparseVariants = 8;
inline constexpr int kWsSparseDefaultVariant = 5;
int ws_sparse_variant();
void set_ws_sparse_variant(int v);
// Consumer warpgroups of the warp-specialised DENSE prefill at d = 64: 2 (the ping-ponged kernel)
// or 3 (kWsVarThreeConsumers: 192-row CTAs, no ping-pong; the same float operations per row, so
// the same outputs bit for bit). SINKSCOPE_WS_DENSE_CONSUMERS (read once; anything but 2 or 3:
// the default), unless set_ws_dense_consumers() overrode it (tests, benchmarks; -1 returns to the
// environment's value). d = 128 always runs 2. Default 3 (H200, 2026-12-01, `bench_attention OUT
// --ws-sparse-variants`: 1.07-1.08x the two-consumer kernel at 16K / 32K).
inline constexpr int kWsDenseDefaultConsumers = 3;
int ws_dense_consumers();
void set_ws_dense_consumers(int n);

// Enqueues the attention on `stream` (cudaStream_t, nullptr = legacy default stream). When
// p.skip_mask is set, its tiles are first filled with kMaskNotVisible. Asynchronous: errors of
// the kernels themselves show at the next synchronisation.
AttentionStatus launch_attention(const AttentionParams& p, void* stream);

}  // namespace sinkscope::kernels
