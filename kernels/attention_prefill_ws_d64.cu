// SPDX-License-Identifier: Apache-2.0
// Warp-specialised prefill, dense and sparse (attention_prefill_ws.cuh), for head_dim 64; one file
// per head dim so the kernels compile in parallel.
#include "kernels/attention_prefill_ws.cuh"

namespace sinkscope::kernels::detail {
AttentionStatus launch_prefill_ws_d64(const AttentionParams& p, const AttentionChoice& c,
                                     cudaStream_t s) {
  // Both sparse variants run the one sparse kernel (it loads V whatever the vote), in the
  // variant ws_sparse_variant(p).
  // The dense kernel with two (ping-pong) or three consumer warpgroups (ws_dense_consumers(p)).
  if (c.variant == AttentionVariant::kPrefillDense)
    return ws_dense_consumers(p) == 3 ? launch_prefill_ws_t<64, false, kWsVarThreeConsumers>(p, s)
                                     : launch_prefill_ws_t<64, false>(p, s);
  return launch_prefill_ws_sparse_t<64>(p, ws_sparse_variant(p), s);
}
}  // namespace sinkscope::kernels::detail
