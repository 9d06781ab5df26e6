// SPDX-License-Identifier: Apache-2.0
// The CUDA backend. Per layer, mirroring engine/cpu_backend.cpp:
//   RMSNorm (fp32 -> bf16) -> fused QKV GEMM (fp32 out) -> bias + RoPE + paged KV append
//   -> attention (kernels::launch_attention) -> O GEMM with the residual add fused (beta = 1)
//   -> RMSNorm -> fused gate|up GEMM -> SwiGLU -> down GEMM with the residual add fused.
// Then the final RMSNorm and the LM head (fp32 logits). Decode steps (one token) run the fused
// batch-1 kernels of kernels/decode_fused.h instead (4 per layer + the attention) unless
// SINKSCOPE_FUSED_DECODE=0 or the shape is unsupported (fused_decode() says why).
//
// Decode and CUDA Graphs. A decode step reads everything that changes from one position to the
// next from a 16-byte step record in device memory: the token id (embedding gather), the position
// (RoPE + KV append), the cache length (attention, AttentionParams::kv_len_dev) and log2(lambda)
// (length-scaled lambda changes every step). The attention grid and workspace are sized from an
// upper bound of the length (kv_bound(): the next power of two, at least kMinKvBound, at most the
// allocated cache), so one captured graph serves every position up to its bound. A step is then:
// the host writes the record into pinned memory, cudaGraphLaunch (the graph copies the record
// in, runs ~330 kernels, copies logits and probes out to pinned memory), one synchronisation.
// Graphs are keyed by (settings generation, bound, dense/sparse kernels) and kept (a few, LRU),
// so a new capture happens only when the length crosses a power of two or the settings change;
// reset() keeps them (they hold no position). Eager steps (graphs off, or a capture failed) run
// the very same enqueue on the stream, so graph and eager results are equal bit for bit. The
// attention kernels re-plan the split of the actual length on the device exactly as a host
// launch would, so the numbers also equal those of a launch with the host length.
#include "engine/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "engine/cuda/blas.h"
#include "engine/cuda/cuda_errors.h"
#include "engine/cuda/device_buffer.h"
#include "engine/kv_page_plan.h"
#include "engine/rope.h"
#include "engine/thread_pool.h"
#include "profiler/graph_capture.h"
#include "kernels/attention.h"
#include "kernels/decode_fused.h"
#include "kernels/ops.h"

namespace sinkscope {
namespace {

using gpu::Blas;
using gpu::DeviceBuffer;
using gpu::PinnedBuffer;

constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;
constexpr int kPositionAlign = 128;  // cache positions rounded up: pages of 64 or 128
static_assert(kQueryTileRows == kernels::kPrefillQueryTile, "the CPU and GPU query tiles");
// Device passes are whole prefill CTAs (kPrefillCtaRows = two query tiles), so a pass is also a
// whole number of query tiles. (The warp-specialised
// sparse kernel's three-consumer variants have 192-row CTAs: a pass's last CTA may then hold 64
// or 128 padding rows, which that kernel masks and does not count.)
static_assert(kernels::kPrefillCtaRows % kQueryTileRows == 0, "a CTA holds whole query tiles");
constexpr int kPassAlign = kernels::kPrefillCtaRows;
constexpr int kMaxLogitRows = 128;   // LM-head rows per GEMM (bounds the logits scratch)
constexpr size_t kStagingFloats = size_t(16) << 20;  // fp32 staging for the weight upload

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

struct Event {
  cudaEvent_t e = nullptr;
  Event() = default;
  ~Event() {
    if (e) (void)cudaEventDestroy(e);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() = default;
  void create() { SS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s) (void)cudaStreamDestroy(s);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

// Decode graphs kept: the bounds of one sequence are a handful of powers of two.
constexpr size_t kMaxGraphs = 8;
constexpr int64_t kMinKvBound = 512;  // smallest length bound a decode graph is captured for

// One executable decode graph, valid for every cache length <= bound under one settings
// generation and one kernel choice (dense / sparse). Move-only owner of the exec.
struct DecodeGraph {
  cudaGraphExec_t exec = nullptr;
  int64_t bound = 0;
  bool sparse = false;
  bool sinkq = false;  // cache position mode past the window: unfused + query re-rotation
  uint64_t gen = 0;
  uint64_t last_use = 0;
  DecodeGraph() = default;
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;
  DecodeGraph(DecodeGraph&& o) noexcept { *this = std::move(o); }
  DecodeGraph& operator=(DecodeGraph&& o) noexcept {
    std::swap(exec, o.exec);
    bound = o.bound;
    sparse = o.sparse;
    sinkq = o.sinkq;
    gen = o.gen;
    last_use = o.last_use;
    return *this;
  }
  ~DecodeGraph() {
    if (exec) (void)cudaGraphExecDestroy(exec);
  }
};

// Device step record of a decode step (int32 slots of m_step / m_h_step).
// kStepPos is the append position (the ring position of a windowed cache, engine/kv_page_plan.h);
// kStepPosOrig the original position and kStepNTiles the live-page count (windowed caches).
enum StepSlot : int {
  kStepToken = 0,
  kStepPos = 1,
  kStepKvLen = 2,
  kStepLog2Lambda = 3,
  kStepPosOrig = 4,
  kStepNTiles = 5,
  kStepSlots
};

struct LayerDev {
  const uint16_t* w_qkv = nullptr;   // (q_dim + 2 kv_dim, D): wq | wk | wv rows
  const float* b_qkv = nullptr;      // (q_dim + 2 kv_dim) or null
  const uint16_t* w_o = nullptr;     // (D, q_dim)
  const uint16_t* w_gu = nullptr;    // (2 n_ff, D): w_gate | w_up rows
  const uint16_t* w_down = nullptr;  // (D, n_ff)
  const float* attn_norm = nullptr;  // (D)
  const float* ffn_norm = nullptr;   // (D)
};

// The model's weights on one device, shared by every backend of that model there (the
// workbench keeps a dense baseline and a variant backend, and a cache-policy change makes a new
// variant: without sharing each would upload ~270 MB again). Immutable after the upload.
struct DeviceWeights {
  DeviceBuffer w16;                   // every bf16 matrix
  DeviceBuffer w32;                   // norms and biases
  const uint16_t* embd = nullptr;     // (n_vocab, D)
  const uint16_t* lm_head = nullptr;  // (n_vocab, D), == embd when tied
  const float* out_norm = nullptr;
  std::vector<LayerDev> layers;
  uint64_t bytes() const { return w16.bytes() + w32.bytes(); }
};

// Process-wide registry of live weight sets by (model, device). A backend holds its Model, so
// a live entry's Model address cannot be reused by another model.
std::shared_ptr<DeviceWeights> shared_weights(const Model* m, int device,
                                              std::shared_ptr<DeviceWeights> add = nullptr) {
  static std::mutex mu;
  static std::map<std::pair<const Model*, int>, std::weak_ptr<DeviceWeights>> live;
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = live.begin(); it != live.end();) it = it->second.expired() ? live.erase(it) : std::next(it);
  auto& slot = live[{m, device}];
  if (add) slot = add;
  return slot.lock();
}

class CudaBackendImpl final : public CudaBackend {
 public:
  CudaBackendImpl(std::shared_ptr<const Model> model, const BackendOptions& opt,
                  const CudaBackendOptions& copt);
  ~CudaBackendImpl() override;

