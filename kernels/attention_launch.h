// SPDX-License-Identifier: Apache-2.0
// Internal: per-file launch entry points (the kernel templates are instantiated in separate
// translation units so they compile in parallel). Only attention.cu calls these.
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention.h"

namespace sinkscope::kernels::detail {

AttentionStatus launch_prefill_d64(const AttentionParams& p, const AttentionChoice& c,
                                   cudaStream_t s);
AttentionStatus launch_prefill_d128(const AttentionParams& p, const AttentionChoice& c,
                                    cudaStream_t s);
// Quantized KV pages (AttentionParams::kv_bits != 0).
AttentionStatus launch_prefill_q_d64(const AttentionParams& p, const AttentionChoice& c,
                                     cudaStream_t s);
AttentionStatus launch_prefill_q_d128(const AttentionParams& p, const AttentionChoice& c,
                                      cudaStream_t s);
// Positional bf16 prefill, dense or sparse, warp-specialised Hopper kernel
// (AttentionChoice::warp_specialized).
AttentionStatus launch_prefill_ws_d64(const AttentionParams& p, const AttentionChoice& c,
                                      cudaStream_t s);
AttentionStatus launch_prefill_ws_d128(const AttentionParams& p, const AttentionChoice& c,
                                       cudaStream_t s);
// Whether the warp-specialised kernels can run these parameters here: the driver offers
// cuTensorMapEncodeTiled and q / k / v are 16-byte aligned (TMA). Otherwise the wgmma kernels run.
bool ws_prefill_tma_ok(const AttentionParams& p);
AttentionStatus launch_decode(const AttentionParams& p, AttentionVariant v,
                              const DecodeSplitPlan& plan, const DecodeWorkspaceLayout& wl,
                              cudaStream_t s);

}  // namespace sinkscope::kernels::detail
