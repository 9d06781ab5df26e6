// SPDX-License-Identifier: Apache-2.0
// Fused batch-1 decode kernels (kernels/decode_fused.h): one GEMV kernel family, three modes.
//
// At M = 1 a projection is a matrix-vector product: every weight byte is used once, so the
// kernel is bound by how fast (and how early) the weight rows arrive. Layout of one launch:
//   - 128-thread CTAs, one warp per PAIR of output rows: (q/k rows a, b of one RoPE pair),
//     (gate row j, up row j), or (rows 2i, 2i+1) of the O / down projection. A pair is what the
//     epilogue needs together (rotation, silu(g)*u), so no second pass or cross-warp exchange.
//   - each lane streams 16-byte chunks (8 bf16) of both rows, U chunks per row in flight
//     (kernels/decode_fused_plan.h picks U so that SmolLM2's rows take one pass), fp32 FMAs
//     against the bf16 input vector staged in shared memory, then a 5-step xor-shuffle
//     reduction; lane 0 runs the epilogue.
//   - the first pass of weight loads is issued BEFORE griddepcontrol.wait: weights are never
//     written during a decode step, so with PDL they stream in while the previous kernel
//     finishes. Everything the previous kernel produces (x, the attention output, the SwiGLU
//     output) is read only after the wait, as in every PDL kernel here (kernels/pdl.cuh).
//   - the RMSNorm modes recompute the norm in every CTA (D fp32 values from L2, cheap) and stage
//     bf16(x * scale * w) exactly like launch_rms_norm's output, so the projection sees the
//     same bf16 activation as the unfused path.
#include "kernels/decode_fused.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda_check.h"
#include "kernels/pdl.cuh"
#include "kernels/rope_pair.cuh"