  std::string name() const override { return m_device_name; }
  const Model& model() const override { return *m_model; }
  int n_past() const override { return m_n_past; }
  // Like the CPU: a windowed cache streams without end; the full cache stops at the smaller of
  // max_context and per_request_limit_tokens.
  int capacity() const override {
    return m_plan->windowed() ? m_capacity : int(m_plan->stats().capacity_tokens);
  }
  KvCacheStats cache_stats() const override { return m_plan->stats(); }
  void reset() override;
  void set_attention(const AttentionSettings& s) override;
  const AttentionSettings& attention() const override { return m_attn; }
  const AttentionProbes& probes() const override { return m_probes; }
  void request_skip_mask(int layer, int head) override;
  void request_all_skip_masks(bool on, bool with_stat) override;
  void request_qkv_capture(const QkvCaptureRequest& r) override;
  const QkvCapture& qkv_capture() const override { return m_capture; }
  void forward(std::span<const TokenId> tokens, LogitsMode mode,
               std::vector<float>& logits) override;

  CudaGraphStats graph_stats() const override {
    CudaGraphStats s = m_stats;
    s.graphs_cached = int64_t(m_graphs.size());
    return s;
  }
  void set_use_graphs(bool on) override {
    m_use_graphs = on;
    if (on) m_stats.disabled_reason.clear();  // allow another attempt
    invalidate_graphs();
  }
  std::string device_name() const override { return m_device_name; }
  bool fused_decode(std::string* why_not) const override {
    if (why_not) *why_not = m_fused_why;
    return m_fused;
  }
  uint64_t device_bytes() const override { return m_device_bytes; }
  bool last_row_stats(std::vector<double>* lse, std::vector<int>* top1) const override {
    if (m_row_stats_n < 0 || m_row_stats_rows != m_row_stats_n) return false;
    if (lse) *lse = m_row_lse;
    if (top1) *top1 = m_row_top1;
    return true;
  }

 private:
  // One device pass over n tokens at positions [pos0, pos0 + n); token ids already in m_tokens.
  // kv_bound > 0 (decode steps): token, position, length and log2(lambda) come from the device
  // step record m_step instead (pos0 is then only informative), lengths up to kv_bound.
  struct Pass {
    int n = 0;
    int pos0 = 0;
    double lambda = 0.0;
    bool decode = false;     // probes go to the decode counters
    bool capturing = false;  // no cancel checks (a throw would abandon the capture)
    int64_t kv_bound = 0;
    bool sinkq = false;  // cache position mode: queries re-rotated at their cache index
  };

  static void validate_attention(const AttentionSettings& s);
  DeviceBuffer alloc(size_t bytes, const char* what);
  void upload_weights(DeviceWeights& dw);
  void upload_bf16(uint16_t* dst, const std::vector<float>& src, size_t expect, const char* what,
                   float* staging);
  const float* upload_f32(float* dst, const std::vector<float>& src, size_t expect,
                          const char* what);

  void enqueue_layers(cudaStream_t s, Blas& blas, const Pass& p);
  // x: the hidden states (rows from row0); nullptr = this pass's residual stream m_x.
  void enqueue_lm_head(cudaStream_t s, Blas& blas, int row0, int rows, const float* x = nullptr);
  // The LM head over nc rows of hidden states (x, or this pass's m_x), the logits into dst
  // row-major, their row statistics into m_row_lse / m_row_top1 from row stats_row0 of the
  // forward.
  void logit_rows_to_host(int nc, float* dst, int64_t stats_row0, const float* x = nullptr);
  kernels::AttentionParams attention_params(int layer, const Pass& p) const;
  // bf16 pages of layer l (a quantized cache: its protected bf16 pages, engine/kv_page_plan.h).
  uint16_t* k_layer(int l) const { return m_k.as<uint16_t>() + size_t(l) * m_layer_kv_elems; }
  uint16_t* v_layer(int l) const { return m_v.as<uint16_t>() + size_t(l) * m_layer_kv_elems; }
  // Quantized cache: codes and fp16 scales of layer l (same page ids as the bf16 layout).
  uint8_t* kc_layer(int l) const { return m_kc.as<uint8_t>() + size_t(l) * m_layer_code_bytes; }
  uint8_t* vc_layer(int l) const { return m_vc.as<uint8_t>() + size_t(l) * m_layer_code_bytes; }
  uint16_t* ks_layer(int l) const { return m_ks.as<uint16_t>() + size_t(l) * m_layer_scale_elems; }
  uint16_t* vs_layer(int l) const { return m_vs.as<uint16_t>() + size_t(l) * m_layer_scale_elems; }
  void upload_full_page_table();  // quantized full cache: protected pages in the table

  // sinkq: cache position mode past the window (queries re-rotated at their cache index for
  // the sink keys, AttentionParams::q_sink).
  // deferred (a windowed forward's chunks): no logits and no synchronisation here; the final
  // hidden states of the n tokens go to the device rows `stage` (when not null), whose LM head
  // the caller runs later over many chunks at once (forward_windowed).
  void prefill(std::span<const TokenId> tokens, LogitsMode mode, double lambda,
               std::vector<float>& logits, bool sinkq = false, bool deferred = false,
               float* stage = nullptr);
  void decode_step(TokenId token, double lambda, std::vector<float>& logits, bool sinkq = false);
  // A sliding-window cache: the tokens in chunks (engine/kv_page_plan.h), page tables and RoPE
  // ring rows uploaded before each, evictions after.
  void forward_windowed(std::span<const TokenId> tokens, LogitsMode mode,
                        std::vector<float>& logits);
  void upload_window_tables(int m);
  // The whole decode step for lengths <= bound: step record in, layers, LM head, logits and
  // probes out (to pinned memory). Eager and captured alike.
  void enqueue_decode(cudaStream_t s, Blas& blas, int64_t bound, double lambda, bool capturing,
                      bool sinkq = false);
  int64_t kv_bound(int64_t kv_len) const;
  cudaGraphExec_t decode_graph(int64_t bound, double lambda, bool sinkq);  // nullptr: eager
  void recover_after_failed_forward();
  void invalidate_graphs() {
    m_graphs.clear();  // callers have synchronised: no graph is in flight
    ++m_gen;
  }
  void disable_graphs(const std::string& why);
  void enqueue_probe_copy();
  void apply_probes();
  void repage(int old_bs, int new_bs);

  std::shared_ptr<const Model> m_model;
  AttentionSettings m_attn;
  CudaBackendOptions m_copt;
  AttentionProbes m_probes;
  int m_device = 0;
  std::string m_device_name;
  int m_capacity = 0;
  int m_alloc_pos = 0;  // cache positions allocated (capacity rounded up to 128)
  int m_batch = 0;      // tokens per device pass
  int m_logit_rows = 0;
  int m_n_past = 0;
  CacheSettings m_cache_settings;
  std::unique_ptr<KvPagePlan> m_plan;  // budgets, stats; pages of a windowed cache
  int m_window_batch = 0;              // windowed: the device batch the pool was sized for
  size_t m_layer_kv_elems = 0;
  // Quantized KV (cache.quantization, engine/kv_layout.h): 8 / 4, 0 = the bf16 cache.
  int m_kv_bits = 0;
  size_t m_layer_code_bytes = 0, m_layer_scale_elems = 0;
  int m_n_prot_extra = 0;
  uint64_t m_device_bytes = 0;
  bool m_use_graphs = true;
  bool m_fused = false;     // decode steps through kernels/decode_fused.h
  std::string m_fused_why;  // why not, when !m_fused
  uint64_t m_gen = 1;
  uint64_t m_use_clock = 0;
  CudaGraphStats m_stats;

  // Declaration order = reverse destruction order: streams outlive everything using them.
  Stream m_stream;      // every execution
  Stream m_cap_stream;  // captures (executes only the warm-up pass at construction)
  std::unique_ptr<Blas> m_blas, m_blas_cap;
  prof::GraphLayoutRecorder* m_capture_layout = nullptr;  // set while decode_graph() captures
  std::vector<DecodeGraph> m_graphs;

