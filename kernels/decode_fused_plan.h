// SPDX-License-Identifier: Apache-2.0
// Host-side plan of the fused batch-1 decode kernels (kernels/decode_fused.h): which model shapes
// they support (and why not), and the per-lane chunk count a launch is compiled for. Pure,
// header-only and CUDA-free, so the CPU tests check it (tests/unit/test_decode_fused_plan.cpp) and
// the backend's choice and the launchers' checks are the same function (docs/architecture.md,
// design principle 6).
#pragma once

#include <string>

namespace sinkscope::kernels {

// Shape of one transformer layer as the fused decode kernels see it.
struct DecodeFusedShape {
  int n_embd = 0;     // D: residual width, the K of the QKV and gate|up projections
  int n_head = 0;     // query heads
  int n_head_kv = 0;  // key/value heads (GQA: n_head % n_head_kv == 0)
  int head_dim = 0;
  int rope_dim = 0;   // rotated dims per head (even, <= head_dim)
  int n_ff = 0;       // F: SwiGLU width, the K of the down projection
};

// Threads per CTA of every fused decode kernel; one warp computes one pair of output rows.
constexpr int kFusedDecodeWarps = 4;
constexpr int kFusedDecodeThreads = kFusedDecodeWarps * 32;
// The input vector of a projection is staged once per CTA in shared memory as bf16 (K * 2
// bytes); the default 48 KB limit (no opt-in, so no attribute call inside a graph capture).
constexpr int kFusedDecodeMaxK = 48 * 1024 / 2;
// Weight chunks (16 bytes = 8 bf16) a lane keeps in flight per row and pass: 1, 2, 3, 4, 6, 8.
constexpr int kFusedDecodeMaxChunks = 8;

// Empty when the fused kernels support the shape, else the reason (shown by the backend, which
// then runs the unfused decode path). Every K must be a multiple of 8 (16-byte weight loads of
// whole rows) and at most kFusedDecodeMaxK; head_dim even (rows are computed in pairs).
inline std::string decode_fused_unsupported(const DecodeFusedShape& s) {
  const auto num = [](int v) { return std::to_string(v); };
  if (s.n_embd <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.head_dim <= 0 || s.n_ff <= 0)
    return "the model has an empty dimension";
  if (s.n_head % s.n_head_kv != 0) return "n_head is not a multiple of n_head_kv";
  if (s.head_dim % 2 != 0) return "head_dim " + num(s.head_dim) + " is odd";
  if (s.rope_dim < 0 || s.rope_dim > s.head_dim || s.rope_dim % 2 != 0)
    return "rope_dim " + num(s.rope_dim) + " is not even and <= head_dim";
  const int q_dim = s.n_head * s.head_dim;
  struct K {
    const char* what;
    int k;
  };
  for (const K k : {K{"n_embd", s.n_embd}, K{"n_ff", s.n_ff}, K{"n_head * head_dim", q_dim}}) {
    if (k.k % 8 != 0)
      return std::string(k.what) + " = " + num(k.k) +
             " is not a multiple of 8 (16-byte bf16 weight loads)";
    if (k.k > kFusedDecodeMaxK)
      return std::string(k.what) + " = " + num(k.k) + " exceeds " + num(kFusedDecodeMaxK) +
             " (the input vector is staged in 48 KB of shared memory)";
  }
  return {};
}

// Chunks per lane and pass for a row of k bf16 values (k % 8 == 0): the smallest supported
// count that covers the row in one pass (k8 / 32 chunks per lane), capped at 8 (longer rows
// loop). SmolLM2: k = 576 -> 3 (one pass), k = 1536 -> 6 (one pass).
inline int decode_fused_chunks_per_lane(int k) {
  const int k8 = k / 8;
  const int need = (k8 + 31) / 32;
  for (int u : {1, 2, 3, 4, 6})
    if (need <= u) return u;
  return kFusedDecodeMaxChunks;
}

// Row pairs (one warp each) and CTAs of a projection with n_pairs pairs.
inline int decode_fused_blocks(int n_pairs) {
  return (n_pairs + kFusedDecodeWarps - 1) / kFusedDecodeWarps;
}

}  // namespace sinkscope::kernels
