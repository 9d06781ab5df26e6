// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's forward(): the checks and budgets, then prefill passes of up to m_batch
// tokens (full cache), or a sliding window's chunks; all-position logits leave the device
// through two pinned row blocks with their row statistics (logit_rows_to_host). Decode steps:
// cuda_backend_decode.cpp.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/cuda_backend_impl.h"
#include "kernels/ops.h"

namespace sinkscope::cuda_detail {

void CudaBackendImpl::forward(std::span<const TokenId> tokens, LogitsMode mode,
                              std::vector<float>& logits) {
  const ModelConfig& c = m_model->config();
  const int n = int(tokens.size());
  if (n == 0) throw BackendError("forward: no tokens");
  if (int64_t(m_n_past) + n > m_capacity)
    throw BackendError("context full: " + std::to_string(m_n_past) + " cached + " +
                       std::to_string(n) + " new tokens exceed the capacity of " +
                       std::to_string(m_capacity) + " tokens");
  for (TokenId t : tokens)
    if (t < 0 || t >= c.n_vocab)
      throw BackendError("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                         std::to_string(c.n_vocab - 1) + ")");
  SS_CUDA(cudaSetDevice(m_device));
  const bool decode = n == 1 && m_n_past > 0;
  prof::ScopedSpan span_fwd(m_spans, decode ? "decode step" : "prefill");
  const double lambda = effective_lambda(m_attn, decode, int64_t(m_n_past) + n);
  // Budgets first (BackendError naming the limit, nothing appended). A windowed cache reserves
  // per chunk inside forward_windowed.
  const bool windowed = m_plan->windowed();
  if (!windowed) m_plan->reserve(n);
  m_row_stats_n = mode == LogitsMode::kAll ? n : -1;
  m_row_stats_rows = 0;
  if (mode == LogitsMode::kAll) {
    m_row_lse.resize(size_t(n));
    m_row_top1.resize(size_t(n));
  }
  m_rs.reset();
  m_rs_hidden.reset();
  m_rs_n = 0;
  try {
    if (mode == LogitsMode::kLastRowStats) begin_row_stats(tokens);
    if (windowed) {
      forward_windowed(tokens, mode, logits);
    } else if (decode) {
      decode_step(tokens[0], lambda, logits);
      // The step leaves its final hidden state in m_x row 0 and its logits in m_logits row 0.
      if (mode == LogitsMode::kLastRowStats) enqueue_row_stats(1, 0, m_x.as<float>(), true);
    } else {
      prefill(tokens, mode, lambda, logits);
    }
  } catch (const Cancelled&) {
    m_row_stats_n = -1;
    m_rs_hidden.reset();
    // A cancel is raised on the host between launches: what was enqueued is valid work, so the
    // captured decode graphs stay (dropping them would make every cancelled run re-capture, and
    // the churn of graph instantiations grows the process's memory over many runs).
    recover_after_failed_forward();
    throw;
  } catch (...) {
    m_row_stats_n = -1;
    m_rs_hidden.reset();
    recover_after_failed_forward();
    invalidate_graphs();
    throw;
  }
  if (!windowed) {
    m_plan->commit(n);
    m_n_past += n;
  }
  if (mode == LogitsMode::kLastRowStats) finish_row_stats();
  apply_probes();
  if (!m_probes.sink_mass.empty()) m_probes.sink_queries += n;  // as the CPU counts them
}

// The CPU backend's chunking (cpu_backend.cpp): pieces of at most windowed_chunk() tokens, each
// reserved, run and committed (evicting) before the next, with the same boundaries as the CPU
// (the query tiles, and so the skip decisions, line up). Cache position mode: chunks reaching
// past the first position whose cache index differs from its position (S + W) score the sink
// keys with the queries re-rotated at their cache index (q_sink), in the prefill kernels as in
// the decode kernels; for the rows before S + W that rotation is their own.
// The chunks are enqueued back to back without waiting for the device: all-position logits go
// through a staging buffer of final hidden states whose LM head and copy to the host run once
// per m_stage_rows rows (logit_rows_to_host, pipelined like a full-cache prefill); last-position
// logits come from the last chunk only.
void CudaBackendImpl::forward_windowed(std::span<const TokenId> tokens, LogitsMode mode,
                                       std::vector<float>& logits) {
  const ModelConfig& c = m_model->config();
  const int n = int(tokens.size());
  const size_t V = size_t(c.n_vocab);
  const bool stats = mode == LogitsMode::kLastRowStats;
  const bool all = mode == LogitsMode::kAll || stats;  // every row's LM head
  logits.resize((mode == LogitsMode::kAll ? size_t(n) : 1) * V);
  const int S = m_plan->sinks(), W = m_plan->window();
  const int step = windowed_chunk(m_cache_settings, m_attn.block_size, m_window_batch);
  if (all && m_stage_rows < std::min(n, step)) {
    // Up to 4096 rows (one LM-head pipeline for a 4K prompt), at most 64 MiB, at least a chunk.
    const int64_t cap = std::max<int64_t>(step, std::min<int64_t>(
                                                    4096, (int64_t(64) << 20) / (int64_t(c.n_embd) * 4)));
    const int rows = int(std::min<int64_t>(cap, std::max(n, step)));
    if (m_stage_rows > 0) m_device_bytes -= m_stage.bytes();
    m_stage = DeviceBuffer();
    m_stage_rows = 0;
    m_stage = alloc(size_t(rows) * c.n_embd * 4, "staged hidden states");
    m_stage_rows = rows;
  }
  int staged = 0, stage_off = 0;  // rows in the stage, and the forward row of its first
  auto flush = [&] {
    if (staged == 0) return;
    if (stats)
      enqueue_row_stats(staged, stage_off, m_stage.as<float>());
    else
      logit_rows_to_host(staged, logits.data() + size_t(stage_off) * V, stage_off,
                         m_stage.as<float>());
    staged = 0;
  };
  std::vector<float> part;
  // λ of the CPU chunk of positions [p0, p1) (cpu_backend.cpp): length-scaled and hybrid modes
  // depend on the chunk's KV length, which grows until the cache holds S + W positions.
  const int cpu_step = windowed_cpu_chunk(m_cache_settings, m_attn.block_size);
  auto chunk_lambda = [&](int64_t p0, int64_t p1) {
    const int64_t n_kv = std::min<int64_t>(p1, cache_position(p1 - 1, S, W) + 1);
    return effective_lambda(m_attn, p1 - p0 == 1 && p0 > 0, n_kv);
  };
  for (int off = 0; off < n;) {
    const int64_t n0 = m_n_past;
    int m = std::min(step, n - off);
    // A pass of several CPU chunks only while each of them would run with the same λ.
    const double lambda = chunk_lambda(n0, n0 + std::min(m, cpu_step));
    for (int e = cpu_step; e < m; e += cpu_step)
      if (chunk_lambda(n0 + e, n0 + std::min(m, e + cpu_step)) != lambda) {
        m = e;
        break;
      }
    const int64_t last = n0 + m - 1;
    const bool sinkq = m_plan->cache_positions() && last >= int64_t(S) + W;
    const bool decode = m == 1 && n0 > 0;
    m_plan->reserve(m);
    upload_window_tables(m);
    if (decode) {
      flush();  // the step's graph reuses the LM head's scratch
      decode_step(tokens[size_t(off)], lambda, part, sinkq);
      // The step leaves its final hidden state in m_x row 0 and its logits in m_logits row 0.
      if (stats) enqueue_row_stats(1, off, m_x.as<float>(), true);
      if (!stats || off + 1 == n)
        std::copy_n(part.data(), V, logits.data() + (mode == LogitsMode::kAll ? size_t(off) * V : 0));
    } else if (all) {
      if (staged + m > m_stage_rows) flush();
      if (staged == 0) stage_off = off;
      prefill(tokens.subspan(size_t(off), size_t(m)), mode, lambda, part, sinkq, true,
              m_stage.as<float>() + size_t(staged) * c.n_embd);
      staged += m;
    } else if (off + m < n) {
      prefill(tokens.subspan(size_t(off), size_t(m)), mode, lambda, part, sinkq, true);
    } else {
      prefill(tokens.subspan(size_t(off), size_t(m)), mode, lambda, part, sinkq);
      std::copy_n(part.data(), V, logits.data());
    }
    m_plan->commit(m);
    m_n_past += m;
    off += m;
  }
  flush();
  enqueue_probe_copy();
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
  if (stats) std::memcpy(logits.data(), m_h_logits.as<float>(), V * 4);  // the last row's
}

void CudaBackendImpl::logit_rows_to_host(int nc, float* dst, int64_t stats_row0,
                                         const float* x) {
  const size_t V = size_t(m_model->config().n_vocab);
  const int R = m_logit_rows;
  const size_t block = size_t(R) * V;
  if (!m_copy_pool) {  // first use (the pool last: a failed allocation retries next time)
    for (PinnedBuffer& b : m_h_rows) b = PinnedBuffer(block * 4, "pinned logit rows");
    for (PinnedBuffer& b : m_h_stats) b = PinnedBuffer(size_t(R) * 12, "pinned row statistics");
    m_stats_dev = alloc(size_t(R) * 12, "logit row statistics");
    for (Event& e : m_rows_ev) SS_CUDA(cudaEventCreateWithFlags(&e.e, cudaEventDisableTiming));
    const int hw = int(std::thread::hardware_concurrency());
    m_copy_pool = std::make_unique<ThreadPool>(std::clamp(hw, 1, 8));
  }
  const int nb = (nc + R - 1) / R;
  auto rows_of = [&](int k) { return std::min(R, nc - k * R); };
  // Block k: LM head into m_logits, then into pinned buffer k % 2 (stream order keeps the next
  // LM head behind this copy); the event says when the host may read it.
  double* lse_dev = m_stats_dev.as<double>();
  int* top1_dev = reinterpret_cast<int*>(lse_dev + R);
  auto enqueue = [&](int k) {
    const int rows = rows_of(k);
    enqueue_lm_head(m_stream.s, *m_blas, k * R, rows, x);
    SS_LAUNCH(kernels::launch_row_lse_argmax(m_logits.as<float>(), rows, int(V), lse_dev, top1_dev,
                                             m_stream.s));
    SS_CUDA(cudaMemcpyAsync(m_h_rows[k & 1].as<float>(), m_logits.get(), size_t(rows) * V * 4,
                            cudaMemcpyDeviceToHost, m_stream.s));
    SS_CUDA(cudaMemcpyAsync(m_h_stats[k & 1].as<uint8_t>(), lse_dev, size_t(R) * 12,
                            cudaMemcpyDeviceToHost, m_stream.s));
    SS_CUDA(cudaEventRecord(m_rows_ev[k & 1].e, m_stream.s));
  };
  enqueue(0);
  if (nb > 1) enqueue(1);
  for (int k = 0; k < nb; ++k) {
    SS_CUDA(cudaEventSynchronize(m_rows_ev[k & 1].e));
    const float* src = m_h_rows[k & 1].as<float>();
    float* d = dst + size_t(k) * block;
    const size_t count = size_t(rows_of(k)) * V;
    const int64_t parts = std::min<int64_t>(m_copy_pool->size(), int64_t(count >> 18) + 1);
    m_copy_pool->parallel_for(parts, [&](int64_t i) {
      const size_t a = count * size_t(i) / size_t(parts), b = count * size_t(i + 1) / size_t(parts);
      std::memcpy(d + a, src + a, (b - a) * 4);
    });
    const int64_t r0 = stats_row0 + int64_t(k) * R;
    if (m_row_stats_n >= 0 && r0 + rows_of(k) <= int64_t(m_row_lse.size())) {
      const double* l = m_h_stats[k & 1].as<double>();
      const int* t = reinterpret_cast<const int*>(l + R);
      std::copy_n(l, rows_of(k), m_row_lse.begin() + r0);
      std::copy_n(t, rows_of(k), m_row_top1.begin() + r0);
      m_row_stats_rows += rows_of(k);
    }
    if (k + 2 < nb) enqueue(k + 2);  // buffer k % 2 is free again
  }
}

void CudaBackendImpl::prefill(std::span<const TokenId> tokens, LogitsMode mode, double lambda,
                              std::vector<float>& logits, bool sinkq, bool deferred,
                              float* stage) {
  const ModelConfig& c = m_model->config();
  const int n = int(tokens.size());
  const size_t V = size_t(c.n_vocab);
  if (!deferred) logits.resize((mode == LogitsMode::kAll ? size_t(n) : 1) * V);
  begin_prefill_probes(n);
  // No LM head after a capture that ends at its layer: the logits are NaN.
  const bool no_head = m_capture.layer >= 0 && m_cap.stop_after_layer;
  // Passes of m_batch tokens (a multiple of kPassAlign: whole CTAs of two 64-row query tiles, so
  // the skip votes and the probes equal one pass over all n tokens).
  for (int start = 0; start < n; start += m_batch) {
    const int nc = std::min(m_batch, n - start);
    SS_CUDA(cudaMemcpyAsync(m_tokens.get(), tokens.data() + start, size_t(nc) * 4,
                            cudaMemcpyHostToDevice, m_stream.s));
    Pass pass{nc, m_n_past + start, lambda, false, false};
    pass.sinkq = sinkq;
    enqueue_layers(m_stream.s, *m_blas, pass);
    read_pass_masks(start, nc, n);
    if (no_head) {
      // nothing leaves the device but the capture (below)
    } else if (deferred) {
      if (stage)
        SS_CUDA(cudaMemcpyAsync(stage + size_t(start) * c.n_embd, m_x.get(),
                                size_t(nc) * c.n_embd * 4, cudaMemcpyDeviceToDevice, m_stream.s));
    } else if (mode == LogitsMode::kAll) {
      logit_rows_to_host(nc, logits.data() + size_t(start) * V, start);
    } else if (mode == LogitsMode::kLastRowStats) {
      enqueue_row_stats(nc, start, m_x.as<float>());
    } else if (start + nc == n) {
      enqueue_lm_head(m_stream.s, *m_blas, nc - 1, 1);
      SS_CUDA(cudaMemcpyAsync(m_h_logits.as<float>(), m_logits.get(), V * 4, cudaMemcpyDeviceToHost,
                              m_stream.s));
    }
  }
  if (deferred && m_capture.layer < 0) return;  // the caller synchronises
  enqueue_probe_copy();
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
  if (no_head && !deferred)
    std::fill(logits.begin(), logits.end(), std::numeric_limits<float>::quiet_NaN());
  else if (!deferred && mode != LogitsMode::kAll)
    std::memcpy(logits.data(), m_h_logits.as<float>(), V * 4);
  if (m_capture.layer >= 0) read_captured_kv(n);
}

}  // namespace sinkscope::cuda_detail
