// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's decode steps and CUDA-graph cache.
//
// A decode step reads everything that changes from one position to the next from a 16-byte step
// record in device memory: the token id (embedding gather), the position (RoPE + KV append), the
// cache length (attention, AttentionParams::kv_len_dev) and log2(lambda) (length-scaled lambda
// changes every step). The attention grid and workspace are sized from an upper bound of the
// length (kv_bound(): the next power of two, at least kMinKvBound, at most the allocated cache),
// so one captured graph serves every position up to its bound. A step is then: the host writes
// the record into pinned memory, cudaGraphLaunch (the graph copies the record in, runs ~330
// kernels, copies logits and probes out to pinned memory), one synchronisation. Graphs are keyed
// by (settings generation, bound, dense/sparse kernels) and kept (a few, LRU), so a new capture
// happens only when the length crosses a power of two or the settings change; reset() keeps them
// (they hold no position). Eager steps (graphs off, or a capture failed) run the very same
// enqueue on the stream, so graph and eager results are equal bit for bit. The attention kernels
// re-plan the split of the actual length on the device exactly as a host launch would, so the
// numbers also equal those of a launch with the host length.
#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "engine/cuda/cuda_backend_impl.h"
#include "kernels/decode_choice.h"
#include "kernels/ops.h"

namespace sinkscope::cuda_detail {

// Power-of-two buckets: a sequence re-captures log2(capacity / kMinKvBound) times at most, and
// the grid of a bound wastes at most half its CTAs (which exit at once) on empty splits.
int64_t CudaBackendImpl::kv_bound(int64_t kv_len) const {
  if (m_plan && m_plan->windowed()) return m_alloc_pos;  // one graph: the whole live-page pool
  int64_t b = kMinKvBound;
  while (b < kv_len) b *= 2;
  return std::min<int64_t>(b, m_alloc_pos);
}

void CudaBackendImpl::enqueue_decode(cudaStream_t s, Blas& blas, int64_t bound, double lambda,
                                     bool capturing, bool sinkq) {
  const ModelConfig& c = m_model->config();
  SS_CUDA(cudaMemcpyAsync(m_step.get(), m_h_step.as<int32_t>(), kStepSlots * 4,
                          cudaMemcpyHostToDevice, s));
  Pass p{1, m_n_past, lambda, true, capturing};
  p.kv_bound = bound;
  p.sinkq = sinkq;
  enqueue_layers(s, blas, p);
  enqueue_lm_head(s, blas, 0, 1);
  SS_CUDA(cudaMemcpyAsync(m_h_logits.as<float>(), m_logits.get(), size_t(c.n_vocab) * 4,
                          cudaMemcpyDeviceToHost, s));
  SS_CUDA(cudaMemcpyAsync(m_h_probe.as<uint64_t>(), m_probe.get(), m_probe.bytes(),
                          cudaMemcpyDeviceToHost, s));
}

void CudaBackendImpl::restart_decode_choice() {
  m_dpath = DecodePathStats{};
  m_dpath.chooses = m_sparse_decode == SparseDecodeKernels::kAuto && !m_copt.force_sparse_kernel;
  m_dpath_since_probe = 0;
}

// The lambda a sparse-asked step runs with: its own (sparse kernels), or 0 (dense kernels) where
// the sparse ones are predicted slower at this length and the skipped share last measured. With
// no measurement yet, and then every kSparseDecodeProbeEvery dense steps, one step runs sparse
// to measure it. Deterministic: the same sequence and settings take the same kernels.
double CudaBackendImpl::choose_decode_lambda(double lambda, int64_t kv_len) {
  if (!(lambda > 0.0) || !m_dpath.chooses) return lambda;
  DecodePathStats& d = m_dpath;
  d.last_kv_len = kv_len;
  bool sparse = true, probe = d.skipped_estimate < 0;
  if (!probe) {
    d.predicted_ratio =
        kernels::sparse_decode_time_ratio(m_model->config().head_dim, kv_len, d.skipped_estimate);
    sparse = d.predicted_ratio < kernels::kSparseDecodeMargin;
    if (!sparse && ++m_dpath_since_probe >= kernels::kSparseDecodeProbeEvery) sparse = probe = true;
  }
  d.last_sparse = sparse;
  if (!sparse) {
    ++d.dense_steps;
    return 0.0;
  }
  ++d.sparse_steps;
  if (probe) {
    ++d.probe_steps;
    m_dpath_since_probe = 0;
  }
  return lambda;
}

void CudaBackendImpl::decode_step(TokenId token, double asked_lambda, std::vector<float>& logits,
                                  bool sinkq) {
  const ModelConfig& c = m_model->config();
  const size_t V = size_t(c.n_vocab);
  const int pos = m_n_past;
  check_cancel();
  const double lambda = choose_decode_lambda(asked_lambda, int64_t(pos) + 1);
  // Decode tile counts so far (the pinned copy of the previous step's probes): this step's
  // skipped share, when it runs sparse for the choice above, is the difference.
  const size_t LH = size_t(m_probes.n_layer) * size_t(m_probes.n_head);
  auto decode_totals = [&](int64_t* visited, int64_t* skipped) {
    const uint64_t* hp = m_h_probe.as<uint64_t>();
    *visited = *skipped = 0;
    for (size_t i = 0; i < LH; ++i) {
      *visited += int64_t(hp[2 * LH + i]);
      *skipped += int64_t(hp[3 * LH + i]);
    }
  };
  int64_t visited0 = 0, skipped0 = 0;
  const bool measure = m_dpath.chooses && lambda > 0.0;
  if (measure) decode_totals(&visited0, &skipped0);
  const float log2_lambda = kernels::log2_of_lambda(lambda);
  if (!(log2_lambda < 0.f))  // what launch_attention would say; graphs do not re-validate
    throw BackendError("attention: lambda must be in [0, 1), got " + std::to_string(lambda));
  // The step record (pinned): the previous step's copy of it finished at its synchronisation.
  int32_t* h = m_h_step.as<int32_t>();
  h[kStepToken] = token;
  h[kStepPos] = int32_t(m_plan->ring_pos(pos));  // the append position (ring when windowed)
  h[kStepKvLen] = pos + 1;
  std::memcpy(&h[kStepLog2Lambda], &log2_lambda, 4);
  h[kStepPosOrig] = pos;
  h[kStepNTiles] = int32_t(m_plan->tile_pos0().size());
  h[kStepOwnTiles] = int32_t((pos + m_attn.block_size) / m_attn.block_size);

  const int64_t bound = kv_bound(int64_t(pos) + 1);
  cudaGraphExec_t exec = nullptr;
  if (m_use_graphs && m_stats.disabled_reason.empty()) exec = decode_graph(bound, lambda, sinkq);
  if (exec) {
    SS_CUDA(cudaGraphLaunch(exec, m_stream.s));
    ++m_stats.graph_steps;
  } else {
    enqueue_decode(m_stream.s, *m_blas, bound, lambda, false, sinkq);
    ++m_stats.eager_steps;
  }
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
  logits.assign(m_h_logits.as<float>(), m_h_logits.as<float>() + V);
  if (measure) {
    int64_t visited1 = 0, skipped1 = 0;
    decode_totals(&visited1, &skipped1);
    if (visited1 > visited0)
      m_dpath.skipped_estimate = double(skipped1 - skipped0) / double(visited1 - visited0);
  }
}

void CudaBackendImpl::disable_graphs(const std::string& why) {
  (void)cudaGetLastError();
  m_stats.disabled_reason = why;
  invalidate_graphs();
}

// The graph for (bound, dense/sparse) under the current settings: cached, else captured now on
// the capture stream (nothing runs there; the capture only records) and instantiated.
cudaGraphExec_t CudaBackendImpl::decode_graph(int64_t bound, double lambda, bool sinkq) {
  const bool sparse = lambda > 0.0 || m_copt.force_sparse_kernel;
  for (DecodeGraph& g : m_graphs)
    if (g.gen == m_gen && g.bound == bound && g.sparse == sparse && g.sinkq == sinkq) {
      g.last_use = ++m_use_clock;
      return g.exec;
    }
  // A capture or instantiation that fails while Programmatic Dependent Launch is on (kernels/
  // pdl.cuh: PDL edges inside the graph) is retried once with PDL off before graphs are given up.
  auto fail = [&](const std::string& why) -> cudaGraphExec_t {
    if (kernels::pdl_enabled()) {
      (void)cudaGetLastError();
      kernels::set_pdl_enabled(false);
      return decode_graph(bound, lambda, sinkq);
    }
    disable_graphs(why);
    return nullptr;
  };
  cudaStream_t s = m_cap_stream.s;
  cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) {
    disable_graphs(std::string("cudaStreamBeginCapture failed: ") + cudaGetErrorString(e));
    return nullptr;
  }
  cudaGraph_t graph = nullptr;
  prof::GraphLayoutRecorder layout(s);  // the timeline's map of replayed kernels to layers
  m_capture_layout = &layout;
  try {
    enqueue_decode(s, *m_blas_cap, bound, lambda, true, sinkq);
    m_capture_layout = nullptr;
  } catch (const std::exception& ex) {
    m_capture_layout = nullptr;
    (void)cudaStreamEndCapture(s, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    return fail(std::string("capturing a decode step failed: ") + ex.what());
  }
  e = cudaStreamEndCapture(s, &graph);
  if (e != cudaSuccess || !graph) {
    if (graph) (void)cudaGraphDestroy(graph);
    return fail(std::string("cudaStreamEndCapture failed: ") + cudaGetErrorString(e));
  }
  ++m_stats.captures;
  DecodeGraph g;
  e = cudaGraphInstantiate(&g.exec, graph, 0);
  if (e == cudaSuccess) (void)layout.publish(graph, g.exec);
  (void)cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    g.exec = nullptr;
    return fail(std::string("cudaGraphInstantiate failed: ") + cudaGetErrorString(e));
  }
  ++m_stats.instantiations;
  g.bound = bound;
  g.sparse = sparse;
  g.sinkq = sinkq;
  g.gen = m_gen;
  g.last_use = ++m_use_clock;
  if (m_graphs.size() >= kMaxGraphs) {  // evict the least recently used (not in flight: synced)
    auto lru = std::min_element(m_graphs.begin(), m_graphs.end(),
                                [](const DecodeGraph& a, const DecodeGraph& b) {
                                  return a.last_use < b.last_use;
                                });
    m_graphs.erase(lru);
  }
  m_graphs.push_back(std::move(g));
  return m_graphs.back().exec;
}

// One decode step on the capture stream and handle, run for real: loads every module a
// decode step needs (the attention launcher opts every decode kernel into its shared memory
// here) and initialises the capture handle, so nothing is first touched inside a capture. It
// writes position 0 of the cache and the decode probes; reset() clears both.
void CudaBackendImpl::warm_up_decode() {
  int32_t* h = m_h_step.as<int32_t>();
  const float dense = kernels::log2_of_lambda(0.0);
  h[kStepToken] = 0;
  h[kStepPos] = 0;
  h[kStepKvLen] = 1;
  std::memcpy(&h[kStepLog2Lambda], &dense, 4);
  h[kStepPosOrig] = 0;
  h[kStepNTiles] = 1;
  h[kStepOwnTiles] = 1;
  enqueue_decode(m_cap_stream.s, *m_blas_cap, kv_bound(1), 0.0, true);
  SS_CUDA(cudaStreamSynchronize(m_cap_stream.s));
}

}  // namespace sinkscope::cuda_detail
