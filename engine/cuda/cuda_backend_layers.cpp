// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's per-layer device work of one pass, mirroring engine/backend/cpu_backend.cpp:
//   RMSNorm (fp32 -> bf16) -> fused QKV GEMM (fp32 out) [-> bias + per-head Q/K RMSNorm
//   (qk_norm)] -> bias + RoPE + paged KV append
//   -> attention (kernels::launch_attention) -> O GEMM with the residual add fused (beta = 1)
//   -> RMSNorm -> fused gate|up GEMM -> SwiGLU -> down GEMM with the residual add fused;
// then the final RMSNorm and the LM head (fp32 logits). Decode steps (one token) run the fused
// batch-1 kernels of kernels/decode_fused.h instead (4 per layer + the attention) unless
// SINKSCOPE_FUSED_DECODE=0, the shape is unsupported or the projections are kept quantized
// (fused_decode() says why); with quantized projections a decode step folds the RMSNorms and the
// SwiGLU into the GEMVs instead (fused_norm_proj, cuda_backend_weights.cpp). Projections go through linear_proj (cuda_backend_weights.cpp): bf16
// cuBLAS, or for weights in their file layout the quantized GEMV (one token) or dequantize +
// cuBLAS (several).
#include <cmath>
#include <optional>

#include "engine/cuda/cuda_backend_impl.h"
#include "kernels/decode_fused.h"
#include "kernels/moe.h"
#include "kernels/ops.h"

