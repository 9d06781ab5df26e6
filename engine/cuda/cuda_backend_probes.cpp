// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's probes: requests for skip masks (one head's, or every head's) and for a
// Q/K/V capture, their read-back around each prefill pass, the tile counters' copy to the host,
// and the recovery after a forward that threw (rollback, keeping the probes of what ran).
#include <algorithm>
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend_impl.h"

namespace sinkscope::cuda_detail {

void CudaBackendImpl::request_skip_mask(int layer, int head) {
  const ModelConfig& c = m_model->config();
  if (layer >= c.n_layer || head >= c.n_head || (layer < 0) != (head < 0))
    throw BackendError("skip mask: (layer " + std::to_string(layer) + ", head " +
                       std::to_string(head) + ") is outside the model (" +
                       std::to_string(c.n_layer) + " layers, " + std::to_string(c.n_head) +
                       " heads)");
  if (layer >= 0 && m_plan->windowed())
    throw BackendError("skip mask: not recorded by the CUDA backend with a sliding_window cache "
                       "(its KV tiles are a live-page list); use the CPU backend or the full cache");
  if (layer >= 0 && !m_mask) {
    // One pass's mask at most: ceil(batch / kPrefillQueryTile) query tiles x ceil(capacity / 64)
    // KV tiles.
    const size_t rows = size_t(m_batch + kernels::kPrefillQueryTile - 1) / kernels::kPrefillQueryTile;
    const size_t cols = size_t(m_capacity + 63) / 64;
    m_mask = alloc(rows * cols, "skip mask");
  }
  m_probes.mask.layer = layer;
  m_probes.mask.head = head;
}

// with_stat: the CPU backend's statistic only (the GPU records none; all_stat stays empty).
void CudaBackendImpl::request_all_skip_masks(bool on, bool /*with_stat*/) {
  if (on && m_plan->windowed())
    throw BackendError("all-heads skip masks: recorded with the full cache only");
  if (on && !m_mask_all) {
    const ModelConfig& c = m_model->config();
    const size_t rows = size_t(m_batch + kernels::kPrefillQueryTile - 1) / kernels::kPrefillQueryTile;
    const size_t cols = size_t(m_capacity + 63) / 64;
    m_mask_all = alloc(size_t(c.n_layer) * c.n_head * rows * cols, "all-heads skip masks");
  }
  m_all_masks = on;
}

void CudaBackendImpl::request_qkv_capture(const QkvCaptureRequest& r) {
  const ModelConfig& c = m_model->config();
  const int layer = r.layer;
  if (layer >= c.n_layer) throw BackendError("Q/K/V capture: layer " + std::to_string(layer) +
                                             " is outside the model");
  if (layer >= 0 && m_plan->windowed())
    throw BackendError("Q/K/V capture: full cache only");
  if (layer >= 0 && r.more_last >= 0)
    throw BackendError("Q/K/V capture: one layer at a time on the CUDA backend");
  if (layer >= 0 && (r.sink_count < 0 || r.window < 0))
    throw BackendError("Q/K/V capture: sink_count and window must be >= 0");
  // A quantized cache keeps bf16 pages for its protected positions only: the layer's keys are
  // codes, not what read_captured_kv copies.
  if (layer >= 0 && m_kv_bits)
    throw BackendError("Q/K/V capture: needs a bf16 (unquantized) KV cache");
  if (layer >= 0 && (r.head < -1 || r.head >= c.n_head))
    throw BackendError("Q/K/V capture: head " + std::to_string(r.head) + " is outside the model (" +
                       std::to_string(c.n_head) + " heads)");
  m_capture = QkvCapture{};
  m_capture.layer = layer < 0 ? -1 : layer;
  m_cap = layer < 0 ? QkvCaptureRequest{} : r;
  if (m_cap.window > 0 && !m_vis_pos0)
    m_vis_pos0 = alloc(size_t(m_alloc_pos / 64) * 4, "capture live-page positions");
}

void CudaBackendImpl::enqueue_probe_copy() {
  SS_CUDA(cudaMemcpyAsync(m_h_probe.as<uint64_t>(), m_probe.get(), m_probe.bytes(),
                          cudaMemcpyDeviceToHost, m_stream.s));
}

void CudaBackendImpl::apply_probes() {
  const size_t LH = size_t(m_probes.n_layer) * m_probes.n_head;
  const uint64_t* h = m_h_probe.as<uint64_t>();
  for (size_t i = 0; i < LH; ++i) {
    m_probes.prefill[i] = {int64_t(h[i]), int64_t(h[LH + i])};
    m_probes.decode[i] = {int64_t(h[2 * LH + i]), int64_t(h[3 * LH + i])};
  }
  if (m_model->config().attn_sinks) {  // learned sinks' mass, behind the counts (doubles)
    const double* sm = reinterpret_cast<const double*>(h + 4 * LH);
    m_probes.sink_mass.assign(sm, sm + LH);
  }
}

// After a forward that threw: the chunk in flight (windowed) or the whole forward is rolled
// back; the device finishes what was enqueued; n_past is kept (new K/V beyond it are ignored
// and overwritten later) and so are the probes of what ran.
void CudaBackendImpl::recover_after_failed_forward() {
  m_plan->rollback();
  if (cudaStreamSynchronize(m_stream.s) == cudaSuccess &&
      cudaMemcpy(m_h_probe.as<uint64_t>(), m_probe.get(), m_probe.bytes(),
                 cudaMemcpyDeviceToHost) == cudaSuccess)
    apply_probes();
  (void)cudaGetLastError();
}

// Before a prefill of n tokens: the Q/K/V capture's shape and visibility list, and the
// all-heads masks sized for the whole prefill.
void CudaBackendImpl::begin_prefill_probes(int n) {
  const ModelConfig& c = m_model->config();
  if (m_capture.layer >= 0) {  // debug capture: queries per pass (enqueue_layers), K/V below
    m_capture.n_q = n;
    m_capture.q_start = m_n_past;
    const bool one = m_cap.head >= 0;  // one head: q (n, d), k (n_kv, d), no v
    m_capture.head = one ? m_cap.head : -1;
    m_capture.n_head = one ? 1 : c.n_head;
    m_capture.n_head_kv = one ? 1 : c.n_head_kv;
    m_capture.head_dim = c.head_dim;
    m_capture.q.assign(size_t(n) * m_capture.n_head * c.head_dim, 0);
    if (m_cap.window > 0) {  // the identity list for this block size (attention_params)
      const int bs = m_attn.block_size;
      std::vector<int32_t> pos0(size_t(m_alloc_pos / bs));
      for (size_t t = 0; t < pos0.size(); ++t) pos0[t] = int32_t(t) * bs;
      SS_CUDA(cudaMemcpyAsync(m_vis_pos0.get(), pos0.data(), pos0.size() * 4,
                              cudaMemcpyHostToDevice, m_stream.s));
      SS_CUDA(cudaStreamSynchronize(m_stream.s));  // pos0 dies here
    }
  }
  if (m_all_masks && m_mask_all) {
    m_probes.all_rows = (n + kernels::kPrefillQueryTile - 1) / kernels::kPrefillQueryTile;
    m_probes.all_cols = (m_n_past + n + m_attn.block_size - 1) / m_attn.block_size;
    m_probes.all_masks.assign(size_t(c.n_layer) * c.n_head * m_probes.all_rows * m_probes.all_cols, 0);
    m_probes.all_stat.clear();
  }
}

// After the pass of nc tokens from `start` of an n-token prefill: its skip-mask tiles (the
// requested head's and the all-heads probe's) into the host probes.
void CudaBackendImpl::read_pass_masks(int start, int nc, int n) {
  const ModelConfig& c = m_model->config();
  if (m_probes.mask.layer >= 0 && m_mask) {
    // The kernel writes this pass's tiles (1 skipped, 0 computed, 2 not visible); the probe
    // convention is 0 not visible, 1 computed, 2 skipped. Passes are whole query tiles.
    const int qt = kernels::kPrefillQueryTile, bs = m_attn.block_size;
    const int rows = (nc + qt - 1) / qt;
    const int cols = (m_n_past + start + nc + bs - 1) / bs;
    std::vector<uint8_t> h(size_t(rows) * cols);
    SS_CUDA(cudaMemcpyAsync(h.data(), m_mask.get(), h.size(), cudaMemcpyDeviceToHost, m_stream.s));
    SS_CUDA(cudaStreamSynchronize(m_stream.s));
    SkipMask& m = m_probes.mask;
    const int total_rows = (n + qt - 1) / qt;
    const int total_cols = (m_n_past + n + bs - 1) / bs;
    if (start == 0) {
      m.rows = total_rows;
      m.cols = total_cols;
      m.cells.assign(size_t(total_rows) * total_cols, 0);
    }
    static constexpr uint8_t kConv[3] = {1, 2, 0};
    for (int r = 0; r < rows; ++r)
      for (int t = 0; t < cols; ++t)
        m.cells[size_t(start / qt + r) * total_cols + t] = kConv[std::min<int>(h[size_t(r) * cols + t], 2)];
  }
  if (m_all_masks && m_mask_all) {  // debug probe: this pass's blocks into the full layout
    const int qt = kernels::kPrefillQueryTile, bs = m_attn.block_size;
    const size_t rows = size_t(nc + qt - 1) / qt;
    const size_t cols = size_t(m_n_past + start + nc + bs - 1) / bs;
    const size_t LH = size_t(c.n_layer) * c.n_head;
    std::vector<uint8_t> h(LH * rows * cols);
    SS_CUDA(cudaMemcpyAsync(h.data(), m_mask_all.get(), h.size(), cudaMemcpyDeviceToHost, m_stream.s));
    SS_CUDA(cudaStreamSynchronize(m_stream.s));
    static constexpr uint8_t kConv[3] = {1, 2, 0};
    const size_t R = size_t(m_probes.all_rows), C = size_t(m_probes.all_cols);
    for (size_t lh = 0; lh < LH; ++lh)
      for (size_t r = 0; r < rows; ++r)
        for (size_t t = 0; t < cols; ++t)
          m_probes.all_masks[(lh * R + size_t(start / qt) + r) * C + t] =
              kConv[std::min<int>(h[(lh * rows + r) * cols + t], 2)];
  }
}

// Debug capture after an n-token prefill: K/V of every cached position, pages -> (pos, kv, d).
void CudaBackendImpl::read_captured_kv(int n) {
  const ModelConfig& c = m_model->config();
  const int bs = m_attn.block_size, hk = c.n_head_kv, d = c.head_dim;
  const int64_t n_kv = int64_t(m_n_past) + n, pages = (n_kv + bs - 1) / bs;
  m_capture.n_kv = int(n_kv);
  if (m_capture.head >= 0) {
    // One KV head: its bs x d block of every page, pages in position order (the full cache's
    // identity table), so the positions come out contiguous.
    const int g = m_capture.head / (c.n_head / hk);
    const size_t block = size_t(bs) * d * 2;
    std::vector<uint16_t> pk(size_t(pages) * bs * d);
    SS_CUDA(cudaMemcpy2D(pk.data(), block, k_layer(m_capture.layer) + size_t(g) * bs * d,
                         block * hk, block, size_t(pages), cudaMemcpyDeviceToHost));
    pk.resize(size_t(n_kv) * d);
    m_capture.k = std::move(pk);
    m_capture.v.clear();
    return;
  }
  std::vector<uint16_t> pk(size_t(pages) * hk * bs * d), pv(pk.size());
  SS_CUDA(cudaMemcpy(pk.data(), k_layer(m_capture.layer), pk.size() * 2, cudaMemcpyDeviceToHost));
  SS_CUDA(cudaMemcpy(pv.data(), v_layer(m_capture.layer), pv.size() * 2, cudaMemcpyDeviceToHost));
  m_capture.k.resize(size_t(n_kv) * hk * d);
  m_capture.v.resize(m_capture.k.size());
  for (int64_t pos = 0; pos < n_kv; ++pos)
    for (int g = 0; g < hk; ++g) {
      const size_t src = ((size_t(pos / bs) * hk + g) * bs + size_t(pos % bs)) * d;
      const size_t dst = (size_t(pos) * hk + g) * d;
      std::copy_n(pk.data() + src, d, m_capture.k.data() + dst);
      std::copy_n(pv.data() + src, d, m_capture.v.data() + dst);
    }
}

}  // namespace sinkscope::cuda_detail
