// SPDX-License-Identifier: Apache-2.0
#include "engine/cache/kv_page_plan.h"

#include <algorithm>

#include "engine/backend/attention.h"
#include "engine/util/errors.h"

namespace sinkscope {
namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }


}  // namespace

std::string cuda_cache_unsupported(const CacheSettings& s) {
  // int8 / int4 KV run on the GPU (codes + fp16 scales, dequantised inside the attention
  // kernels); the kernels' fragments take one scale per 32 elements, so other group sizes are
  // refused by name.
  if (s.quantization.enabled && s.quantization.group_size != 32)
    return "KV quantization group_size " + std::to_string(s.quantization.group_size) +
           " is not implemented in the CUDA backend (its kernels use groups of 32); use "
           "group_size 32 or the CPU backend";
  return "";
}

bool kv_position_protected(const CacheSettings& s, int64_t pos) {
  if (!s.quantization.enabled || !s.quantization.protect_sink_positions) return false;
  if (pos < s.sink_keep_count) return true;
  return std::find(s.protected_positions.begin(), s.protected_positions.end(), int(pos)) !=
         s.protected_positions.end();
}

int64_t protected_pool_positions(const CacheSettings& s, int64_t max_positions,
                                 int64_t pool_positions) {
  if (!s.quantization.enabled || !s.quantization.protect_sink_positions) return 0;
  std::vector<int> extra = s.protected_positions;
  std::sort(extra.begin(), extra.end());
  extra.erase(std::unique(extra.begin(), extra.end()), extra.end());
  int64_t best = 0;
  for (int64_t bs : {64, 128}) {
    int64_t pages = 0;
    if (s.windowed()) {
      const int64_t sink_pages = (s.sink_keep_count + bs - 1) / bs;
      int64_t n_extra = 0;
      for (int e : extra) n_extra += e >= sink_pages * bs ? 1 : 0;
      pages = sink_pages + std::min<int64_t>(n_extra, pool_positions / bs);
    } else {
      const int64_t n_pages = (max_positions + bs - 1) / bs;
      pages = std::min<int64_t>(n_pages, (std::min<int64_t>(s.sink_keep_count, max_positions) + bs - 1) / bs);
      int64_t last = pages - 1;  // pages [0, pages) already counted
      for (int e : extra) {
        if (e < 0 || e >= max_positions) continue;
        if (e / bs > last) {
          ++pages;
          last = e / bs;
        }
      }
    }
    best = std::max(best, pages * bs);
  }
  return round_up(best, 128);
}

int64_t windowed_pool_positions(const CacheSettings& s, int64_t chunk) {
  return round_up(s.sink_keep_count, 128) + round_up(s.window_size + chunk, 128) + 256;
}

int windowed_chunk(const CacheSettings& s, int block_size, int device_batch) {
  const int64_t cpu = windowed_cpu_chunk(s, block_size);
  const int64_t one = std::max<int64_t>(1, std::min<int64_t>(cpu, device_batch));
  // Several CPU chunks per pass when that changes nothing the CPU would compute: the CPU chunk
  // is a whole number of device CTAs (two kQueryTileRows-row query tiles each: the tiles, and
  // every skip decision, line up with the CPU's, and no CTA straddles two CPU chunks -- which
  // would be correct, each half deciding alone, but no GPU test covers it yet), and no cache
  // memory limit could refuse the larger pass.
  if (cpu % (2 * kQueryTileRows) != 0 || s.global_cache_limit_mib > 0) return int(one);
  return int(std::max<int64_t>(one, cpu * (device_batch / cpu)));
}

KvPagePlan::KvPagePlan(int n_layer, int64_t bytes_per_token_layer, int block_size,
                       int64_t max_tokens, int64_t pool_positions, const CacheSettings& s,
                       int64_t protected_row_bytes)
    : m_s(s),
      m_layers(n_layer),
      m_row_bytes(bytes_per_token_layer),
      m_bs(block_size),
      m_max_tokens(max_tokens),
      m_pool_positions(pool_positions) {
  if (s.quantization.enabled && s.quantization.protect_sink_positions)
    m_prot_row_bytes = std::max<int64_t>(protected_row_bytes, 0);
  m_prot_extra = s.protected_positions;
  std::sort(m_prot_extra.begin(), m_prot_extra.end());
  // The CPU cache's own checks (window range, block size, budgets vs capacity) with the same
  // messages; it allocates nothing until reserve().
  KvCache check(1, 1, 64, block_size, max_tokens, s);
  (void)check;
  if (s.windowed() && (pool_positions % 128 != 0 || pool_positions < 256))
    throw BackendError("KV page plan: pool of " + std::to_string(pool_positions) +
                       " positions is not a positive multiple of 128 (internal error)");
  reset(block_size);
}

