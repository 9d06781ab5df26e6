// SPDX-License-Identifier: Apache-2.0
// Decode kernels (dense one-pass, sparse two-pass) and the split combine, all head dims.
#include "kernels/attention_decode.cuh"
#include "kernels/attention_launch.h"
#include "kernels/cuda_check.h"

namespace sinkscope::kernels::detail {
namespace {

template <int D, int BC, int MODE>
cudaError_t set_smem_attr() {
  return cudaFuncSetAttribute(attention_decode_kernel<D, BC, MODE>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              DecodeCfg<D, BC, MODE>::SMEM);
}
template <int D, int BC>
cudaError_t set_smem_attrs_bc() {
  cudaError_t e = set_smem_attr<D, BC, 0>();
  if (e == cudaSuccess) e = set_smem_attr<D, BC, 1>();
  if (e == cudaSuccess) e = set_smem_attr<D, BC, 2>();
  return e;
}
// The shared-memory opt-in of EVERY decode instantiation, done once at the first decode launch
// (it costs host time per call). All at once, so that a later switch to another variant (dense
// -> sparse, block 64 -> 128) never makes its first runtime call inside a CUDA graph capture.
cudaError_t decode_smem_attrs_once() {
  static const cudaError_t err = [] {
    cudaError_t e = set_smem_attrs_bc<64, 64>();
    if (e == cudaSuccess) e = set_smem_attrs_bc<64, 128>();
    if (e == cudaSuccess) e = set_smem_attrs_bc<128, 64>();
    if (e == cudaSuccess) e = set_smem_attrs_bc<128, 128>();
    return e;
  }();
  return err;
}

template <int D, int BC, int MODE>
AttentionStatus launch_mode(const AttentionParams& p, const DecodeSplitPlan& plan,
                            const DecodeWorkspaceLayout& wl, cudaStream_t stream) {
  constexpr int smem = DecodeCfg<D, BC, MODE>::SMEM;
  SINKSCOPE_CUDA_TRY(AttentionStatus, decode_smem_attrs_once());
  attention_decode_kernel<D, BC, MODE>
      <<<dim3(plan.n_splits, p.n_kv_heads), kDecodeWarps * 32, smem, stream>>>(p, plan, wl);
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
