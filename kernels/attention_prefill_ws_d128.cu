// SPDX-License-Identifier: Apache-2.0
// Warp-specialised dense prefill (attention_prefill_ws.cuh) for head_dim 128; one file per head dim
// so the two kernels compile in parallel.
#include "kernels/attention_prefill_ws.cuh"

namespace sinkscope::kernels::detail {
AttentionStatus launch_prefill_ws_d128(const AttentionParams& p, cudaStream_t s) {
  return launch_prefill_ws_t<128>(p, s);
}
}  // namespace sinkscope::kernels::detail
