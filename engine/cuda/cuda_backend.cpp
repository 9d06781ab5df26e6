// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: construction and the factory. The constructor checks the model's shape and
// the cache settings, sizes the passes and the cache, plans every allocation and compares it
// with the device's free memory before touching it, then allocates, uploads (or shares) the
// weights, fills the RoPE tables and runs one warm-up decode step. The rest of the backend is in
// the files listed in engine/cuda/cuda_backend_impl.h.
#include "engine/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/gpu_weights_choice.h"
#include "engine/cuda/cuda_backend_impl.h"
#include "engine/format/ggml_types.h"
#include "kernels/decode_fused.h"
#include "kernels/moe.h"
#include "kernels/ops.h"
#include "kernels/qgemv.h"

namespace sinkscope {
namespace cuda_detail {

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
  m_capacity = opt.max_context > 0 ? opt.max_context : c.n_ctx_train;
  if (m_capacity <= 0) throw BackendError("CUDA backend: KV capacity must be positive");
  // LongRoPE (phi3): the CPU's choice of factor set, from the backend's context (long factors
  // past the original context, llama.cpp's rule; cpu_backend.cpp), with its attention factor.
  m_rope_host = RopeTable(c, m_model->weights().rope_factors_for(m_capacity, c.rope_orig_ctx));
  if (c.rope_theta_local > 0) {
    // Local layers of their own RoPE (gemma3): base rope_theta_local, never scaled (as the CPU).
    ModelConfig lc = c;
    lc.rope_theta = c.rope_theta_local;
    lc.rope_scaling = RopeScalingType::kNone;
    m_rope_host_local = RopeTable(lc, {});
  }
  kernels::set_gpu_tuning(m_copt.tuning);
  m_use_graphs = m_copt.tuning.cuda_graphs;
  {
    kernels::DecodeFusedShape fs;
    fs.n_embd = c.n_embd;
    fs.n_head = c.n_head;
    fs.n_head_kv = c.n_head_kv;
    fs.head_dim = c.head_dim;
    fs.rope_dim = c.rope_dim;
    fs.n_ff = c.n_ff;
    m_fused_why = m_copt.tuning.fused_decode
                      ? kernels::decode_fused_unsupported(fs)
                      : "switched off (tuning fused_decode; SINKSCOPE_FUSED_DECODE=0)";
    m_fused = m_fused_why.empty();
  }
  if (m_fused && c.gemma) {
    m_fused = false;
    m_fused_why = "Gemma's post-norms and GeGLU run in the unfused decode path";
  }
  if (m_fused && c.qk_norm) {
    // The fused QKV kernel rotates and appends straight from its products; the per-head Q/K
    // RMSNorm sits between the projection and RoPE, so these models decode unfused.
    m_fused = false;
    m_fused_why = "the model normalises each Q/K head (qk_norm), which the unfused decode path "
                  "applies between the QKV projection and RoPE";
  }
  if (m_fused && (c.n_expert > 0 || c.o_bias || c.attn_sinks)) {
    // gpt-oss: the fused kernels have no MoE FFN, output-projection bias or learned sinks.
    m_fused = false;
    m_fused_why = "gpt-oss's mixture-of-experts FFN, output-projection bias and learned sinks run "
                  "in the unfused decode path";
  }
  if (c.n_expert > 0) {
    const std::string why =
        kernels::moe_shape_error(c.n_embd, c.n_ff, c.n_expert, c.n_expert_used);
    if (!why.empty()) throw BackendError("CUDA backend: " + c.name + ": " + why);
  }
  m_gpu_weights = opt.gpu_weights;  // kAuto: resolved at the memory check below
  m_act_planes = opt.gpu_activations == GpuActivations::kInt8 ? 1 : 2;
  m_sparse_decode = opt.sparse_decode;
  restart_decode_choice();
  WeightPlan wplan =
      plan_weights(*m_model, m_gpu_weights == GpuWeights::kAuto ? GpuWeights::kBf16 : m_gpu_weights);

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
  size_t w32_elems = a128(D) + size_t(c.n_layer) * (2 * a128(D) + (c.qkv_bias ? a128(W) : 0) +
                                                    (c.qk_norm ? 2 * a128(c.head_dim) : 0) +
                                                    (c.gemma ? 2 * a128(D) : 0));
  const size_t half = size_t(std::max(c.rope_dim / 2, 1));
  const uint64_t kv_b = 2 * uint64_t(c.n_layer) *
                        (m_layer_kv_elems * 2 + m_layer_code_bytes + m_layer_scale_elems * 2);
  const uint64_t B = uint64_t(m_batch);
  // The single-token products' activation, quantized once per projection (linear_proj).
  const size_t xq_bytes = kernels::qgemv_x_bytes(int(std::max({D, Q, F})), 2);
  // Weights and scratch of a weight mode (the plan's pools, the dequantization scratch of the
  // native projections, gpt-oss's experts).
  const auto weights_of = [&](const WeightPlan& wp, GpuWeights mode) -> uint64_t {
    return uint64_t(wp.w16_elems) * 2 + wp.wq_bytes + w32_elems * 4 +
           gpt_oss_weight_bytes(*m_model, mode);
  };
  const auto scratch_of = [&](const WeightPlan& wp, GpuWeights mode) -> uint64_t {
    return B * 4 + B * D * 4 + B * D * 2 + B * W * 4 + 2 * B * Q * 2 + B * 2 * F * 4 + B * F * 2 +
           uint64_t(m_logit_rows) * V * 4 + ws_bytes +
           (c.rope_theta_local > 0 ? 4 : 2) * size_t(m_alloc_pos) * half * 4 +
           (c.gemma ? B * D * 4 : 0) + 2 * kBlasWorkspaceBytes + kStagingFloats * 4 +
           wp.scratch_elems * 2 + moe_scratch_bytes(c, m_batch) +
           (moe_native(*m_model, mode) ? uint64_t(4) * F * D : 0) +
           (c.attn_sinks ? uint64_t(8) * c.n_layer * c.n_head : 0) +
           (wp.scratch_elems ? xq_bytes : 0);
  };
  size_t free_b = 0, total_b = 0;
  SS_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (m_gpu_weights == GpuWeights::kAuto) {
    const WeightPlan nplan = plan_weights(*m_model, GpuWeights::kNative);
    std::optional<GpuWeights> uploaded;
    for (GpuWeights mode : {GpuWeights::kBf16, GpuWeights::kNative})
      if (!uploaded && shared_weights(m_model.get(), m_device, mode)) uploaded = mode;
    const GpuMemoryNeed bf16{weights_of(wplan, GpuWeights::kBf16),
                             kv_b + scratch_of(wplan, GpuWeights::kBf16)};
    const GpuMemoryNeed native{weights_of(nplan, GpuWeights::kNative),
                               kv_b + scratch_of(nplan, GpuWeights::kNative)};
    const GpuWeightsChoice choice = choose_gpu_weights(
        bf16, native, nplan.any_native() || moe_native(*m_model, GpuWeights::kNative), free_b,
        uploaded);
    m_gpu_weights = choice.mode;
    m_gpu_weights_why = choice.why;
    if (choice.mode == GpuWeights::kNative) wplan = nplan;
  }
  if (wplan.lm_native) {  // said with the weight mode (generate's note, the workbench's tooltip)
    const std::string head =
        std::string("LM head kept as ") + ggml_type_name(m_model->weights().output.type);
    m_gpu_weights_why = m_gpu_weights_why.empty() ? head : m_gpu_weights_why + "; " + head;
  }
  if (m_fused && wplan.any_native()) {
    // The fused kernels read bf16 rows; quantized projections decode through the quantized GEMV.
    m_fused = false;
    m_fused_why = "the projections are kept in their file format (quantized GEMV; gpu weights "
                  "bf16 selects the fused bf16 kernels)";
  }
  const size_t w16_elems = size_t(wplan.w16_elems);
  const uint64_t weights_b = weights_of(wplan, m_gpu_weights);
  const uint64_t scratch_b = scratch_of(wplan, m_gpu_weights);
  std::shared_ptr<DeviceWeights> shared = shared_weights(m_model.get(), m_device, m_gpu_weights);
  const uint64_t need = (shared ? 0 : weights_b) + kv_b + scratch_b;
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
    if (wplan.wq_bytes) dw->wq = DeviceBuffer(wplan.wq_bytes, "quantized weights");
    dw->w32 = DeviceBuffer(w32_elems * 4, "fp32 norms and biases");
    upload_weights(*dw, wplan);
    upload_gpt_oss(*dw);
    shared = shared_weights(m_model.get(), m_device, m_gpu_weights, dw);
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
  if (c.rope_theta_local > 0) {
    m_rope_cos_l = alloc(size_t(m_alloc_pos) * half * 4, "local layers' RoPE cos table");
    m_rope_sin_l = alloc(size_t(m_alloc_pos) * half * 4, "local layers' RoPE sin table");
  }
  if (c.gemma) m_tmp = alloc(B * D * 4, "projection output before its post-norm");
  m_tokens = alloc(B * 4, "token ids");
  m_x = alloc(B * D * 4, "residual stream");
  m_xn = alloc(B * D * 2, "normed activations");
  m_qkv = alloc(B * W * 4, "qkv projections");
  if (wplan.scratch_elems) {
    m_wscratch = alloc(wplan.scratch_elems * 2, "bf16 scratch of dequantized weights (prefill)");
    // Shared-memory limits of the quantized GEMV set now: not while a decode graph is captured.
    // (Native projections have rows within the stage, qgemv_shape_error; clamp the others.)
    SS_LAUNCH(kernels::qgemv_prepare(std::min(std::max({c.n_embd, c.q_dim(), c.n_ff}), 227 * 1024 / 4)));
    if (xq_bytes) m_xq = alloc(xq_bytes, "int8 activation of the quantized GEMVs");
  }
  m_q = alloc(B * Q * 2, "rotated queries");
  m_att = alloc(B * Q * 2, "attention output");
  m_gu = alloc(B * 2 * F * 4, "gate|up projections");
  m_act = alloc(B * F * 2, "SwiGLU output");
  m_logits = alloc(size_t(m_logit_rows) * V * 4, "logits");
  m_attn_ws = alloc(ws_bytes, "attention decode workspace");
  // + the learned sinks' mass (doubles) behind the tile counts.
  m_probe = alloc(size_t(c.attn_sinks ? 5 : 4) * c.n_layer * c.n_head * 8, "attention probes");
  if (c.n_expert > 0) {
    const size_t K = size_t(c.n_expert_used);
    m_moe_xn = alloc(B * D * 4, "MoE normed rows");
    m_moe_sel = alloc(B * K * 4, "MoE chosen experts");
    m_moe_wts = alloc(B * K * 4, "MoE expert weights");
    m_moe_act = alloc(B * K * F * 4, "MoE SwiGLU outputs");
    const char* g = std::getenv("SINKSCOPE_MOE_GROUPED");
    m_moe_grouped = !(g && std::string(g) == "0");
    if (m_moe_grouped && m_batch >= kMoeGroupedMin) {
      m_moe_grp = alloc(moe_grouped_bytes(c, m_batch), "MoE grouped-expert scratch");
      m_h_moe_sel = PinnedBuffer(B * K * 4, "pinned MoE chosen experts");
      if (moe_native(*m_model, m_gpu_weights))
        m_moe_wdq = alloc(size_t(2) * F * D * 2, "MoE expert dequantized to bf16 (grouped)");
    }
  }
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
      if (c.rope_theta_local > 0) {
        m_rope_cache_cos_l = alloc(rows * half * 4, "local RoPE cos of cache indices");
        m_rope_cache_sin_l = alloc(rows * half * 4, "local RoPE sin of cache indices");
      }
      m_q_sink = alloc(B * Q * 2, "queries at cache indices");
    }
  }
  m_h_step = PinnedBuffer(kStepSlots * 4, "pinned decode step record");
  bool local_layers = false;
  for (int l = 0; l < c.n_layer; ++l) local_layers = local_layers || c.layer_window(l) > 0;
  if (local_layers && !ks.windowed()) {
    std::vector<int32_t> pos0;
    for (int bs : {64, 128})
      for (int t = 0; t < m_alloc_pos / bs; ++t) pos0.push_back(int32_t(t) * bs);
    m_own_pos0 = alloc(pos0.size() * 4, "identity live-page lists (local layers)");
    SS_CUDA(cudaMemcpy(m_own_pos0.get(), pos0.data(), pos0.size() * 4, cudaMemcpyHostToDevice));
  }

  fill_rope_tables();
  warm_up_decode();
  reset();
}

