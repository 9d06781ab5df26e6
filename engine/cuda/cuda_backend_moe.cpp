// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's gpt-oss parts beyond the dense layout: the output-projection bias, the
// learned sink logits (read by the attention kernels, AttentionParams::sinks) and the
// mixture-of-experts FFN (kernels/moe.h). The expert matrices are converted to bf16 at load
// (MXFP4 values are exact in bf16, so the device multiplies the CPU's weights), or with
// GpuWeights::kNative kept in their MXFP4 blocks (a quarter of the memory; the GEMVs decode
// them, the grouped GEMMs dequantize one expert at a time); the router stays fp32 so the device
// picks the experts the CPU picks.
#include <string>

#include "engine/cuda/cuda_backend_impl.h"
#include "engine/format/ggml_types.h"
#include "kernels/moe.h"

namespace sinkscope::cuda_detail {

namespace {

// Per layer, in elements: bf16 expert matrices; fp32 router, router bias, expert biases, the
// output-projection bias and the sink logits.
uint64_t layer_g16(const ModelConfig& c, bool native) {
  const uint64_t D = uint64_t(c.n_embd), F = uint64_t(c.n_ff), E = uint64_t(c.n_expert);
  return E > 0 && !native ? a128(E * 2 * F * D) + a128(E * D * F) : 0;
}
uint64_t a256b(uint64_t b) { return (b + 255) / 256 * 256; }
// MXFP4 experts per layer, bytes: [E][2F] rows of D / 32 blocks, then [E][D] rows of F / 32.
uint64_t layer_g8(const ModelConfig& c, bool native) {
  const uint64_t D = uint64_t(c.n_embd), F = uint64_t(c.n_ff), E = uint64_t(c.n_expert);
  if (E == 0 || !native) return 0;
  return a256b(E * 2 * F * (D / 32) * 17) + a256b(E * D * (F / 32) * 17);
}
uint64_t layer_g32(const ModelConfig& c) {
  const uint64_t D = uint64_t(c.n_embd), F = uint64_t(c.n_ff), E = uint64_t(c.n_expert);
  uint64_t n = 0;
  if (E > 0) n += a128(E * D) + a128(E) + a128(E * 2 * F) + a128(E * D);
  if (c.o_bias) n += a128(D);
  if (c.attn_sinks) n += a128(uint64_t(c.n_head));
  return n;
}
}  // namespace

bool moe_native(const Model& m, GpuWeights mode) {
  const ModelConfig& c = m.config();
  if (mode != GpuWeights::kNative || c.n_expert <= 0 || c.n_embd % 32 != 0 || c.n_ff % 32 != 0)
    return false;
  const auto ok = [](const QuantMatrix& q, int64_t rows, int64_t cols) {
    return q.data && q.type == GgmlType::kMXFP4 && q.rows == rows && q.cols == cols &&
           q.row_bytes == uint64_t(cols / 32 * 17);
  };
  for (const LayerWeights& L : m.weights().layers) {
    if (L.exp_gate.size() != size_t(c.n_expert) || L.exp_up.size() != L.exp_gate.size() ||
        L.exp_down.size() != L.exp_gate.size())
      return false;
    for (size_t e = 0; e < L.exp_gate.size(); ++e)
      if (!ok(L.exp_gate[e], c.n_ff, c.n_embd) || !ok(L.exp_up[e], c.n_ff, c.n_embd) ||
          !ok(L.exp_down[e], c.n_embd, c.n_ff))
        return false;
  }
  return true;
}

uint64_t gpt_oss_weight_bytes(const Model& m, GpuWeights mode) {
  const ModelConfig& c = m.config();
  const bool q = moe_native(m, mode);
  return uint64_t(c.n_layer) * (layer_g16(c, q) * 2 + layer_g32(c) * 4 + layer_g8(c, q));
}

namespace {
uint64_t a256(uint64_t b) { return (b + 255) / 256 * 256; }
// Byte offsets of the grouped scratch's parts for P (token, expert) pairs.
struct GroupedLayout {
  uint64_t xg, gu, act, y, maps, total;
};
GroupedLayout grouped_layout(const ModelConfig& c, uint64_t P) {
  const uint64_t D = uint64_t(c.n_embd), F = uint64_t(c.n_ff);
  GroupedLayout g;
  g.xg = 0;                            // [P][D] bf16
  g.gu = a256(g.xg + P * D * 2);       // [P][2F] fp32
  g.act = a256(g.gu + P * 2 * F * 4);  // [P][F] bf16
  g.y = a256(g.act + P * F * 2);       // [P][D] fp32
  g.maps = a256(g.y + P * D * 4);      // [3][P] int32: token, expert, slot
  g.total = a256(g.maps + 3 * P * 4);
  return g;
}
}  // namespace

uint64_t moe_grouped_bytes(const ModelConfig& c, int batch) {
  if (c.n_expert <= 0) return 0;
  return grouped_layout(c, uint64_t(batch) * uint64_t(c.n_expert_used)).total;
}

uint64_t moe_scratch_bytes(const ModelConfig& c, int batch) {
  if (c.n_expert <= 0) return 0;
  const uint64_t B = uint64_t(batch), K = uint64_t(c.n_expert_used);
  return B * uint64_t(c.n_embd) * 4 + 2 * B * K * 4 + B * K * uint64_t(c.n_ff) * 4 +
         (batch >= kMoeGroupedMin ? moe_grouped_bytes(c, batch) + B * K * 4 : 0);
}

void CudaBackendImpl::upload_gpt_oss(DeviceWeights& dw) {
  const ModelConfig& c = m_model->config();
  const ModelWeights& w = m_model->weights();
  const bool native = moe_native(*m_model, m_gpu_weights);
  const size_t g16 = size_t(layer_g16(c, native)), g32 = size_t(layer_g32(c)),
               g8 = size_t(layer_g8(c, native));
  if (g16 + g32 + g8 == 0) return;
  const size_t D = size_t(c.n_embd), F = size_t(c.n_ff), E = size_t(c.n_expert);
  if (g16) dw.g16 = DeviceBuffer(g16 * 2 * size_t(c.n_layer), "gpt-oss expert weights (bf16)");
  dw.g32 = DeviceBuffer(g32 * 4 * size_t(c.n_layer), "gpt-oss router, biases and sinks");
  if (g8) dw.g8 = DeviceBuffer(g8 * size_t(c.n_layer), "gpt-oss MXFP4 expert weights");
  uint8_t* p8 = dw.g8.as<uint8_t>();
  DeviceBuffer staging(kStagingFloats * 4, "weight upload staging");
  uint16_t* p16 = dw.g16.as<uint16_t>();
  float* p32 = dw.g32.as<float>();
  auto take16 = [&](size_t n) { return take_a128(p16, n); };
  auto take32 = [&](size_t n) { return take_a128(p32, n); };
  std::vector<std::vector<float>> keep;  // host copies alive until the copies are done
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    LayerDev& d = dw.layers[size_t(l)];
    if (c.o_bias) d.b_o = upload_f32(take32(D), L.bo, D, "attn_output.bias");
    if (c.attn_sinks) d.sinks = upload_f32(take32(size_t(c.n_head)), L.sinks, size_t(c.n_head), "attn_sinks");
    if (E == 0) continue;
    if (L.exp_gate.size() != E || L.exp_up.size() != E || L.exp_down.size() != E)
      throw BackendError("CUDA backend: layer " + std::to_string(l) + " has " +
                         std::to_string(L.exp_gate.size()) + " experts, expected " +
                         std::to_string(E));
    keep.push_back(dequantize(L.router));
    d.router = upload_f32(take32(E * D), keep.back(), E * D, "ffn_gate_inp");
    d.router_b = upload_f32(take32(E), L.router_bias, E, "ffn_gate_inp.bias");
    float* gub = take32(E * 2 * F);
    for (size_t e = 0; e < E; ++e) {  // per expert: gate biases, then up biases
      if (L.exp_gate_b.size() != E * F || L.exp_up_b.size() != E * F)
        throw BackendError("CUDA backend: expert gate/up biases of layer " + std::to_string(l) +
                           " have the wrong size");
      SS_CUDA(cudaMemcpyAsync(gub + e * 2 * F, L.exp_gate_b.data() + e * F, F * 4,
                              cudaMemcpyHostToDevice, m_stream.s));
      SS_CUDA(cudaMemcpyAsync(gub + e * 2 * F + F, L.exp_up_b.data() + e * F, F * 4,
                              cudaMemcpyHostToDevice, m_stream.s));
    }
    d.exp_gu_b = gub;
    d.exp_down_b = upload_f32(take32(E * D), L.exp_down_b, E * D, "ffn_down_exps.bias");
    if (native) {  // the blocks as they are (pageable: staged before each call returns)
      const uint64_t rb_d = D / 32 * 17, rb_f = F / 32 * 17;
      uint8_t* gu = p8;
      uint8_t* down = p8 + a256b(E * 2 * F * rb_d);
      for (size_t e = 0; e < E; ++e) {
        SS_CUDA(cudaMemcpyAsync(gu + e * 2 * F * rb_d, L.exp_gate[e].data, F * rb_d,
                                cudaMemcpyHostToDevice, m_stream.s));
        SS_CUDA(cudaMemcpyAsync(gu + (e * 2 + 1) * F * rb_d, L.exp_up[e].data, F * rb_d,
                                cudaMemcpyHostToDevice, m_stream.s));
        SS_CUDA(cudaMemcpyAsync(down + e * D * rb_f, L.exp_down[e].data, D * rb_f,
                                cudaMemcpyHostToDevice, m_stream.s));
      }
      d.exp_gu_q = gu;
      d.exp_down_q = down;
      p8 += g8;
      continue;
    }
    uint16_t* gu = take16(E * 2 * F * D);
    uint16_t* down = take16(E * D * F);
    for (size_t e = 0; e < E; ++e) {
      upload_bf16(gu + e * 2 * F * D, dequantize(L.exp_gate[e]), F * D, "ffn_gate_exps", staging.as<float>());
      upload_bf16(gu + e * 2 * F * D + F * D, dequantize(L.exp_up[e]), F * D, "ffn_up_exps",
                  staging.as<float>());
      upload_bf16(down + e * D * F, dequantize(L.exp_down[e]), D * F, "ffn_down_exps",
                  staging.as<float>());
    }
    d.exp_gu = gu;
    d.exp_down = down;
  }
  SS_CUDA(cudaStreamSynchronize(m_stream.s));  // staging and the host copies die here
}

