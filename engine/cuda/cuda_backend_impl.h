// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's inside, shared by its source files and by nothing else: the constants the
// passes agree on, the RAII stream/event/graph owners, the decode step record, the device
// weights, and the implementation class with every buffer it holds. Which file holds what:
//   cuda_backend.cpp            construction (sizing, memory check, allocation), the factory
//   cuda_backend_weights.cpp    the weights upload and the per-(model, device) weight registry
//   cuda_backend_cache.cpp      the KV cache: reset, page size, page tables, RoPE and ring rows
//   cuda_backend_attention.cpp  the attention kernels' parameters of one layer and pass
//   cuda_backend_layers.cpp     the per-layer device work of one pass and the LM head
//   cuda_backend_forward.cpp    forward(): prefill passes, windowed chunks, logits to the host
//   cuda_backend_decode.cpp     decode steps and the CUDA-graph cache
//   cuda_backend_probes.cpp     probes, skip masks, Q/K/V capture, recovery after a failed forward
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/cuda/blas.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_errors.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cache/kv_page_plan.h"
#include "engine/model/rope.h"
#include "engine/util/thread_pool.h"
#include "profiler/graph_capture.h"
#include "kernels/attention.h"

namespace sinkscope::cuda_detail {

using gpu::Blas;
using gpu::DeviceBuffer;
using gpu::PinnedBuffer;

constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;
constexpr int kPositionAlign = 128;  // cache positions rounded up: pages of 64 or 128
static_assert(kQueryTileRows == kernels::kPrefillQueryTile, "the CPU and GPU query tiles");
// Device passes are whole prefill CTAs (kPrefillCtaRows = two query tiles), so a pass is also a
// whole number of query tiles. (The warp-specialised sparse kernel's three-consumer variants have
// 192-row CTAs: a pass's last CTA may then hold 64 or 128 padding rows, which that kernel masks
// and does not count.)
static_assert(kernels::kPrefillCtaRows % kQueryTileRows == 0, "a CTA holds whole query tiles");
constexpr int kPassAlign = kernels::kPrefillCtaRows;
constexpr int kMaxLogitRows = 128;   // LM-head rows per GEMM (bounds the logits scratch)
constexpr size_t kStagingFloats = size_t(16) << 20;  // fp32 staging for the weight upload

inline int64_t round_up(int64_t x, int64_t m) {
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
// kStepPos is the append position (the ring position of a windowed cache, engine/cache/kv_page_plan.h);
// kStepPosOrig the original position and kStepNTiles the live-page count (windowed caches);
// kStepOwnTiles the tiles of the identity list a full cache's local layers read (ceil((pos + 1)
// / block_size)).
enum StepSlot : int {
  kStepToken = 0,
  kStepPos = 1,
  kStepKvLen = 2,
  kStepLog2Lambda = 3,
  kStepPosOrig = 4,
  kStepNTiles = 5,
  kStepOwnTiles = 6,
  kStepSlots
};

// One part of a projection kept in its ggml block layout on the device (kernels/qgemv.h).
struct QuantPart {
  int type = 0;  // ggml type id (qblock::supported) or a repacked row layout (qblock::kQ8_0R, kQ6_KR)
  const uint8_t* data = nullptr;  // rows * row_bytes, rows back to back
  int rows = 0;
};

// A projection (out, in): either one bf16 matrix (w16) or up to 3 quantized parts stacked by
// rows (QKV: wq | wk | wv, gate|up: w_gate | w_up; the parts of one file can differ in type).
struct ProjDev {
  const uint16_t* w16 = nullptr;  // null: the quantized parts
  QuantPart parts[3];
  int n_parts = 0;
  int out = 0, in = 0;
  bool native() const { return w16 == nullptr; }
};

struct LayerDev {
  ProjDev qkv;                       // (q_dim + 2 kv_dim, D): wq | wk | wv rows
  const float* b_qkv = nullptr;      // (q_dim + 2 kv_dim) or null
  ProjDev o;                         // (D, q_dim)
  ProjDev gu;                        // (2 n_ff, D): w_gate | w_up rows
  ProjDev down;                      // (D, n_ff)
  const float* attn_norm = nullptr;  // (D)
  const float* ffn_norm = nullptr;   // (D)
  const float* q_norm = nullptr;     // (head_dim) per-head Q RMSNorm gain (qk_norm) or null
  const float* k_norm = nullptr;     // (head_dim) per-head K RMSNorm gain (qk_norm) or null
  const float* attn_post_norm = nullptr;  // (D) Gemma: RMSNorm of the attention output, or null
  const float* ffn_post_norm = nullptr;   // (D) Gemma: RMSNorm of the FFN output, or null
  // gpt-oss (cuda_backend_moe.cpp): the output-projection bias, the learned sink logits and the
  // mixture-of-experts FFN (router fp32, experts bf16; kernels/moe.h). Null otherwise.
  const float* b_o = nullptr;          // (D)
  const float* sinks = nullptr;        // (n_head)
  const float* router = nullptr;       // (n_expert, D)
  const float* router_b = nullptr;     // (n_expert)
  const uint16_t* exp_gu = nullptr;    // (n_expert, 2 n_ff, D): gate rows, then up rows
  const float* exp_gu_b = nullptr;     // (n_expert, 2 n_ff)
  const uint16_t* exp_down = nullptr;  // (n_expert, D, n_ff)
  const float* exp_down_b = nullptr;   // (n_expert, D)
  // GpuWeights::kNative with MXFP4 experts: the same matrices in their blocks (kernels/moe.h),
  // exp_gu / exp_down then null.
  const uint8_t* exp_gu_q = nullptr;
  const uint8_t* exp_down_q = nullptr;
};

// gpt-oss's device weights beyond the dense layout (cuda_backend_moe.cpp): bf16 expert matrices
// and fp32 router / biases / sinks, in bytes; and the MoE scratch of a pass of `batch` tokens.
uint64_t gpt_oss_weight_bytes(const Model& m, GpuWeights mode);
// Whether the experts stay MXFP4 on the device: GpuWeights::kNative, every expert matrix MXFP4
// in GGUF's row layout, n_embd and n_ff multiples of 32.
bool moe_native(const Model& m, GpuWeights mode);
uint64_t moe_scratch_bytes(const ModelConfig& c, int batch);
// The grouped part of that scratch (m_moe_grp), and the fewest tokens a pass groups.
uint64_t moe_grouped_bytes(const ModelConfig& c, int batch);
constexpr int kMoeGroupedMin = 16;

// Elements rounded up to 128: every matrix of a weight pool starts on a 256-byte boundary.
inline uint64_t a128(uint64_t e) { return (e + 127) / 128 * 128; }
// Bump allocation in such a pool: returns p and moves it past n elements rounded up to 128.
template <typename T>
T* take_a128(T*& p, uint64_t n) {
  T* r = p;
  p += a128(n);
  return r;
}

// Which projections stay in their file layout (GpuWeights::kNative and a type with a device
// block decode, for every part of the projection) and the memory that takes: computed once from
// the model for the memory check, then followed by the upload.
struct WeightPlan {
  // Per layer: qkv, o, gu, down.
  std::vector<std::array<bool, 4>> native;
  uint64_t w16_elems = 0;      // bf16 pool (128-element aligned matrices)
  uint64_t wq_bytes = 0;       // quantized pool (256-byte aligned parts)
  uint64_t scratch_elems = 0;  // largest native projection: the prefill's bf16 dequant scratch
  // An untied LM head (output.weight) kept in its file blocks too: its single-row products run
  // the quantized GEMV, several rows go through the scratch a slice of the vocabulary at a time.
  bool lm_native = false;
  bool any_native() const { return wq_bytes > 0; }
};
WeightPlan plan_weights(const Model& m, GpuWeights mode);
// Vocabulary rows per slice of a native LM head's several-row product (the dequantization
// scratch holds at least this many rows, or the whole vocabulary when smaller).
constexpr uint64_t kLmSliceRows = 8192;
// SINKSCOPE_GPU_LM_HEAD: "native" (or unset) lets plan_weights keep an untied LM head in its
// file blocks with --gpu-weights native; "bf16" converts it like the embedding table. Anything
// else is a BackendError naming the variable.
bool lm_head_native_allowed();

// The model's weights on one device, shared by every backend of that model there (the
// workbench keeps a dense baseline and a variant backend, and a cache-policy change makes a new
// variant: without sharing each would upload ~270 MB again). Immutable after the upload.
struct DeviceWeights {
  DeviceBuffer w16;                   // every bf16 matrix
  DeviceBuffer wq;                    // quantized projections in their file layout
  DeviceBuffer w32;                   // norms and biases
  DeviceBuffer g16, g32;              // gpt-oss: experts (bf16); router, biases, sinks (fp32)
  DeviceBuffer g8;                    // gpt-oss: experts in MXFP4 blocks (moe_native)
  const uint16_t* embd = nullptr;     // (n_vocab, D)
  const uint16_t* lm_head = nullptr;  // (n_vocab, D), == embd when tied; null: lm holds it
  ProjDev lm;                         // the LM head in its file blocks (WeightPlan::lm_native)
  const float* out_norm = nullptr;
  std::vector<LayerDev> layers;
  uint64_t bytes() const {
    return w16.bytes() + wq.bytes() + w32.bytes() + g16.bytes() + g32.bytes() + g8.bytes();
  }
};

// Process-wide registry of live weight sets by (model, device): the set of (m, device), or
// null; `add` registers a new one. A backend holds its Model, so a live entry's Model address
// cannot be reused by another model.
std::shared_ptr<DeviceWeights> shared_weights(const Model* m, int device, GpuWeights mode,
                                              std::shared_ptr<DeviceWeights> add = nullptr);

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
  DecodePathStats decode_path_stats() const override { return m_dpath; }
  void reset() override;
  // Full bf16 or unprotected cache: back to the first n_past positions, the tile counters (and
  // their device copy) and skip masks set to `probes`. Windows and protected pages: false.
  bool rewind(int n_past, const AttentionProbes& probes) override;
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
  GpuWeights gpu_weights(std::string* why) const override {
    if (why) *why = m_gpu_weights_why;
    return m_gpu_weights;
  }
  bool fused_decode(std::string* why_not) const override {
    if (why_not) *why_not = m_fused_why;
    return m_fused;
  }
  uint64_t device_bytes() const override { return m_device_bytes; }
  bool last_row_stats(RowStats* out) const override {
    if (m_rs) {
      if (out) *out = *m_rs;
      return true;
    }
    if (m_row_stats_n < 0 || m_row_stats_rows != m_row_stats_n) return false;
    if (out) {
      *out = RowStats{};
      out->lse = m_row_lse;
      out->top1 = m_row_top1;
    }
    return true;
  }
  std::vector<double> kl_rows(const HiddenRows& p, const HiddenRows& q) override;

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
  void upload_weights(DeviceWeights& dw, const WeightPlan& plan);
  // out (+)= in . W^T for a projection: bf16 cuBLAS, the quantized GEMV (one token), or the
  // quantized parts dequantized into m_wscratch and cuBLAS (beta: 0 store, 1 accumulate).
  void linear_proj(cudaStream_t s, Blas& blas, const uint16_t* in, const ProjDev& w, float* out,
                   int n, float beta = 0.0f);
  // One token through a native projection with RMSNorm(x) * norm_w folded into its GEMVs
  // (kernels/qgemv.h launch_qgemv_fused), into out, or with act set the SwiGLU of a gate|up
  // projection into act. False, with nothing launched, where the fused kernels do not apply
  // (tuning qgemv_fuse off, bf16 weights, another kernel variant or prequantization, a part the
  // kernel cannot take, SwiGLU over gate and up in separate parts): the caller then runs the
  // separate kernels. The same numbers either way, bit for bit.
  bool fused_norm_proj(cudaStream_t s, const float* x, const float* norm_w, const ProjDev& w,
                       float* out, uint16_t* act = nullptr);
  void upload_bf16(uint16_t* dst, const std::vector<float>& src, size_t expect, const char* what,
                   float* staging);
  const float* upload_f32(float* dst, const std::vector<float>& src, size_t expect,
                          const char* what);

  // gpt-oss (cuda_backend_moe.cpp): its weights beyond the dense layout into dw.g16 / g32 and
  // the layers' pointers; the MoE FFN of a pass (x += FFN(x), m_moe_* scratch): GEMV experts,
  // or for a pass of many tokens outside a capture the grouped experts (one GEMM per expert).
  void upload_gpt_oss(DeviceWeights& dw);
  void enqueue_moe(cudaStream_t s, Blas& blas, const LayerDev& L, const Pass& p);

  void enqueue_layers(cudaStream_t s, Blas& blas, const Pass& p);
  // x: the hidden states (rows from row0); nullptr = this pass's residual stream m_x. out: the
  // logits' rows (nullptr: m_logits, which holds m_logit_rows rows).
  void enqueue_lm_head(cudaStream_t s, Blas& blas, int row0, int rows, const float* x = nullptr,
                       float* out = nullptr);
  // LogitsMode::kLastRowStats: rows [r0, r0 + rows) of the forward, whose final hidden states
  // are x (device, rows x n_embd): their LM head block by block, each block's row statistics
  // into m_rs_dev, the hidden states to the host (m_rs), the forward's last row's logits to
  // m_h_logits. have_logits: one row (a decode step's) whose logits m_logits already holds.
  void enqueue_row_stats(int rows, int64_t r0, const float* x, bool have_logits = false);
  void begin_row_stats(std::span<const TokenId> tokens);  // sizes and next tokens
  void finish_row_stats();  // the statistics to the host (synchronises)
  // The LM head over nc rows of hidden states (x, or this pass's m_x), the logits into dst
  // row-major, their row statistics into m_row_lse / m_row_top1 from row stats_row0 of the
  // forward.
  void logit_rows_to_host(int nc, float* dst, int64_t stats_row0, const float* x = nullptr);
  kernels::AttentionParams attention_params(int layer, const Pass& p) const;
  // bf16 pages of layer l (a quantized cache: its protected bf16 pages, engine/cache/kv_page_plan.h).
  uint16_t* k_layer(int l) const { return m_k.as<uint16_t>() + size_t(l) * m_layer_kv_elems; }
  uint16_t* v_layer(int l) const { return m_v.as<uint16_t>() + size_t(l) * m_layer_kv_elems; }
  // Quantized cache: codes and fp16 scales of layer l (same page ids as the bf16 layout).
  uint8_t* kc_layer(int l) const { return m_kc.as<uint8_t>() + size_t(l) * m_layer_code_bytes; }
  uint8_t* vc_layer(int l) const { return m_vc.as<uint8_t>() + size_t(l) * m_layer_code_bytes; }
  uint16_t* ks_layer(int l) const { return m_ks.as<uint16_t>() + size_t(l) * m_layer_scale_elems; }
  uint16_t* vs_layer(int l) const { return m_vs.as<uint16_t>() + size_t(l) * m_layer_scale_elems; }
  void upload_full_page_table();  // quantized full cache: protected pages in the table
  void fill_rope_tables();        // construction: RoPE tables, identity page table

  // sinkq: cache position mode past the window (queries re-rotated at their cache index for
  // the sink keys, AttentionParams::q_sink).
  // deferred (a windowed forward's chunks): no logits and no synchronisation here; the final
  // hidden states of the n tokens go to the device rows `stage` (when not null), whose LM head
  // the caller runs later over many chunks at once (forward_windowed).
  void prefill(std::span<const TokenId> tokens, LogitsMode mode, double lambda,
               std::vector<float>& logits, bool sinkq = false, bool deferred = false,
               float* stage = nullptr);
  void decode_step(TokenId token, double lambda, std::vector<float>& logits, bool sinkq = false);
  // A sliding-window cache: the tokens in chunks (engine/cache/kv_page_plan.h), page tables and RoPE
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
  void warm_up_decode();  // construction: one real decode step on the capture stream
  void recover_after_failed_forward();
  void invalidate_graphs() {
    m_graphs.clear();  // callers have synchronised: no graph is in flight
    ++m_gen;
  }
  void disable_graphs(const std::string& why);
  void enqueue_probe_copy();
  void apply_probes();
  // Around a prefill: the capture's shape and the all-heads masks' size before it; each
  // pass's skip-mask tiles after the pass; the captured layer's K/V after the prefill.
  void begin_prefill_probes(int n);
  void read_pass_masks(int start, int nc, int n);
  void read_captured_kv(int n);
  void repage(int old_bs, int new_bs);

  std::shared_ptr<const Model> m_model;
  AttentionSettings m_attn;
  CudaBackendOptions m_copt;
  GpuWeights m_gpu_weights = GpuWeights::kBf16;  // BackendOptions::gpu_weights, kAuto resolved
  std::string m_gpu_weights_why;                 // kAuto: the choice's reason
  int m_act_planes = 2;  // BackendOptions::gpu_activations: int8 planes of the quantized GEMVs
  // The sparse-asked decode steps' kernel choice (BackendOptions::sparse_decode,
  // kernels/decode_choice.h) and what it did; reset() and set_attention() start it afresh.
  SparseDecodeKernels m_sparse_decode = SparseDecodeKernels::kAuto;
  DecodePathStats m_dpath;
  int m_dpath_since_probe = 0;
  double choose_decode_lambda(double lambda, int64_t kv_len);
  void restart_decode_choice();
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
  // Quantized KV (cache.quantization, engine/cache/kv_layout.h): 8 / 4, 0 = the bf16 cache.
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
  // Local layers' own RoPE (ModelConfig::rope_theta_local, gemma3): the same layout as the tables
  // above (and the cache-index tables below), from m_rope_host_local. Null otherwise.
  DeviceBuffer m_rope_cos_l, m_rope_sin_l, m_rope_cache_cos_l, m_rope_cache_sin_l;
  RopeTable m_rope_host_local;
  // Gemma: the O / down projection's fp32 output before its post-norm and residual add.
  DeviceBuffer m_tmp;
  // KV cache: per layer, pages[page][kv_head][slot][head_dim] bf16, identity page table.
  DeviceBuffer m_k, m_v, m_page_table, m_repage_tmp;
  // Quantized cache: per layer pages[page][kv_head][slot][code bytes] codes and [...][d/32]
  // fp16 scales; m_k / m_v then hold only the protected bf16 pages; fp32 K|V rows of one pass
  // (the append kernels' output, quantized by launch_kv_quant_append); the sorted
  // protected_positions (device).
  DeviceBuffer m_kc, m_vc, m_ks, m_vs, m_kv32, m_prot_extra;
  // Windowed cache (engine/cache/kv_page_plan.h): m_page_table is the append table (ring position /
  // block_size -> page), the attention reads the live-page list (first positions, page ids), and
  // m_rope_cos/sin hold ring rows. Cache position mode: angles of cache indices [0, S + W) and
  // the re-rotated queries.
  DeviceBuffer m_tile_pos0, m_tile_page, m_rope_cache_cos, m_rope_cache_sin, m_q_sink;
  // Windowed forwards with all-position logits: final hidden states of many chunks, whose LM
  // head runs once (allocated at first use, m_stage_rows rows of n_embd floats).
  DeviceBuffer m_stage;
  // bf16 scratch of the largest quantized projection: the prefill's dequantized weights.
  DeviceBuffer m_wscratch;
  DeviceBuffer m_xq;  // kernels::qgemv_x_bytes of the widest projection input, two planes
  int m_stage_rows = 0;
  std::vector<float> m_h_rope;  // pageable staging of ring rows (cos | sin)
  RopeTable m_rope_host;        // the CPU's angles, for the ring rows
  // Scratch for one pass of up to m_batch tokens.
  DeviceBuffer m_tokens, m_x, m_xn, m_qkv, m_q, m_att, m_gu, m_act, m_logits, m_attn_ws;
  // gpt-oss MoE scratch of one pass (kernels/moe.h): fp32 normed rows, chosen experts, their
  // weights, the SwiGLU outputs. Empty without experts.
  DeviceBuffer m_moe_xn, m_moe_sel, m_moe_wts, m_moe_act;
  // Grouped experts (passes of >= kMoeGroupedMin tokens): bf16 gathered rows, gate|up, bf16
  // SwiGLU, down outputs and the pair maps in one buffer; the chosen experts on the host; off
  // with SINKSCOPE_MOE_GROUPED=0 (every pass then runs the GEMV experts).
  DeviceBuffer m_moe_grp;
  DeviceBuffer m_moe_wdq;  // MXFP4 experts, grouped: one expert's matrix dequantized to bf16
  PinnedBuffer m_h_moe_sel;
  std::vector<int32_t> m_moe_maps;
  bool m_moe_grouped = true;
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
  // Models with local layers (ModelConfig::layer_window) over a full cache: identity live-page
  // lists (tile t at position t * block_size) that carry the layer's own window into the
  // kernels (AttentionParams::own_window): alloc_pos / 64 entries for block size 64, then
  // alloc_pos / 128 for 128. Null without local layers.
  DeviceBuffer m_own_pos0;
  const int32_t* own_list(int block_size) const {
    return m_own_pos0.as<int32_t>() + (block_size == 64 ? 0 : m_alloc_pos / 64);
  }
  // u64 [phase: prefill, decode][visited, skipped][layer][head]; a model with learned sinks
  // then has double [layer][head] sink mass (AttentionParams::sink_mass).
  DeviceBuffer m_probe;
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
  // LogitsMode::kLastRowStats: the forward's statistics (m_rs, set when complete), their device
  // rows (m_rs_dev: n doubles lse, n ints top1, n floats next logit, n ints next token) and
  // the logit block of kl_rows' first operand with its hidden states (m_kl_x).
  std::unique_ptr<RowStats> m_rs;
  std::shared_ptr<HiddenRows> m_rs_hidden;
  int64_t m_rs_n = 0, m_rs_cap = 0;
  DeviceBuffer m_rs_dev, m_kl_logits, m_kl_x, m_kl_dev;
  int64_t m_kl_cap = 0;
};

}  // namespace sinkscope::cuda_detail