CudaBackendImpl::~CudaBackendImpl() {
  (void)cudaSetDevice(m_device);
  (void)cudaStreamSynchronize(m_stream.s);
}

// RoPE angles from the CPU's own table code, so both rotate with identical cos/sin; the
// identity page table; a window's cache-index angles and its first live-page list.
void CudaBackendImpl::fill_rope_tables() {
  const ModelConfig& c = m_model->config();
  const size_t half = size_t(std::max(c.rope_dim / 2, 1));
  // One RoPE (the model's, or the local layers' own) into its position and cache-index tables.
  const auto fill = [&](const RopeTable& rope, DeviceBuffer& cos_b, DeviceBuffer& sin_b,
                        DeviceBuffer& cache_cos, DeviceBuffer& cache_sin) {
    std::vector<float> cs(size_t(m_alloc_pos) * half, 1.0f), sn(size_t(m_alloc_pos) * half, 0.0f);
    if (c.rope_dim >= 2)
      for (int p = 0; p < m_alloc_pos; ++p)
        rope.angles(p, &cs[size_t(p) * half], &sn[size_t(p) * half]);
    SS_CUDA(cudaMemcpyAsync(cos_b.get(), cs.data(), cs.size() * 4, cudaMemcpyHostToDevice,
                            m_stream.s));
    SS_CUDA(cudaMemcpyAsync(sin_b.get(), sn.data(), sn.size() * 4, cudaMemcpyHostToDevice,
                            m_stream.s));
    if (cache_cos) {  // cache indices [0, S + W), the first rows of the same table
      const size_t n = std::min(cache_cos.bytes() / 4, cs.size());
      SS_CUDA(cudaMemcpyAsync(cache_cos.get(), cs.data(), n * 4, cudaMemcpyHostToDevice,
                              m_stream.s));
      SS_CUDA(cudaMemcpyAsync(cache_sin.get(), sn.data(), n * 4, cudaMemcpyHostToDevice,
                              m_stream.s));
      if (cache_cos.bytes() / 4 > cs.size()) {  // S + W beyond the pool: compute the rest
        const size_t rows = cache_cos.bytes() / 4 / half;
        std::vector<float> c2(rows * half, 1.0f), s2(rows * half, 0.0f);
        if (c.rope_dim >= 2)
          for (size_t p = 0; p < rows; ++p) rope.angles(int(p), &c2[p * half], &s2[p * half]);
        SS_CUDA(cudaMemcpyAsync(cache_cos.get(), c2.data(), c2.size() * 4,
                                cudaMemcpyHostToDevice, m_stream.s));
        SS_CUDA(cudaMemcpyAsync(cache_sin.get(), s2.data(), s2.size() * 4,
                                cudaMemcpyHostToDevice, m_stream.s));
      }
    }
    SS_CUDA(cudaStreamSynchronize(m_stream.s));  // the host vectors die here
  };
  fill(m_rope_host, m_rope_cos, m_rope_sin, m_rope_cache_cos, m_rope_cache_sin);
  if (m_rope_cos_l)
    fill(m_rope_host_local, m_rope_cos_l, m_rope_sin_l, m_rope_cache_cos_l, m_rope_cache_sin_l);
  std::vector<int32_t> table(size_t(m_alloc_pos / 64));
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
  SS_CUDA(cudaMemcpyAsync(m_page_table.get(), table.data(), table.size() * 4,
                          cudaMemcpyHostToDevice, m_stream.s));
  // warm_up_decode() reads a one-page list: page 0 at position 0.
  if (m_tile_pos0) {
    SS_CUDA(cudaMemsetAsync(m_tile_pos0.get(), 0, m_tile_pos0.bytes(), m_stream.s));
    SS_CUDA(cudaMemsetAsync(m_tile_page.get(), 0, m_tile_page.bytes(), m_stream.s));
  }
  SS_CUDA(cudaStreamSynchronize(m_stream.s));  // the host vectors die here
}

}  // namespace cuda_detail

