// SPDX-License-Identifier: Apache-2.0
// Warp-specialised prefill, dense and sparse (attention_prefill_ws.cuh), for head_dim 128; one file
// per head dim so the kernels compile in parallel.
#include "kernels/attention_prefill_ws.cuh"

namespace sinkscope::kernels::detail {
AttentionStatus launch_prefill_ws_d128(const AttentionParams& p, const AttentionChoice& c,
                                      cudaStream_t s) {
  // Two consumer warpgroups (three do not fit d = 128's registers); both sparse variants run
  // the one sparse kernel (it loads V whatever the vote).
  return c.variant == AttentionVariant::kPrefillDense ? launch_prefill_ws_t<128, false>(p, s)
                                                      : launch_prefill_ws_sparse_t<128>(p, false, s);
}
bool ws_prefill_tma_ok(const AttentionParams& p) {
  const auto addr = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  return tensor_map_encoder() != nullptr && ((addr(p.q) | addr(p.k_pages) | addr(p.v_pages)) & 15) == 0;
}
}  // namespace sinkscope::kernels::detail
