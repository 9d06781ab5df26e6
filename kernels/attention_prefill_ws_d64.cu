// SPDX-License-Identifier: Apache-2.0
// Warp-specialised prefill, dense and sparse (attention_prefill_ws.cuh), for head_dim 64; one file
// per head dim so the kernels compile in parallel.
#include "kernels/attention_prefill_ws.cuh"

namespace sinkscope::kernels::detail {
AttentionStatus launch_prefill_ws_d64(const AttentionParams& p, const AttentionChoice& c,
                                     cudaStream_t s) {
  // Dense and sparse with two or three consumer warpgroups (ws_dense_consumers(p),
  // ws_sparse_consumers(p)); both sparse variants run the one sparse kernel (it loads V whatever
  // the vote).
  if (c.variant == AttentionVariant::kPrefillDense)
    return ws_dense_consumers(p) == 3 ? launch_prefill_ws_t<64, false, kWsVarThreeConsumers>(p, s)
                                     : launch_prefill_ws_t<64, false>(p, s);
  return launch_prefill_ws_sparse_t<64>(p, ws_sparse_consumers(p) == 3, s);
}
}  // namespace sinkscope::kernels::detail
