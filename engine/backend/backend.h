// SPDX-License-Identifier: Apache-2.0
// The backend interface: one forward over a batch of new tokens, appending to the backend's KV
// cache. The CPU backend is the reference; a CUDA backend slots in beside it.
#pragma once

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/attention.h"
#include "engine/cache/cache_settings.h"
#include "engine/util/errors.h"
#include "engine/cache/kv_cache.h"
#include "engine/model/model.h"
#include "profiler/spans.h"

namespace sinkscope {

// What forward() writes: the last token's logits (kLast), every token's (kAll), or the last
// token's plus per-row statistics of every token computed where the logits are, without
// moving the (n, n_vocab) logits anywhere (kLastRowStats; Backend::last_row_stats). At 32K
// tokens and a 128K vocabulary the logits are 17 GB; their statistics are a few MB.
enum class LogitsMode { kLast, kAll, kLastRowStats };

// Final hidden states of a forward's rows: the residual stream before the output norm,
// (n, n_embd) floats, from which the LM head makes the rows' logits. 32K rows of a 4096-wide
// model take 512 MB, against 17 GB for their logits over a 128K vocabulary.
struct HiddenRows {
  int n = 0, n_embd = 0;
  std::vector<float> x;  // on the host; empty where a GPU holds them (device_x)
  // A CUDA backend keeps its rows in device memory (owned by device_owner), so that kl_rows on
  // that device reads them in place; only the backend kind that made them reads them then.
  const float* device_x = nullptr;
  std::shared_ptr<const void> device_owner;
  bool on_device() const { return device_x != nullptr; }
};

// Backend::kl_rows' precondition: p and q hold the same number of rows of width n_embd (on the
// host or a device). Throws BackendError naming both shapes and the width.
inline void check_kl_rows(const HiddenRows& p, const HiddenRows& q, int n_embd) {
  auto fits = [&](const HiddenRows& h) {
    return h.n_embd == n_embd && (h.on_device() || h.x.size() == size_t(h.n) * size_t(n_embd));
  };
  if (p.n != q.n || !fits(p) || !fits(q))
    throw BackendError("kl_rows: the hidden states are " + std::to_string(p.n) + " x " +
                       std::to_string(p.n_embd) + " and " + std::to_string(q.n) + " x " +
                       std::to_string(q.n_embd) + "; both must be rows of the model's width " +
                       std::to_string(n_embd));
}

// Per-row statistics of a LogitsMode::kLastRowStats forward of n tokens (or the log-sum-exp
// and argmax of a kAll forward, where the backend computes them next to the logits).
struct RowStats {
  std::vector<double> lse;  // log-sum-exp of row i (natural log, summed in double)
  std::vector<int> top1;    // argmax of row i (the first index of the maximum)
  // Row i's logit of the forward's token i + 1 (n - 1 values; empty for a kAll forward): the
  // prompt's negative log-likelihood is sum_i lse[i] - next_logit[i].
  std::vector<float> next_logit;
  // The rows' final hidden states (kLastRowStats only), for Backend::kl_rows.
  std::shared_ptr<const HiddenRows> hidden;
};

// Post-RoPE attention inputs of one layer (Backend::request_qkv_capture): q (n_q, n_head,
// head_dim) of the tokens at positions [q_start, q_start + n_q); k, v (n_kv, n_head_kv, head_dim)
// of cache positions [0, n_kv). The CUDA backend records bf16 bit patterns (q, k, v), the CPU
// backend float32 (qf, kf, vf; vf of the request's `layer` only); q_at / k_at read either.
// A one-head capture (QkvCaptureRequest::head) holds that query head's q and its KV head's k
// only, no v: then `head` names it and n_head = n_head_kv = 1 describe the layout.
struct QkvCapture {
  int layer = -1;
  int n_q = 0, q_start = 0, n_kv = 0;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  int head = -1;  // -1: every head; else the one query head held (its KV head: head / group)
  std::vector<uint16_t> q, k, v;
  std::vector<float> qf, kf, vf;

