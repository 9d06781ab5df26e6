// SPDX-License-Identifier: Apache-2.0
// The paged, sink-retaining KV cache of one request (docs/architecture.md, "Sink-retaining KV
// cache", "KV quantization"). Backend-neutral host code: the CPU backend stores its K/V here and
// hands attention a KvLayerView (engine/cache/kv_layout.h) per layer; the CUDA backend can mirror the
// same page table with device pages.
//
// Policies. full: every position stays (up to the budgets). sliding_window: the first S
// positions (sinks) are never evicted and the W most recent are kept, capacity S + W; S = 0 is a
// plain window. A query at position q sees the sinks and the keys in (q - W, q] (itself
// included), so a chunk of m new tokens gives each of them exactly the view it would have had
// token by token: chunked and token-by-token streaming are the same computation. Pages whose
// positions all fell out of the window are freed after each forward; the cache then holds
// S + W tokens (plus the unused slots of partly evicted pages, which memory accounting counts).
//
// Position modes. original: keys keep their RoPE positions. cache (StreamingLLM): positions are
// indices inside the cache: sinks 0..S-1, then the window, the query last (cache_position()).
// Design choice, no key re-rotation: RoPE scores depend only on the position difference. A
// window key's cache-index difference to the query equals its original difference (the window
// is contiguous and ends at the query), so only the sink keys see a different distance. We
// store keys rotated at their original positions in both modes and, in cache mode, rotate each
// query a second time at its cache index; attention uses that copy against sink keys (stored at
// positions 0..S-1, which are also their cache indices). Cost: one extra RoPE per query head and
// token plus re-scoring S columns of the first tile(s) -- O(S d) per query, against O(W d) per
// evicted token for re-rotating stored keys (which, with quantized keys, would also requantize
// and accumulate error). Numerically identical to re-rotation up to float rounding.
//
// Budgets. per_request_limit_tokens bounds the tokens a request holds (full: n_past; window: its
// capacity S + W, checked when the cache is made); global_cache_limit_mib bounds the bytes of
// allocated pages and protected rows. Exceeding either throws BackendError naming the limit;
// the cache is unchanged then. Never silent truncation.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/cache/cache_settings.h"
#include "engine/cache/kv_layout.h"

namespace sinkscope {

// The budget rules above, shared by this cache and the CUDA backend's page plan
// (kv_page_plan.h), so that both hold, and name, the same limits.
// The tokens a request can hold: S + W for a window, else max_tokens capped by the request limit.
int64_t kv_capacity_tokens(const CacheSettings& s, int64_t max_tokens);
// Throws BackendError "per_request_limit_tokens exceeded: ..." when a full cache holding n0
// tokens would exceed the request limit with m more.
void check_request_limit(const CacheSettings& s, int64_t n0, int m);
// Throws BackendError "global_cache_limit_mib exceeded: ..." when `need` bytes (allocated now
// plus the pages the m new tokens add) exceed the global limit.
void check_global_limit(const CacheSettings& s, int64_t need, int m, int64_t bytes_per_token,
                        int block);

struct KvCacheStats {
  int64_t n_past = 0;            // positions appended in this request
  int64_t n_cached = 0;          // tokens retained: sinks + window (all of them for full)
  int64_t capacity_tokens = 0;   // S + W (window) or the token limit (full)
  int64_t evicted = 0;           // tokens evicted so far
  int64_t pages = 0;             // live pages per layer
  int64_t bytes_per_token = 0;   // K + V over all layers in the storage format (scales included)
  int64_t bytes_allocated = 0;   // live pages (block_size slots each) + protected float rows
  int64_t high_water_bytes = 0;  // max of bytes_allocated since reset()
  int64_t protected_rows = 0;    // positions held unquantized (quantized caches only)
};

// The windowed cache's chunk (KvCache::max_chunk(); the CUDA backend's passes are built from
// it, engine/cache/kv_page_plan.h): max(block_size, window_size).
int windowed_cpu_chunk(const CacheSettings& s, int block_size);

class KvCache {
 public:
  // max_tokens: the backend's token capacity for the full strategy (its max_context).
  // Throws BackendError on settings that cannot work (window < 1, group size not dividing
  // head_dim, S + W over per_request_limit_tokens, ...).
  KvCache(int n_layer, int n_kv_head, int head_dim, int block_size, int64_t max_tokens,
          const CacheSettings& settings);

  void reset();

  // Makes room for positions [n_past, n_past + m): checks the budgets (BackendError naming the
  // limit, nothing changed) and allocates pages in every layer.
  void reserve(int m);
  // Stores m rows of one layer for the reserved positions: k and v are (m, n_kv_head, d), K
  // already rotated at the original positions. Quantizes unless the position is protected.
  void write(int layer, int m, const float* k, const float* v);
  // Ends the forward: n_past += m, then evicts what fell out of the window.
  void commit(int m);
  // Undoes reserve() (a failed or cancelled forward).
  void rollback();
  // Keeps positions [0, n) only (full caches: a window has evicted what it would need); rows
  // are stored and quantized one position at a time, so what is kept is exactly what a forward
  // of those n positions wrote. False (nothing changed) for a windowed cache, n > n_past or a
  // forward in flight.
  bool truncate(int64_t n);

  KvLayerView view(int layer) const;
  const KvCacheStats& stats() const { return m_stats; }
  const CacheSettings& settings() const { return m_settings; }
  int64_t n_past() const { return m_stats.n_past; }
  int block_size() const { return m_block; }
  // For the attention's visibility rule: 0 window means full.
  int sinks() const { return m_settings.windowed() ? int(m_settings.sink_keep_count) : 0; }
  int window() const { return m_settings.windowed() ? int(m_settings.window_size) : 0; }
  bool cache_positions() const {
    return m_settings.windowed() && m_settings.position_mode == PositionMode::kCache;
  }
  // Largest number of new tokens one reserve() should take so the cache stays near S + W
  // (windowed_cpu_chunk).
  int max_chunk() const;

 private:
  struct Page {
    std::vector<float> k, v;             // float32 rows
    std::vector<uint8_t> kc, vc;         // codes
    std::vector<uint16_t> ks, vs;        // fp16 scales
  };
  struct Layer {
    std::vector<Page> pool;
    std::vector<int> free_ids;
    std::vector<int> table;               // physical page ids in position order
    std::vector<const float*> kf, vf;     // per table entry, for views
    std::vector<const uint8_t*> kc, vc;
    std::vector<const uint16_t*> ks, vs;
    std::vector<float> prot_k, prot_v;    // (n_prot, n_kv_head, d)
  };

  bool is_protected(int64_t pos) const;
  int64_t page_bytes() const;  // one page, one layer
  int64_t prot_row_bytes() const;
  void refresh_pointers(Layer& L) const;
  void update_bytes();

  CacheSettings m_settings;
  int m_layers, m_kv_heads, m_d, m_block;
  int64_t m_max_tokens;
  KvQuantFormat m_fmt;
  int64_t m_row_floats;  // n_kv_head * d
  std::vector<Layer> m_layer;
  std::vector<int> m_page_pos0, m_page_rows;  // shared by every layer's table
  std::vector<int> m_prot_pos;                // ascending
  std::vector<int> m_protect_extra;           // sorted extra positions
  // reserve() bookkeeping for rollback.
  int m_reserved = 0, m_reserved_pages = 0, m_reserved_prot = 0;
  KvCacheStats m_stats;
};

}  // namespace sinkscope