void KvPagePlan::reset(int block_size) {
  m_bs = block_size;
  m_base = 0;
  m_pos0.clear();
  m_page.clear();
  m_free.clear();
  if (m_s.windowed())
    for (int64_t i = pool_pages() - 1; i >= 0; --i) m_free.push_back(int32_t(i));
  m_full_pages = 0;
  m_reserved = m_reserved_pages = m_reserved_prot = 0;
  m_prot_pos.clear();
  m_prot_free.clear();
  if (m_s.windowed() && protects()) {
    const int64_t n = protected_pool_positions(m_s, 0, m_pool_positions) / m_bs;
    for (int64_t i = n - 1; i >= 0; --i) m_prot_free.push_back(int32_t(i));
  }
  m_stats = {};
  m_stats.bytes_per_token = m_row_bytes * m_layers;
  m_stats.capacity_tokens = kv_capacity_tokens(m_s, m_max_tokens);
}

bool KvPagePlan::page_protected(int64_t pos0) const {
  if (!protects()) return false;
  if (pos0 < m_s.sink_keep_count) return true;
  const auto it = std::lower_bound(m_prot_extra.begin(), m_prot_extra.end(), int(pos0));
  return it != m_prot_extra.end() && *it < pos0 + m_bs;
}

int64_t KvPagePlan::full_prot_pages(int64_t n_pages) const {
  int64_t n = 0;
  for (int64_t i = 0; i < n_pages && protects(); ++i) {
    // Pages past the sinks hold a protected position only where an extra lies: jump there.
    if (i * m_bs >= m_s.sink_keep_count) {
      const auto it = std::lower_bound(m_prot_extra.begin(), m_prot_extra.end(), int(i * m_bs));
      if (it == m_prot_extra.end()) break;
      i = std::max<int64_t>(i, *it / m_bs);
      if (i >= n_pages) break;
    }
    n += page_protected(i * m_bs) ? 1 : 0;
  }
  return n;
}

int64_t KvPagePlan::protected_pages() const {
  if (!protects()) return 0;
  if (!m_s.windowed()) return full_prot_pages(m_full_pages);
  return int64_t(std::count_if(m_page.begin(), m_page.end(), [](int32_t p) { return p < 0; }));
}

std::vector<int32_t> KvPagePlan::full_page_table(int64_t page_entries) const {
  std::vector<int32_t> t(size_t(std::max<int64_t>(page_entries, 0)));
  int32_t j = 0;
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = page_protected(int64_t(i) * m_bs) ? -1 - j++ : int32_t(i);
  return t;
}

void KvPagePlan::update_bytes() {
  m_stats.pages = m_s.windowed() ? int64_t(m_pos0.size()) : m_full_pages;
  const int64_t prot = protected_pages();
  m_stats.protected_rows = int64_t(m_prot_pos.size());
  m_stats.bytes_allocated =
      (m_stats.pages - prot) * page_bytes_all_layers() + prot * prot_page_bytes_all_layers();
  m_stats.high_water_bytes = std::max(m_stats.high_water_bytes, m_stats.bytes_allocated);
}

