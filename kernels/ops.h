// SPDX-License-Identifier: Apache-2.0
// Host API of the element-wise / fused kernels the CUDA backend runs around the GEMMs and the
// attention: embedding gather, RMSNorm, QKV bias + RoPE + paged KV append, SwiGLU, fp32->bf16
// weight conversion and KV re-paging. Plain C++ (no CUDA headers): device pointers are raw,
// bf16 travels as uint16_t bit patterns, the stream is a cudaStream_t passed as void*.
// Nothing here throws or exits: a launch failure comes back as an OpStatus naming the kernel,
// file and line. Every launcher accepts an empty problem (no launch).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace sinkscope::kernels {

using OpStatus = Status;  // base/status.h

// Programmatic Dependent Launch for the small kernels of a step (kernels/pdl.cuh): on unless
// the tuning in force has pdl off (GpuTuning, read once) or set_pdl_enabled(false) was called (the
// backend does so when a graph with PDL edges cannot be captured or instantiated, and a launch
// whose attribute is rejected does so itself). Thread-safe.
bool pdl_enabled();
void set_pdl_enabled(bool on);

// Whether the current device can run these kernels (an image for its architecture is in the
// binary): asks the runtime for one kernel's attributes. No launch.
OpStatus ops_device_check();

// dst[i] = bf16(src[i]), round to nearest even. n elements.
OpStatus launch_f32_to_bf16(const float* src, uint16_t* dst, int64_t n, void* stream);

// x[i][:] = float(table[tokens[i]][:]).  table: [n_vocab][dim] bf16, tokens: [n] (device,
// already validated), x: [n][dim] fp32 (the residual stream).
// scale != 1 (Gemma: sqrt(n_embd) rounded to float32): x = float(table[...]) * scale.
OpStatus launch_embed_gather(const uint16_t* table, const int32_t* tokens, float* x, int n, int dim,
                             void* stream, float scale = 1.0f);

// out[r][:] = bf16(x[r][:] * rsqrt(mean(x[r]^2) + eps) * w[:]), fp32 accumulation.
// x: [rows][dim] fp32, w: [dim] fp32, out: [rows][dim] bf16. w is a model weight: the wide-row
// kernel reads it before waiting for the previous kernel in the stream (PDL).
OpStatus launch_rms_norm(const float* x, const float* w, uint16_t* out, int rows, int dim,
                         float eps, void* stream);

// After the fused QKV GEMM: adds the optional bias, rotates q and k (RoPE, both pair
// conventions) and writes q (bf16, for the attention) and k, v (bf16) into the paged cache.
struct QkvRopeParams {
  const float* qkv = nullptr;   // [n_tokens][q_dim + 2*kv_dim] fp32: q | k | v
  const float* bias = nullptr;  // [q_dim + 2*kv_dim] fp32, or nullptr
  // Angles of every position: [positions][rope_dim/2] fp32 (host-computed with RopeTable, so
  // the GPU rotates with the CPU's exact cos/sin).
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;
  uint16_t* q_out = nullptr;  // [n_tokens][q_dim] bf16
  // Paged cache of ONE layer: pages[page][kv_head][slot][head_dim] bf16
  // (kernels/attention_params.h).
  uint16_t* k_pages = nullptr;
  uint16_t* v_pages = nullptr;
  const int32_t* page_table = nullptr;  // page of positions [i*block_size, (i+1)*block_size)
  int n_tokens = 0;
  int pos0 = 0;  // absolute position (== cache index) of token 0
  // When set, pos0 is read from device memory instead (a decode step captured once into a CUDA
  // graph and replayed at every position). The caller guarantees it lies inside the tables.
  const int32_t* pos0_dev = nullptr;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  int rope_dim = 0;   // rotated dims per head (<= head_dim); the rest pass through
  bool neox = false;  // pairs (i, i + rope_dim/2) when true, (2i, 2i+1) otherwise
  int block_size = 64;
  // Quantized KV cache: when set, K (rotated) and V are written here in fp32 instead of into
  // the pages, [n_tokens][2][n_head_kv * head_dim] (k | v); launch_kv_quant_append then stores
  // them (k_pages / v_pages / page_table are not read).
  float* kv_f32 = nullptr;
};
OpStatus launch_qkv_rope_append(const QkvRopeParams& p, void* stream);

// Per-head Q/K RMSNorm (qwen3, gemma3), in place on the fp32 q|k|v rows of the QKV GEMM before
// launch_qkv_rope_append: the optional bias is added to the whole row first (the CPU's order), then
// each query head's head_dim values become x * (1 / sqrt(mean(x^2) + eps)) * q_norm (sum of squares
// in double, like the CPU's rms_norm) and each key head's likewise with k_norm; V keeps x + bias.
// The caller then runs qkv_rope_append / rope_queries without the bias (it is in the rows now).
struct QkHeadNormParams {
  float* qkv = nullptr;           // [n_tokens][q_dim + 2*kv_dim] fp32, updated in place
  const float* bias = nullptr;    // [q_dim + 2*kv_dim] or nullptr
  const float* q_norm = nullptr;  // [head_dim] gain shared by the query heads
  const float* k_norm = nullptr;  // [head_dim] gain shared by the key heads
  int n_tokens = 0;
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  float eps = 1e-6f;
};
OpStatus launch_qk_head_norm(const QkHeadNormParams& p, void* stream);