namespace sinkscope::cuda_detail {

void CudaBackendImpl::enqueue_layers(cudaStream_t s, Blas& blas, const Pass& p) {
  const ModelConfig& c = m_model->config();
  const int D = c.n_embd, Q = c.q_dim(), F = c.n_ff;
  float* x = m_x.as<float>();
  uint16_t* xn = m_xn.as<uint16_t>();
  const int32_t* tokens = p.kv_bound > 0 ? m_step.as<int32_t>() + kStepToken : m_tokens.as<int32_t>();
  // Gemma scales the embeddings by sqrt(D), rounded to float32 as the CPU and HF do.
  const float embd_scale = c.gemma ? float(std::sqrt(double(D))) : 1.0f;
  SS_LAUNCH(kernels::launch_embed_gather(m_weights->embd, tokens, x, p.n, D, s, embd_scale));
  // A capture's prefill that ends after its layer (QkvCaptureRequest::stop_after_layer).
  const int n_layers = m_capture.layer >= 0 && m_cap.stop_after_layer && !p.decode &&
                               !p.capturing && p.kv_bound == 0
                           ? m_capture.layer + 1
                           : c.n_layer;
  for (int l = 0; l < n_layers; ++l) {
    if (!p.capturing) check_cancel();
    // Layer ranges for the timeline (CPU span + NVTX); not while capturing a graph, whose
    // replays would not re-emit them.
    std::optional<prof::ScopedSpan> span_layer;
    if (!p.capturing) span_layer.emplace(m_spans, "layer", l);
    // While capturing: the layer's graph nodes, so replayed kernels find their layer.
    prof::GraphRegionScope region_layer(p.capturing ? m_capture_layout : nullptr, "layer", l);
    const LayerDev& L = m_weights->layers[size_t(l)];
    // Decode steps (one token): 4 fused kernels + the attention per layer (kernels/decode_fused.h).
    // Not with re-rotated queries: they are made from the unfused path's fp32 q|k|v rows.
    const bool fused = m_fused && p.kv_bound > 0 && p.n == 1 && !p.sinkq;
    if (!fused && !(p.n == 1 && fused_norm_proj(s, x, L.attn_norm, L.qkv, m_qkv.as<float>()))) {
      SS_LAUNCH(kernels::launch_rms_norm(x, L.attn_norm, xn, p.n, D, c.rms_eps, s));
      linear_proj(s, blas, xn, L.qkv, m_qkv.as<float>(), p.n);
    }

    const float* qkv_bias = L.b_qkv;
    if (L.q_norm) {  // qwen3 / gemma3: bias, then each Q and K head RMS-normalised, in place
      kernels::QkHeadNormParams hn;
      hn.qkv = m_qkv.as<float>();
      hn.bias = L.b_qkv;
      hn.q_norm = L.q_norm;
      hn.k_norm = L.k_norm;
      hn.n_tokens = p.n;
      hn.n_head = c.n_head;
      hn.n_head_kv = c.n_head_kv;
      hn.head_dim = c.head_dim;
      hn.eps = c.rms_eps;
      SS_LAUNCH(kernels::launch_qk_head_norm(hn, s));
      qkv_bias = nullptr;  // added above
    }
    kernels::QkvRopeParams r;
    r.qkv = m_qkv.as<float>();
    r.bias = qkv_bias;
    // Local layers of a model with two RoPE bases (gemma3) rotate with their own tables.
    const bool local_rope = m_rope_cos_l && c.layer_local(l);
    r.rope_cos = (local_rope ? m_rope_cos_l : m_rope_cos).as<float>();
    r.rope_sin = (local_rope ? m_rope_sin_l : m_rope_sin).as<float>();
    r.q_out = m_q.as<uint16_t>();
    r.k_pages = k_layer(l);
    r.v_pages = v_layer(l);
    r.page_table = m_page_table.as<int32_t>();
    r.n_tokens = p.n;
    r.pos0 = int(m_plan->ring_pos(p.pos0));  // windowed: the append ring (kv_page_plan.h)
    if (p.kv_bound > 0) r.pos0_dev = m_step.as<int32_t>() + kStepPos;
    r.n_head = c.n_head;
    r.n_head_kv = c.n_head_kv;
    r.head_dim = c.head_dim;
    r.rope_dim = c.rope_dim;
    r.neox = c.rope_neox;
    r.block_size = m_attn.block_size;
    if (m_kv_bits) r.kv_f32 = m_kv32.as<float>();  // quantized below
    if (fused) {
      kernels::FusedQkvParams f;
      f.x = x;
      f.norm_w = L.attn_norm;
      f.eps = c.rms_eps;
      f.w_qkv = L.qkv.w16;
      f.n_embd = D;
      f.rope = r;
      SS_LAUNCH(kernels::launch_fused_norm_qkv_rope(f, s));
    } else {
      SS_LAUNCH(kernels::launch_qkv_rope_append(r, s));
    }
    if (m_kv_bits) {  // the fp32 K|V rows -> codes + scales (protected rows: bf16 pages)
      kernels::KvQuantAppendParams qa;
      qa.kv_f32 = m_kv32.as<float>();
      qa.k_codes = kc_layer(l);
      qa.v_codes = vc_layer(l);
      qa.k_scales = ks_layer(l);
      qa.v_scales = vs_layer(l);
      qa.prot_k = k_layer(l);
      qa.prot_v = v_layer(l);
      qa.page_table = m_page_table.as<int32_t>();
      qa.n_tokens = p.n;
      qa.pos0 = r.pos0;
      qa.pos0_dev = r.pos0_dev;
      qa.orig_pos0 = p.pos0;
      if (p.kv_bound > 0) qa.orig_pos0_dev = m_step.as<int32_t>() + kStepPosOrig;
      const KvQuantSettings& q = m_cache_settings.quantization;
      qa.prot_sinks = q.protect_sink_positions ? int(m_cache_settings.sink_keep_count) : 0;
      qa.prot_extra = m_prot_extra.as<int32_t>();
      qa.n_prot_extra = m_n_prot_extra;
      qa.n_head_kv = c.n_head_kv;
      qa.head_dim = c.head_dim;
      qa.block_size = m_attn.block_size;
      qa.bits = m_kv_bits;
      SS_LAUNCH(kernels::launch_kv_quant_append(qa, s));
    }
    if (p.sinkq) {
      kernels::RopeQueriesParams rq;
      rq.qkv = m_qkv.as<float>();
      rq.bias = qkv_bias;
      rq.rope_cos = (local_rope ? m_rope_cache_cos_l : m_rope_cache_cos).as<float>();
      rq.rope_sin = (local_rope ? m_rope_cache_sin_l : m_rope_cache_sin).as<float>();
      rq.q_out = m_q_sink.as<uint16_t>();
      rq.n_tokens = p.n;
      rq.pos0 = p.pos0;
      if (p.kv_bound > 0) rq.pos0_dev = m_step.as<int32_t>() + kStepPosOrig;
      rq.sinks = m_plan->sinks();
      rq.window = m_plan->window();
      rq.n_head = c.n_head;
      rq.n_head_kv = c.n_head_kv;
      rq.head_dim = c.head_dim;
      rq.rope_dim = c.rope_dim;
      rq.neox = c.rope_neox;
      SS_LAUNCH(kernels::launch_rope_queries_at_cache_index(rq, s));
    }

    const kernels::AttentionParams a = attention_params(l, p);
    if (kernels::attention_workspace_bytes(a) > a.workspace_bytes)
      throw BackendError("CUDA backend: attention decode workspace too small (internal error)");
    SS_LAUNCH(kernels::launch_attention(a, s));
    if (l == m_capture.layer && !p.decode && !p.capturing && p.kv_bound == 0) {
      // Debug capture: this pass's post-RoPE queries (pageable copy: synchronous); of one
      // head, a strided copy of its d columns.
      const int hd = c.head_dim, qh = m_capture.head;
      const size_t row = qh >= 0 ? size_t(hd) : size_t(Q);
      const size_t off = size_t(p.pos0 - m_capture.q_start) * row;
      if (m_capture.q.size() >= off + size_t(p.n) * row) {
        if (qh >= 0)
          SS_CUDA(cudaMemcpy2DAsync(m_capture.q.data() + off, row * 2,
                                    m_q.as<uint16_t>() + size_t(qh) * hd, size_t(Q) * 2, row * 2,
                                    size_t(p.n), cudaMemcpyDeviceToHost, s));
        else
          SS_CUDA(cudaMemcpyAsync(m_capture.q.data() + off, m_q.get(), size_t(p.n) * Q * 2,
                                  cudaMemcpyDeviceToHost, s));
      }
    }

    if (fused) {
      SS_LAUNCH(kernels::launch_fused_gemv_residual(m_att.as<uint16_t>(), L.o.w16, x, D, Q, s));
      kernels::FusedGateUpParams g;
      g.x = x;
      g.norm_w = L.ffn_norm;
      g.eps = c.rms_eps;
      g.w_gu = L.gu.w16;
      g.act = m_act.as<uint16_t>();
      g.n_embd = D;
      g.n_ff = F;
      SS_LAUNCH(kernels::launch_fused_norm_gate_up_swiglu(g, s));
      SS_LAUNCH(kernels::launch_fused_gemv_residual(m_act.as<uint16_t>(), L.down.w16, x, D, F, s));
      continue;
    }
    if (L.attn_post_norm) {  // Gemma: x += RMSNorm(o-proj)
      linear_proj(s, blas, m_att.as<uint16_t>(), L.o, m_tmp.as<float>(), p.n);
      SS_LAUNCH(kernels::launch_rms_norm_add(m_tmp.as<float>(), L.attn_post_norm, x, p.n, D,
                                             c.rms_eps, s));
    } else {
      linear_proj(s, blas, m_att.as<uint16_t>(), L.o, x, p.n, 1.0f);  // x += o-proj
      if (L.b_o) SS_LAUNCH(kernels::launch_add_bias_rows(x, L.b_o, p.n, D, s));  // gpt-oss
    }
    if (L.router) {  // gpt-oss: x += MoE(RMSNorm(x)), the norm inside (cuda_backend_moe.cpp)
      enqueue_moe(s, blas, L, p);
      continue;
    }
    // One token, native gate|up: RMSNorm, GEMV and SwiGLU in one kernel where it applies, or
    // the norm folded into the GEMV; otherwise three kernels.
    if (!(p.n == 1 && !c.gemma &&
          fused_norm_proj(s, x, L.ffn_norm, L.gu, nullptr, m_act.as<uint16_t>()))) {
      if (!(p.n == 1 && fused_norm_proj(s, x, L.ffn_norm, L.gu, m_gu.as<float>()))) {
        SS_LAUNCH(kernels::launch_rms_norm(x, L.ffn_norm, xn, p.n, D, c.rms_eps, s));
        linear_proj(s, blas, xn, L.gu, m_gu.as<float>(), p.n);
      }
      if (c.gemma)
        SS_LAUNCH(kernels::launch_geglu(m_gu.as<float>(), m_act.as<uint16_t>(), p.n, F, s));
      else
        SS_LAUNCH(kernels::launch_swiglu(m_gu.as<float>(), m_act.as<uint16_t>(), p.n, F, s));
    }
    if (L.ffn_post_norm) {  // Gemma: x += RMSNorm(down-proj)
      linear_proj(s, blas, m_act.as<uint16_t>(), L.down, m_tmp.as<float>(), p.n);
      SS_LAUNCH(kernels::launch_rms_norm_add(m_tmp.as<float>(), L.ffn_post_norm, x, p.n, D,
                                             c.rms_eps, s));
    } else {
      linear_proj(s, blas, m_act.as<uint16_t>(), L.down, x, p.n, 1.0f);  // x += down-proj
    }
  }
}

void CudaBackendImpl::enqueue_lm_head(cudaStream_t s, Blas& blas, int row0, int rows,
                                      const float* hidden, float* out) {
  const ModelConfig& c = m_model->config();
  const float* x = (hidden ? hidden : m_x.as<float>()) + size_t(row0) * c.n_embd;
  float* logits = out ? out : m_logits.as<float>();
  // One row of a native head: the norm folded into its GEMV where that applies.
  if (!(rows == 1 && !m_weights->lm_head &&
        fused_norm_proj(s, x, m_weights->out_norm, m_weights->lm, logits))) {
    SS_LAUNCH(kernels::launch_rms_norm(x, m_weights->out_norm, m_xn.as<uint16_t>(), rows, c.n_embd,
                                       c.rms_eps, s));
    const uint16_t* xn = m_xn.as<uint16_t>();
    if (m_weights->lm_head)
      blas.linear(xn, m_weights->lm_head, logits, rows, c.n_vocab, c.n_embd);
    else
      linear_proj(s, blas, xn, m_weights->lm, logits, rows);  // in its file blocks
  }
  if (c.final_softcap > 0)  // Gemma: logits tanh(z / cap) * cap
    SS_LAUNCH(kernels::launch_softcap(logits, int64_t(rows) * c.n_vocab, c.final_softcap, s));
}

}  // namespace sinkscope::cuda_detail
