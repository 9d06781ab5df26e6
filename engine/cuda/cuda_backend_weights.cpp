// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's weights: projections in their ggml block layout (GpuWeights::kNative and a
// type with a device decode, kernels/qblock.h) copied as they are, every other matrix converted
// to bf16, in one pooled allocation per kind (quantized bytes, bf16 matrices, fp32 norms and
// biases); the process-wide registry that lets every backend of a model on a device share one
// upload; and the projection GEMM that picks the path per matrix.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "engine/cuda/cuda_backend_impl.h"
#include "kernels/ops.h"
#include "kernels/qblock.h"
#include "kernels/qgemv.h"

namespace sinkscope::cuda_detail {

namespace {

constexpr uint64_t kQuantAlign = 256;  // bytes; every quantized part starts on this boundary
uint64_t align_q(uint64_t b) { return (b + kQuantAlign - 1) / kQuantAlign * kQuantAlign; }

// A matrix the device can read in its file layout.
bool device_decodable(const QuantMatrix& q) {
  return q.data && kernels::qgemv_shape_error(int(q.type), q.rows, q.cols).empty() &&
         q.row_bytes == uint64_t(kernels::qweight_row_bytes(int(q.type), q.cols));
}

// The parts of projection k (0 qkv, 1 o, 2 gate|up, 3 down) of a layer.
std::vector<const QuantMatrix*> proj_parts(const LayerWeights& L, int k) {
  switch (k) {
    case 0: return {&L.wq, &L.wk, &L.wv};
    case 1: return {&L.wo};
    case 2: return {&L.w_gate, &L.w_up};
    default: return {&L.w_down};
  }
}

}  // namespace

bool lm_head_native_allowed() {
  const char* v = std::getenv("SINKSCOPE_GPU_LM_HEAD");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "native") == 0) return true;
  if (std::strcmp(v, "bf16") == 0) return false;
  throw BackendError(std::string("SINKSCOPE_GPU_LM_HEAD=") + v + ": expected native or bf16");
}

WeightPlan plan_weights(const Model& m, GpuWeights mode) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  const uint64_t D = uint64_t(c.n_embd), Q = uint64_t(c.q_dim()), KV = uint64_t(c.kv_dim()),
                 F = uint64_t(c.n_ff), V = uint64_t(c.n_vocab), W = Q + 2 * KV;
  const uint64_t elems[4] = {W * D, D * Q, 2 * F * D, D * F};
  WeightPlan p;
  p.lm_native = mode == GpuWeights::kNative && !w.output.empty() && device_decodable(w.output) &&
                lm_head_native_allowed();
  p.w16_elems = a128(V * D) + (w.output.empty() || p.lm_native ? 0 : a128(V * D));
  if (p.lm_native) {
    p.wq_bytes += align_q(uint64_t(w.output.rows) * uint64_t(w.output.row_bytes));
    p.scratch_elems = std::max(p.scratch_elems, std::min<uint64_t>(V, kLmSliceRows) * D);
  }
  p.native.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    for (int k = 0; k < 4; ++k) {
      if (k >= 2 && c.n_expert > 0) continue;  // gpt-oss: experts instead (cuda_backend_moe.cpp)
      bool native = mode == GpuWeights::kNative;
      uint64_t qb = 0;
      for (const QuantMatrix* q : proj_parts(L, k)) {
        native = native && device_decodable(*q);
        qb += align_q(uint64_t(q->rows) * uint64_t(q->row_bytes));
      }
      p.native[size_t(l)][size_t(k)] = native;
      if (native) {
        p.wq_bytes += qb;
        p.scratch_elems = std::max(p.scratch_elems, elems[k]);
      } else {
        p.w16_elems += a128(elems[k]);
      }
    }
  }
  return p;
}

std::shared_ptr<DeviceWeights> shared_weights(const Model* m, int device, GpuWeights mode,
                                              std::shared_ptr<DeviceWeights> add) {
  static std::mutex mu;
  static std::map<std::tuple<const Model*, int, GpuWeights>, std::weak_ptr<DeviceWeights>> live;
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = live.begin(); it != live.end();) it = it->second.expired() ? live.erase(it) : std::next(it);
  auto& slot = live[{m, device, mode}];
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