// Quantized KV append (engine/cache/kv_layout.h KvQuantFormat, groups of 32, the CPU's
// quantize_kv_row rounding bit for bit on the same fp32 input): the rows of QkvRopeParams::kv_f32
// go into one layer's paged quantized cache
//   codes  [page][kv_head][slot][code_bytes]  (int8: head_dim bytes, int4: head_dim / 2)
//   scales [page][kv_head][slot][head_dim / 32] fp16 (rounded up: no code clips)
// A page-table entry e < 0 is protected bf16 page j = -1 - e of prot_k / prot_v
// ([j][kv_head][slot][head_dim], the AttentionParams k_pages layout): protected positions
// (position < prot_sinks or in prot_extra) are stored there as bf16(x), the page's other rows as
// bf16(c * s) -- the very bf16 values the attention kernels dequantise a quantized row to.
// Difference to the CPU: a scale above fp16's range (|x| > 65504 * qmax) makes the CPU throw; the
// kernel saturates it to 65504 (codes then clip).
struct KvQuantAppendParams {
  const float* kv_f32 = nullptr;  // [n_tokens][2][n_head_kv * head_dim]
  uint8_t* k_codes = nullptr;
  uint8_t* v_codes = nullptr;
  uint16_t* k_scales = nullptr;
  uint16_t* v_scales = nullptr;
  uint16_t* prot_k = nullptr;  // protected bf16 pages (may be null when no entry is < 0)
  uint16_t* prot_v = nullptr;
  const int32_t* page_table = nullptr;  // as QkvRopeParams::page_table (ring positions)
  int n_tokens = 0;
  int pos0 = 0;                       // append (ring) position of token 0
  const int32_t* pos0_dev = nullptr;  // when set, read instead (decode graphs)
  int orig_pos0 = 0;                       // original position of token 0 (protection rule)
  const int32_t* orig_pos0_dev = nullptr;  // when set, read instead
  int prot_sinks = 0;                   // positions < prot_sinks are protected
  const int32_t* prot_extra = nullptr;  // sorted extra protected positions (device)
  int n_prot_extra = 0;
  int n_head_kv = 0, head_dim = 0, block_size = 64;
  int bits = 8;  // 8 or 4
};
OpStatus launch_kv_quant_append(const KvQuantAppendParams& p, void* stream);

// out[r][j] = bf16(silu(g) * u) with g = gate_up[r][j], u = gate_up[r][n_ff + j].
// gate_up: [rows][2*n_ff] fp32 (the fused gate|up GEMM), out: [rows][n_ff] bf16.
OpStatus launch_swiglu(const float* gate_up, uint16_t* out, int rows, int n_ff, void* stream);

// Gemma's post-norms: x[r][:] += (y[r][:] * rsqrt(mean(y[r]^2) + eps)) * w[:] in fp32 (the sum of
// squares in double, the CPU's rms_norm then its residual add). y, x: [rows][dim] fp32, w: [dim].
OpStatus launch_rms_norm_add(const float* y, const float* w, float* x, int rows, int dim, float eps,
                             void* stream);

// GeGLU (Gemma): out[r][j] = bf16(gelu_tanh(g) * u), gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi)
// (g + 0.044715 g^3))), with g = gate_up[r][j], u = gate_up[r][n_ff + j] (the CPU's geglu).
OpStatus launch_geglu(const float* gate_up, uint16_t* out, int rows, int n_ff, void* stream);

// Logit soft-capping in place: x[i] = tanh(x[i] * (1 / cap)) * cap (Gemma 2's final logits).
OpStatus launch_softcap(float* x, int64_t n, float cap, void* stream);

// Copies positions [0, n_positions) of one layer's paged cache from pages of bs_src slots to
// pages of bs_dst slots (identity page tables on both sides). src and dst must not overlap.
OpStatus launch_repage_kv(const uint16_t* src, uint16_t* dst, int64_t n_positions, int n_kv_heads,
                          int head_dim, int bs_src, int bs_dst, void* stream);

// Cache position mode (StreamingLLM, engine/cache/kv_cache.h): the queries rotated a second time, at
// their cache index c = cache_position(pos, sinks, window) (engine/cache/kv_layout.h) instead of their
// position, from the same fp32 q|k|v rows (+ bias) and with the same arithmetic as
// qkv_rope_append; the attention scores sink keys with them. Nothing is appended.
struct RopeQueriesParams {
  const float* qkv = nullptr;   // [n_tokens][q_dim + 2*kv_dim] fp32
  const float* bias = nullptr;  // [q_dim + 2*kv_dim] or nullptr
  // Angles of cache indices [0, sinks + window): [index][rope_dim/2] fp32.
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;
  uint16_t* q_out = nullptr;  // [n_tokens][q_dim] bf16
  int n_tokens = 0;
  int pos0 = 0;                         // original position of token 0
  const int32_t* pos0_dev = nullptr;    // when set, read instead (decode graphs)
  int sinks = 0, window = 0;
  int n_head = 0, n_head_kv = 0, head_dim = 0, rope_dim = 0;
  bool neox = false;
};
OpStatus launch_rope_queries_at_cache_index(const RopeQueriesParams& p, void* stream);

// Per row of logits [rows][n_vocab] (fp32): lse[r] = max + log(sum exp(x - max)) (the sum in
// double) and top1[r] = the first index of the row's maximum. One block per row. With next
// (nullable): next_logit[r] = logits[r][next[r]] where 0 <= next[r] < n_vocab (the logit of the
// token that follows row r's; rows with next[r] < 0 are left as they are).
OpStatus launch_row_lse_argmax(const float* logits, int rows, int n_vocab, double* lse, int* top1,
                               void* stream, const int* next = nullptr,
                               float* next_logit = nullptr);
// Per row r of two logit blocks p, q [rows][n_vocab] with log-sum-exps lse_p, lse_q:
// kl[r] = sum_v P_v (log P_v - log Q_v), terms and sum in double, never below 0. One block a row.
OpStatus launch_row_kl(const float* p, const float* q, int rows, int n_vocab, const double* lse_p,
                       const double* lse_q, double* kl, void* stream);

}  // namespace sinkscope::kernels
