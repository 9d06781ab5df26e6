// SPDX-License-Identifier: Apache-2.0
// Host-side bookkeeping of a device KV cache (the CUDA backend's), plain C++ so CI tests it
// without a GPU (tests/unit/test_kv_page_plan.cpp). Same policy, budgets and accounting as the
// CPU's engine/cache/kv_cache.h; only the storage differs (bf16 pages in a preallocated device pool).
//
// Two layouts:
//  - full: positions live at identity pages (page i = positions [i*bs, (i+1)*bs)), as the CUDA
//    backend always had; the plan only enforces the budgets and keeps the statistics.
//  - sliding_window (+ S sinks): a pool of pool_pages pages per layer. Live pages are listed in
//    position order (tile_pos0 / tile_page, what the attention kernels read, sink pages first);
//    commit() drops the pages whose positions all left the window back into the free list, so
//    eviction is page-table work, no copy. The stream has no end: the append kernels see
//    "ring positions" vpos = pos - base (base a multiple of 128, moved forward when a pass would
//    run past the ring), and append_table[vpos / bs] names the page receiving position pos. The
//    RoPE table rows the append kernels read are likewise ring rows, refreshed per pass.
//
// Layer-independent: every layer's pool uses the same page ids, so one table serves all layers.
//
// Quantized KV (quantization.enabled: int8 / int4 codes + fp16 scales, engine/cache/kv_layout.h
// KvQuantFormat, the CPU's format) with protect_sink_positions: a page holding a protected
// position (a sink, position < sink_keep_count, or one of protected_positions -- the CPU's
// KvCache::is_protected rule) is a "protected page": it lives in a separate pool of bf16 pages
// and its entry in the page tables (full: full_page_table(); window: tile_page /
// append_entries) is -1 - j, j its protected-pool page. The attention kernels read such a tile
// as bf16 (a compile-time KV-format template, one warp-uniform branch per tile); the append
// kernel stores the protected rows as bf16(x) and the page's other rows as bf16(dequant(quant(x)))
// -- exactly the bf16 values the kernels' fused dequantisation feeds the tensor cores for a
// quantized page, so only the protected rows differ from a plain quantized page (CPU semantics).
// Statistics: pages, protected_rows, n_cached, evicted and bytes_per_token equal the CPU's;
// bytes_allocated counts the device storage: quantized pages + protected bf16 pages (the CPU
// counts quantized pages + float32 protected rows).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/cache/cache_settings.h"
#include "engine/cache/kv_cache.h"

namespace sinkscope {

// Why the CUDA backend cannot run these cache settings ("" when it can). Names the setting.
std::string cuda_cache_unsupported(const CacheSettings& s);

// Positions a windowed device pool needs so that no pass of up to `chunk` tokens runs out of
// pages, whichever page size (64 or 128): sinks, window + chunk, and two partial pages.
int64_t windowed_pool_positions(const CacheSettings& s, int64_t chunk);

// Largest pass of new tokens for a windowed cache: the CPU's KvCache::max_chunk() capped by the
// device batch; or as many CPU chunks as fit the device batch when the CPU chunk is a multiple
// of kQueryTileRows (engine/backend/attention.h; the query tiles then start where the CPU's do, so the
// results, skip decisions and probes equal those of CPU-sized passes) and no global cache limit
// is set. Keeps the live pages within windowed_pool_positions(). A 2K-token prompt with W = 256
// is then one device pass instead of nine.
int windowed_chunk(const CacheSettings& s, int block_size, int device_batch);

// Whether the cache keeps position `pos` unquantized (the CPU KvCache's rule): quantization on,
// protect_sink_positions on, and pos < sink_keep_count or pos in protected_positions.
bool kv_position_protected(const CacheSettings& s, int64_t pos);
// Positions (per layer, a multiple of 128) the device's protected bf16 page pool needs for
// either page size: full cache: the pages holding protected positions below max_positions;
// window: the sink pages plus one page per protected_positions entry (at most the ring's
// pool_positions worth of pages).
int64_t protected_pool_positions(const CacheSettings& s, int64_t max_positions,
                                 int64_t pool_positions = 0);

class KvPagePlan {
 public:
  // bytes_per_token_layer: K + V bytes of one position in one layer (bf16: 4 * n_kv_head * d).
  // max_tokens: the full cache's token capacity. pool_positions: windowed pool size (a multiple
  // of 128, >= windowed_pool_positions()); ignored for the full cache.
  // protected_row_bytes: K + V bytes of one position in one layer of a protected bf16 page
  // (4 * n_kv_head * d); > 0 turns protected pages on (quantized caches with
  // protect_sink_positions only), bytes_per_token_layer is then the quantized row.
  KvPagePlan(int n_layer, int64_t bytes_per_token_layer, int block_size, int64_t max_tokens,
             int64_t pool_positions, const CacheSettings& s, int64_t protected_row_bytes = 0);