std::unique_ptr<CudaBackend> make_cuda_backend(std::shared_ptr<const Model> model,
                                               const BackendOptions& options,
                                               const CudaBackendOptions& cuda_options) {
  if (!model) throw BackendError("make_cuda_backend: no model");
  // What the device forward does not apply is refused (before touching a device) rather than
  // computed wrong; backend_factory's auto mode then falls back to the CPU. Supported: llama,
  // qwen2, qwen3 (per-head Q/K RMSNorm), a model's own sliding-window layers, on every layer
  // (Mistral, qwen2, phi3) or some (AttentionParams::own_window), gemma2 / gemma3 (scaled
  // embeddings, post-norms, GeGLU, local RoPE base, attention and final logit soft-caps), phi3
  // (fused QKV and gate/up split at load, partial rotary, LongRoPE factors and attention factor
  // from the CPU's RopeTable), gpt-oss (learned sinks in every attention kernel it runs -- not
  // the warp-specialised prefill, which the dispatch passes over --, the output-projection bias,
  // the MoE FFN, kernels/moe.h, experts bf16 or with native weights MXFP4; YaRN through the CPU's
  // RoPE tables, the local windows through own_window). What remains refused is named by the
  // constructor: a MoE shape outside kernels/moe.h's limits.
  std::string why;
  if (!gpu::probe_device(&why, nullptr)) throw BackendError("CUDA backend unavailable: " + why);
  return std::make_unique<cuda_detail::CudaBackendImpl>(std::move(model), options, cuda_options);
}

}  // namespace sinkscope
