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
#include "kernels/ops.h"

namespace sinkscope::kernels {
namespace {
std::mutex g_tuning_mu;
bool g_tuning_set = false;
GpuTuning g_tuning;
}  // namespace

GpuTuning gpu_tuning() {
  std::lock_guard<std::mutex> lock(g_tuning_mu);
  if (!g_tuning_set) {
    g_tuning = gpu_tuning_from_environment();
    g_tuning_set = true;
  }
  return g_tuning;
}

void set_gpu_tuning(const GpuTuning& t) {
  bool pdl_changed = false;
  {
    std::lock_guard<std::mutex> lock(g_tuning_mu);
    pdl_changed = !g_tuning_set || g_tuning.pdl != t.pdl;
    g_tuning = t;
    g_tuning_set = true;
  }
  // Only a change of the setting: a run-time fallback (set_pdl_enabled(false) after a rejected
  // launch or capture) stays in force otherwise.
  if (pdl_changed) set_pdl_enabled(t.pdl);
}

namespace {


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

int64_t query_rows(const AttentionParams& p) { return int64_t(p.n_q_heads) * p.n_q_tokens; }

// The selection inputs on this device: the wgmma prefill needs sm_90 and sm_90a code.
AttentionShape device_shape(const AttentionParams& p, const DeviceInfo& dev) {
  AttentionShape s = shape_of(p);
#if defined(SINKSCOPE_KERNELS_WGMMA)
  s.wgmma_ok = p.prefer_wgmma && dev.cc == 90;
#endif
  // The caller's choice (the CUDA backend passes its tuning's prefill_ws / prefill_ws_sparse).
  s.prefer_ws = p.prefer_ws && detail::ws_prefill_tma_ok(p);
  s.prefer_ws_sparse = p.prefer_ws_sparse;
  return s;
}

bool is_decode(AttentionVariant v) {
  return v == AttentionVariant::kDecodeDense || v == AttentionVariant::kDecodeSparse;
}

}  // namespace

namespace {
int consumers_for(int setting, const AttentionParams& p, int64_t three_from_rows) {
  if (setting == 2 || setting == 3) return setting;
  return query_rows(p) >= three_from_rows ? 3 : 2;
}
}  // namespace

int ws_dense_consumers(const AttentionParams& p) {
  return consumers_for(gpu_tuning().ws_dense_consumers, p, kWsThreeConsumerRowsDense);
}

int ws_sparse_consumers(const AttentionParams& p) {
  return consumers_for(gpu_tuning().ws_sparse_consumers, p, kWsThreeConsumerRowsSparse);
}

DecodeSplitPolicy decode_split_policy(int head_dim, int block_size) {
  const GpuTuning t = gpu_tuning();
  if (t.decode_ctas_per_sm >= 1 && t.decode_ctas_per_sm <= kDecodeMaxCtasPerSm)
    return {t.decode_ctas_per_sm, std::clamp(t.decode_max_ctas_per_sm, 0, kDecodeMaxCtasPerSm),
            std::clamp(t.decode_min_tiles, 0, kDecodeMaxTilesPerSplit)};
  return decode_default_policy(head_dim, block_size);
}

namespace {
// The plan a decode launch runs and sizes its workspace with (attention_workspace_bytes() and
// launch_attention() must agree).
DecodeSplitPlan decode_plan(const AttentionShape& s, const DeviceInfo& dev) {
  return decode_launch_plan(s, dev.sms, decode_split_policy(s.head_dim, s.block_size));
}
}  // namespace

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