void CudaBackendImpl::upload_weights(DeviceWeights& dw, const WeightPlan& plan) {
  const ModelConfig& c = m_model->config();
  const ModelWeights& w = m_model->weights();
  const size_t D = size_t(c.n_embd), Q = size_t(c.q_dim()), KV = size_t(c.kv_dim()),
               F = size_t(c.n_ff), V = size_t(c.n_vocab), W = Q + 2 * KV;
  DeviceBuffer staging(kStagingFloats * 4, "weight upload staging");
  float* stage = staging.as<float>();
  uint16_t* p16 = dw.w16.as<uint16_t>();
  uint8_t* pq = dw.wq.as<uint8_t>();
  float* p32 = dw.w32.as<float>();
  auto take16 = [&](size_t n) { return take_a128(p16, n); };
  auto take32 = [&](size_t n) { return take_a128(p32, n); };
  // Copies the parts of a native projection as they are (the host data is the model's mapping,
  // alive while the model is; pageable, so the runtime stages it before returning).
  // A part with a repacked row layout (kernels::qweight_repacked_type; tuning qweight_repack)
  // goes through the staging buffer a slice of rows at a time and is repacked from there into
  // its place (stream order keeps the staging buffer's reuse safe).
  auto upload_native = [&](ProjDev& pd, std::initializer_list<const QuantMatrix*> parts, int out,
                           int in) {
    pd.out = out;
    pd.in = in;
    pd.n_parts = 0;
    for (const QuantMatrix* q : parts) {
      const uint64_t bytes = uint64_t(q->rows) * uint64_t(q->row_bytes);
      const int type = int(q->type);
      const int rtype = m_copt.tuning.qweight_repack ? kernels::qweight_repacked_type(type, in) : type;
      if (rtype == type) {
        SS_CUDA(cudaMemcpyAsync(pq, q->data, bytes, cudaMemcpyHostToDevice, m_stream.s));
      } else {
        const uint64_t slice = std::max<uint64_t>(1, staging.bytes() / q->row_bytes);
        for (uint64_t r = 0; r < uint64_t(q->rows); r += slice) {
          const uint64_t nr = std::min<uint64_t>(slice, uint64_t(q->rows) - r);
          const auto* src = static_cast<const uint8_t*>(q->data) + r * q->row_bytes;
          SS_CUDA(cudaMemcpyAsync(stage, src, nr * q->row_bytes, cudaMemcpyHostToDevice, m_stream.s));
          SS_LAUNCH(kernels::launch_qrepack(type, stage, int64_t(nr), in, pq + r * q->row_bytes,
                                            m_stream.s));
        }
      }
      // A part of the previous part's type that follows it without a gap (its bytes a multiple
      // of the alignment) joins it: one GEMV launch over both (each row's result is the same).
      QuantPart* prev = pd.n_parts > 0 ? &pd.parts[pd.n_parts - 1] : nullptr;
      if (m_copt.tuning.qweight_merge && prev && prev->type == rtype &&
          prev->data + uint64_t(prev->rows) * q->row_bytes == pq) {
        prev->rows += int(q->rows);
      } else {
        pd.parts[pd.n_parts++] = QuantPart{rtype, pq, int(q->rows)};
      }
      pq += align_q(bytes);
    }
  };
  auto set16 = [](ProjDev& pd, const uint16_t* p, int out, int in) {
    pd.w16 = p;
    pd.out = out;
    pd.in = in;
  };

  uint16_t* embd = take16(V * D);
  upload_bf16(embd, dequantize(w.tok_embd), V * D, "token_embd", stage);
  dw.embd = embd;
  if (w.output.empty()) {
    dw.lm_head = embd;
  } else if (plan.lm_native) {
    upload_native(dw.lm, {&w.output}, int(V), int(D));  // lm_head stays null
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
    const auto& native = plan.native[size_t(l)];
    if (native[0]) {
      upload_native(d.qkv, {&L.wq, &L.wk, &L.wv}, int(W), int(D));
    } else {
      uint16_t* qkv = take16(W * D);  // rows: wq | wk | wv
      upload_bf16(qkv, dequantize(L.wq), Q * D, "attn_q", stage);
      upload_bf16(qkv + Q * D, dequantize(L.wk), KV * D, "attn_k", stage);
      upload_bf16(qkv + (Q + KV) * D, dequantize(L.wv), KV * D, "attn_v", stage);
      set16(d.qkv, qkv, int(W), int(D));
    }
    if (native[1]) {
      upload_native(d.o, {&L.wo}, int(D), int(Q));
    } else {
      uint16_t* o = take16(D * Q);
      upload_bf16(o, dequantize(L.wo), D * Q, "attn_output", stage);
      set16(d.o, o, int(D), int(Q));
    }
    if (c.n_expert > 0) {
      // gpt-oss: no dense FFN (its experts: upload_gpt_oss)
    } else if (native[2]) {
      upload_native(d.gu, {&L.w_gate, &L.w_up}, int(2 * F), int(D));
    } else {
      uint16_t* gu = take16(2 * F * D);  // rows: w_gate | w_up
      upload_bf16(gu, dequantize(L.w_gate), F * D, "ffn_gate", stage);
      upload_bf16(gu + F * D, dequantize(L.w_up), F * D, "ffn_up", stage);
      set16(d.gu, gu, int(2 * F), int(D));
    }
    if (c.n_expert > 0) {
    } else if (native[3]) {
      upload_native(d.down, {&L.w_down}, int(D), int(F));
    } else {
      uint16_t* down = take16(D * F);
      upload_bf16(down, dequantize(L.w_down), D * F, "ffn_down", stage);
      set16(d.down, down, int(D), int(F));
    }
    d.attn_norm = upload_f32(take32(D), L.attn_norm, D, "attn_norm");
    d.ffn_norm = upload_f32(take32(D), L.ffn_norm, D, "ffn_norm");
    if (c.qkv_bias) {
      float* b = take32(W);
      upload_f32(b, L.bq, Q, "attn_q.bias");
      upload_f32(b + Q, L.bk, KV, "attn_k.bias");
      upload_f32(b + Q + KV, L.bv, KV, "attn_v.bias");
      d.b_qkv = b;
    }
    if (!L.attn_post_norm.empty())
      d.attn_post_norm = upload_f32(take32(D), L.attn_post_norm, D, "post_attention_norm");
    if (!L.ffn_post_norm.empty())
      d.ffn_post_norm = upload_f32(take32(D), L.ffn_post_norm, D, "post_ffw_norm");
    if (c.qk_norm) {
      const size_t hd = size_t(c.head_dim);
      d.q_norm = upload_f32(take32(hd), L.q_norm, hd, "attn_q_norm");
      d.k_norm = upload_f32(take32(hd), L.k_norm, hd, "attn_k_norm");
    }
  }
  // The host vectors are the model's (alive), but staging dies here: wait for the copies.
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
}

