// SPDX-License-Identifier: Apache-2.0
// How attention sees a paged KV cache (docs/architecture.md, "Sink-retaining KV cache"): a plain
// parameter struct, so the CPU attention and the CUDA kernels read the same description.
//
// Pages hold block_size consecutive positions, aligned: page p covers positions
// [pos0, pos0 + block_size). A layer's page table lists its live pages in increasing position
// order, so the sink page(s) come first and "the first KV tile holds the sinks" stays true.
// Keys are stored rotated at their ORIGINAL positions in both position modes (see kv_cache.h for
// why cache mode needs no key re-rotation). Slots of live pages whose positions were evicted
// (window tokens that share a page with sinks or with kept tokens) are never visible: the
// visibility rule below excludes them by position alone, so no per-slot valid bits exist.
//
// Visibility of key position k to a query at original position q (S sinks, window W, W = 0 for
// the full cache):   k <= q  and  (k < S  or  W == 0  or  k > q - W)  -- kernels/visibility.h,
// which also applies a model layer's own window, is the one implementation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sinkscope {

// Per-token KV quantization (docs/architecture.md, "KV quantization"): each (token, kv head) vector
// of d values is split into groups of `group` consecutive elements; each group has one fp16
// scale s = amax / qmax rounded UP to fp16 (so no value clips) and codes c = round(x / s) in
// [-qmax, qmax]: int8 qmax = 127 (one byte per element), int4 qmax = 7 (two elements per byte,
// element 2i in the low nibble, stored as c + 8). Dequant: x' = c * s.
struct KvQuantFormat {
  int bits = 0;  // 0: float32 rows; 8 or 4: quantized
  int group = 32;
  int qmax() const { return bits == 8 ? 127 : 7; }
  int code_bytes(int d) const { return bits == 8 ? d : d / 2; }  // per (token, head) vector
  int scales(int d) const { return d / group; }                 // fp16 scales per vector
};

// Streaming-LLM cache index of a query at original position q: the number of keys it sees,
// minus one (sinks first, then the window, then itself). Equals q until eviction starts.
inline int64_t cache_position(int64_t q, int64_t sinks, int64_t window) {
  if (window <= 0 || q < sinks) return q;
  return sinks + std::min<int64_t>(window - 1, q - sinks);
}

// The sliding window's eviction once n positions have been appended (S sinks, window W): the
// positions in [S, keep_from), keep_from = max(S, n - W), are out of every later query's window.
// Of the live pages (first positions page_pos0, ascending), those in [drop_begin, drop_end) hold
// no sink and only such positions, and go back to the pool. Shared by the CPU cache
// (kv_cache.cpp) and the CUDA backend's page plan (kv_page_plan.cpp).
struct WindowEviction {
  int64_t keep_from = 0;  // positions in [S, keep_from) are evicted
  int64_t evicted = 0, n_cached = 0;
  size_t drop_begin = 0, drop_end = 0;
};
inline WindowEviction window_eviction(int64_t n, int64_t S, int64_t W,
                                      const std::vector<int>& page_pos0, int block) {
  WindowEviction e;
  const int64_t keep_from = e.keep_from = std::max<int64_t>(S, n - W);
  e.evicted = std::max<int64_t>(0, keep_from - S);
  e.n_cached = std::min(n, S) + (n - std::min(n, S) - e.evicted);
  while (e.drop_begin < page_pos0.size() && page_pos0[e.drop_begin] < S) ++e.drop_begin;
  e.drop_end = e.drop_begin;
  while (e.drop_end < page_pos0.size() && page_pos0[e.drop_end] + block <= keep_from) ++e.drop_end;
  return e;
}

// One layer of the cache as attention reads it. Row r of a page, kv head g:
//   float:     k_f32[page] + (r * n_kv_head + g) * d
//   quantized: k_codes[page] + (r * n_kv_head + g) * fmt.code_bytes(d),
//              k_scales[page] + (r * n_kv_head + g) * fmt.scales(d)   (fp16 bits)
// Protected positions (sinks kept unquantized) override the quantized row with the float row
// prot_k + (i * n_kv_head + g) * d for prot_pos[i] == position (prot_pos ascending).
struct KvLayerView {
  int n_pages = 0;
  int block_size = 64;
  int n_kv_head = 0, d = 0;
  const int* page_pos0 = nullptr;  // first position of each page (increasing)
  const int* page_rows = nullptr;  // rows written in each page (<= block_size)
  KvQuantFormat fmt;
  const float* const* k_f32 = nullptr;
  const float* const* v_f32 = nullptr;
  const uint8_t* const* k_codes = nullptr;
  const uint8_t* const* v_codes = nullptr;
  const uint16_t* const* k_scales = nullptr;
  const uint16_t* const* v_scales = nullptr;
  int n_prot = 0;
  const int* prot_pos = nullptr;
  const float* prot_k = nullptr;
  const float* prot_v = nullptr;
};

}  // namespace sinkscope