  void reset(int block_size);  // empties the cache; the page size may change here
  // Makes room for [n_past, n_past + m): budgets (BackendError naming the limit, nothing
  // changed), pages, the ring base. Returns true when the live-page list changed.
  bool reserve(int m);
  void commit(int m);  // n_past += m; evicts pages that left the window
  void rollback();     // undoes reserve()
  // Full cache without protected pages: back to the first n positions (the later ones are
  // overwritten by the next reserve). False, nothing changed, for a window, protected pages,
  // a pending reserve or n outside [0, n_past].
  bool truncate(int64_t n);

  bool windowed() const { return m_s.windowed(); }
  int block_size() const { return m_bs; }
  int64_t n_past() const { return m_stats.n_past; }
  int sinks() const { return m_s.windowed() ? int(m_s.sink_keep_count) : 0; }
  int window() const { return m_s.windowed() ? int(m_s.window_size) : 0; }
  bool cache_positions() const {
    return m_s.windowed() && m_s.position_mode == PositionMode::kCache;
  }
  int64_t pool_pages() const { return m_pool_positions / m_bs; }
  int64_t ring_positions() const { return m_pool_positions; }

  // Windowed only. Live pages in position order.
  const std::vector<int32_t>& tile_pos0() const { return m_pos0; }
  const std::vector<int32_t>& tile_page() const { return m_page; }
  // Ring position of an original position of the current pass (full cache: the position).
  int64_t ring_pos(int64_t pos) const { return m_s.windowed() ? pos - m_base : pos; }
  // (append-table index, page id) of every page holding a reserved position.
  std::vector<std::pair<int32_t, int32_t>> append_entries() const;

  const KvCacheStats& stats() const { return m_stats; }

  // Protected pages (see the top): on, and the full cache's page table for page_entries pages
  // (entry i: i, or -1 - j for the j-th page holding a protected position). Both layouts:
  // protected pages in use now.
  bool protects() const { return m_prot_row_bytes > 0; }
  std::vector<int32_t> full_page_table(int64_t page_entries) const;
  int64_t protected_pages() const;

 private:
  void update_bytes();
  int64_t page_bytes_all_layers() const { return m_row_bytes * m_bs * m_layers; }
  int64_t prot_page_bytes_all_layers() const { return m_prot_row_bytes * m_bs * m_layers; }
  bool page_protected(int64_t pos0) const;  // holds a protected position
  int64_t full_prot_pages(int64_t n_pages) const;  // protected among identity pages [0, n)

  CacheSettings m_s;
  int m_layers;
  int64_t m_row_bytes;
  int m_bs;
  int64_t m_max_tokens, m_pool_positions;
  int64_t m_base = 0;          // ring base (multiple of 128)
  std::vector<int32_t> m_pos0, m_page, m_free;
  int64_t m_full_pages = 0;    // full cache: pages in use (identity layout)
  int m_reserved = 0, m_reserved_pages = 0;
  int64_t m_base_before = 0;
  KvCacheStats m_stats;
  // Protected pages (m_prot_row_bytes > 0).
  int64_t m_prot_row_bytes = 0;
  std::vector<int> m_prot_extra;     // protected_positions, sorted
  std::vector<int32_t> m_prot_free;  // windowed: free protected-pool pages
  std::vector<int> m_prot_pos;       // protected positions held (the CPU's list)
  int m_reserved_prot = 0;
};

}  // namespace sinkscope