namespace sinkscope::kernels {
namespace {

using detail::launch_pdl;
using detail::paged_kv_index;
using detail::pdl_trigger;
using detail::pdl_wait;
using detail::rope_pair_dims;
using detail::rope_rotate;

enum class Mode : int {
  kQkvRope,   // RMSNorm -> QKV -> bias, RoPE, q out, K/V append
  kGateUp,    // RMSNorm -> gate|up -> SwiGLU
  kResidual,  // bf16 vector -> projection -> x += result
};

// Everything any mode reads: one parameter struct for the one kernel template
// (docs/architecture.md, design principle 7).
struct GemvArgs {
  const uint16_t* w = nullptr;  // weight rows, k bf16 each
  int k = 0;                    // row length (multiple of 8)
  int n_pairs = 0;              // row pairs = warps with work
  // Input: kResidual reads v (bf16 [k]); the RMSNorm modes read x, norm_w (fp32 [k]).
  const uint16_t* v = nullptr;
  const float* x = nullptr;
  const float* norm_w = nullptr;
  float eps = 0.f;
  // Outputs.
  float* x_out = nullptr;    // kResidual: [n_out] fp32, accumulated into
  int n_out = 0;             // kResidual
  uint16_t* act = nullptr;   // kGateUp: [n_ff] bf16
  int n_ff = 0;              // kGateUp
  QkvRopeParams rope;        // kQkvRope
};

__device__ __forceinline__ uint16_t to_bf16_bits(float v) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
// The two bf16 halves of a 32-bit word as floats (exact: bf16 is the high half of an fp32).
__device__ __forceinline__ float bf16_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }

// acc_lo/acc_hi += the 8 products of one 16-byte weight chunk and one input chunk (two chains
// for instruction-level parallelism).
__device__ __forceinline__ void dot8(const uint4& w, const uint4& x, float& acc_lo, float& acc_hi) {
  acc_lo = fmaf(bf16_lo(w.x), bf16_lo(x.x), acc_lo);
  acc_hi = fmaf(bf16_hi(w.x), bf16_hi(x.x), acc_hi);
  acc_lo = fmaf(bf16_lo(w.y), bf16_lo(x.y), acc_lo);
  acc_hi = fmaf(bf16_hi(w.y), bf16_hi(x.y), acc_hi);
  acc_lo = fmaf(bf16_lo(w.z), bf16_lo(x.z), acc_lo);
  acc_hi = fmaf(bf16_hi(w.z), bf16_hi(x.z), acc_hi);
  acc_lo = fmaf(bf16_lo(w.w), bf16_lo(x.w), acc_lo);
  acc_hi = fmaf(bf16_hi(w.w), bf16_hi(x.w), acc_hi);
}

// The two weight rows of a pair, and for kQkvRope where they go.
struct PairRows {
  int r0 = 0, r1 = 0;
  bool has_r1 = true;  // kResidual with an odd n_out: the last pair has one row
  // kQkvRope: head index over q | k | v heads, the dims of both rows, RoPE pair index or -1.
  int head = 0, d0 = 0, d1 = 0, rope_i = -1;
};

template <Mode M>
__device__ __forceinline__ PairRows pair_rows(const GemvArgs& a, int pair) {
  PairRows p;
  if constexpr (M == Mode::kResidual) {
    p.r0 = 2 * pair;
    p.r1 = 2 * pair + 1;
    p.has_r1 = p.r1 < a.n_out;
    if (!p.has_r1) p.r1 = p.r0;  // load a valid row, write nothing
  } else if constexpr (M == Mode::kGateUp) {
    p.r0 = pair;
    p.r1 = a.n_ff + pair;
  } else {
    // Rows are heads of head_dim rows: q heads, then k heads, then v heads (wq | wk | wv).
    const QkvRopeParams& r = a.rope;
    const int per_head = r.head_dim / 2;
    p.head = pair / per_head;
    const int i = pair - p.head * per_head;
    if (p.head < r.n_head + r.n_head_kv && 2 * i < r.rope_dim) {
      rope_pair_dims(i, r.rope_dim, r.neox, &p.d0, &p.d1);  // rotated pair
      p.rope_i = i;
    } else {
      p.d0 = 2 * i;  // pass-through dims [rope_dim, head_dim) and all of v, two at a time
      p.d1 = 2 * i + 1;
    }
    p.r0 = p.head * r.head_dim + p.d0;
    p.r1 = p.head * r.head_dim + p.d1;
  }
  return p;
}

// Stages the projection's input vector in shared memory as bf16 (k values, k / 8 chunks).
// RMSNorm modes: bf16(x * scale * norm_w), scale = 1 / sqrt(mean(x^2) + eps) formed in double,
// the same formula and product order as launch_rms_norm. Ends with a block barrier.
template <Mode M>
__device__ __forceinline__ void stage_input(const GemvArgs& a, uint4* s_vec, float* s_red) {
  const int k8 = a.k >> 3;
  if constexpr (M == Mode::kResidual) {
    const uint4* v = reinterpret_cast<const uint4*>(a.v);
    for (int i = threadIdx.x; i < k8; i += kFusedDecodeThreads) s_vec[i] = v[i];
  } else {
    const float4* x4 = reinterpret_cast<const float4*>(a.x);
    const float4* g4 = reinterpret_cast<const float4*>(a.norm_w);
    const int n4 = a.k >> 2;
    float ss = 0.f;
    for (int i = threadIdx.x; i < n4; i += kFusedDecodeThreads) {
      const float4 v = x4[i];
      ss += v.x * v.x;
      ss += v.y * v.y;
      ss += v.z * v.z;
      ss += v.w * v.w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) s_red[threadIdx.x >> 5] = ss;
    __syncthreads();
    double total = 0.0;  // every thread sums the warps in the same order: one scale per CTA
#pragma unroll
    for (int w = 0; w < kFusedDecodeWarps; ++w) total += s_red[w];
    const float scale = float(1.0 / sqrt(total / double(a.k) + double(a.eps)));
    uint2* s2 = reinterpret_cast<uint2*>(s_vec);
    for (int i = threadIdx.x; i < n4; i += kFusedDecodeThreads) {
      const float4 v = x4[i];
      const float4 g = g4[i];
      const uint32_t b0 = to_bf16_bits(v.x * scale * g.x);
      const uint32_t b1 = to_bf16_bits(v.y * scale * g.y);
      const uint32_t b2 = to_bf16_bits(v.z * scale * g.z);
      const uint32_t b3 = to_bf16_bits(v.w * scale * g.w);
      s2[i] = make_uint2(b0 | (b1 << 16), b2 | (b3 << 16));
    }
  }
  __syncthreads();
}

// The epilogue of one pair (lane 0): s0, s1 are the two rows' dot products.
template <Mode M>
__device__ __forceinline__ void finish_pair(const GemvArgs& a, int pair, const PairRows& p,
                                            float s0, float s1) {
  if constexpr (M == Mode::kResidual) {
    a.x_out[p.r0] += s0;  // == cuBLAS beta = 1: x = dot + x
    if (p.has_r1) a.x_out[p.r1] += s1;
  } else if constexpr (M == Mode::kGateUp) {
    a.act[pair] = to_bf16_bits(s0 / (1.0f + expf(-s0)) * s1);  // launch_swiglu's formula
  } else {
    const QkvRopeParams& r = a.rope;
    float v0 = s0, v1 = s1;
    if (r.bias) {
      v0 = s0 + r.bias[p.r0];
      v1 = s1 + r.bias[p.r1];
    }
    const int pos = r.pos0_dev ? *r.pos0_dev : r.pos0;  // one token: row 0
    if (p.rope_i >= 0) {
      const int64_t t = int64_t(pos) * (r.rope_dim / 2) + p.rope_i;
      float o0, o1;
      rope_rotate(v0, v1, r.rope_cos[t], r.rope_sin[t], &o0, &o1);
      v0 = o0;
      v1 = o1;
    }
    if (p.head < r.n_head) {
      uint16_t* q = r.q_out + int64_t(p.head) * r.head_dim;
      q[p.d0] = to_bf16_bits(v0);
      q[p.d1] = to_bf16_bits(v1);
    } else {
      const bool is_k = p.head < r.n_head + r.n_head_kv;
      const int h = p.head - r.n_head - (is_k ? 0 : r.n_head_kv);
      if (r.kv_f32) {  // quantized cache: fp32 K|V for launch_kv_quant_append (ops.h)
        float* dst = r.kv_f32 + (is_k ? 0 : r.n_head_kv * r.head_dim) + h * r.head_dim;
        dst[p.d0] = v0;
        dst[p.d1] = v1;
        return;
      }
      const int64_t page = r.page_table[pos / r.block_size];
      const int slot = pos % r.block_size;
      uint16_t* dst = is_k ? r.k_pages : r.v_pages;
      dst[paged_kv_index(page, r.n_head_kv, h, r.block_size, slot, r.head_dim, p.d0)] =
          to_bf16_bits(v0);
      dst[paged_kv_index(page, r.n_head_kv, h, r.block_size, slot, r.head_dim, p.d1)] =
          to_bf16_bits(v1);
    }
  }
}

// One pass of weight loads: chunk lane + 32 u (< n) of both rows, zeros past the row's end.
template <int U>
__device__ __forceinline__ void load_pass(uint4 (&wa)[U], uint4 (&wb)[U], const uint4* w0,
                                          const uint4* w1, int n, int lane) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = lane + 32 * u;
    wa[u] = c < n ? __ldg(w0 + c) : make_uint4(0u, 0u, 0u, 0u);
    wb[u] = c < n ? __ldg(w1 + c) : make_uint4(0u, 0u, 0u, 0u);
  }
}

