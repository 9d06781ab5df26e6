// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's KV cache state: reset, a change of attention settings (the page size is
// the attention tile, so a new block size re-pages the cache), the page tables of a quantized
// full cache and of a sliding window, and the RoPE ring rows a window uploads per chunk.
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend_impl.h"
#include "kernels/ops.h"

namespace sinkscope::cuda_detail {

void CudaBackendImpl::reset() {
  SS_CUDA(cudaSetDevice(m_device));
  m_n_past = 0;
  m_plan->reset(m_attn.block_size);  // a windowed cache takes a new page size here
  upload_full_page_table();
  const ModelConfig& c = m_model->config();
  m_probes.reset(c.n_layer, c.n_head);
  restart_decode_choice();
  SS_CUDA(cudaMemsetAsync(m_probe.get(), 0, m_probe.bytes(), m_stream.s));
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
  // Decode graphs stay: they hold no position, only buffers and settings.
}

bool CudaBackendImpl::rewind(int n_past, const AttentionProbes& probes) {
  const ModelConfig& c = m_model->config();
  const size_t LH = size_t(c.n_layer) * c.n_head;
  if (n_past < 0 || n_past > m_n_past || probes.n_layer != c.n_layer ||
      probes.n_head != c.n_head || probes.prefill.size() != LH || probes.decode.size() != LH)
    return false;
  if (!m_plan->truncate(n_past)) return false;
  SS_CUDA(cudaSetDevice(m_device));
  // The device's tile counters: [prefill, decode][visited, skipped][layer][head].
  uint64_t* h = m_h_probe.as<uint64_t>();
  for (size_t i = 0; i < LH; ++i) {
    h[i] = uint64_t(probes.prefill[i].visited);
    h[LH + i] = uint64_t(probes.prefill[i].skipped);
    h[2 * LH + i] = uint64_t(probes.decode[i].visited);
    h[3 * LH + i] = uint64_t(probes.decode[i].skipped);
  }
  SS_CUDA(cudaMemcpyAsync(m_probe.get(), h, LH * 4 * 8, cudaMemcpyHostToDevice, m_stream.s));
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
  m_n_past = n_past;
  m_probes = probes;
  restart_decode_choice();  // the measured skipped share belongs to the dropped steps
  return true;
}

void CudaBackendImpl::set_attention(const AttentionSettings& s) {
  validate_attention(s);
  if (m_cache_settings.block_size != 0 && m_cache_settings.block_size != s.block_size)
    throw BackendError("attention block_size " + std::to_string(s.block_size) +
                       " differs from the cache block_size " +
                       std::to_string(m_cache_settings.block_size));
  if (m_plan->windowed() && m_n_past > 0 && s.block_size != m_attn.block_size)
    throw BackendError("CUDA backend: a sliding_window cache changes block_size only when empty "
                       "(reset first): its pages are " + std::to_string(m_attn.block_size) +
                       "-token tiles");
  SS_CUDA(cudaSetDevice(m_device));
  if (s.block_size != m_attn.block_size && m_n_past > 0 && m_kv_bits)
    throw BackendError("CUDA backend: a quantized KV cache changes block_size only when empty "
                       "(reset first): its pages are " + std::to_string(m_attn.block_size) +
                       "-token code pages");
  if (s.block_size != m_attn.block_size && m_n_past > 0) repage(m_attn.block_size, s.block_size);
  m_attn = s;
  restart_decode_choice();  // another lambda: the measured skipped share no longer holds
  if (m_n_past == 0) {
    m_plan->reset(s.block_size);
    upload_full_page_table();
  }
  invalidate_graphs();
}

// A quantized full cache with protected positions: the page table names the protected bf16
// pages (-1 - j, engine/cache/kv_page_plan.h) for the current page size; identity otherwise.
void CudaBackendImpl::upload_full_page_table() {
  if (!m_kv_bits || m_plan->windowed()) return;
  const std::vector<int32_t> t = m_plan->full_page_table(m_alloc_pos / m_attn.block_size);
  SS_CUDA(cudaMemcpyAsync(m_page_table.get(), t.data(), t.size() * 4, cudaMemcpyHostToDevice,
                          m_stream.s));
  SS_CUDA(cudaStreamSynchronize(m_stream.s));  // t dies here
}

// The page size is the attention tile size, so a new block size re-lays the cached positions.
void CudaBackendImpl::repage(int old_bs, int new_bs) {
  const ModelConfig& c = m_model->config();
  if (!m_repage_tmp) m_repage_tmp = alloc(m_layer_kv_elems * 2, "KV re-paging buffer");
  uint16_t* tmp = m_repage_tmp.as<uint16_t>();
  for (int l = 0; l < c.n_layer; ++l) {
    for (uint16_t* layer : {k_layer(l), v_layer(l)}) {
      SS_LAUNCH(kernels::launch_repage_kv(layer, tmp, m_n_past, c.n_head_kv, c.head_dim, old_bs,
                                          new_bs, m_stream.s));
      SS_CUDA(
          cudaMemcpyAsync(layer, tmp, m_layer_kv_elems * 2, cudaMemcpyDeviceToDevice, m_stream.s));
    }
  }
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
}

void CudaBackendImpl::upload_window_tables(int m) {
  const ModelConfig& c = m_model->config();
  const int64_t n0 = m_n_past;
  cudaStream_t s = m_stream.s;
  // Pageable sources: cudaMemcpyAsync stages them before returning, so they may change after.
  for (const auto& [idx, page] : m_plan->append_entries())
    SS_CUDA(cudaMemcpyAsync(m_page_table.as<int32_t>() + idx, &page, 4, cudaMemcpyHostToDevice, s));
  if (c.rope_dim >= 2) {  // ring rows of this chunk's positions
    const size_t half = size_t(c.rope_dim / 2);
    m_h_rope.resize(2 * size_t(m) * half);
    for (int i = 0; i < m; ++i)
      m_rope_host.angles(int(n0 + i), &m_h_rope[size_t(i) * half],
                         &m_h_rope[(size_t(m) + size_t(i)) * half]);
    const size_t row0 = size_t(m_plan->ring_pos(n0));
    SS_CUDA(cudaMemcpyAsync(m_rope_cos.as<float>() + row0 * half, m_h_rope.data(),
                            size_t(m) * half * 4, cudaMemcpyHostToDevice, s));
    SS_CUDA(cudaMemcpyAsync(m_rope_sin.as<float>() + row0 * half, m_h_rope.data() + size_t(m) * half,
                            size_t(m) * half * 4, cudaMemcpyHostToDevice, s));
    if (m_rope_cos_l) {  // the local layers' own RoPE (gemma3): the same ring rows
      for (int i = 0; i < m; ++i)
        m_rope_host_local.angles(int(n0 + i), &m_h_rope[size_t(i) * half],
                                 &m_h_rope[(size_t(m) + size_t(i)) * half]);
      SS_CUDA(cudaMemcpyAsync(m_rope_cos_l.as<float>() + row0 * half, m_h_rope.data(),
                              size_t(m) * half * 4, cudaMemcpyHostToDevice, s));
      SS_CUDA(cudaMemcpyAsync(m_rope_sin_l.as<float>() + row0 * half,
                              m_h_rope.data() + size_t(m) * half, size_t(m) * half * 4,
                              cudaMemcpyHostToDevice, s));
    }
  }
  const std::vector<int32_t>& pos0 = m_plan->tile_pos0();
  const std::vector<int32_t>& page = m_plan->tile_page();
  SS_CUDA(cudaMemcpyAsync(m_tile_pos0.get(), pos0.data(), pos0.size() * 4, cudaMemcpyHostToDevice, s));
  SS_CUDA(cudaMemcpyAsync(m_tile_page.get(), page.data(), page.size() * 4, cudaMemcpyHostToDevice, s));
}

}  // namespace sinkscope::cuda_detail