  // Element i of q / k in the layouts above.
  float q_at(size_t i) const { return qf.empty() ? bf16_to_fp32(q[i]) : qf[i]; }
  float k_at(size_t i) const { return kf.empty() ? bf16_to_fp32(k[i]) : kf[i]; }
  // True when the capture holds q of every query and k of every key (either precision).
  bool complete() const {
    const size_t nq = size_t(n_q) * n_head * head_dim, nk = size_t(n_kv) * n_head_kv * head_dim;
    return layer >= 0 && nq > 0 && (qf.size() >= nq || q.size() >= nq) &&
           (kf.size() >= nk || k.size() >= nk);
  }
};

// What a Q/K/V capture records and how its prefill runs (Backend::request_qkv_capture).
struct QkvCaptureRequest {
  int layer = -1;  // -1: no capture
  // A sink-retaining window's visibility rule applied over a full cache, nothing evicted: key k
  // is visible to the query at q iff k <= q and (k < sink_count or window == 0 or
  // k > q - window), in every layer of the capture's prefill (the reference forward of a
  // windowed attention map). window 0: causal attention.
  int sink_count = 0, window = 0;
  // The capture's prefill ends after the last captured layer: its logits are NaN and the cache
  // holds no complete forward (reset() before the next one).
  bool stop_after_layer = false;
  // CPU backend only: also capture Q/K (no V) of the layers in [more_first, more_last] besides
  // `layer` while the capture's float32 bytes stay within max_bytes (0: no bound; `layer` itself
  // always is), so that one prefill feeds the maps of many layers (Backend::qkv_capture_of).
  // With stop_after_layer the prefill then ends after max(layer, more_last). -1: none.
  int more_first = 0, more_last = -1;
  size_t max_bytes = 0;
  // CUDA backend: >= 0 records only this query head's q and its KV head's k (no v) and copies
  // only those to the host (what one attention map needs: 1 / n_head of the q bytes; at 32K
  // tokens of an 8B model 17 MB instead of 403 MB). -1: every head. The CPU backend records
  // every head whatever this says (QkvCapture::head tells which layout came back).
  int head = -1;
};
// Where the CUDA backend keeps the projection matrices (QKV, O, gate|up, down). kNative: in their
// file layout when it is Q8_0, Q4_0, Q4_1, Q4_K, Q5_K or Q6_K (decode reads the blocks directly,
// prefill dequantizes into a bf16 scratch for cuBLAS; other types are converted to bf16). kBf16:
// every matrix converted to bf16 (the fused bf16 decode kernels and the faster prefill).
// kAuto, the default: bf16 where it fits the device with room for a second backend, else native
// (engine/backend/gpu_weights_choice.h; the backend's note says which and why). The CPU backend
// ignores it.
enum class GpuWeights { kNative, kBf16, kAuto };
const char* gpu_weights_name(GpuWeights w);  // "native" / "bf16" / "auto"
// "native" / "bf16" / "auto"; nullopt for anything else.
std::optional<GpuWeights> parse_gpu_weights(std::string_view text);

// The activation precision of the CUDA backend's single-token products of native weights (Q4_K,
// Q6_K, Q8_0 through the int8 kernel, kernels/qgemv.h): kInt8 (the default) one int8 plane per
// run of 32 elements (the Q8_1 activations of llama.cpp's GEMV, the precision a deployed
// quantized model runs at); kInt16 two planes (about 15 bits, like the CPU backend's int16
// products): logits closer to the CPU's, twice the dot-product work, a slower decode
// (docs/performance.md: 8B Q4_K_M 246 against 214 tokens/s). Ignored with bf16 weights and by
// the CPU backend.
enum class GpuActivations { kInt16, kInt8 };
inline constexpr GpuActivations kDefaultGpuActivations = GpuActivations::kInt8;
const char* gpu_activations_name(GpuActivations a);  // "int16" / "int8"
std::optional<GpuActivations> parse_gpu_activations(std::string_view text);

// Dynamic-sparse decode steps on the CUDA backend: kAuto runs the dense attention kernels for a
// step where the sparse ones are predicted slower (kernels/decode_choice.h: head width, cache
// length, the skipped share measured on recent sparse steps), so turning sparsity on never costs
// decode time; kAlways runs the sparse kernels whenever lambda > 0 (tests comparing skip
// decisions, kernel benchmarks). The CPU backend always runs what is asked.
enum class SparseDecodeKernels { kAuto, kAlways };

// What the backend did with the dynamic-sparse decode steps it was asked for (chooses: false on
// a backend that always runs them as asked).
struct DecodePathStats {
  bool chooses = false;
  int64_t sparse_steps = 0;  // sparse-asked steps run with the sparse kernels (probes included)
  int64_t dense_steps = 0;   // sparse-asked steps run with the dense kernels (predicted faster)
  int64_t probe_steps = 0;   // of sparse_steps: run only to measure the skipped share again
  double skipped_estimate = -1;  // skipped share the last decision used; -1: none yet
  double predicted_ratio = 0;    // sparse / dense attention time predicted at the last decision
  int64_t last_kv_len = 0;
  bool last_sparse = false;      // the kernels of the last sparse-asked step
};

struct BackendOptions {
  int n_threads = 0;    // 0: hardware concurrency
  int max_context = 0;  // KV capacity in tokens; 0: the model's trained context
  AttentionSettings attention;
  // KV-cache policy, budgets and quantization (engine/cache/cache_settings.h). The default -- full
  // cache, float32 -- is the cache the backend always had.
  CacheSettings cache;
  // The CPU backend's single-token products (engine/backend/qgemv.h): 16-bit integer
  // activations by default, kFloatActivations for decode equal to the prefill's float
  // products. SINKSCOPE_QGEMV overrides it for every product (benchmarks' A/B runs).
  QgemvMode decode_products = QgemvMode::kInt16Activations;
  GpuWeights gpu_weights = GpuWeights::kAuto;  // CUDA backend only
  GpuActivations gpu_activations = kDefaultGpuActivations;  // CUDA backend, native weights only
  SparseDecodeKernels sparse_decode = SparseDecodeKernels::kAuto;  // CUDA backend only
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu" or the device name
  virtual const Model& model() const = 0;

