// SPDX-License-Identifier: Apache-2.0
// Host launcher: validates, selects the variant with the one pure function of
// attention_dispatch.h, and enqueues the kernels.
#include "kernels/attention.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/attention_launch.h"
#include "kernels/cuda_check.h"

namespace sinkscope::kernels {
namespace detail {

bool env_not_zero(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

int env_int_in(const char* name, int lo, int hi) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(e, &end, 10);
  return *end == '\0' && x >= lo && x <= hi ? int(x) : -1;
}

}  // namespace detail

namespace {

using detail::env_int_in;
using detail::env_not_zero;

struct DeviceInfo {
  int sms = 0;
  int cc = 0;  // major * 10 + minor
  std::string error;
};

// Multiprocessor count and compute capability of the current device, looked up once per device.
DeviceInfo current_device_info() {
  static std::mutex mu;
  static std::vector<DeviceInfo> cache;
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return {0, 0, cuda_error_text(e, "cudaGetDevice", __FILE__, __LINE__)};
  std::lock_guard<std::mutex> lock(mu);
  if (dev >= static_cast<int>(cache.size())) cache.resize(dev + 1);
  DeviceInfo& d = cache[dev];
  if (d.sms == 0) {
    int major = 0, minor = 0;
    e = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (e != cudaSuccess) {
      d.sms = 0;
      return {0, 0, cuda_error_text(e, "cudaDeviceGetAttribute", __FILE__, __LINE__)};
    }
    d.cc = major * 10 + minor;
  }
  return d;
}

// SINKSCOPE_PREFILL_WS=0 turns the warp-specialised prefill off (read once per process).
bool ws_prefill_env_enabled() {
  static const bool enabled = env_not_zero("SINKSCOPE_PREFILL_WS");
  return enabled;
}

// SINKSCOPE_PREFILL_WS_SPARSE=0 keeps sparse prefill off the warp-specialised kernel (read once
// per process).
bool ws_sparse_prefill_env_enabled() {
  static const bool enabled = env_not_zero("SINKSCOPE_PREFILL_WS_SPARSE");
  return enabled;
}

// SINKSCOPE_WS_SPARSE_VARIANT (read once): the variant (ws_sparse_variant_valid()), or -1. The
// values with bits 8 / 16 other than 9, 13, 25 and 29 (combinations no kernel has) are rejected
// as 30 is.
std::atomic<int> g_ws_sparse_variant_override{-1};
int ws_sparse_variant_env() {
  static const int v = [] {
    const int x = env_int_in("SINKSCOPE_WS_SPARSE_VARIANT", 0, kWsSparseArriveVoteD64);
    return ws_sparse_variant_valid(x) ? x : -1;
  }();
  return v;
}

// SINKSCOPE_WS_DENSE_CONSUMERS (read once): 2, 3, or -1.
std::atomic<int> g_ws_dense_consumers_override{-1};
int ws_dense_consumers_env() {
  static const int n = [] {
    const char* e = std::getenv("SINKSCOPE_WS_DENSE_CONSUMERS");
    const std::string s = e ? e : "";
    return s == "2" ? 2 : (s == "3" ? 3 : -1);
  }();
  return n;
}

// SINKSCOPE_DECODE_CTAS_PER_SM (read once): 1 .. kDecodeMaxCtasPerSm, or -1.
// The override of set_decode_split_policy() / set_decode_ctas_per_sm(): ctas -1 = none.
std::atomic<int> g_decode_ctas_override{-1}, g_decode_max_ctas_override{0},
    g_decode_min_tiles_override{0};
int decode_ctas_env() {
  static const int n = env_int_in("SINKSCOPE_DECODE_CTAS_PER_SM", 1, kDecodeMaxCtasPerSm);
  return n;
}

int64_t query_rows(const AttentionParams& p) { return int64_t(p.n_q_heads) * p.n_q_tokens; }

// The selection inputs on this device: the wgmma prefill needs sm_90 and sm_90a code.
AttentionShape device_shape(const AttentionParams& p, const DeviceInfo& dev) {
  AttentionShape s = shape_of(p);
#if defined(SINKSCOPE_KERNELS_WGMMA)
  s.wgmma_ok = p.prefer_wgmma && dev.cc == 90;
#endif
  s.prefer_ws = p.prefer_ws && ws_prefill_env_enabled() && detail::ws_prefill_tma_ok(p);
  s.prefer_ws_sparse = p.prefer_ws_sparse && ws_sparse_prefill_env_enabled();
  return s;
}

bool is_decode(AttentionVariant v) {
  return v == AttentionVariant::kDecodeDense || v == AttentionVariant::kDecodeSparse;
}

}  // namespace

int ws_sparse_variant(const AttentionParams& p) {
  const int o = g_ws_sparse_variant_override.load(std::memory_order_relaxed);
  if (ws_sparse_variant_valid(o)) return o;
  if (const int e = ws_sparse_variant_env(); e >= 0) return e;
  // From the size: three consumers without the empty commit group (13; d = 128 runs it as 9),
  // else 9 (d = 64 runs it as 1). Variant 29 (bit 16) stays opt-in: see attention.h.
  return query_rows(p) >= kWsThreeConsumerRowsSparse ? kWsSparseNoEmptyGroupD64
                                                     : kWsSparseNoEmptyGroupD128;
}

void set_ws_sparse_variant(int v) { g_ws_sparse_variant_override.store(v, std::memory_order_relaxed); }

int ws_dense_consumers(const AttentionParams& p) {
  const int o = g_ws_dense_consumers_override.load(std::memory_order_relaxed);
  if (o == 2 || o == 3) return o;
  if (const int e = ws_dense_consumers_env(); e > 0) return e;
  return query_rows(p) >= kWsThreeConsumerRowsDense ? 3 : 2;
}

void set_ws_dense_consumers(int n) { g_ws_dense_consumers_override.store(n, std::memory_order_relaxed); }

DecodeSplitPolicy decode_split_policy(int head_dim, int block_size) {
  const int c = g_decode_ctas_override.load(std::memory_order_relaxed);
  if (c >= 1 && c <= kDecodeMaxCtasPerSm) {
    const int mx = g_decode_max_ctas_override.load(std::memory_order_relaxed);
    const int mt = g_decode_min_tiles_override.load(std::memory_order_relaxed);
    return {c, std::clamp(mx, 0, kDecodeMaxCtasPerSm), std::clamp(mt, 0, kDecodeMaxTilesPerSplit)};
  }
  if (const int e = decode_ctas_env(); e > 0) return {e, 0, 0};
  return decode_default_policy(head_dim, block_size);
}

namespace {
// The plan a decode launch runs and sizes its workspace with (attention_workspace_bytes() and
// launch_attention() must agree).
DecodeSplitPlan decode_plan(const AttentionShape& s, const DeviceInfo& dev) {
  return decode_launch_plan(s, dev.sms, decode_split_policy(s.head_dim, s.block_size));
}
}  // namespace

void set_decode_split_policy(DecodeSplitPolicy pol) {
  g_decode_max_ctas_override.store(pol.max_ctas_per_sm, std::memory_order_relaxed);
  g_decode_min_tiles_override.store(pol.min_tiles, std::memory_order_relaxed);
  g_decode_ctas_override.store(pol.ctas_per_sm, std::memory_order_relaxed);
}

void set_decode_ctas_per_sm(int n) { set_decode_split_policy({n, 0, 0}); }

AttentionStatus attention_supported(const AttentionParams& p) {
  const AttentionChoice c = select_attention_kernel(shape_of(p));
  if (!c.ok()) return AttentionStatus::error(c.reason);
  return {};
}

AttentionVariant attention_variant(const AttentionParams& p) {
  return select_attention_kernel(shape_of(p)).variant;
}

bool attention_uses_wgmma(const AttentionParams& p) {
  return select_attention_kernel(device_shape(p, current_device_info())).wgmma;
}

bool attention_uses_warp_specialized(const AttentionParams& p) {
  return select_attention_kernel(device_shape(p, current_device_info())).warp_specialized;
}

uint64_t attention_workspace_bytes(const AttentionParams& p) {
  const AttentionShape s = shape_of(p);
  const AttentionChoice c = select_attention_kernel(s);
  if (!is_decode(c.variant)) return 0;
  const DeviceInfo dev = current_device_info();
  if (dev.sms == 0) return 0;
  const DecodeSplitPlan plan = decode_plan(s, dev);
  return decode_workspace_layout(s, plan, c.variant == AttentionVariant::kDecodeSparse).total;
}

AttentionStatus launch_attention(const AttentionParams& p, void* stream_ptr) {
  const DeviceInfo dev = current_device_info();
  if (dev.sms == 0) return AttentionStatus::error(dev.error);
  const AttentionShape s = device_shape(p, dev);
  const AttentionChoice c = select_attention_kernel(s);
  if (!c.ok()) return AttentionStatus::error(c.reason);
  if (!p.q || !p.o || !p.k_pages || !p.v_pages || !p.page_table)
    return AttentionStatus::error("q, o, k_pages, v_pages and page_table must be set");
  if (p.kv_bits != 0 && (!p.k_codes || !p.v_codes || !p.k_scales || !p.v_scales))
    return AttentionStatus::error("quantized KV (kv_bits) needs k_codes, v_codes, k_scales and "
                                  "v_scales (k_pages / v_pages: the protected bf16 pages)");
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (p.skip_mask) {
    const int64_t heads = p.mask_head < 0 ? p.n_q_heads : 1;
    const int64_t qt = is_decode(c.variant)
                           ? 1
                           : (p.n_q_tokens + kPrefillQueryTile - 1) / kPrefillQueryTile;
    const int64_t kvt = (p.kv_len + p.block_size - 1) / p.block_size;
    SINKSCOPE_CUDA_TRY(AttentionStatus,
                       cudaMemsetAsync(p.skip_mask, kMaskNotVisible, heads * qt * kvt, stream));
  }
  if (is_decode(c.variant)) {
    const DecodeSplitPlan plan = decode_plan(s, dev);
    const DecodeWorkspaceLayout wl =
        decode_workspace_layout(s, plan, c.variant == AttentionVariant::kDecodeSparse);
    if (!p.workspace || p.workspace_bytes < wl.total)
      return AttentionStatus::error("decode needs attention_workspace_bytes() of workspace (" +
                                    std::to_string(wl.total) + " bytes)");
    return detail::launch_decode(p, c.variant, plan, wl, stream);
  }
  if (p.kv_bits != 0)
    return p.head_dim == 64 ? detail::launch_prefill_q_d64(p, c, stream)
                            : detail::launch_prefill_q_d128(p, c, stream);
  if (c.warp_specialized)
    return p.head_dim == 64 ? detail::launch_prefill_ws_d64(p, c, stream)
                            : detail::launch_prefill_ws_d128(p, c, stream);
  return p.head_dim == 64 ? detail::launch_prefill_d64(p, c, stream)
                          : detail::launch_prefill_d128(p, c, stream);
}

}  // namespace sinkscope::kernels