bool KvPagePlan::reserve(int m) {
  if (m <= 0) throw BackendError("KV cache: reserve of " + std::to_string(m) + " tokens");
  if (m_reserved) throw BackendError("KV cache: reserve while a forward is in flight");
  const int64_t n0 = m_stats.n_past, n1 = n0 + m;
  check_request_limit(m_s, n0, m);
  const int64_t last_now = n0 > 0 ? (n0 - 1) / m_bs : -1;
  const int64_t last_new = (n1 - 1) / m_bs;
  const int new_pages = int(last_new - last_now);
  int new_prot_pages = 0;
  for (int i = 0; i < new_pages; ++i) new_prot_pages += page_protected((last_now + 1 + i) * m_bs);
  check_global_limit(m_s,
                     m_stats.bytes_allocated +
                         int64_t(new_pages - new_prot_pages) * page_bytes_all_layers() +
                         int64_t(new_prot_pages) * prot_page_bytes_all_layers(),
                     m, m_stats.bytes_per_token, m_bs);
  if (m_s.windowed()) {
    if (new_pages - new_prot_pages > int(m_free.size()) ||
        new_prot_pages > int(m_prot_free.size()))
      throw BackendError("KV cache: the device page pool is exhausted (" +
                         std::to_string(pool_pages()) + " pages, " +
                         std::to_string(m_prot_free.size()) +
                         " free protected pages; internal error)");
    // The ring: the pass's ring positions [n0 - base, n1 - base) must lie inside the ring.
    m_base_before = m_base;
    if (n1 - m_base > m_pool_positions) m_base = n0 / 128 * 128;
    if (n1 - m_base > m_pool_positions)
      throw BackendError("KV cache: a pass of " + std::to_string(m) +
                         " tokens does not fit the device ring (internal error)");
    for (int i = 0; i < new_pages; ++i) {
      const int64_t pos0 = (last_now + 1 + i) * m_bs;
      m_pos0.push_back(int32_t(pos0));
      std::vector<int32_t>& from = page_protected(pos0) ? m_prot_free : m_free;
      m_page.push_back(&from == &m_prot_free ? -1 - from.back() : from.back());
      from.pop_back();
    }
  } else {
    m_full_pages += new_pages;
  }
  m_reserved_prot = 0;
  for (int64_t p = n0; p < n1 && protects(); ++p) {
    if (!kv_position_protected(m_s, p)) continue;
    m_prot_pos.push_back(int(p));
    ++m_reserved_prot;
  }
  m_reserved = m;
  m_reserved_pages = new_pages;
  update_bytes();
  return new_pages > 0;
}

std::vector<std::pair<int32_t, int32_t>> KvPagePlan::append_entries() const {
  std::vector<std::pair<int32_t, int32_t>> out;
  if (!m_s.windowed() || !m_reserved) return out;
  const int64_t n0 = m_stats.n_past, n1 = n0 + m_reserved;
  for (size_t i = 0; i < m_pos0.size(); ++i) {
    const int64_t p0 = m_pos0[i];
    if (p0 + m_bs <= n0 || p0 >= n1) continue;  // holds no position of this pass
    out.emplace_back(int32_t((p0 - m_base) / m_bs), m_page[i]);
  }
  return out;
}

void KvPagePlan::rollback() {
  if (!m_reserved) return;
  if (m_s.windowed()) {
    for (int i = 0; i < m_reserved_pages; ++i) {
      const int32_t pg = m_page.back();
      if (pg < 0) {
        m_prot_free.push_back(-1 - pg);
      } else {
        m_free.push_back(pg);
      }
      m_page.pop_back();
      m_pos0.pop_back();
    }
    m_base = m_base_before;
  } else {
    m_full_pages -= m_reserved_pages;
  }
  m_prot_pos.resize(m_prot_pos.size() - size_t(m_reserved_prot));
  m_reserved = m_reserved_pages = m_reserved_prot = 0;
  update_bytes();
}

bool KvPagePlan::truncate(int64_t n) {
  if (m_s.windowed() || protects() || m_reserved != 0 || n < 0 || n > m_stats.n_past) return false;
  m_full_pages = (n + m_bs - 1) / m_bs;
  m_stats.n_past = m_stats.n_cached = n;
  update_bytes();
  return true;
}

void KvPagePlan::commit(int m) {
  if (m != m_reserved) throw BackendError("KV cache: commit without a matching reserve");
  m_reserved = m_reserved_pages = m_reserved_prot = 0;
  m_stats.n_past += m;
  const int64_t n = m_stats.n_past;
  if (!m_s.windowed()) {
    m_stats.n_cached = n;
    update_bytes();
    return;
  }
  // The CPU's rule (kv_layout.h): pages that hold no sink and only evicted positions go back
  // to the pool.
  const WindowEviction ev = window_eviction(n, m_s.sink_keep_count, m_s.window_size, m_pos0, m_bs);
  m_stats.evicted = ev.evicted;
  m_stats.n_cached = ev.n_cached;
  const size_t b = ev.drop_begin, e = ev.drop_end;
  for (size_t i = b; i < e; ++i) {
    if (m_page[i] < 0) {
      m_prot_free.push_back(-1 - m_page[i]);
    } else {
      m_free.push_back(m_page[i]);
    }
  }
  m_pos0.erase(m_pos0.begin() + long(b), m_pos0.begin() + long(e));
  m_page.erase(m_page.begin() + long(b), m_page.begin() + long(e));
  // Protected rows outside the sinks leave with the window (the CPU's rule).
  std::erase_if(m_prot_pos, [&](int p) { return p >= m_s.sink_keep_count && p < ev.keep_from; });
  update_bytes();
}

}  // namespace sinkscope
