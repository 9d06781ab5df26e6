// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's row statistics (LogitsMode::kLastRowStats) and per-row KL between two
// forwards' hidden states (Backend::kl_rows): the LM head runs block by block into the logits
// scratch and each block is reduced on the device, so no (n, n_vocab) logits leave it.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend_impl.h"
#include "kernels/ops.h"

namespace sinkscope::cuda_detail {

namespace {
constexpr size_t kRowStatBytes = 8 + 4 + 4 + 4;  // lse, top1, next logit, next token
}

void CudaBackendImpl::begin_row_stats(std::span<const TokenId> tokens) {
  if (m_capture.layer >= 0 && m_cap.stop_after_layer)
    throw BackendError("row statistics: a Q/K/V capture that stops after its layer has no logits");
  const ModelConfig& c = m_model->config();
  const int64_t n = int64_t(tokens.size());
  if (n > m_rs_cap) {
    if (m_rs_cap > 0) m_device_bytes -= m_rs_dev.bytes();
    m_rs_dev = DeviceBuffer();
    m_rs_cap = 0;
    m_rs_dev = alloc(size_t(n) * kRowStatBytes, "row statistics");
    m_rs_cap = n;
  }
  m_rs_n = n;
  // Row i's next token is the forward's token i + 1; the last row has none.
  std::vector<int32_t> next(size_t(n), -1);
  for (int64_t i = 0; i + 1 < n; ++i) next[size_t(i)] = tokens[size_t(i + 1)];
  int32_t* next_dev = reinterpret_cast<int32_t*>(m_rs_dev.as<uint8_t>() + size_t(m_rs_cap) * 16);
  SS_CUDA(cudaMemcpyAsync(next_dev, next.data(), size_t(n) * 4, cudaMemcpyHostToDevice,
                          m_stream.s));
  SS_CUDA(cudaStreamSynchronize(m_stream.s));  // `next` is a host temporary
  m_rs_hidden = std::make_shared<HiddenRows>();
  m_rs_hidden->n = int(n);
  m_rs_hidden->n_embd = c.n_embd;
  // The rows stay in device memory (kl_rows reads them there); where that memory is short,
  // they go to the host instead.
  try {
    auto buf = std::make_shared<DeviceBuffer>(size_t(n) * c.n_embd * 4, "final hidden states");
    m_rs_hidden->device_x = buf->as<float>();
    m_rs_hidden->device_owner = std::move(buf);
  } catch (const BackendError&) {
    m_rs_hidden->x.resize(size_t(n) * c.n_embd);
  }
}

void CudaBackendImpl::enqueue_row_stats(int rows, int64_t r0, const float* x, bool have_logits) {
  const ModelConfig& c = m_model->config();
  const int V = c.n_vocab, R = m_logit_rows;
  uint8_t* base = m_rs_dev.as<uint8_t>();
  double* lse = reinterpret_cast<double*>(base);
  int32_t* top1 = reinterpret_cast<int32_t*>(base + size_t(m_rs_cap) * 8);
  float* next_logit = reinterpret_cast<float*>(base + size_t(m_rs_cap) * 12);
  const int32_t* next = reinterpret_cast<const int32_t*>(base + size_t(m_rs_cap) * 16);
  for (int k = 0; k < rows; k += R) {
    const int m = std::min(R, rows - k);
    if (!have_logits) enqueue_lm_head(m_stream.s, *m_blas, k, m, x);
    const int64_t r = r0 + k;
    SS_LAUNCH(kernels::launch_row_lse_argmax(m_logits.as<float>(), m, V, lse + r, top1 + r,
                                             m_stream.s, next + r, next_logit + r));
    if (r + m == m_rs_n)  // the forward's last row: the logits the caller samples from
      SS_CUDA(cudaMemcpyAsync(m_h_logits.as<float>(), m_logits.as<float>() + size_t(m - 1) * V,
                              size_t(V) * 4, cudaMemcpyDeviceToHost, m_stream.s));
  }
  if (m_rs_hidden->on_device()) {
    SS_CUDA(cudaMemcpyAsync(const_cast<float*>(m_rs_hidden->device_x) + size_t(r0) * c.n_embd, x,
                            size_t(rows) * c.n_embd * 4, cudaMemcpyDeviceToDevice, m_stream.s));
  } else {  // pageable destination: the copy returns once the rows are on the host
    SS_CUDA(cudaMemcpyAsync(m_rs_hidden->x.data() + size_t(r0) * c.n_embd, x,
                            size_t(rows) * c.n_embd * 4, cudaMemcpyDeviceToHost, m_stream.s));
  }
}

void CudaBackendImpl::finish_row_stats() {
  const int64_t n = m_rs_n;
  const uint8_t* base = m_rs_dev.as<uint8_t>();
  auto st = std::make_unique<RowStats>();
  st->lse.resize(size_t(n));
  st->top1.resize(size_t(n));
  st->next_logit.resize(size_t(std::max<int64_t>(n - 1, 0)));
  SS_CUDA(cudaMemcpyAsync(st->lse.data(), base, size_t(n) * 8, cudaMemcpyDeviceToHost,
                          m_stream.s));
  SS_CUDA(cudaMemcpyAsync(st->top1.data(), base + size_t(m_rs_cap) * 8, size_t(n) * 4,
                          cudaMemcpyDeviceToHost, m_stream.s));
  if (n > 1)
    SS_CUDA(cudaMemcpyAsync(st->next_logit.data(), base + size_t(m_rs_cap) * 12,
                            size_t(n - 1) * 4, cudaMemcpyDeviceToHost, m_stream.s));
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
  st->hidden = std::move(m_rs_hidden);
  m_rs = std::move(st);
}

std::vector<double> CudaBackendImpl::kl_rows(const HiddenRows& p, const HiddenRows& q) {
  const ModelConfig& c = m_model->config();
  check_kl_rows(p, q, c.n_embd);
  SS_CUDA(cudaSetDevice(m_device));
  const int V = c.n_vocab, R = m_logit_rows, D = c.n_embd;
  if (p.n > m_kl_cap || !m_kl_logits) {
    if (m_kl_logits) m_device_bytes -= m_kl_logits.bytes() + m_kl_x.bytes() + m_kl_dev.bytes();
    m_kl_logits = DeviceBuffer();
    m_kl_x = DeviceBuffer();
    m_kl_dev = DeviceBuffer();
    m_kl_cap = 0;
    m_kl_logits = alloc(size_t(R) * V * 4, "KL logit rows");
    m_kl_x = alloc(size_t(R) * D * 4 * 2, "KL hidden rows");
    // kl (n doubles), then two blocks' log-sum-exps and argmaxes (R doubles + R ints each)
    m_kl_dev = alloc(size_t(std::max(p.n, 1)) * 8 + size_t(R) * 24, "KL rows");
    m_kl_cap = p.n;
  }
  double* kl = m_kl_dev.as<double>();
  double* lse_p = kl + m_kl_cap;
  double* lse_q = lse_p + R;
  int* top1 = reinterpret_cast<int*>(lse_q + R);
  float* xp = m_kl_x.as<float>();
  float* xq = xp + size_t(R) * D;
  for (int r0 = 0; r0 < p.n; r0 += R) {
    check_cancel();
    const int m = std::min(R, p.n - r0);
    // Rows in device memory are read in place; host rows go through m_kl_x.
    auto rows_at = [&](const HiddenRows& h, float* staging) -> const float* {
      if (h.on_device()) return h.device_x + size_t(r0) * D;
      SS_CUDA(cudaMemcpyAsync(staging, h.x.data() + size_t(r0) * D, size_t(m) * D * 4,
                              cudaMemcpyHostToDevice, m_stream.s));
      return staging;
    };
    const float* rp = rows_at(p, xp);
    const float* rq = rows_at(q, xq);
    enqueue_lm_head(m_stream.s, *m_blas, 0, m, rp, m_kl_logits.as<float>());
    SS_LAUNCH(kernels::launch_row_lse_argmax(m_kl_logits.as<float>(), m, V, lse_p, top1,
                                             m_stream.s));
    enqueue_lm_head(m_stream.s, *m_blas, 0, m, rq);
    SS_LAUNCH(kernels::launch_row_lse_argmax(m_logits.as<float>(), m, V, lse_q, top1, m_stream.s));
    SS_LAUNCH(kernels::launch_row_kl(m_kl_logits.as<float>(), m_logits.as<float>(), m, V, lse_p,
                                     lse_q, kl + r0, m_stream.s));
  }
  std::vector<double> out(size_t(p.n));
  SS_CUDA(cudaMemcpyAsync(out.data(), kl, size_t(p.n) * 8, cudaMemcpyDeviceToHost, m_stream.s));
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
  return out;
}

}  // namespace sinkscope::cuda_detail
