// SPDX-License-Identifier: Apache-2.0
// Decode kernels (dense one-pass, sparse two-pass) and the split combine, all head dims.
#include "kernels/attention_decode.cuh"
#include "kernels/attention_launch.h"
#include "kernels/cuda_check.h"

namespace sinkscope::kernels::detail {
namespace {

template <int D, int BC, int MODE>
AttentionStatus launch_mode(const AttentionParams& p, const DecodeSplitPlan& plan,
                            const DecodeWorkspaceLayout& wl, cudaStream_t stream) {
  constexpr int smem = DecodeCfg<D, BC, MODE>::SMEM;
  auto kernel = attention_decode_kernel<D, BC, MODE>;
  static const cudaError_t attr_err =  // once per instantiation: it costs host time per call
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  SINKSCOPE_CUDA_TRY(AttentionStatus, attr_err);
  kernel<<<dim3(plan.n_splits, p.n_kv_heads), kDecodeWarps * 32, smem, stream>>>(p, plan, wl);
  SINKSCOPE_CUDA_TRY(AttentionStatus, cudaGetLastError());
  return {};
}

template <int D, int BC>
AttentionStatus launch_bc(const AttentionParams& p, AttentionVariant v, const DecodeSplitPlan& plan,
                          const DecodeWorkspaceLayout& wl, cudaStream_t s) {
  if (v == AttentionVariant::kDecodeDense) {
    if (auto st = launch_mode<D, BC, 0>(p, plan, wl, s); !st.ok) return st;
  } else {
    if (auto st = launch_mode<D, BC, 1>(p, plan, wl, s); !st.ok) return st;
    if (auto st = launch_mode<D, BC, 2>(p, plan, wl, s); !st.ok) return st;
  }
  attention_decode_combine_kernel<D><<<p.n_q_heads, D, 0, s>>>(p, plan, wl);
  SINKSCOPE_CUDA_TRY(AttentionStatus, cudaGetLastError());
  return {};
}

}  // namespace

AttentionStatus launch_decode(const AttentionParams& p, AttentionVariant v,
                              const DecodeSplitPlan& plan, const DecodeWorkspaceLayout& wl,
                              cudaStream_t s) {
  if (p.head_dim == 64)
    return p.block_size == 64 ? launch_bc<64, 64>(p, v, plan, wl, s)
                              : launch_bc<64, 128>(p, v, plan, wl, s);
  return p.block_size == 64 ? launch_bc<128, 64>(p, v, plan, wl, s)
                            : launch_bc<128, 128>(p, v, plan, wl, s);
}

}  // namespace sinkscope::kernels::detail
