// SPDX-License-Identifier: Apache-2.0
// Decode kernels (dense one-pass, sparse two-pass) and the split combine, all head dims.
#include "kernels/attention_decode.cuh"
#include "kernels/attention_launch.h"
#include "kernels/cuda_check.h"
#include "kernels/tuning.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace sinkscope::kernels::detail {
namespace {

bool early_loads_enabled() { return gpu_tuning().decode_early_loads; }
// Whether the split combine is folded into the decode kernel (the last split CTA of each KV head
// merges the group's heads).
bool fused_combine_enabled() { return gpu_tuning().decode_fused_combine; }

template <int D, int BC, int MODE, bool LIST, int KVB>
cudaError_t set_smem_attr() {
  return cudaFuncSetAttribute(attention_decode_kernel<D, BC, MODE, LIST, KVB>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              DecodeCfg<D, BC, MODE>::SMEM);
}
template <int D, int BC, bool LIST, int KVB>
cudaError_t set_smem_attrs_list() {
  cudaError_t e = set_smem_attr<D, BC, 0, LIST, KVB>();
  if (e == cudaSuccess) e = set_smem_attr<D, BC, 1, LIST, KVB>();
  if (e == cudaSuccess) e = set_smem_attr<D, BC, 2, LIST, KVB>();
  return e;
}
// Every KV format (bf16, int8, int4: AttentionParams::kv_bits) of both tile kinds.
template <int D, int BC>
cudaError_t set_smem_attrs_bc() {
  cudaError_t e = cudaSuccess;
  for (cudaError_t (*f)() : {set_smem_attrs_list<D, BC, false, 0>, set_smem_attrs_list<D, BC, true, 0>,
                             set_smem_attrs_list<D, BC, false, 8>, set_smem_attrs_list<D, BC, true, 8>,
                             set_smem_attrs_list<D, BC, false, 4>, set_smem_attrs_list<D, BC, true, 4>})
    if (e == cudaSuccess) e = f();
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

// pdl: launch with Programmatic Dependent Launch (kernels/pdl.cuh); off when the launch follows
// a memset of the skip mask (programmatic edges are for kernel -> kernel).
template <int D, int BC, int MODE>
AttentionStatus launch_mode(const AttentionParams& p, const DecodeSplitPlan& plan,
                            const DecodeWorkspaceLayout& wl, bool fused, bool pdl,
                            cudaStream_t stream) {
  constexpr int smem = DecodeCfg<D, BC, MODE>::SMEM;
  SINKSCOPE_CUDA_TRY(AttentionStatus, decode_smem_attrs_once());
  // A live-page list (sliding-window cache) takes the LIST instantiation; the KV format its
  // compile-time variant.
  auto pick = [&](auto kvb) {
    constexpr int KVB = decltype(kvb)::value;
    return p.tile_pos0 ? attention_decode_kernel<D, BC, MODE, true, KVB>
                       : attention_decode_kernel<D, BC, MODE, false, KVB>;
  };
  auto kernel = p.kv_bits == 8   ? pick(std::integral_constant<int, 8>{})
                : p.kv_bits == 4 ? pick(std::integral_constant<int, 4>{})
                                 : pick(std::integral_constant<int, 0>{});
  SINKSCOPE_CUDA_TRY(AttentionStatus,
                     (launch_pdl(pdl, kernel,
                                 dim3(plan.n_splits, p.n_kv_heads), dim3(kDecodeWarps * 32),
                                 size_t(smem), stream, p, plan, wl,
                                 (fused ? 1 : 0) | (early_loads_enabled() ? 0 : 2))));
  return {};
}

template <int D, int BC>
AttentionStatus launch_bc(const AttentionParams& p, AttentionVariant v, const DecodeSplitPlan& plan,
                          const DecodeWorkspaceLayout& wl, cudaStream_t s) {
  // Learned sinks are added by the separate combine (attention_decode_combine.cuh).
  const bool fused =
      fused_combine_enabled() && p.n_kv_heads <= kDecodeCounterSlots && p.sinks == nullptr;
  const bool pdl_first = p.skip_mask == nullptr;
  if (v == AttentionVariant::kDecodeDense) {
    if (auto st = launch_mode<D, BC, 0>(p, plan, wl, fused, pdl_first, s); !st.ok) return st;
  } else {
    if (auto st = launch_mode<D, BC, 1>(p, plan, wl, false, pdl_first, s); !st.ok) return st;
    if (auto st = launch_mode<D, BC, 2>(p, plan, wl, fused, true, s); !st.ok) return st;
  }
  if (fused) return {};  // the last split CTA of each KV head wrote the output
  SINKSCOPE_CUDA_TRY(AttentionStatus,
                     (launch_pdl(true, attention_decode_combine_kernel<D>, dim3(p.n_q_heads),
                                 dim3(kCombineThreads), size_t(0), s, p, plan, wl)));
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
