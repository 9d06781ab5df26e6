// SPDX-License-Identifier: Apache-2.0
// Prefill kernels over a quantized KV cache (int8 / int4 pages) for head_dim 128.
#include "kernels/attention_prefill_inst.cuh"

namespace sinkscope::kernels::detail {
AttentionStatus launch_prefill_q_d128(const AttentionParams& p, const AttentionChoice& c,
                                     cudaStream_t s) {
  return launch_prefill_qd<128>(p, c, s);
}
}  // namespace sinkscope::kernels::detail
