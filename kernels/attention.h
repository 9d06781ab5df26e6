// SPDX-License-Identifier: Apache-2.0
// Host launcher API of the attention kernel family. Includers need no CUDA headers: the stream
// is an opaque cudaStream_t passed as void*. Nothing here exits or throws: failures come back
// as a status with a message naming the CUDA call, file and line.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "kernels/attention_dispatch.h"
#include "kernels/attention_params.h"
#include "kernels/tuning.h"

namespace sinkscope::kernels {

using AttentionStatus = Status;  // base/status.h

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
// sparse) on the current device (positional, bf16 pages, sm_90, prefer_ws, and the tuning's
// prefill_ws).
bool attention_uses_warp_specialized(const AttentionParams& p);

// Consumer warpgroups of the warp-specialised prefill at d = 64 (docs/architecture.md, "The
// warp-specialised prefill (sm_90)"): 2 or 3 (192-row CTAs, no ping-pong; the same float
// operations per row, so the same outputs bit for bit). GpuTuning's ws_dense_consumers /
// ws_sparse_consumers when set, else by size: 3 from these many query rows (n_q_heads x
// n_q_tokens) on; below it the fewer, larger CTAs leave SMs idle (`bench_attention OUT
// --consumers` times both). d = 128 always runs 2.
inline constexpr int64_t kWsThreeConsumerRowsDense = 9 * 8192;
inline constexpr int64_t kWsThreeConsumerRowsSparse = 9 * 4096;
int ws_dense_consumers(const AttentionParams& p);
int ws_sparse_consumers(const AttentionParams& p);
// How the decode cuts its KV tiles into splits (DecodeSplitPolicy, attention_dispatch.h: the
// CTAs per SM its grid aims at, up to how many a long sequence may take while every split keeps
// min_tiles tiles): GpuTuning's decode_* fields when decode_ctas_per_sm is set, else
// decode_default_policy(head_dim, block_size). The workspace follows it
// (attention_workspace_bytes()), so a workspace sized before a tuning change may be too small
// for the next launch, which then fails with that message.
DecodeSplitPolicy decode_split_policy(int head_dim, int block_size);

// Enqueues the attention on `stream` (cudaStream_t, nullptr = legacy default stream). When
// p.skip_mask is set, its tiles are first filled with kMaskNotVisible. Asynchronous: errors of
// the kernels themselves show at the next synchronisation.
AttentionStatus launch_attention(const AttentionParams& p, void* stream);

}  // namespace sinkscope::kernels
