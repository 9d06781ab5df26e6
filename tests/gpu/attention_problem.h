// SPDX-License-Identifier: Apache-2.0
// Shared by the GPU test and the benchmark: random attention problems (optionally with an
// attention sink and "quiet" KV tiles that make skipping real), their paged device copies,
// and bf16 helpers. Host-only C++ plus the CUDA runtime.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cuda_check.h"

namespace sinkscope::testing {

inline uint16_t f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}
inline float bf2f(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
constexpr uint16_t kBf16NaN = 0x7fc0;

struct ProblemSpec {
  int n_q_tokens = 1, n_q_heads = 1, n_kv_heads = 1, head_dim = 64, block_size = 64;
  int64_t kv_len = 1, q_start = 0;
  // Inputs: q, k, v ~ N(0, 1). With sink_logit > 0 every query scores exactly sink_logit against
  // key 0 (one shared extra component; key 0 is that component alone). quiet_fraction of the KV tiles after the first have their
  // keys scaled by quiet_scale (scores near 0: skippable); the others by loud_scale.
  double sink_logit = 0.0;
  double quiet_fraction = 0.0, quiet_scale = 0.1, loud_scale = 1.0;
};

// Host copy: q [tok][hq][d], k/v in logical order [pos][hkv][d], all already bf16-rounded.
struct HostProblem {
  ProblemSpec spec;
  std::vector<uint16_t> q, k, v;
  float qf(int64_t t, int h, int i) const {
    return bf2f(q[(t * spec.n_q_heads + h) * spec.head_dim + i]);
  }
  float kf(int64_t pos, int h, int i) const {
    return bf2f(k[(pos * spec.n_kv_heads + h) * spec.head_dim + i]);
  }
  float vf(int64_t pos, int h, int i) const {
    return bf2f(v[(pos * spec.n_kv_heads + h) * spec.head_dim + i]);
  }
};

// Fast approximately-normal numbers (Irwin-Hall: sum of 4 uniforms, variance scaled to 1) from
// splitmix64: the 64K-token problems need ~10^8 draws, which std::normal_distribution makes slowly.
struct FastNormal {
  uint64_t state;
  explicit FastNormal(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float operator()() {
    const uint64_t r = next();
    const float sum = float(r & 0xffff) + float((r >> 16) & 0xffff) + float((r >> 32) & 0xffff) +
                      float(r >> 48);
    return (sum * (1.f / 65536.f) - 2.f) * 1.7320508f;  // 4 uniforms: mean 2, variance 1/3
  }
};

inline HostProblem make_problem(const ProblemSpec& s, std::mt19937_64& rng) {
  HostProblem p;
  p.spec = s;
  const int d = s.head_dim;
  FastNormal nd(rng());
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  p.q.resize(size_t(s.n_q_tokens) * s.n_q_heads * d);
  p.k.resize(size_t(s.kv_len) * s.n_kv_heads * d);
  p.v.resize(p.k.size());
  const float sink_q = 2.f;  // the shared component of every query
  for (size_t i = 0; i < p.q.size(); ++i) {
    const bool last = (i % d) == size_t(d - 1);
    p.q[i] = f2bf(last && s.sink_logit > 0 ? sink_q : nd());
  }
  const int64_t n_tiles = (s.kv_len + s.block_size - 1) / s.block_size;
  std::vector<float> tile_scale(n_tiles, float(s.loud_scale));
  for (int64_t t = 1; t < n_tiles; ++t)
    if (ud(rng) < s.quiet_fraction) tile_scale[t] = float(s.quiet_scale);
  for (int64_t pos = 0; pos < s.kv_len; ++pos)
    for (int h = 0; h < s.n_kv_heads; ++h)
      for (int i = 0; i < d; ++i) {
        const size_t idx = (size_t(pos) * s.n_kv_heads + h) * d + i;
        float kv = nd() * tile_scale[pos / s.block_size];
        // The sink key is the shared direction alone, so every query scores exactly sink_logit.
        if (s.sink_logit > 0 && pos == 0) kv = 0.f;
        if (s.sink_logit > 0 && i == d - 1)
          kv = pos == 0 ? float(s.sink_logit * std::sqrt(double(d)) / sink_q) : 0.f;
        p.k[idx] = f2bf(kv);
        p.v[idx] = f2bf(nd());
      }
  return p;
}

// Device copy with a shuffled page table; unused pool pages and the tail of the last page are
// NaN, so any read outside the visible cache shows up in the output.
struct DeviceProblem {
  uint16_t *q = nullptr, *o = nullptr, *k = nullptr, *v = nullptr;
  int32_t* pages = nullptr;
  uint64_t *visited = nullptr, *skipped = nullptr;
  uint8_t* mask = nullptr;
  void* workspace = nullptr;
  size_t o_elems = 0, mask_bytes = 0, workspace_bytes = 0;
  int n_kvt = 0;

  void upload(const HostProblem& h, std::mt19937_64& rng) {
    const ProblemSpec& s = h.spec;
    const int d = s.head_dim, bc = s.block_size;
    n_kvt = int((s.kv_len + bc - 1) / bc);
    const int pool = n_kvt + 2;
    std::vector<int32_t> table(n_kvt);
    std::vector<int32_t> perm(pool);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int i = 0; i < n_kvt; ++i) table[i] = perm[i];
    const size_t page_elems = size_t(s.n_kv_heads) * bc * d;
    std::vector<uint16_t> kp(page_elems * pool, kBf16NaN), vp(page_elems * pool, kBf16NaN);
    for (int64_t pos = 0; pos < s.kv_len; ++pos)
      for (int hh = 0; hh < s.n_kv_heads; ++hh) {
        const size_t src = (size_t(pos) * s.n_kv_heads + hh) * d;
        const size_t dst = size_t(table[pos / bc]) * page_elems + (size_t(hh) * bc + pos % bc) * d;
        std::memcpy(&kp[dst], &h.k[src], d * 2);
        std::memcpy(&vp[dst], &h.v[src], d * 2);
      }
    o_elems = h.q.size();
    mask_bytes = size_t(s.n_q_heads) *
                 ((s.n_q_tokens + kernels::kPrefillQueryTile - 1) / kernels::kPrefillQueryTile) * n_kvt;
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&q, h.q.size() * 2));
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&o, o_elems * 2));
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&k, kp.size() * 2));
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&v, vp.size() * 2));
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&pages, table.size() * 4));
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&visited, s.n_q_heads * 8));
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&skipped, s.n_q_heads * 8));
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&mask, mask_bytes));
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(q, h.q.data(), h.q.size() * 2, cudaMemcpyHostToDevice));
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(k, kp.data(), kp.size() * 2, cudaMemcpyHostToDevice));
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(v, vp.data(), vp.size() * 2, cudaMemcpyHostToDevice));
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(pages, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  }

  kernels::AttentionParams params(const HostProblem& h, double lambda) {
    const ProblemSpec& s = h.spec;
    kernels::AttentionParams p;
    p.q = q;
    p.o = o;
    p.k_pages = k;
    p.v_pages = v;
    p.page_table = pages;
    p.n_q_tokens = s.n_q_tokens;
    p.n_q_heads = s.n_q_heads;
    p.n_kv_heads = s.n_kv_heads;
    p.head_dim = s.head_dim;
    p.block_size = s.block_size;
    p.kv_len = s.kv_len;
    p.q_start = s.q_start;
    p.scale = float(1.0 / std::sqrt(double(s.head_dim)));
    p.log2_lambda = kernels::log2_of_lambda(lambda);
    p.tiles_visited = visited;
    p.tiles_skipped = skipped;
    p.skip_mask = mask;
    p.mask_head = -1;
    return p;
  }

  // Grows the workspace to what p needs and points p at it.
  void attach_workspace(kernels::AttentionParams& p) {
    const size_t need = kernels::attention_workspace_bytes(p);
    if (need > workspace_bytes) {
      if (workspace) SINKSCOPE_CUDA_CHECK(cudaFree(workspace));
      SINKSCOPE_CUDA_CHECK(cudaMalloc(&workspace, need));
      workspace_bytes = need;
    }
    p.workspace = workspace;
    p.workspace_bytes = workspace_bytes;
  }

  void release() {
    for (void* ptr : {(void*)q, (void*)o, (void*)k, (void*)v, (void*)pages, (void*)visited,
                      (void*)skipped, (void*)mask, workspace})
      if (ptr) SINKSCOPE_CUDA_CHECK(cudaFree(ptr));
    *this = DeviceProblem{};
  }
};

// "SKIP: ..." when no usable CUDA device is present; returns false then.
inline bool have_gpu(const char* program) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIP: %s: no CUDA device (%s)\n", program,
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return false;
  }
  return true;
}

}  // namespace sinkscope::testing