  // Runs tokens at positions [n_past, n_past + n) and appends their K/V. Writes logits for the
  // last token (n_vocab floats) or every token (n * n_vocab). Throws BackendError when the
  // context would overflow (nothing is appended then), Cancelled when `cancel` is raised.
  virtual void forward(std::span<const TokenId> tokens, LogitsMode mode,
                       std::vector<float>& logits) = 0;

  virtual int n_past() const = 0;
  virtual int capacity() const = 0;
  virtual void reset() = 0;  // empties the KV cache and the probes

  virtual void set_attention(const AttentionSettings& s) = 0;
  virtual const AttentionSettings& attention() const = 0;
  virtual const AttentionProbes& probes() const = 0;
  // Asks the next prefill to record the skip mask of (layer, head); -1, -1 stops it.
  virtual void request_skip_mask(int layer, int head) = 0;

  // Probe, off by default (the workbench, tests/gpu/test_skip_agreement.cpp): later prefills
  // record the skip mask of every (layer, head) into AttentionProbes::all_masks, or, where the
  // CPU backend prefills a windowed cache in chunks, as tiles into all_tiles. with_stat: the
  // CPU also records each cell's deciding statistic (all_stat, 4 bytes a cell: 1 GB for 32
  // layers x 32 heads at 32K tokens, so only the CPU-vs-GPU agreement test asks for it; full
  // cache only).
  virtual void request_all_skip_masks(bool on, bool with_stat = false) {
    (void)with_stat;
    if (on) throw BackendError(name() + " backend: the all-heads skip-mask probe is not supported");
  }
  // Debug capture, off by default: the next prefill copies the post-RoPE queries of its tokens
  // and the cached keys and values of r.layer (every position) into qkv_capture(), or of one
  // head only, without the values (QkvCaptureRequest::head); layer -1 stops it.
  virtual void request_qkv_capture(const QkvCaptureRequest& r) {
    if (r.layer >= 0) throw BackendError(name() + " backend: the Q/K/V capture is not supported");
  }
  virtual const QkvCapture& qkv_capture() const {
    static const QkvCapture none;
    return none;
  }
  // The capture of `layer` from the last capture prefill (a request's range of layers on the
  // CPU backend), or nullptr where that layer was not captured.
  virtual const QkvCapture* qkv_capture_of(int layer) const {
    const QkvCapture& c = qkv_capture();
    return layer >= 0 && c.layer == layer ? &c : nullptr;
  }

