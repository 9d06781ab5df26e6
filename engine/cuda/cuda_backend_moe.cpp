// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's gpt-oss parts beyond the dense layout: the output-projection bias, the
// learned sink logits (read by the attention kernels, AttentionParams::sinks) and the
// mixture-of-experts FFN (kernels/moe.h). The expert matrices are converted to bf16 at load
// (MXFP4 values are exact in bf16, so the device multiplies the CPU's weights); the router stays
// fp32 so the device picks the experts the CPU picks.
#include <string>

#include "engine/cuda/cuda_backend_impl.h"
#include "kernels/moe.h"

namespace sinkscope::cuda_detail {

namespace {
uint64_t a128(uint64_t e) { return (e + 127) / 128 * 128; }

// Per layer, in elements: bf16 expert matrices; fp32 router, router bias, expert biases, the
// output-projection bias and the sink logits.
uint64_t layer_g16(const ModelConfig& c) {
  const uint64_t D = uint64_t(c.n_embd), F = uint64_t(c.n_ff), E = uint64_t(c.n_expert);
  return E > 0 ? a128(E * 2 * F * D) + a128(E * D * F) : 0;
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

uint64_t gpt_oss_weight_bytes(const ModelConfig& c) {
  return uint64_t(c.n_layer) * (layer_g16(c) * 2 + layer_g32(c) * 4);
}

uint64_t moe_scratch_bytes(const ModelConfig& c, int batch) {
  if (c.n_expert <= 0) return 0;
  const uint64_t B = uint64_t(batch), K = uint64_t(c.n_expert_used);
  return B * uint64_t(c.n_embd) * 4 + 2 * B * K * 4 + B * K * uint64_t(c.n_ff) * 4;
}

void CudaBackendImpl::upload_gpt_oss(DeviceWeights& dw) {
  const ModelConfig& c = m_model->config();
  const ModelWeights& w = m_model->weights();
  const size_t g16 = size_t(layer_g16(c)), g32 = size_t(layer_g32(c));
  if (g16 + g32 == 0) return;
  const size_t D = size_t(c.n_embd), F = size_t(c.n_ff), E = size_t(c.n_expert);
  if (g16) dw.g16 = DeviceBuffer(g16 * 2 * size_t(c.n_layer), "gpt-oss expert weights (bf16)");
  dw.g32 = DeviceBuffer(g32 * 4 * size_t(c.n_layer), "gpt-oss router, biases and sinks");
  DeviceBuffer staging(kStagingFloats * 4, "weight upload staging");
  uint16_t* p16 = dw.g16.as<uint16_t>();
  float* p32 = dw.g32.as<float>();
  auto take16 = [&](size_t n) {
    uint16_t* r = p16;
    p16 += a128(n);
    return r;
  };
  auto take32 = [&](size_t n) {
    float* r = p32;
    p32 += a128(n);
    return r;
  };
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

void CudaBackendImpl::enqueue_moe(cudaStream_t s, const LayerDev& L, int n) {
  const ModelConfig& c = m_model->config();
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
  SS_LAUNCH(kernels::launch_moe_ffn(p, s));
}

}  // namespace sinkscope::cuda_detail
