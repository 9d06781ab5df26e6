// SPDX-License-Identifier: Apache-2.0
// Prefill kernels for head_dim 64 (all block sizes and variants).
#include "kernels/attention_prefill_inst.cuh"

namespace sinkscope::kernels::detail {
AttentionStatus launch_prefill_d64(const AttentionParams& p, const AttentionChoice& c,
                                   cudaStream_t s) {
  return launch_prefill_d<64>(p, c, s);
}
}  // namespace sinkscope::kernels::detail
