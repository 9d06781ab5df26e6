// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's weights: the fp32 (dequantized) host tensors converted to bf16 on the
// device in one pooled allocation per kind (bf16 matrices, fp32 norms and biases), and the
// process-wide registry that lets every backend of a model on a device share one upload.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "engine/cuda/cuda_backend_impl.h"
#include "kernels/ops.h"

namespace sinkscope::cuda_detail {

std::shared_ptr<DeviceWeights> shared_weights(const Model* m, int device,
                                              std::shared_ptr<DeviceWeights> add) {
  static std::mutex mu;
  static std::map<std::pair<const Model*, int>, std::weak_ptr<DeviceWeights>> live;
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = live.begin(); it != live.end();) it = it->second.expired() ? live.erase(it) : std::next(it);
  auto& slot = live[{m, device}];
  if (add) slot = add;
  return slot.lock();
}

void CudaBackendImpl::upload_bf16(uint16_t* dst, const std::vector<float>& src, size_t expect,
                                  const char* what, float* staging) {
  if (src.size() != expect)
    throw BackendError(std::string("CUDA backend: weight ") + what + " has " +
                       std::to_string(src.size()) + " values, expected " + std::to_string(expect));
  for (size_t off = 0; off < src.size(); off += kStagingFloats) {
    const size_t n = std::min(kStagingFloats, src.size() - off);
    // Pageable source: the runtime stages it before returning; stream order protects staging.
    SS_CUDA(cudaMemcpyAsync(staging, src.data() + off, n * 4, cudaMemcpyHostToDevice, m_stream.s));
    SS_LAUNCH(kernels::launch_f32_to_bf16(staging, dst + off, int64_t(n), m_stream.s));
  }
}

const float* CudaBackendImpl::upload_f32(float* dst, const std::vector<float>& src, size_t expect,
                                         const char* what) {
  if (src.size() != expect)
    throw BackendError(std::string("CUDA backend: weight ") + what + " has " +
                       std::to_string(src.size()) + " values, expected " + std::to_string(expect));
  SS_CUDA(cudaMemcpyAsync(dst, src.data(), src.size() * 4, cudaMemcpyHostToDevice, m_stream.s));
  return dst;
}

void CudaBackendImpl::upload_weights(DeviceWeights& dw) {
  const ModelConfig& c = m_model->config();
  const ModelWeights& w = m_model->weights();
  const size_t D = size_t(c.n_embd), Q = size_t(c.q_dim()), KV = size_t(c.kv_dim()),
               F = size_t(c.n_ff), V = size_t(c.n_vocab), W = Q + 2 * KV;
  DeviceBuffer staging(kStagingFloats * 4, "weight upload staging");
  float* stage = staging.as<float>();
  uint16_t* p16 = dw.w16.as<uint16_t>();
  float* p32 = dw.w32.as<float>();
  const auto a128 = [](size_t e) { return (e + 127) / 128 * 128; };
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

  uint16_t* embd = take16(V * D);
  upload_bf16(embd, dequantize(w.tok_embd), V * D, "token_embd", stage);
  dw.embd = embd;
  if (w.output.empty()) {
    dw.lm_head = embd;
  } else {
    uint16_t* head = take16(V * D);
    upload_bf16(head, dequantize(w.output), V * D, "output", stage);
    dw.lm_head = head;
  }
  dw.out_norm = upload_f32(take32(D), w.output_norm, D, "output_norm");

  dw.layers.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    LayerDev& d = dw.layers[size_t(l)];
    uint16_t* qkv = take16(W * D);  // rows: wq | wk | wv
    upload_bf16(qkv, dequantize(L.wq), Q * D, "attn_q", stage);
    upload_bf16(qkv + Q * D, dequantize(L.wk), KV * D, "attn_k", stage);
    upload_bf16(qkv + (Q + KV) * D, dequantize(L.wv), KV * D, "attn_v", stage);
    d.w_qkv = qkv;
    uint16_t* o = take16(D * Q);
    upload_bf16(o, dequantize(L.wo), D * Q, "attn_output", stage);
    d.w_o = o;
    uint16_t* gu = take16(2 * F * D);  // rows: w_gate | w_up
    upload_bf16(gu, dequantize(L.w_gate), F * D, "ffn_gate", stage);
    upload_bf16(gu + F * D, dequantize(L.w_up), F * D, "ffn_up", stage);
    d.w_gu = gu;
    uint16_t* down = take16(D * F);
    upload_bf16(down, dequantize(L.w_down), D * F, "ffn_down", stage);
    d.w_down = down;
    d.attn_norm = upload_f32(take32(D), L.attn_norm, D, "attn_norm");
    d.ffn_norm = upload_f32(take32(D), L.ffn_norm, D, "ffn_norm");
    if (c.qkv_bias) {
      float* b = take32(W);
      upload_f32(b, L.bq, Q, "attn_q.bias");
      upload_f32(b + Q, L.bk, KV, "attn_k.bias");
      upload_f32(b + Q + KV, L.bv, KV, "attn_v.bias");
      d.b_qkv = b;
    }
  }
  // The host vectors are the model's (alive), but staging dies here: wait for the copies.
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
}

}  // namespace sinkscope::cuda_detail
