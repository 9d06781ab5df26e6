// SPDX-License-Identifier: Apache-2.0
// Hopper (sm_90) PTX wrappers of the warp-specialised prefill (kernels/attention_prefill_ws.cuh):
// mbarriers, named barriers, setmaxnreg, the wgmma wait and the TMA tensor loads. Device code
// only where the wgmma path is compiled (SINKSCOPE_HAVE_WGMMA); declared for the host pass.
#pragma once

#include <cstdint>

#include "kernels/attention_wgmma.cuh"  // SINKSCOPE_HAVE_WGMMA

namespace sinkscope::kernels::detail {

#if defined(SINKSCOPE_HAVE_WGMMA) || !defined(__CUDA_ARCH__)
// ---- mbarrier / named barrier / setmaxnreg wrappers (PTX ISA, "mbarrier", "bar", "setmaxnreg") ----
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Returns once the phase with the given parity has completed (acquire at CTA scope).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// Named barrier with a reduction: the number of the `count` participating threads whose pred is
// true, returned to all of them (PTX "bar.red.popc").
__device__ __forceinline__ uint32_t named_bar_red_popc(int id, int count, bool pred) {
  uint32_t r;
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.u32 p, %3, 0;\n"
      "bar.red.popc.u32 %0, %1, %2, p;\n}\n"
      : "=r"(r)
      : "r"(id), "r"(count), "r"(static_cast<uint32_t>(pred))
      : "memory");
  return r;
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
__device__ __forceinline__ void wgmma_wait1() {
  asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
// Arrive once and expect `bytes` more from asynchronous copies (PTX "mbarrier.expect_tx").
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// One TMA box (tensor map coordinates c0 innermost) into shared memory at dst; completes `bar`
// by its byte count (PTX "cp.async.bulk.tensor").
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
#endif

}  // namespace sinkscope::kernels::detail