// U: 16-byte chunks per lane and row in flight (one pass covers 32 * U chunks of a row).
template <Mode M, int U>
__global__ void __launch_bounds__(kFusedDecodeThreads) decode_gemv_kernel(const GemvArgs a) {
  extern __shared__ uint4 s_vec[];  // [k / 8]: the bf16 input vector
  __shared__ float s_red[kFusedDecodeWarps];
  const int lane = threadIdx.x & 31;
  const int pair = blockIdx.x * kFusedDecodeWarps + (threadIdx.x >> 5);
  const bool active = pair < a.n_pairs;
  const int k8 = a.k >> 3;
  PairRows rows;
  if (active) rows = pair_rows<M>(a, pair);
  const uint4* w0 = reinterpret_cast<const uint4*>(a.w) + int64_t(rows.r0) * k8;
  const uint4* w1 = reinterpret_cast<const uint4*>(a.w) + int64_t(rows.r1) * k8;

  uint4 wa[U], wb[U];
  // Weights are constant during a decode step: the first pass is loaded before the PDL wait.
  load_pass<U>(wa, wb, w0, w1, active ? k8 : 0, lane);
  pdl_wait();
  pdl_trigger();
  stage_input<M>(a, s_vec, s_red);  // after the wait: x / v come from the previous kernel
  if (!active) return;

  float a_lo = 0.f, a_hi = 0.f, b_lo = 0.f, b_hi = 0.f;
#pragma unroll 1
  for (int base = 0;;) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = base + lane + 32 * u;
      if (c < k8) {
        const uint4 xs = s_vec[c];
        dot8(wa[u], xs, a_lo, a_hi);
        dot8(wb[u], xs, b_lo, b_hi);
      }
    }
    base += 32 * U;
    if (base >= k8) break;
    load_pass<U>(wa, wb, w0 + base, w1 + base, k8 - base, lane);
  }
  float s0 = a_lo + a_hi, s1 = b_lo + b_hi;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    s0 += __shfl_xor_sync(0xffffffffu, s0, o);
    s1 += __shfl_xor_sync(0xffffffffu, s1, o);
  }
  if (lane == 0) finish_pair<M>(a, pair, rows, s0, s1);
}

template <Mode M, int U>
cudaError_t launch_u(const GemvArgs& a, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(decode_fused_blocks(a.n_pairs)));
  const size_t smem = size_t(a.k) * 2;
  return launch_pdl(true, decode_gemv_kernel<M, U>, grid, dim3(kFusedDecodeThreads), smem, st, a);
}