  // Weights (shared_weights(): one upload per model and device).
  std::shared_ptr<const DeviceWeights> m_weights;
  DeviceBuffer m_rope_cos, m_rope_sin;  // (alloc_pos, rope_dim/2)
  // KV cache: per layer, pages[page][kv_head][slot][head_dim] bf16, identity page table.
  DeviceBuffer m_k, m_v, m_page_table, m_repage_tmp;
  // Quantized cache: per layer pages[page][kv_head][slot][code bytes] codes and [...][d/32]
  // fp16 scales; m_k / m_v then hold only the protected bf16 pages; fp32 K|V rows of one pass
  // (the append kernels' output, quantized by launch_kv_quant_append); the sorted
  // protected_positions (device).
  DeviceBuffer m_kc, m_vc, m_ks, m_vs, m_kv32, m_prot_extra;
  // Windowed cache (engine/kv_page_plan.h): m_page_table is the append table (ring position /
  // block_size -> page), the attention reads the live-page list (first positions, page ids), and
  // m_rope_cos/sin hold ring rows. Cache position mode: angles of cache indices [0, S + W) and
  // the re-rotated queries.
  DeviceBuffer m_tile_pos0, m_tile_page, m_rope_cache_cos, m_rope_cache_sin, m_q_sink;
  // Windowed forwards with all-position logits: final hidden states of many chunks, whose LM
  // head runs once (allocated at first use, m_stage_rows rows of n_embd floats).
  DeviceBuffer m_stage;
  int m_stage_rows = 0;
  std::vector<float> m_h_rope;  // pageable staging of ring rows (cos | sin)
  RopeTable m_rope_host;        // the CPU's angles, for the ring rows
  // Scratch for one pass of up to m_batch tokens.
  DeviceBuffer m_tokens, m_x, m_xn, m_qkv, m_q, m_att, m_gu, m_act, m_logits, m_attn_ws;
  DeviceBuffer m_mask;   // u8 [q_tile][kv_tile] of the requested (layer, head), one pass
  // Debug probes (off by default): every (layer, head)'s mask of one pass, u8 [layer][head]
  // [q_tile][kv_tile] packed per pass; the Q/K/V capture of one layer (host copies).
  DeviceBuffer m_mask_all;
  bool m_all_masks = false;
  QkvCapture m_capture;
  // The capture's prefill: visibility window and early end (QkvCaptureRequest); m_vis_pos0 the
  // identity live-page list (tile t at position t * block_size) that carries the window rule.
  QkvCaptureRequest m_cap;
  DeviceBuffer m_vis_pos0;
  DeviceBuffer m_probe;  // u64 [phase: prefill, decode][visited, skipped][layer][head]
  DeviceBuffer m_step;   // int32 [kStepSlots]: the decode step record (StepSlot)
  PinnedBuffer m_h_logits, m_h_probe, m_h_step;
  // All-position logits (LogitsMode::kAll) leave the device through two pinned row blocks: the
  // GPU fills one while a few host threads copy the other into the caller's rows (a pageable
  // copy of a 2K-token prompt's 400 MB runs at ~8 GB/s and would dominate the prefill).
  PinnedBuffer m_h_rows[2];
  Event m_rows_ev[2];
  std::unique_ptr<ThreadPool> m_copy_pool;
  // Per-row log-sum-exp and argmax of those logits (Backend::last_row_stats), computed on the
  // device per row block (m_stats_dev: R doubles, then R ints) and copied with it.
  DeviceBuffer m_stats_dev;
  PinnedBuffer m_h_stats[2];
  std::vector<double> m_row_lse;
  std::vector<int> m_row_top1;
  int64_t m_row_stats_n = -1, m_row_stats_rows = 0;  // rows expected (-1: none) / filled
};

void CudaBackendImpl::validate_attention(const AttentionSettings& s) {
  if (s.block_size != 64 && s.block_size != 128)
    throw BackendError("attention block_size must be 64 or 128, got " +
                       std::to_string(s.block_size));
}

DeviceBuffer CudaBackendImpl::alloc(size_t bytes, const char* what) {
  DeviceBuffer b(std::max<size_t>(bytes, 256), what);
  m_device_bytes += b.bytes();
  return b;
}

CudaBackendImpl::CudaBackendImpl(std::shared_ptr<const Model> model, const BackendOptions& opt,
                                 const CudaBackendOptions& copt)
    : m_model(std::move(model)), m_attn(opt.attention), m_copt(copt) {
  const ModelConfig& c = m_model->config();
  validate_attention(opt.attention);
  if (c.head_dim != 64 && c.head_dim != 128)
    throw BackendError("CUDA backend: the attention kernels support head_dim 64 or 128; " + c.name +
                       " has head_dim " + std::to_string(c.head_dim));
  if (c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0)
    throw BackendError("CUDA backend: n_head must be a multiple of n_head_kv");
  if (c.rope_dim < 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    throw BackendError("CUDA backend: rope_dim " + std::to_string(c.rope_dim) +
                       " must be even and <= head_dim");
  // Never ignore cache settings: what the kernels cannot do yet is refused, naming the setting
  // (backend_factory's auto mode then falls back to the CPU with a note).
  if (const std::string why = cuda_cache_unsupported(opt.cache); !why.empty())
    throw BackendError("CUDA backend: " + why);
  if (opt.cache.block_size != 0 && opt.cache.block_size != opt.attention.block_size)
    throw BackendError("cache block_size " + std::to_string(opt.cache.block_size) +
                       " differs from the attention block_size " +
                       std::to_string(opt.attention.block_size) + " (a KV page is one attention tile)");
  m_cache_settings = opt.cache;
  m_rope_host = RopeTable(c, m_model->weights().rope_freqs);
  m_capacity = opt.max_context > 0 ? opt.max_context : c.n_ctx_train;
  if (m_capacity <= 0) throw BackendError("CUDA backend: KV capacity must be positive");
  if (const char* env = std::getenv("SINKSCOPE_CUDA_GRAPHS"); env && std::string(env) == "0")
    m_copt.use_graphs = false;
  m_use_graphs = m_copt.use_graphs;
  if (const char* env = std::getenv("SINKSCOPE_FUSED_DECODE"); env && std::string(env) == "0")
    m_copt.fused_decode = false;
  {
    kernels::DecodeFusedShape fs;
    fs.n_embd = c.n_embd;
    fs.n_head = c.n_head;
    fs.n_head_kv = c.n_head_kv;
    fs.head_dim = c.head_dim;
    fs.rope_dim = c.rope_dim;
    fs.n_ff = c.n_ff;
    m_fused_why = m_copt.fused_decode ? kernels::decode_fused_unsupported(fs)
                                      : "switched off (SINKSCOPE_FUSED_DECODE=0 or the option)";
    m_fused = m_fused_why.empty();
  }

  if (m_copt.device >= 0) SS_CUDA(cudaSetDevice(m_copt.device));
  SS_CUDA(cudaGetDevice(&m_device));
  cudaDeviceProp prop{};
  SS_CUDA(cudaGetDeviceProperties(&prop, m_device));
  m_device_name = prop.name;
  SS_LAUNCH(kernels::ops_device_check());
  m_stream.create();  // on the selected device
  m_cap_stream.create();

  const int64_t D = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  const int64_t W = Q + 2 * KV;
  m_alloc_pos = int(round_up(m_capacity, kPositionAlign));
  const CacheSettings& ks = m_cache_settings;
  if (ks.windowed()) {
    // A pool of pages for sinks + window + one pass, recycled as the window slides; the stream
    // itself has no end (positions within int, like the CPU).
    if (ks.window_size < 1 || ks.window_size > (int64_t(1) << 28) || ks.sink_keep_count < 0 ||
        ks.sink_keep_count > 1024)
      throw BackendError("sliding_window: window_size must be in [1, 2^28] and sink_keep_count "
                         "in [0, 1024], got " + std::to_string(ks.window_size) + " and " +
                         std::to_string(ks.sink_keep_count));
    m_window_batch = int(round_up(std::max(copt.max_batch, 1), kPassAlign));
    const int chunk = windowed_chunk(ks, 128, m_window_batch);
    m_alloc_pos = int(windowed_pool_positions(ks, chunk));
    m_capacity = 1 << 30;
  }
  m_batch =
      int(std::min<int64_t>(round_up(std::max(copt.max_batch, 1), kPassAlign), m_alloc_pos));
  const KvQuantSettings& qs = ks.quantization;
  KvQuantFormat qf;
  if (qs.enabled) {
    qf.bits = qs.kv_dtype == KvQuantDtype::kInt8 ? 8 : 4;
    qf.group = qs.group_size;
    m_kv_bits = qf.bits;
  }
  // K + V bytes of one position in one layer: bf16, or codes + fp16 scales (the CPU's count).
  const int64_t row_bytes =
      m_kv_bits ? 2 * int64_t(c.n_head_kv) * (qf.code_bytes(c.head_dim) + 2 * qf.scales(c.head_dim))
                : int64_t(4) * KV;
  m_plan = std::make_unique<KvPagePlan>(c.n_layer, row_bytes, opt.attention.block_size,
                                        ks.windowed() ? int64_t(1) << 30 : m_capacity,
                                        ks.windowed() ? m_alloc_pos : 0, ks,
                                        m_kv_bits ? int64_t(4) * KV : 0);
  m_logit_rows = std::min(kMaxLogitRows, m_batch);
  m_layer_kv_elems = size_t(m_alloc_pos) * size_t(KV);
  if (m_kv_bits) {
    // bf16 pages only for the protected pages (sinks, protected_positions): their pool.
    m_layer_kv_elems = size_t(protected_pool_positions(ks, m_alloc_pos, m_alloc_pos)) * size_t(KV);
    m_layer_code_bytes = size_t(m_alloc_pos) * c.n_head_kv * size_t(qf.code_bytes(c.head_dim));
    m_layer_scale_elems = size_t(m_alloc_pos) * c.n_head_kv * size_t(qf.scales(c.head_dim));
  }

  // Decode workspace for the longest cache, the larger of both block sizes, sparse layout.
  uint64_t ws_bytes = 0;
  for (int bs : {64, 128}) {
    kernels::AttentionParams p;
    p.n_q_tokens = 1;
    p.n_q_heads = c.n_head;
    p.n_kv_heads = c.n_head_kv;
    p.head_dim = c.head_dim;
    p.block_size = bs;
    p.kv_len = m_alloc_pos;
    p.q_start = m_alloc_pos - 1;
    p.force_sparse_kernel = true;
    ws_bytes = std::max(ws_bytes, kernels::attention_workspace_bytes(p));  // host length
    // Decode steps: device-side length, grid of the bound (the workspace grows with the bound,
    // so the largest bound covers all). The pointer only marks the mode; it is not read here.
    static const int32_t kMarker = 0;
    p.kv_len_dev = &kMarker;
    ws_bytes = std::max(ws_bytes, kernels::attention_workspace_bytes(p));
  }

  // Plan every allocation, then compare with the free memory before touching it, so the error
  // names the whole need rather than whichever buffer happened to fail.
  const bool tied = m_model->weights().output.empty();
  const auto a128 = [](int64_t e) { return size_t(round_up(e, 128)); };
  size_t w16_elems = a128(V * D) + (tied ? 0 : a128(V * D));
  w16_elems += size_t(c.n_layer) * (a128(W * D) + a128(D * Q) + a128(2 * F * D) + a128(D * F));
  size_t w32_elems = a128(D) + size_t(c.n_layer) * (2 * a128(D) + (c.qkv_bias ? a128(W) : 0));
  const size_t half = size_t(std::max(c.rope_dim / 2, 1));
  const uint64_t weights_b = w16_elems * 2 + w32_elems * 4;
  const uint64_t kv_b = 2 * uint64_t(c.n_layer) *
                        (m_layer_kv_elems * 2 + m_layer_code_bytes + m_layer_scale_elems * 2);
  const uint64_t B = uint64_t(m_batch);
  const uint64_t scratch_b = B * 4 + B * D * 4 + B * D * 2 + B * W * 4 + 2 * B * Q * 2 +
                             B * 2 * F * 4 + B * F * 2 + uint64_t(m_logit_rows) * V * 4 + ws_bytes +
                             2 * size_t(m_alloc_pos) * half * 4 + 2 * kBlasWorkspaceBytes +
                             kStagingFloats * 4;
  std::shared_ptr<DeviceWeights> shared = shared_weights(m_model.get(), m_device);
  const uint64_t need = (shared ? 0 : weights_b) + kv_b + scratch_b;
  size_t free_b = 0, total_b = 0;
  SS_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (need > free_b)
    throw BackendError("CUDA backend needs " + gpu::format_bytes(need) + " of device memory (" +
                       "weights " + gpu::format_bytes(weights_b) + ", KV cache for " +
                       std::to_string(m_capacity) + " tokens " + gpu::format_bytes(kv_b) +
                       ", scratch " + gpu::format_bytes(scratch_b) + ") but " + m_device_name +
                       " has " + gpu::format_bytes(free_b) + " free of " +
                       gpu::format_bytes(total_b) + "; lower max_context to shrink the cache");

  m_blas = std::make_unique<Blas>(m_stream.s, kBlasWorkspaceBytes);
  m_blas_cap = std::make_unique<Blas>(m_cap_stream.s, kBlasWorkspaceBytes);
  m_device_bytes += 2 * kBlasWorkspaceBytes;

  if (!shared) {
    auto dw = std::make_shared<DeviceWeights>();
    dw->w16 = DeviceBuffer(w16_elems * 2, "bf16 weights");
    dw->w32 = DeviceBuffer(w32_elems * 4, "fp32 norms and biases");
    upload_weights(*dw);
    shared = shared_weights(m_model.get(), m_device, dw);
  }
  m_weights = shared;
  m_device_bytes += shared->bytes();  // counted by every backend that uses them
  m_k = alloc(m_layer_kv_elems * c.n_layer * 2, m_kv_bits ? "K cache (protected bf16 pages)" : "K cache");
  m_v = alloc(m_layer_kv_elems * c.n_layer * 2, m_kv_bits ? "V cache (protected bf16 pages)" : "V cache");
  if (m_kv_bits) {
    m_kc = alloc(m_layer_code_bytes * c.n_layer, "K cache codes");
    m_vc = alloc(m_layer_code_bytes * c.n_layer, "V cache codes");
    m_ks = alloc(m_layer_scale_elems * c.n_layer * 2, "K cache scales");
    m_vs = alloc(m_layer_scale_elems * c.n_layer * 2, "V cache scales");
    // Zero codes and scales: slots never written dequantise to 0 (finite), which the kernels'
    // masking of invisible keys relies on.
    for (DeviceBuffer* b : {&m_kc, &m_vc, &m_ks, &m_vs})
      SS_CUDA(cudaMemsetAsync(b->get(), 0, b->bytes(), m_stream.s));
    m_kv32 = alloc(B * 2 * KV * 4, "fp32 K|V rows for quantization");
    std::vector<int32_t> extra(ks.protected_positions.begin(), ks.protected_positions.end());
    std::sort(extra.begin(), extra.end());
    extra.erase(std::unique(extra.begin(), extra.end()), extra.end());
    m_n_prot_extra = qs.protect_sink_positions ? int(extra.size()) : 0;
    m_prot_extra = alloc(extra.size() * 4, "protected positions");
    if (!extra.empty())
      SS_CUDA(cudaMemcpy(m_prot_extra.get(), extra.data(), extra.size() * 4, cudaMemcpyHostToDevice));
  }
  m_page_table = alloc(size_t(m_alloc_pos / 64) * 4, "page table");
  m_rope_cos = alloc(size_t(m_alloc_pos) * half * 4, "RoPE cos table");
  m_rope_sin = alloc(size_t(m_alloc_pos) * half * 4, "RoPE sin table");
  m_tokens = alloc(B * 4, "token ids");
  m_x = alloc(B * D * 4, "residual stream");
  m_xn = alloc(B * D * 2, "normed activations");
  m_qkv = alloc(B * W * 4, "qkv projections");
  m_q = alloc(B * Q * 2, "rotated queries");
  m_att = alloc(B * Q * 2, "attention output");
  m_gu = alloc(B * 2 * F * 4, "gate|up projections");
  m_act = alloc(B * F * 2, "SwiGLU output");
  m_logits = alloc(size_t(m_logit_rows) * V * 4, "logits");
  m_attn_ws = alloc(ws_bytes, "attention decode workspace");
  m_probe = alloc(size_t(4) * c.n_layer * c.n_head * 8, "attention probes");
  m_h_logits = PinnedBuffer(size_t(V) * 4, "pinned logits");
  m_h_probe = PinnedBuffer(m_probe.bytes(), "pinned probes");
  m_step = alloc(kStepSlots * 4, "decode step record");
  if (ks.windowed()) {
    m_tile_pos0 = alloc(size_t(m_alloc_pos / 64) * 4, "live-page positions");
    m_tile_page = alloc(size_t(m_alloc_pos / 64) * 4, "live-page ids");
    if (ks.position_mode == PositionMode::kCache) {
      const size_t rows = size_t(ks.sink_keep_count + ks.window_size);
      m_rope_cache_cos = alloc(rows * half * 4, "RoPE cos of cache indices");
      m_rope_cache_sin = alloc(rows * half * 4, "RoPE sin of cache indices");
      m_q_sink = alloc(B * Q * 2, "queries at cache indices");
    }
  }
  m_h_step = PinnedBuffer(kStepSlots * 4, "pinned decode step record");

  // RoPE angles from the CPU's own table code, so both rotate with identical cos/sin.
  {
    RopeTable rope(c, m_model->weights().rope_freqs);
    std::vector<float> cs(size_t(m_alloc_pos) * half, 1.0f), sn(size_t(m_alloc_pos) * half, 0.0f);
    if (c.rope_dim >= 2)
      for (int p = 0; p < m_alloc_pos; ++p)
        rope.angles(p, &cs[size_t(p) * half], &sn[size_t(p) * half]);
    SS_CUDA(cudaMemcpyAsync(m_rope_cos.get(), cs.data(), cs.size() * 4, cudaMemcpyHostToDevice,
                            m_stream.s));
    SS_CUDA(cudaMemcpyAsync(m_rope_sin.get(), sn.data(), sn.size() * 4, cudaMemcpyHostToDevice,
                            m_stream.s));
    std::vector<int32_t> table(size_t(m_alloc_pos / 64));
    for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
    SS_CUDA(cudaMemcpyAsync(m_page_table.get(), table.data(), table.size() * 4,
                            cudaMemcpyHostToDevice, m_stream.s));
    if (m_rope_cache_cos) {  // cache indices [0, S + W), the first rows of the same table
      const size_t n = std::min(m_rope_cache_cos.bytes() / 4, cs.size());
      SS_CUDA(cudaMemcpyAsync(m_rope_cache_cos.get(), cs.data(), n * 4, cudaMemcpyHostToDevice,
                              m_stream.s));
      SS_CUDA(cudaMemcpyAsync(m_rope_cache_sin.get(), sn.data(), n * 4, cudaMemcpyHostToDevice,
                              m_stream.s));
      if (m_rope_cache_cos.bytes() / 4 > cs.size()) {  // S + W beyond the pool: compute the rest
        const size_t rows = m_rope_cache_cos.bytes() / 4 / half;
        std::vector<float> c2(rows * half, 1.0f), s2(rows * half, 0.0f);
        if (c.rope_dim >= 2)
          for (size_t p = 0; p < rows; ++p) rope.angles(int(p), &c2[p * half], &s2[p * half]);
        SS_CUDA(cudaMemcpyAsync(m_rope_cache_cos.get(), c2.data(), c2.size() * 4,
                                cudaMemcpyHostToDevice, m_stream.s));
        SS_CUDA(cudaMemcpyAsync(m_rope_cache_sin.get(), s2.data(), s2.size() * 4,
                                cudaMemcpyHostToDevice, m_stream.s));
        SS_CUDA(cudaStreamSynchronize(m_stream.s));
      }
    }
    if (m_tile_pos0) {  // the warm-up step below reads a one-page list: page 0 at position 0
      SS_CUDA(cudaMemsetAsync(m_tile_pos0.get(), 0, m_tile_pos0.bytes(), m_stream.s));
      SS_CUDA(cudaMemsetAsync(m_tile_page.get(), 0, m_tile_page.bytes(), m_stream.s));
    }
    SS_CUDA(cudaStreamSynchronize(m_stream.s));  // the host vectors die here
  }
  // One decode step on the capture stream and handle, run for real: loads every module a
  // decode step needs (the attention launcher opts every decode kernel into its shared memory
  // here) and initialises the capture handle, so nothing is first touched inside a capture. It
  // writes position 0 of the cache and the decode probes; reset() clears both.
  {
    int32_t* h = m_h_step.as<int32_t>();
    const float dense = kernels::log2_of_lambda(0.0);
    h[kStepToken] = 0;
    h[kStepPos] = 0;
    h[kStepKvLen] = 1;
    std::memcpy(&h[kStepLog2Lambda], &dense, 4);
    h[kStepPosOrig] = 0;
    h[kStepNTiles] = 1;
    enqueue_decode(m_cap_stream.s, *m_blas_cap, kv_bound(1), 0.0, true);
    SS_CUDA(cudaStreamSynchronize(m_cap_stream.s));
  }
  reset();
}

CudaBackendImpl::~CudaBackendImpl() {
  (void)cudaSetDevice(m_device);
  (void)cudaStreamSynchronize(m_stream.s);
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

void CudaBackendImpl::reset() {
  SS_CUDA(cudaSetDevice(m_device));
  m_n_past = 0;
  m_plan->reset(m_attn.block_size);  // a windowed cache takes a new page size here
  upload_full_page_table();
  const ModelConfig& c = m_model->config();
  m_probes.reset(c.n_layer, c.n_head);
  SS_CUDA(cudaMemsetAsync(m_probe.get(), 0, m_probe.bytes(), m_stream.s));
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
  // Decode graphs stay: they hold no position, only buffers and settings.
}

void CudaBackendImpl::set_attention(const AttentionSettings& s) {
  validate_attention(s);
  if (m_cache_settings.block_size != 0 && m_cache_settings.block_size != s.block_size)
    throw BackendError("attention block_size " + std::to_string(s.block_size) +
                       " differs from the cache block_size " +
                       std::to_string(m_cache_settings.block_size));
  if (m_plan->windowed() && m_n_past > 0 && s.block_size != m_attn.block_size)
    throw BackendError("CUDA backend: a sliding_window cache changes block_size only when empty "
                       "(reset first): its pages are " + std::to_string(m_attn.block_size) +
                       "-token tiles");
  SS_CUDA(cudaSetDevice(m_device));
  if (s.block_size != m_attn.block_size && m_n_past > 0 && m_kv_bits)
    throw BackendError("CUDA backend: a quantized KV cache changes block_size only when empty "
                       "(reset first): its pages are " + std::to_string(m_attn.block_size) +
                       "-token code pages");
  if (s.block_size != m_attn.block_size && m_n_past > 0) repage(m_attn.block_size, s.block_size);
  m_attn = s;
  if (m_n_past == 0) {
    m_plan->reset(s.block_size);
    upload_full_page_table();
  }
  invalidate_graphs();
}

// A quantized full cache with protected positions: the page table names the protected bf16
// pages (-1 - j, engine/kv_page_plan.h) for the current page size; identity otherwise.
void CudaBackendImpl::upload_full_page_table() {
  if (!m_kv_bits || m_plan->windowed()) return;
  const std::vector<int32_t> t = m_plan->full_page_table(m_alloc_pos / m_attn.block_size);
  SS_CUDA(cudaMemcpyAsync(m_page_table.get(), t.data(), t.size() * 4, cudaMemcpyHostToDevice,
                          m_stream.s));
  SS_CUDA(cudaStreamSynchronize(m_stream.s));  // t dies here
}

// The page size is the attention tile size, so a new block size re-lays the cached positions.
void CudaBackendImpl::repage(int old_bs, int new_bs) {
  const ModelConfig& c = m_model->config();
  if (!m_repage_tmp) m_repage_tmp = alloc(m_layer_kv_elems * 2, "KV re-paging buffer");
  uint16_t* tmp = m_repage_tmp.as<uint16_t>();
  for (int l = 0; l < c.n_layer; ++l) {
    for (uint16_t* layer : {k_layer(l), v_layer(l)}) {
      SS_LAUNCH(kernels::launch_repage_kv(layer, tmp, m_n_past, c.n_head_kv, c.head_dim, old_bs,
                                          new_bs, m_stream.s));
      SS_CUDA(
          cudaMemcpyAsync(layer, tmp, m_layer_kv_elems * 2, cudaMemcpyDeviceToDevice, m_stream.s));
    }
  }
  SS_CUDA(cudaStreamSynchronize(m_stream.s));
}

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
  a.scale = float(1.0 / std::sqrt(double(c.head_dim)));
  a.log2_lambda = kernels::log2_of_lambda(p.lambda);
  a.skip_value_load = m_attn.skip_value_load;
  a.skip_softmax_exp = m_attn.skip_softmax_exp;
  a.force_sparse_kernel = m_copt.force_sparse_kernel;
  a.prefer_ws = m_copt.warp_specialized_prefill;
  const size_t LH = size_t(c.n_layer) * c.n_head;
  uint64_t* probe = m_probe.as<uint64_t>() + (p.decode ? 2 * LH : 0);
  a.tiles_visited = probe + size_t(l) * c.n_head;
  a.tiles_skipped = probe + LH + size_t(l) * c.n_head;
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
  return a;
}

void CudaBackendImpl::request_skip_mask(int layer, int head) {
  const ModelConfig& c = m_model->config();
  if (layer >= c.n_layer || head >= c.n_head || (layer < 0) != (head < 0))
    throw BackendError("skip mask: (layer " + std::to_string(layer) + ", head " +
                       std::to_string(head) + ") is outside the model (" +
                       std::to_string(c.n_layer) + " layers, " + std::to_string(c.n_head) +
                       " heads)");
  if (layer >= 0 && m_plan->windowed())
    throw BackendError("skip mask: not recorded by the CUDA backend with a sliding_window cache "
                       "(its KV tiles are a live-page list); use the CPU backend or the full cache");
  if (layer >= 0 && !m_mask) {
    // One pass's mask at most: ceil(batch / kPrefillQueryTile) query tiles x ceil(capacity / 64)
    // KV tiles.
    const size_t rows = size_t(m_batch + kernels::kPrefillQueryTile - 1) / kernels::kPrefillQueryTile;
    const size_t cols = size_t(m_capacity + 63) / 64;
    m_mask = alloc(rows * cols, "skip mask");
  }
  m_probes.mask.layer = layer;
  m_probes.mask.head = head;
}

// with_stat: the CPU backend's statistic only (the GPU records none; all_stat stays empty).
void CudaBackendImpl::request_all_skip_masks(bool on, bool /*with_stat*/) {
  if (on && m_plan->windowed())
    throw BackendError("all-heads skip masks: recorded with the full cache only");
  if (on && !m_mask_all) {
    const ModelConfig& c = m_model->config();
    const size_t rows = size_t(m_batch + kernels::kPrefillQueryTile - 1) / kernels::kPrefillQueryTile;
    const size_t cols = size_t(m_capacity + 63) / 64;
    m_mask_all = alloc(size_t(c.n_layer) * c.n_head * rows * cols, "all-heads skip masks");
  }
  m_all_masks = on;
}

void CudaBackendImpl::request_qkv_capture(const QkvCaptureRequest& r) {
  const ModelConfig& c = m_model->config();
  const int layer = r.layer;
  if (layer >= c.n_layer) throw BackendError("Q/K/V capture: layer " + std::to_string(layer) +
                                             " is outside the model");
  if (layer >= 0 && m_plan->windowed())
    throw BackendError("Q/K/V capture: full cache only");
  if (layer >= 0 && r.more_last >= 0)
    throw BackendError("Q/K/V capture: one layer at a time on the CUDA backend");
  if (layer >= 0 && (r.sink_count < 0 || r.window < 0))
    throw BackendError("Q/K/V capture: sink_count and window must be >= 0");
  if (layer >= 0 && r.window > 0 && m_kv_bits)
    throw BackendError("Q/K/V capture: a visibility window needs a bf16 (unquantized) cache");
  m_capture = QkvCapture{};
  m_capture.layer = layer < 0 ? -1 : layer;
  m_cap = layer < 0 ? QkvCaptureRequest{} : r;
  if (m_cap.window > 0 && !m_vis_pos0)
    m_vis_pos0 = alloc(size_t(m_alloc_pos / 64) * 4, "capture live-page positions");
}

void CudaBackendImpl::enqueue_layers(cudaStream_t s, Blas& blas, const Pass& p) {
  const ModelConfig& c = m_model->config();
  const int D = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, W = Q + 2 * KV;
  float* x = m_x.as<float>();
  uint16_t* xn = m_xn.as<uint16_t>();
  const int32_t* tokens = p.kv_bound > 0 ? m_step.as<int32_t>() + kStepToken : m_tokens.as<int32_t>();
  SS_LAUNCH(kernels::launch_embed_gather(m_weights->embd, tokens, x, p.n, D, s));
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
    if (!fused) {
      SS_LAUNCH(kernels::launch_rms_norm(x, L.attn_norm, xn, p.n, D, c.rms_eps, s));
      blas.linear(xn, L.w_qkv, m_qkv.as<float>(), p.n, W, D);
    }

    kernels::QkvRopeParams r;
    r.qkv = m_qkv.as<float>();
    r.bias = L.b_qkv;
    r.rope_cos = m_rope_cos.as<float>();
    r.rope_sin = m_rope_sin.as<float>();
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
      f.w_qkv = L.w_qkv;
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
      rq.bias = L.b_qkv;
      rq.rope_cos = m_rope_cache_cos.as<float>();
      rq.rope_sin = m_rope_cache_sin.as<float>();
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
      // Debug capture: this pass's post-RoPE queries (pageable copy: synchronous).
      const size_t off = size_t(p.pos0 - m_capture.q_start) * Q;
      if (m_capture.q.size() >= off + size_t(p.n) * Q)
        SS_CUDA(cudaMemcpyAsync(m_capture.q.data() + off, m_q.get(), size_t(p.n) * Q * 2,
                                cudaMemcpyDeviceToHost, s));
    }

    if (fused) {
      SS_LAUNCH(kernels::launch_fused_gemv_residual(m_att.as<uint16_t>(), L.w_o, x, D, Q, s));
      kernels::FusedGateUpParams g;
      g.x = x;
      g.norm_w = L.ffn_norm;
      g.eps = c.rms_eps;
      g.w_gu = L.w_gu;
      g.act = m_act.as<uint16_t>();
      g.n_embd = D;
      g.n_ff = F;
      SS_LAUNCH(kernels::launch_fused_norm_gate_up_swiglu(g, s));
      SS_LAUNCH(kernels::launch_fused_gemv_residual(m_act.as<uint16_t>(), L.w_down, x, D, F, s));
      continue;
    }
    blas.linear(m_att.as<uint16_t>(), L.w_o, x, p.n, D, Q, 1.0f);  // x += o-proj
    SS_LAUNCH(kernels::launch_rms_norm(x, L.ffn_norm, xn, p.n, D, c.rms_eps, s));
    blas.linear(xn, L.w_gu, m_gu.as<float>(), p.n, 2 * F, D);
    SS_LAUNCH(kernels::launch_swiglu(m_gu.as<float>(), m_act.as<uint16_t>(), p.n, F, s));
    blas.linear(m_act.as<uint16_t>(), L.w_down, x, p.n, D, F, 1.0f);  // x += down-proj
  }
}

void CudaBackendImpl::enqueue_lm_head(cudaStream_t s, Blas& blas, int row0, int rows,
                                      const float* hidden) {
  const ModelConfig& c = m_model->config();
  const float* x = (hidden ? hidden : m_x.as<float>()) + size_t(row0) * c.n_embd;
  SS_LAUNCH(
      kernels::launch_rms_norm(x, m_weights->out_norm, m_xn.as<uint16_t>(), rows, c.n_embd, c.rms_eps, s));
  blas.linear(m_xn.as<uint16_t>(), m_weights->lm_head, m_logits.as<float>(), rows, c.n_vocab, c.n_embd);
}

void CudaBackendImpl::enqueue_probe_copy() {
  SS_CUDA(cudaMemcpyAsync(m_h_probe.as<uint64_t>(), m_probe.get(), m_probe.bytes(),
                          cudaMemcpyDeviceToHost, m_stream.s));
}

void CudaBackendImpl::apply_probes() {
  const size_t LH = size_t(m_probes.n_layer) * m_probes.n_head;
  const uint64_t* h = m_h_probe.as<uint64_t>();
  for (size_t i = 0; i < LH; ++i) {
    m_probes.prefill[i] = {int64_t(h[i]), int64_t(h[LH + i])};
    m_probes.decode[i] = {int64_t(h[2 * LH + i]), int64_t(h[3 * LH + i])};
  }
}

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
  try {
    if (windowed) {
      forward_windowed(tokens, mode, logits);
    } else if (decode) {
      decode_step(tokens[0], lambda, logits);
    } else {
      prefill(tokens, mode, lambda, logits);
    }
  } catch (const Cancelled&) {
    m_row_stats_n = -1;
    // A cancel is raised on the host between launches: what was enqueued is valid work, so the
    // captured decode graphs stay (dropping them would make every cancelled run re-capture, and
    // the churn of graph instantiations grows the process's memory over many runs).
    recover_after_failed_forward();
    throw;
  } catch (...) {
    m_row_stats_n = -1;
    recover_after_failed_forward();
    invalidate_graphs();
    throw;
  }
  if (!windowed) {
    m_plan->commit(n);
    m_n_past += n;
  }
  apply_probes();
}

void CudaBackendImpl::upload_window_tables(int m) {
  const ModelConfig& c = m_model->config();
  const int64_t n0 = m_n_past;
  cudaStream_t s = m_stream.s;
  // Pageable sources: cudaMemcpyAsync stages them before returning, so they may change after.
  for (const auto& [idx, page] : m_plan->append_entries())
    SS_CUDA(cudaMemcpyAsync(m_page_table.as<int32_t>() + idx, &page, 4, cudaMemcpyHostToDevice, s));
  if (c.rope_dim >= 2) {  // ring rows of this chunk's positions
    const size_t half = size_t(c.rope_dim / 2);
    m_h_rope.resize(2 * size_t(m) * half);
    for (int i = 0; i < m; ++i)
      m_rope_host.angles(int(n0 + i), &m_h_rope[size_t(i) * half],
                         &m_h_rope[(size_t(m) + size_t(i)) * half]);
    const size_t row0 = size_t(m_plan->ring_pos(n0));
    SS_CUDA(cudaMemcpyAsync(m_rope_cos.as<float>() + row0 * half, m_h_rope.data(),
                            size_t(m) * half * 4, cudaMemcpyHostToDevice, s));
    SS_CUDA(cudaMemcpyAsync(m_rope_sin.as<float>() + row0 * half, m_h_rope.data() + size_t(m) * half,
                            size_t(m) * half * 4, cudaMemcpyHostToDevice, s));
  }
  const std::vector<int32_t>& pos0 = m_plan->tile_pos0();
  const std::vector<int32_t>& page = m_plan->tile_page();
  SS_CUDA(cudaMemcpyAsync(m_tile_pos0.get(), pos0.data(), pos0.size() * 4, cudaMemcpyHostToDevice, s));
  SS_CUDA(cudaMemcpyAsync(m_tile_page.get(), page.data(), page.size() * 4, cudaMemcpyHostToDevice, s));
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
  const bool all = mode == LogitsMode::kAll;
  logits.resize((all ? size_t(n) : 1) * V);
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
      std::copy_n(part.data(), V, logits.data() + (all ? size_t(off) * V : 0));
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
  if (m_capture.layer >= 0) {  // debug capture: queries per pass (enqueue_layers), K/V below
    m_capture.n_q = n;
    m_capture.q_start = m_n_past;
    m_capture.n_head = c.n_head;
    m_capture.n_head_kv = c.n_head_kv;
    m_capture.head_dim = c.head_dim;
    m_capture.q.assign(size_t(n) * c.q_dim(), 0);
    if (m_cap.window > 0) {  // the identity list for this block size (attention_params)
      const int bs = m_attn.block_size;
      std::vector<int32_t> pos0(size_t(m_alloc_pos / bs));
      for (size_t t = 0; t < pos0.size(); ++t) pos0[t] = int32_t(t) * bs;
      SS_CUDA(cudaMemcpyAsync(m_vis_pos0.get(), pos0.data(), pos0.size() * 4,
                              cudaMemcpyHostToDevice, m_stream.s));
      SS_CUDA(cudaStreamSynchronize(m_stream.s));  // pos0 dies here
    }
  }
  // No LM head after a capture that ends at its layer: the logits are NaN.
  const bool no_head = m_capture.layer >= 0 && m_cap.stop_after_layer;
  if (m_all_masks && m_mask_all) {
    m_probes.all_rows = (n + kernels::kPrefillQueryTile - 1) / kernels::kPrefillQueryTile;
    m_probes.all_cols = (m_n_past + n + m_attn.block_size - 1) / m_attn.block_size;
    m_probes.all_masks.assign(size_t(c.n_layer) * c.n_head * m_probes.all_rows * m_probes.all_cols, 0);
    m_probes.all_stat.clear();
  }
  // Passes of m_batch tokens (a multiple of kPassAlign: whole CTAs of two 64-row query tiles, so
  // the skip votes and the probes equal one pass over all n tokens).
  for (int start = 0; start < n; start += m_batch) {
    const int nc = std::min(m_batch, n - start);
    SS_CUDA(cudaMemcpyAsync(m_tokens.get(), tokens.data() + start, size_t(nc) * 4,
                            cudaMemcpyHostToDevice, m_stream.s));
    Pass pass{nc, m_n_past + start, lambda, false, false};
    pass.sinkq = sinkq;
    enqueue_layers(m_stream.s, *m_blas, pass);
    if (m_probes.mask.layer >= 0 && m_mask) {
      // The kernel writes this pass's tiles (1 skipped, 0 computed, 2 not visible); the probe
      // convention is 0 not visible, 1 computed, 2 skipped. Passes are whole query tiles.
      const int qt = kernels::kPrefillQueryTile, bs = m_attn.block_size;
      const int rows = (nc + qt - 1) / qt;
      const int cols = (m_n_past + start + nc + bs - 1) / bs;
      std::vector<uint8_t> h(size_t(rows) * cols);
      SS_CUDA(cudaMemcpyAsync(h.data(), m_mask.get(), h.size(), cudaMemcpyDeviceToHost, m_stream.s));
      SS_CUDA(cudaStreamSynchronize(m_stream.s));
      SkipMask& m = m_probes.mask;
      const int total_rows = (n + qt - 1) / qt;
      const int total_cols = (m_n_past + n + bs - 1) / bs;
      if (start == 0) {
        m.rows = total_rows;
        m.cols = total_cols;
        m.cells.assign(size_t(total_rows) * total_cols, 0);
      }
      static constexpr uint8_t kConv[3] = {1, 2, 0};
      for (int r = 0; r < rows; ++r)
        for (int t = 0; t < cols; ++t)
          m.cells[size_t(start / qt + r) * total_cols + t] = kConv[std::min<int>(h[size_t(r) * cols + t], 2)];
    }
    if (m_all_masks && m_mask_all) {  // debug probe: this pass's blocks into the full layout
      const int qt = kernels::kPrefillQueryTile, bs = m_attn.block_size;
      const size_t rows = size_t(nc + qt - 1) / qt;
      const size_t cols = size_t(m_n_past + start + nc + bs - 1) / bs;
      const size_t LH = size_t(c.n_layer) * c.n_head;
      std::vector<uint8_t> h(LH * rows * cols);
      SS_CUDA(cudaMemcpyAsync(h.data(), m_mask_all.get(), h.size(), cudaMemcpyDeviceToHost, m_stream.s));
      SS_CUDA(cudaStreamSynchronize(m_stream.s));
      static constexpr uint8_t kConv[3] = {1, 2, 0};
      const size_t R = size_t(m_probes.all_rows), C = size_t(m_probes.all_cols);
      for (size_t lh = 0; lh < LH; ++lh)
        for (size_t r = 0; r < rows; ++r)
          for (size_t t = 0; t < cols; ++t)
            m_probes.all_masks[(lh * R + size_t(start / qt) + r) * C + t] =
                kConv[std::min<int>(h[(lh * rows + r) * cols + t], 2)];
    }
    if (no_head) {
      // nothing leaves the device but the capture (below)
    } else if (deferred) {
      if (stage)
        SS_CUDA(cudaMemcpyAsync(stage + size_t(start) * c.n_embd, m_x.get(),
                                size_t(nc) * c.n_embd * 4, cudaMemcpyDeviceToDevice, m_stream.s));
    } else if (mode == LogitsMode::kAll) {
      logit_rows_to_host(nc, logits.data() + size_t(start) * V, start);
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
  if (m_capture.layer >= 0) {  // debug capture: K/V of every cached position, pages -> (pos, kv, d)
    const int bs = m_attn.block_size, hk = c.n_head_kv, d = c.head_dim;
    const int64_t n_kv = int64_t(m_n_past) + n, pages = (n_kv + bs - 1) / bs;
    std::vector<uint16_t> pk(size_t(pages) * hk * bs * d), pv(pk.size());
    SS_CUDA(cudaMemcpy(pk.data(), k_layer(m_capture.layer), pk.size() * 2, cudaMemcpyDeviceToHost));
    SS_CUDA(cudaMemcpy(pv.data(), v_layer(m_capture.layer), pv.size() * 2, cudaMemcpyDeviceToHost));
    m_capture.n_kv = int(n_kv);
    m_capture.k.resize(size_t(n_kv) * hk * d);
    m_capture.v.resize(m_capture.k.size());
    for (int64_t pos = 0; pos < n_kv; ++pos)
      for (int g = 0; g < hk; ++g) {
        const size_t src = ((size_t(pos / bs) * hk + g) * bs + size_t(pos % bs)) * d;
        const size_t dst = (size_t(pos) * hk + g) * d;
        std::copy_n(pk.data() + src, d, m_capture.k.data() + dst);
        std::copy_n(pv.data() + src, d, m_capture.v.data() + dst);
      }
  }
}

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

void CudaBackendImpl::decode_step(TokenId token, double lambda, std::vector<float>& logits,
                                  bool sinkq) {
  const ModelConfig& c = m_model->config();
  const size_t V = size_t(c.n_vocab);
  const int pos = m_n_past;
  check_cancel();
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
}

// After a forward that threw: the chunk in flight (windowed) or the whole forward is rolled
// back; the device finishes what was enqueued; n_past is kept (new K/V beyond it are ignored
// and overwritten later) and so are the probes of what ran.
void CudaBackendImpl::recover_after_failed_forward() {
  m_plan->rollback();
  if (cudaStreamSynchronize(m_stream.s) == cudaSuccess &&
      cudaMemcpy(m_h_probe.as<uint64_t>(), m_probe.get(), m_probe.bytes(),
                 cudaMemcpyDeviceToHost) == cudaSuccess)
    apply_probes();
  (void)cudaGetLastError();
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

}  // namespace

std::unique_ptr<CudaBackend> make_cuda_backend(std::shared_ptr<const Model> model,
                                               const BackendOptions& options,
                                               const CudaBackendOptions& cuda_options) {
  if (!model) throw BackendError("make_cuda_backend: no model");
  // The device forward has no per-head Q/K RMSNorm: refuse (before touching a device) rather
  // than compute wrong logits; backend_factory's auto mode then falls back to the CPU.
  if (const ModelConfig& c = model->config(); c.qk_norm)
    throw BackendError("CUDA backend: " + c.architecture +
                       " is supported on the CPU backend only (" +
                       (c.name.empty() ? model->path().filename().string() : c.name) +
                       " needs the per-head Q/K RMSNorm the CUDA forward does not apply)");
  std::string why;
  if (!gpu::probe_device(&why, nullptr)) throw BackendError("CUDA backend unavailable: " + why);
  return std::make_unique<CudaBackendImpl>(std::move(model), options, cuda_options);
}

namespace gpu {

int select_device(int ordinal, std::string* why) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    if (why) *why = "no CUDA device found";
    return -1;
  }
  const int dev = ((ordinal % count) + count) % count;
  const cudaError_t e = cudaSetDevice(dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = std::string("cudaSetDevice failed: ") + cudaGetErrorString(e);
    return -1;
  }
  return dev;
}

bool probe_device(std::string* why, std::string* name) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why)
      *why = std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" +
             cudaGetErrorString(e) + ")";
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  if (name) {
    cudaDeviceProp prop{};
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
      *name = prop.name;
    (void)cudaGetLastError();
  }
  return true;
}

}  // namespace gpu
}  // namespace sinkscope
