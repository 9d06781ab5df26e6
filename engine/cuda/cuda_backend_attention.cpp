// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's attention parameters: the kernels::AttentionParams of one layer and one
// pass, for each cache layout (bf16, quantized, sliding window, a capture's visibility window)
// and for prefill passes and decode steps (lengths from the device step record).
#include <cmath>

#include "engine/cuda/cuda_backend_impl.h"

namespace sinkscope::cuda_detail {

kernels::AttentionParams CudaBackendImpl::attention_params(int l, const Pass& p) const {
  const ModelConfig& c = m_model->config();
  kernels::AttentionParams a;
  a.q = m_q.as<uint16_t>();
  a.o = m_att.as<uint16_t>();
  a.k_pages = k_layer(l);
  a.v_pages = v_layer(l);
  a.page_table = m_page_table.as<int32_t>();
  if (m_kv_bits) {  // codes + scales; k_pages / v_pages: the protected bf16 pages
    a.kv_bits = m_kv_bits;
    a.k_codes = kc_layer(l);
    a.v_codes = vc_layer(l);
    a.k_scales = ks_layer(l);
    a.v_scales = vs_layer(l);
  }
  a.n_q_tokens = p.n;
  a.n_q_heads = c.n_head;
  a.n_kv_heads = c.n_head_kv;
  a.head_dim = c.head_dim;
  a.block_size = m_attn.block_size;
  a.kv_len = int64_t(p.pos0) + p.n;
  a.q_start = p.pos0;
  if (p.kv_bound > 0) {  // decode step: the length (and lambda) from the device step record
    a.kv_len = p.kv_bound;
    a.q_start = p.kv_bound - 1;
    a.kv_len_dev = m_step.as<int32_t>() + kStepKvLen;
    a.log2_lambda_dev = reinterpret_cast<const float*>(m_step.as<int32_t>() + kStepLog2Lambda);
  }
  a.scale = c.attention_scale();  // 1/sqrt(head_dim) unless the model sets its own
  a.softcap = c.attn_softcap;     // Gemma 2: scores tanh(s / cap) * cap (0: none)
  a.log2_lambda = kernels::log2_of_lambda(p.lambda);
  a.skip_value_load = m_attn.skip_value_load;
  a.skip_softmax_exp = m_attn.skip_softmax_exp;
  a.force_sparse_kernel = m_copt.force_sparse_kernel;
  a.prefer_ws = m_copt.tuning.prefill_ws;
  a.prefer_ws_sparse = m_copt.tuning.prefill_ws_sparse;
  const size_t LH = size_t(c.n_layer) * c.n_head;
  uint64_t* probe = m_probe.as<uint64_t>() + (p.decode ? 2 * LH : 0);
  a.tiles_visited = probe + size_t(l) * c.n_head;
  a.tiles_skipped = probe + LH + size_t(l) * c.n_head;
  if (const float* sk = m_weights->layers[size_t(l)].sinks) {  // gpt-oss's learned sinks
    a.sinks = sk;
    a.sink_mass = reinterpret_cast<double*>(m_probe.as<uint64_t>() + 4 * LH) + size_t(l) * c.n_head;
  }
  a.workspace = m_attn_ws.get();
  a.workspace_bytes = m_attn_ws.bytes();
  if (!p.decode && l == m_probes.mask.layer && m_mask) {
    a.skip_mask = m_mask.as<uint8_t>();
    a.mask_head = m_probes.mask.head;
  }
  if (!p.decode && m_all_masks && m_mask_all) {  // debug probe: all heads, layer blocks packed
    const size_t rows = size_t(p.n + kernels::kPrefillQueryTile - 1) / kernels::kPrefillQueryTile;
    const size_t cols = size_t(a.kv_len + a.block_size - 1) / size_t(a.block_size);
    a.skip_mask = m_mask_all.as<uint8_t>() + size_t(l) * c.n_head * rows * cols;
    a.mask_head = -1;
  }
  if (m_cap.window > 0 && !p.decode && p.kv_bound == 0 && !m_plan->windowed()) {
    // A capture's reference prefill: every page of the full cache listed at its own position
    // (identity page table) so that the kernels apply the sink/window rule; no eviction.
    a.tile_pos0 = m_vis_pos0.as<int32_t>();
    a.n_tiles = int((a.kv_len + a.block_size - 1) / a.block_size);
    a.sink_count = m_cap.sink_count;
    a.window = m_cap.window;
    a.skip_mask = nullptr;
  }
  if (m_plan->windowed()) {  // the live-page list with the sink/window rule
    a.page_table = m_tile_page.as<int32_t>();
    a.tile_pos0 = m_tile_pos0.as<int32_t>();
    a.sink_count = m_plan->sinks();
    a.window = m_plan->window();
    a.q_sink = p.sinkq ? m_q_sink.as<uint16_t>() : nullptr;
    a.kv_len_dev = nullptr;
    a.skip_mask = nullptr;
    if (p.kv_bound > 0) {  // decode graph: count and query position from the step record
      a.n_tiles = int(m_plan->pool_pages());
      a.kv_len = int64_t(a.n_tiles) * a.block_size;
      a.q_start = a.kv_len - 1;
      a.n_tiles_dev = m_step.as<int32_t>() + kStepNTiles;
      a.q_pos_dev = m_step.as<int32_t>() + kStepPosOrig;
    } else {
      a.n_tiles = int(m_plan->tile_pos0().size());
    }
  }
  if (const int ow = c.layer_window(l); ow > 0) {
    // The layer's own window (a model's local layer): invisible keys, not skipped ones. A
    // windowed cache already lists its pages; a full cache reads the identity list, with the
    // tile count and query position from the step record in decode steps.
    a.own_window = ow;
    if (!a.tile_pos0) {
      a.tile_pos0 = own_list(a.block_size);
      a.sink_count = 0;
      a.window = 0;
      a.skip_mask = nullptr;  // masks are recorded on positional tiles only
      if (p.kv_bound > 0) {
        a.n_tiles = int((p.kv_bound + a.block_size - 1) / a.block_size);
        a.kv_len = int64_t(a.n_tiles) * a.block_size;
        a.q_start = a.kv_len - 1;
        a.kv_len_dev = nullptr;
        a.n_tiles_dev = m_step.as<int32_t>() + kStepOwnTiles;
        a.q_pos_dev = m_step.as<int32_t>() + kStepPosOrig;
      } else {
        a.n_tiles = int((a.kv_len + a.block_size - 1) / a.block_size);
      }
    }
  }
  return a;
}

}  // namespace sinkscope::cuda_detail