template <Mode M>
OpStatus launch_mode(const GemvArgs& a, void* stream, const char* name) {
  if (a.n_pairs <= 0) return {};
  const auto st = static_cast<cudaStream_t>(stream);
  cudaError_t e;
  switch (decode_fused_chunks_per_lane(a.k)) {
    case 1: e = launch_u<M, 1>(a, st); break;
    case 2: e = launch_u<M, 2>(a, st); break;
    case 3: e = launch_u<M, 3>(a, st); break;
    case 4: e = launch_u<M, 4>(a, st); break;
    case 6: e = launch_u<M, 6>(a, st); break;
    default: e = launch_u<M, kFusedDecodeMaxChunks>(a, st); break;
  }
  if (e != cudaSuccess) return OpStatus::error(cuda_error_text(e, name, __FILE__, __LINE__));
  return {};
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The row length every mode needs: a multiple of 8 that fits the shared-memory stage.
std::string bad_k(const char* what, int k) {
  if (k <= 0 || k % 8 != 0 || k > kFusedDecodeMaxK)
    return std::string(what) + " = " + std::to_string(k) + " must be a positive multiple of 8, <= " +
           std::to_string(kFusedDecodeMaxK);
  return {};
}

}  // namespace

OpStatus launch_fused_norm_qkv_rope(const FusedQkvParams& p, void* stream) {
  const QkvRopeParams& r = p.rope;
  const char* fn = "launch_fused_norm_qkv_rope: ";
  if (!p.x || !p.norm_w || !p.w_qkv || !r.rope_cos || !r.rope_sin || !r.q_out ||
      (!r.kv_f32 && (!r.k_pages || !r.v_pages || !r.page_table)))
    return OpStatus::error(std::string(fn) + "a required pointer is null");
  if (r.n_tokens != 1) return OpStatus::error(std::string(fn) + "one token per launch");
  DecodeFusedShape s;
  s.n_embd = p.n_embd;
  s.n_head = r.n_head;
  s.n_head_kv = r.n_head_kv;
  s.head_dim = r.head_dim;
  s.rope_dim = r.rope_dim;
  s.n_ff = 8;  // not used here
  if (std::string why = decode_fused_unsupported(s); !why.empty())
    return OpStatus::error(fn + why);
  if (r.block_size <= 0) return OpStatus::error(std::string(fn) + "bad block_size");
  if (!aligned16(p.x) || !aligned16(p.norm_w) || !aligned16(p.w_qkv))
    return OpStatus::error(std::string(fn) + "x, norm_w and w_qkv must be 16-byte aligned");
  GemvArgs a;
  a.w = p.w_qkv;
  a.k = p.n_embd;
  a.n_pairs = (r.n_head + 2 * r.n_head_kv) * (r.head_dim / 2);
  a.x = p.x;
  a.norm_w = p.norm_w;
  a.eps = p.eps;
  a.rope = r;
  return launch_mode<Mode::kQkvRope>(a, stream, "decode_gemv_kernel<kQkvRope>");
}

OpStatus launch_fused_norm_gate_up_swiglu(const FusedGateUpParams& p, void* stream) {
  const char* fn = "launch_fused_norm_gate_up_swiglu: ";
  if (p.n_ff <= 0) return {};
  if (!p.x || !p.norm_w || !p.w_gu || !p.act)
    return OpStatus::error(std::string(fn) + "a required pointer is null");
  if (std::string why = bad_k("n_embd", p.n_embd); !why.empty()) return OpStatus::error(fn + why);
  if (!aligned16(p.x) || !aligned16(p.norm_w) || !aligned16(p.w_gu))
    return OpStatus::error(std::string(fn) + "x, norm_w and w_gu must be 16-byte aligned");
  GemvArgs a;
  a.w = p.w_gu;
  a.k = p.n_embd;
  a.n_pairs = p.n_ff;
  a.x = p.x;
  a.norm_w = p.norm_w;
  a.eps = p.eps;
  a.act = p.act;
  a.n_ff = p.n_ff;
  return launch_mode<Mode::kGateUp>(a, stream, "decode_gemv_kernel<kGateUp>");
}

OpStatus launch_fused_gemv_residual(const uint16_t* v, const uint16_t* w, float* x, int n_out,
                                    int n_in, void* stream) {
  const char* fn = "launch_fused_gemv_residual: ";
  if (n_out <= 0) return {};
  if (!v || !w || !x) return OpStatus::error(std::string(fn) + "a required pointer is null");
  if (std::string why = bad_k("n_in", n_in); !why.empty()) return OpStatus::error(fn + why);
  if (!aligned16(v) || !aligned16(w))
    return OpStatus::error(std::string(fn) + "v and w must be 16-byte aligned");
  GemvArgs a;
  a.w = w;
  a.k = n_in;
  a.n_pairs = (n_out + 1) / 2;
  a.v = v;
  a.x_out = x;
  a.n_out = n_out;
  return launch_mode<Mode::kResidual>(a, stream, "decode_gemv_kernel<kResidual>");
}

}  // namespace sinkscope::kernels