void CudaBackendImpl::linear_proj(cudaStream_t s, Blas& blas, const uint16_t* in, const ProjDev& w,
                                  float* out, int n, float beta) {
  if (!w.native()) {
    blas.linear(in, w.w16, out, n, w.out, w.in, beta);
    return;
  }
  if (n == 1) {
    // One token: the GEMV reads the blocks; each part writes its rows of out. Parts of the int8
    // kernel's formats share one activation quantization (tuning qgemv_prequant) or quantize it
    // per CTA; the other formats take the fp32-activation kernel.
    const bool acc = beta != 0.0f;
    bool pre = m_copt.tuning.qgemv_prequant && m_xq.bytes() >= kernels::qgemv_x_bytes(w.in, m_act_planes);
    for (int i = 0; i < w.n_parts && pre; ++i)
      pre = kernels::qgemv_int8_activation(w.parts[i].type, w.parts[i].data, w.in, m_xq.get());
    if (pre) SS_LAUNCH(kernels::launch_qgemv_quantize_x(in, w.in, m_act_planes, m_xq.get(), s));
    int row0 = 0;
    for (int i = 0; i < w.n_parts; ++i) {
      const QuantPart& q = w.parts[i];
      if (pre)
        SS_LAUNCH(kernels::launch_qgemv_prequant(q.type, q.data, q.rows, w.in, m_xq.get(), out + row0,
                                                 acc, m_act_planes, s));
      else if (kernels::qgemv_int8_activation(q.type, q.data, w.in, in))
        SS_LAUNCH(kernels::launch_qgemv_int8(q.type, q.data, q.rows, w.in, in, out + row0, acc,
                                             m_act_planes, s));
      else
        SS_LAUNCH(kernels::launch_qgemv_f32(q.type, q.data, q.rows, w.in, in, out + row0, acc, s));
      row0 += q.rows;
    }
    return;
  }
  // Several tokens: the parts dequantized into the bf16 scratch (sized to the largest native
  // projection; stream order makes reuse safe), then the bf16 GEMM.
  uint16_t* scratch = m_wscratch.as<uint16_t>();
  const int64_t cap = int64_t(m_wscratch.bytes() / 2) / w.in;  // rows the scratch holds
  if (w.out <= cap) {
    int64_t row0 = 0;
    for (int i = 0; i < w.n_parts; ++i) {
      const QuantPart& q = w.parts[i];
      SS_LAUNCH(kernels::launch_qdequant_bf16(q.type, q.data, q.rows, w.in, scratch + row0 * w.in, s));
      row0 += q.rows;
    }
    blas.linear(in, scratch, out, n, w.out, w.in, beta);
    return;
  }
  // Wider than the scratch (a native LM head: plan_weights sizes the scratch for kLmSliceRows of
  // its rows): a slice of rows at a time, each GEMM into its columns of out.
  int64_t row0 = 0;
  for (int i = 0; i < w.n_parts; ++i) {
    const QuantPart& q = w.parts[i];
    const int64_t row_bytes = kernels::qweight_row_bytes(q.type, w.in);
    for (int64_t r = 0; r < q.rows; r += cap) {
      const int nr = int(std::min<int64_t>(cap, q.rows - r));
      const auto* src = static_cast<const uint8_t*>(q.data) + r * row_bytes;
      SS_LAUNCH(kernels::launch_qdequant_bf16(q.type, src, nr, w.in, scratch, s));
      blas.linear(in, scratch, out + row0 + r, n, nr, w.in, beta, w.out);
    }
    row0 += q.rows;
  }
}