void CudaBackendImpl::enqueue_moe(cudaStream_t s, Blas& blas, const LayerDev& L, const Pass& pass) {
  const ModelConfig& c = m_model->config();
  const int n = pass.n;
  kernels::MoeParams p;
  p.x = m_x.as<float>();
  p.x_out = m_x.as<float>();
  p.norm_w = L.ffn_norm;
  p.eps = c.rms_eps;
  p.router = L.router;
  p.router_b = L.router_b;
  p.w_gu = L.exp_gu;
  p.b_gu = L.exp_gu_b;
  p.w_down = L.exp_down;
  p.b_down = L.exp_down_b;
  p.q_gu = L.exp_gu_q;
  p.q_down = L.exp_down_q;
  p.xn = m_moe_xn.as<float>();
  p.sel = m_moe_sel.as<int32_t>();
  p.wts = m_moe_wts.as<float>();
  p.act = m_moe_act.as<float>();
  p.n = n;
  p.D = c.n_embd;
  p.F = c.n_ff;
  p.E = c.n_expert;
  p.K = c.n_expert_used;
  p.alpha = c.swiglu_alpha;
  p.limit = c.swiglu_limit;
  SS_LAUNCH(kernels::launch_moe_route(p, s));
  // Decode steps and captures (no host synchronisation there), short passes: the GEMV experts.
  if (!m_moe_grp || pass.capturing || pass.kv_bound > 0 || n < kMoeGroupedMin) {
    SS_LAUNCH(kernels::launch_moe_gemv(p, s));
    return;
  }
  // Grouped: the chosen experts to the host (their row counts size the GEMMs), the pairs sorted
  // by expert (token order within one), then per expert one gate|up and one down GEMM.
  const int K = p.K, E = p.E, D = p.D, F = p.F, P = n * K;
  SS_CUDA(cudaMemcpyAsync(m_h_moe_sel.as<int32_t>(), m_moe_sel.get(), size_t(P) * 4,
                          cudaMemcpyDeviceToHost, s));
  SS_CUDA(cudaStreamSynchronize(s));
  const int32_t* sel = m_h_moe_sel.as<int32_t>();
  std::vector<int> start(size_t(E) + 1, 0);
  for (int i = 0; i < P; ++i) {
    if (sel[i] < 0 || sel[i] >= E)
      throw BackendError("CUDA backend: MoE routing chose expert " + std::to_string(sel[i]) +
                         " of " + std::to_string(E) + " (internal error)");
    ++start[size_t(sel[i]) + 1];
  }
  for (int e = 0; e < E; ++e) start[size_t(e) + 1] += start[size_t(e)];
  m_moe_maps.resize(size_t(3) * P);
  int32_t* tok = m_moe_maps.data();
  int32_t* exp = tok + P;
  int32_t* slot = exp + P;
  std::vector<int> fill(start.begin(), start.end() - 1);
  for (int i = 0; i < P; ++i) {
    const int j = fill[size_t(sel[i])]++;
    tok[j] = i / K;
    exp[j] = sel[i];
    slot[i] = j;
  }
  const GroupedLayout g = grouped_layout(c, uint64_t(P));
  uint8_t* base = m_moe_grp.as<uint8_t>();
  uint16_t* xg = reinterpret_cast<uint16_t*>(base + g.xg);
  float* gu = reinterpret_cast<float*>(base + g.gu);
  uint16_t* act = reinterpret_cast<uint16_t*>(base + g.act);
  float* y = reinterpret_cast<float*>(base + g.y);
  int32_t* maps = reinterpret_cast<int32_t*>(base + g.maps);
  // Pageable source: staged before the call returns, so m_moe_maps may be refilled next layer.
  SS_CUDA(cudaMemcpyAsync(maps, m_moe_maps.data(), size_t(3) * P * 4, cudaMemcpyHostToDevice, s));
  SS_LAUNCH(kernels::launch_moe_gather(p.xn, maps, P, D, xg, s));
  // MXFP4 experts: each one's matrix dequantized into m_moe_wdq right before its GEMM (stream
  // order makes the reuse safe).
  const uint64_t rb_d = uint64_t(D) / 32 * kernels::kMxfp4BlockBytes,
                 rb_f = uint64_t(F) / 32 * kernels::kMxfp4BlockBytes;
  uint16_t* wdq = m_moe_wdq.as<uint16_t>();
  if (L.exp_gu_q && !wdq) throw BackendError("CUDA backend: no MXFP4 dequant scratch (internal error)");
  for (int e = 0; e < E; ++e) {
    const int r0 = start[size_t(e)], rows = start[size_t(e) + 1] - r0;
    if (rows == 0) continue;
    const uint16_t* w = L.exp_gu + size_t(e) * 2 * F * D;
    if (L.exp_gu_q) {
      SS_LAUNCH(kernels::launch_mxfp4_to_bf16(L.exp_gu_q + size_t(e) * 2 * F * rb_d, 2 * int64_t(F),
                                              D, wdq, s));
      w = wdq;
    }
    blas.linear(xg + size_t(r0) * D, w, gu + size_t(r0) * 2 * F, rows, 2 * F, D);
  }
  SS_LAUNCH(kernels::launch_moe_act(gu, maps + P, L.exp_gu_b, P, F, p.alpha, p.limit, act, s));
  for (int e = 0; e < E; ++e) {
    const int r0 = start[size_t(e)], rows = start[size_t(e) + 1] - r0;
    if (rows == 0) continue;
    const uint16_t* w = L.exp_down + size_t(e) * D * F;
    if (L.exp_down_q) {
      SS_LAUNCH(kernels::launch_mxfp4_to_bf16(L.exp_down_q + size_t(e) * D * rb_f, D, F, wdq, s));
      w = wdq;
    }
    blas.linear(act + size_t(r0) * F, w, y + size_t(r0) * D, rows, D, F);
  }
  SS_LAUNCH(kernels::launch_moe_combine(y, maps + 2 * P, p.sel, p.wts, p.b_down, n, K, D, p.x,
                                        p.x_out, s));
}

}  // namespace sinkscope::cuda_detail