  // The row statistics of the last forward: always after LogitsMode::kLastRowStats; after
  // kAll only lse and top1, where the backend computed them next to the logits (the CUDA
  // backend does, on the device; false otherwise, and the caller computes them from the
  // logits). Any later forward replaces them.
  virtual bool last_row_stats(RowStats* out) const {
    (void)out;
    return false;
  }
  // KL(p || q) per row, in nats, of the distributions the LM head makes of two forwards'
  // hidden states (RowStats::hidden) of the same number of rows: sum_t p_t (log p_t - log q_t)
  // in double, computed where the backend computes logits. Identical rows give exactly 0.
  // Throws BackendError on a shape mismatch.
  virtual std::vector<double> kl_rows(const HiddenRows& p, const HiddenRows& q) = 0;

  // Goes back to the state after the first n_past positions: drops every later position from
  // the KV cache and sets the probes to `probes` (a copy of probes() taken at that point), so
  // a forward from there runs as if the later positions had never been. False, with nothing
  // changed, where the backend or its cache cannot (a windowed cache has evicted; a backend
  // without it): then reset() and run the positions again.
  virtual bool rewind(int n_past, const AttentionProbes& probes) {
    (void)n_past;
    (void)probes;
    return false;
  }

  // The KV cache's token and memory accounting (engine/cache/kv_cache.h); zeros where unsupported.
  virtual KvCacheStats cache_stats() const { return {}; }
  // The dynamic-sparse decode steps' kernel choice (CUDA backend; see SparseDecodeKernels).
  virtual DecodePathStats decode_path_stats() const { return {}; }
  // Records the column-mass probe (AttentionProbes::col_mass, engine/eval/sinks.h) for key positions
  // < n in later forwards; 0 stops it. Takes effect from the next reset().
  virtual void request_column_mass(int n) {
    if (n != 0) throw BackendError(name() + " backend: the column-mass probe is not supported");
  }

  void set_cancel_flag(const std::atomic<bool>* flag) { m_cancel = flag; }
  void set_span_recorder(prof::SpanRecorder* r) { m_spans = r; }
  // Called on the forward's thread as a multi-token forward advances: the share of its work
  // done, in [0, 1] (per layer of each chunk, where a backend reports it). Empty: none.
  void set_progress_callback(std::function<void(double)> fn) { m_progress = std::move(fn); }

 protected:
  void check_cancel() const {
    if (m_cancel && m_cancel->load(std::memory_order_relaxed)) throw Cancelled();
  }
  void report_progress(double fraction) const {
    if (m_progress) m_progress(fraction);
  }
  const std::atomic<bool>* m_cancel = nullptr;
  prof::SpanRecorder* m_spans = nullptr;
  std::function<void(double)> m_progress;
};

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Model> model,
                                          const BackendOptions& options);

}  // namespace sinkscope