bool CudaBackendImpl::fused_norm_proj(cudaStream_t s, const float* x, const float* norm_w,
                                      const ProjDev& w, float* out, uint16_t* act) {
  const kernels::GpuTuning& t = m_copt.tuning;
  if (!t.qgemv_fuse || t.qgemv_prequant || !w.native() ||
      !kernels::qgemv_wide_variant_fuses(kernels::qgemv_wide_variant()))
    return false;
  if (act && w.n_parts != 1) return false;  // gate and up must be one part (merged)
  const float eps = m_model->config().rms_eps;
  kernels::QgemvFusedArgs a[3];
  int row0 = 0;
  for (int i = 0; i < w.n_parts; ++i) {
    const QuantPart& q = w.parts[i];
    a[i].type = q.type;
    a[i].w = q.data;
    a[i].rows = q.rows;
    a[i].cols = w.in;
    a[i].x = x;
    a[i].norm_w = norm_w;
    a[i].eps = eps;
    a[i].planes = m_act_planes;
    if (act) a[i].act = act;
    else a[i].y = out + row0;
    if (!kernels::qgemv_fused_eligible(a[i])) return false;
    row0 += q.rows;
  }
  for (int i = 0; i < w.n_parts; ++i) SS_LAUNCH(kernels::launch_qgemv_fused(a[i], s));
  ++m_stats.fused_norm_projections;
  return true;
}

}  // namespace sinkscope::cuda_detail
