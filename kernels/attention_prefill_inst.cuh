// SPDX-License-Identifier: Apache-2.0
// Internal: the run-time -> compile-time switch for one head_dim (block size x variant).
#pragma once

#include "kernels/attention_launch.h"
#include "kernels/attention_prefill.cuh"
#include "kernels/cuda_check.h"

namespace sinkscope::kernels::detail {

template <int D, int BC, bool SPARSE, bool LAZY_V, bool WG, bool LIST = false, int KVB = 0>
AttentionStatus launch_prefill_t(const AttentionParams& p, cudaStream_t stream) {
  constexpr PrefillTileConfig cfg = prefill_tile_config(D, BC, WG);
  constexpr int smem = prefill_smem_bytes<D, BC, LAZY_V>();
  auto kernel = attention_prefill_kernel<D, BC, SPARSE, LAZY_V, WG, LIST, KVB>;
  // Once per instantiation (and process): the attribute call costs host time on every launch.
  static const cudaError_t attr_err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  SINKSCOPE_CUDA_TRY(AttentionStatus, attr_err);
  const dim3 grid(p.n_q_heads, (p.n_q_tokens + kPrefillCtaRows - 1) / kPrefillCtaRows);
  kernel<<<grid, cfg.warps * 32, smem, stream>>>(p);
  SINKSCOPE_CUDA_TRY(AttentionStatus, cudaGetLastError());
  return {};
}

template <int D, int BC, bool WG>
AttentionStatus launch_prefill_bc(const AttentionParams& p, AttentionVariant v, cudaStream_t s) {
  switch (v) {
    case AttentionVariant::kPrefillDense: return launch_prefill_t<D, BC, false, false, WG>(p, s);
    case AttentionVariant::kPrefillSparse: return launch_prefill_t<D, BC, true, false, WG>(p, s);
    case AttentionVariant::kPrefillSparseLazyV: return launch_prefill_t<D, BC, true, true, WG>(p, s);
    default: return AttentionStatus::error("not a prefill variant");
  }
}

// A live-page list (sliding-window cache): the mma.sync kernels with the LIST rule, dense or
// sparse with eager V (the only instantiations with LIST, to keep the build time in bounds).
template <int D, int BC>
AttentionStatus launch_prefill_list(const AttentionParams& p, AttentionVariant v, cudaStream_t s) {
  if (v == AttentionVariant::kPrefillDense) return launch_prefill_t<D, BC, false, false, false, true>(p, s);
  return launch_prefill_t<D, BC, true, false, false, true>(p, s);
}

template <int D>
AttentionStatus launch_prefill_d(const AttentionParams& p, const AttentionChoice& c,
                                 cudaStream_t s) {
  if (p.tile_pos0)
    return p.block_size == 64 ? launch_prefill_list<D, 64>(p, c.variant, s)
                              : launch_prefill_list<D, 128>(p, c.variant, s);
  if (c.wgmma)
    return p.block_size == 64 ? launch_prefill_bc<D, 64, true>(p, c.variant, s)
                              : launch_prefill_bc<D, 128, true>(p, c.variant, s);
  return p.block_size == 64 ? launch_prefill_bc<D, 64, false>(p, c.variant, s)
                            : launch_prefill_bc<D, 128, false>(p, c.variant, s);
}

// Quantized KV (AttentionParams::kv_bits 8 / 4): the mma.sync kernels, dense or sparse with V
// loaded with K (select_attention_kernel never picks wgmma or lazy V for them), positional or
// live-page tiles; instantiated in attention_prefill_q_d*.cu only.
template <int D, int BC, int KVB>
AttentionStatus launch_prefill_q(const AttentionParams& p, AttentionVariant v, cudaStream_t s) {
  const bool sparse = v != AttentionVariant::kPrefillDense;
  if (p.tile_pos0)
    return sparse ? launch_prefill_t<D, BC, true, false, false, true, KVB>(p, s)
                  : launch_prefill_t<D, BC, false, false, false, true, KVB>(p, s);
  return sparse ? launch_prefill_t<D, BC, true, false, false, false, KVB>(p, s)
                : launch_prefill_t<D, BC, false, false, false, false, KVB>(p, s);
}

template <int D>
AttentionStatus launch_prefill_qd(const AttentionParams& p, const AttentionChoice& c,
                                  cudaStream_t s) {
  if (p.kv_bits == 8)
    return p.block_size == 64 ? launch_prefill_q<D, 64, 8>(p, c.variant, s)
                              : launch_prefill_q<D, 128, 8>(p, c.variant, s);
  return p.block_size == 64 ? launch_prefill_q<D, 64, 4>(p, c.variant, s)
                            : launch_prefill_q<D, 128, 4>(p, c.variant, s);
}

}  // namespace sinkscope::kernels::detail
