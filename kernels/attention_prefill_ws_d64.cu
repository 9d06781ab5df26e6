// SPDX-License-Identifier: Apache-2.0
// Warp-specialised prefill (attention_prefill_ws.cuh) for head_dim 64, dense only: the dispatch
// sends sparse d = 64 prefill to the wgmma kernels (faster there). One file per head dim so the
// kernels compile in parallel.
#include "kernels/attention_prefill_ws.cuh"

namespace sinkscope::kernels::detail {
AttentionStatus launch_prefill_ws_d64(const AttentionParams& p, const AttentionChoice& c,
                                     cudaStream_t s) {
  if (c.variant != AttentionVariant::kPrefillDense)
    return AttentionStatus::error("warp-specialised sparse prefill is built for head_dim 128 only");
  return launch_prefill_ws_t<64, false>(p, s);
}
}  // namespace sinkscope::kernels::detail
