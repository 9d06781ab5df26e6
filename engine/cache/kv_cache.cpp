// SPDX-License-Identifier: Apache-2.0
#include "engine/cache/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>

#include "engine/util/errors.h"
#include "engine/cache/kv_quant.h"

namespace sinkscope {
namespace {

std::string mib(int64_t bytes) {
  std::ostringstream o;
  o.precision(3);
  o << std::fixed << double(bytes) / (1024.0 * 1024.0) << " MiB";
  return o.str();
}

}  // namespace

std::string describe(const CacheSettings& s) {
  std::ostringstream o;
  if (s.windowed()) {
    o << "sliding_window W=" << s.window_size << " S=" << s.sink_keep_count << " ("
      << (s.position_mode == PositionMode::kCache ? "cache" : "original") << " positions)";
  } else {
    o << "full";
  }
  if (s.quantization.enabled) {
    o << ", " << (s.quantization.kv_dtype == KvQuantDtype::kInt8 ? "int8" : "int4") << "/"
      << s.quantization.group_size
      << (s.quantization.protect_sink_positions ? " sinks protected" : " sinks quantized");
  } else {
    o << ", float32";
  }
  return o.str();
}

KvCache::KvCache(int n_layer, int n_kv_head, int head_dim, int block_size, int64_t max_tokens,
                 const CacheSettings& s)
    : m_settings(s),
      m_layers(n_layer),
      m_kv_heads(n_kv_head),
      m_d(head_dim),
      m_block(block_size),
      m_max_tokens(max_tokens),
      m_row_floats(int64_t(n_kv_head) * head_dim) {
  if (block_size != 64 && block_size != 128)
    throw BackendError("cache block_size must be 64 or 128, got " + std::to_string(block_size));
  if (s.block_size != 0 && s.block_size != block_size)
    throw BackendError("cache block_size " + std::to_string(s.block_size) +
                       " differs from the attention block_size " + std::to_string(block_size) +
                       " (a KV page is one attention tile)");
  if (s.per_request_limit_tokens < 0)
    throw BackendError("per_request_limit_tokens must be >= 0, got " +
                       std::to_string(s.per_request_limit_tokens));
  if (s.global_cache_limit_mib < 0)
    throw BackendError("global_cache_limit_mib must be >= 0, got " +
                       std::to_string(s.global_cache_limit_mib));
  if (s.windowed()) {
    if (s.window_size < 1 || s.window_size > (int64_t(1) << 28))
      throw BackendError("window_size must be in [1, 2^28], got " + std::to_string(s.window_size));
    if (s.sink_keep_count < 0 || s.sink_keep_count > 1024)
      throw BackendError("sink_keep_count must be in [0, 1024], got " +
                         std::to_string(s.sink_keep_count));
    const int64_t cap = s.window_size + s.sink_keep_count;
    if (s.per_request_limit_tokens > 0 && cap > s.per_request_limit_tokens)
      throw BackendError("per_request_limit_tokens (" + std::to_string(s.per_request_limit_tokens) +
                         ") is below the cache capacity sink_keep_count + window_size = " +
                         std::to_string(cap));
  }
  const KvQuantSettings& q = s.quantization;
  if (q.enabled) {
    m_fmt.bits = q.kv_dtype == KvQuantDtype::kInt8 ? 8 : 4;
    m_fmt.group = q.group_size;
    if (q.group_size < 2 || head_dim % q.group_size != 0 || q.group_size % 2 != 0)
      throw BackendError("quantization group_size " + std::to_string(q.group_size) +
                         " must be even and divide head_dim " + std::to_string(head_dim));
  }
  m_protect_extra = s.protected_positions;
  std::sort(m_protect_extra.begin(), m_protect_extra.end());
  m_layer.resize(size_t(n_layer));
  reset();
}

int windowed_cpu_chunk(const CacheSettings& s, int block_size) {
  return int(std::max<int64_t>(block_size, std::min<int64_t>(s.window_size, 1 << 20)));
}

int KvCache::max_chunk() const {
  return m_settings.windowed() ? windowed_cpu_chunk(m_settings, m_block) : 1 << 30;
}

bool KvCache::is_protected(int64_t pos) const {
  if (!m_fmt.bits || !m_settings.quantization.protect_sink_positions) return false;
  if (pos < m_settings.sink_keep_count) return true;
  return std::binary_search(m_protect_extra.begin(), m_protect_extra.end(), int(pos));
}

int64_t KvCache::page_bytes() const {
  const int64_t row = m_fmt.bits ? int64_t(m_kv_heads) * (m_fmt.code_bytes(m_d) + 2 * m_fmt.scales(m_d))
                                 : m_row_floats * 4;
  return 2 * row * m_block;
}

int64_t KvCache::prot_row_bytes() const { return 2 * m_row_floats * 4 * m_layers; }

void KvCache::reset() {
  for (Layer& L : m_layer) {
    L.table.clear();
    L.free_ids.clear();
    for (int i = 0; i < int(L.pool.size()); ++i) L.free_ids.push_back(i);
    L.prot_k.clear();
    L.prot_v.clear();
    refresh_pointers(L);
  }
  m_page_pos0.clear();
  m_page_rows.clear();
  m_prot_pos.clear();
  m_reserved = m_reserved_pages = m_reserved_prot = 0;
  m_stats = {};
  m_stats.bytes_per_token = page_bytes() / m_block * m_layers;
  m_stats.capacity_tokens = kv_capacity_tokens(m_settings, m_max_tokens);
}

void KvCache::refresh_pointers(Layer& L) const {
  const size_t n = L.table.size();
  L.kf.assign(n, nullptr);
  L.vf.assign(n, nullptr);
  L.kc.assign(n, nullptr);
  L.vc.assign(n, nullptr);
  L.ks.assign(n, nullptr);
  L.vs.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const Page& p = L.pool[size_t(L.table[i])];
    if (m_fmt.bits) {
      L.kc[i] = p.kc.data();
      L.vc[i] = p.vc.data();
      L.ks[i] = p.ks.data();
      L.vs[i] = p.vs.data();
    } else {
      L.kf[i] = p.k.data();
      L.vf[i] = p.v.data();
    }
  }
}

void KvCache::update_bytes() {
  m_stats.pages = int64_t(m_page_pos0.size());
  m_stats.protected_rows = int64_t(m_prot_pos.size());
  m_stats.bytes_allocated = m_stats.pages * page_bytes() * m_layers +
                            int64_t(m_prot_pos.size()) * prot_row_bytes();
  m_stats.high_water_bytes = std::max(m_stats.high_water_bytes, m_stats.bytes_allocated);
}

void KvCache::reserve(int m) {
  if (m <= 0) throw BackendError("KV cache: reserve of " + std::to_string(m) + " tokens");
  if (m_reserved) throw BackendError("KV cache: reserve while a forward is in flight");
  const int64_t n0 = m_stats.n_past, n1 = n0 + m;
  const CacheSettings& s = m_settings;
  check_request_limit(s, n0, m);
  const int64_t last_page_now = n0 > 0 ? (n0 - 1) / m_block : -1;
  const int64_t last_page_new = (n1 - 1) / m_block;
  const int new_pages = int(last_page_new - last_page_now);
  int new_prot = 0;
  for (int64_t p = n0; p < n1 && m_fmt.bits; ++p) new_prot += is_protected(p) ? 1 : 0;
  check_global_limit(s,
                     m_stats.bytes_allocated + int64_t(new_pages) * page_bytes() * m_layers +
                         int64_t(new_prot) * prot_row_bytes(),
                     m, m_stats.bytes_per_token, m_block);
  const int64_t rows_per_layer = m_fmt.bits ? 0 : m_row_floats * m_block;
  for (int i = 0; i < new_pages; ++i) {
    const int pos0 = int((last_page_now + 1 + i) * m_block);
    m_page_pos0.push_back(pos0);
    m_page_rows.push_back(0);
    for (Layer& L : m_layer) {
      int id;
      if (!L.free_ids.empty()) {
        id = L.free_ids.back();
        L.free_ids.pop_back();
      } else {
        id = int(L.pool.size());
        Page p;
        if (m_fmt.bits) {
          const size_t codes = size_t(m_block) * m_kv_heads * m_fmt.code_bytes(m_d);
          const size_t sc = size_t(m_block) * m_kv_heads * m_fmt.scales(m_d);
          p.kc.assign(codes, 0);
          p.vc.assign(codes, 0);
          p.ks.assign(sc, 0);
          p.vs.assign(sc, 0);
        } else {
          p.k.assign(size_t(rows_per_layer), 0.0f);
          p.v.assign(size_t(rows_per_layer), 0.0f);
        }
        L.pool.push_back(std::move(p));
      }
      L.table.push_back(id);
    }
  }
  for (size_t i = 0; i < m_page_pos0.size(); ++i)
    m_page_rows[i] = int(std::clamp<int64_t>(n1 - m_page_pos0[i], 0, m_block));
  for (int64_t p = n0; p < n1 && m_fmt.bits; ++p) {
    if (!is_protected(p)) continue;
    m_prot_pos.push_back(int(p));
    for (Layer& L : m_layer) {
      L.prot_k.resize(m_prot_pos.size() * size_t(m_row_floats));
      L.prot_v.resize(m_prot_pos.size() * size_t(m_row_floats));
    }
  }
  for (Layer& L : m_layer) refresh_pointers(L);
  m_reserved = m;
  m_reserved_pages = new_pages;
  m_reserved_prot = new_prot;
  update_bytes();
}

void KvCache::write(int layer, int m, const float* k, const float* v) {
  if (m != m_reserved) throw BackendError("KV cache: write of " + std::to_string(m) +
                                          " rows, " + std::to_string(m_reserved) + " reserved");
  Layer& L = m_layer[size_t(layer)];
  const int64_t n0 = m_stats.n_past;
  // The table is in position order and pages are aligned: position p lives in the page whose
  // pos0 == p - p % block.
  const size_t prot_first = m_prot_pos.size() - size_t(m_reserved_prot);
  size_t prot_i = prot_first;
  for (int i = 0; i < m; ++i) {
    const int64_t pos = n0 + i;
    const int pos0 = int(pos - pos % m_block);
    const auto it = std::lower_bound(m_page_pos0.begin(), m_page_pos0.end(), pos0);
    if (it == m_page_pos0.end() || *it != pos0) throw BackendError("KV cache: page missing");
    Page& pg = L.pool[size_t(L.table[size_t(it - m_page_pos0.begin())])];
    const int r = int(pos - pos0);
    const float* kr = k + int64_t(i) * m_row_floats;
    const float* vr = v + int64_t(i) * m_row_floats;
    if (!m_fmt.bits) {
      std::memcpy(pg.k.data() + int64_t(r) * m_row_floats, kr, sizeof(float) * size_t(m_row_floats));
      std::memcpy(pg.v.data() + int64_t(r) * m_row_floats, vr, sizeof(float) * size_t(m_row_floats));
      continue;
    }
    const int cb = m_fmt.code_bytes(m_d), ns = m_fmt.scales(m_d);
    for (int g = 0; g < m_kv_heads; ++g) {
      const int64_t slot = int64_t(r) * m_kv_heads + g;
      quantize_kv_row(kr + int64_t(g) * m_d, m_d, m_fmt, pg.kc.data() + slot * cb, pg.ks.data() + slot * ns);
      quantize_kv_row(vr + int64_t(g) * m_d, m_d, m_fmt, pg.vc.data() + slot * cb, pg.vs.data() + slot * ns);
    }
    if (prot_i < m_prot_pos.size() && m_prot_pos[prot_i] == pos) {
      std::memcpy(L.prot_k.data() + prot_i * size_t(m_row_floats), kr, sizeof(float) * size_t(m_row_floats));
      std::memcpy(L.prot_v.data() + prot_i * size_t(m_row_floats), vr, sizeof(float) * size_t(m_row_floats));
      ++prot_i;
    }
  }
}

void KvCache::rollback() {
  if (!m_reserved) return;
  for (int i = 0; i < m_reserved_pages; ++i) {
    m_page_pos0.pop_back();
    m_page_rows.pop_back();
    for (Layer& L : m_layer) {
      L.free_ids.push_back(L.table.back());
      L.table.pop_back();
    }
  }
  const int64_t n0 = m_stats.n_past;
  for (size_t i = 0; i < m_page_pos0.size(); ++i)
    m_page_rows[i] = int(std::clamp<int64_t>(n0 - m_page_pos0[i], 0, m_block));
  m_prot_pos.resize(m_prot_pos.size() - size_t(m_reserved_prot));
  for (Layer& L : m_layer) {
    L.prot_k.resize(m_prot_pos.size() * size_t(m_row_floats));
    L.prot_v.resize(m_prot_pos.size() * size_t(m_row_floats));
    refresh_pointers(L);
  }
  m_reserved = m_reserved_pages = m_reserved_prot = 0;
  update_bytes();
}

bool KvCache::truncate(int64_t n) {
  if (m_settings.windowed() || m_reserved || n < 0 || n > m_stats.n_past) return false;
  while (!m_page_pos0.empty() && m_page_pos0.back() >= n) {
    m_page_pos0.pop_back();
    m_page_rows.pop_back();
    for (Layer& L : m_layer) {
      L.free_ids.push_back(L.table.back());
      L.table.pop_back();
    }
  }
  for (size_t i = 0; i < m_page_pos0.size(); ++i)
    m_page_rows[i] = int(std::clamp<int64_t>(n - m_page_pos0[i], 0, m_block));
  m_prot_pos.erase(std::lower_bound(m_prot_pos.begin(), m_prot_pos.end(), int(n)), m_prot_pos.end());
  for (Layer& L : m_layer) {
    L.prot_k.resize(m_prot_pos.size() * size_t(m_row_floats));
    L.prot_v.resize(m_prot_pos.size() * size_t(m_row_floats));
    refresh_pointers(L);
  }
  m_stats.n_past = m_stats.n_cached = n;
  update_bytes();
  return true;
}

void KvCache::commit(int m) {
  if (m != m_reserved) throw BackendError("KV cache: commit without a matching reserve");
  m_reserved = m_reserved_pages = m_reserved_prot = 0;
  m_stats.n_past += m;
  const int64_t n = m_stats.n_past;
  if (!m_settings.windowed()) {
    m_stats.n_cached = n;
    update_bytes();
    return;
  }
  const WindowEviction ev =
      window_eviction(n, m_settings.sink_keep_count, m_settings.window_size, m_page_pos0, m_block);
  m_stats.evicted = ev.evicted;
  m_stats.n_cached = ev.n_cached;
  const size_t drop_begin = ev.drop_begin, drop_end = ev.drop_end;
  const int64_t S = m_settings.sink_keep_count, keep_from = ev.keep_from;
  if (drop_end > drop_begin) {
    for (Layer& L : m_layer) {
      for (size_t i = drop_begin; i < drop_end; ++i) L.free_ids.push_back(L.table[i]);
      L.table.erase(L.table.begin() + long(drop_begin), L.table.begin() + long(drop_end));
    }
    m_page_pos0.erase(m_page_pos0.begin() + long(drop_begin), m_page_pos0.begin() + long(drop_end));
    m_page_rows.erase(m_page_rows.begin() + long(drop_begin), m_page_rows.begin() + long(drop_end));
  }
  // Protected rows outside the sinks (detector-flagged positions) leave with the window.
  size_t keep = 0;
  std::vector<size_t> kept_idx;
  for (size_t i = 0; i < m_prot_pos.size(); ++i)
    if (m_prot_pos[i] < S || m_prot_pos[i] >= keep_from) kept_idx.push_back(i);
  if (kept_idx.size() != m_prot_pos.size()) {
    for (Layer& L : m_layer) {
      keep = 0;
      for (size_t i : kept_idx) {
        std::memmove(L.prot_k.data() + keep * size_t(m_row_floats), L.prot_k.data() + i * size_t(m_row_floats),
                     sizeof(float) * size_t(m_row_floats));
        std::memmove(L.prot_v.data() + keep * size_t(m_row_floats), L.prot_v.data() + i * size_t(m_row_floats),
                     sizeof(float) * size_t(m_row_floats));
        ++keep;
      }
      L.prot_k.resize(keep * size_t(m_row_floats));
      L.prot_v.resize(keep * size_t(m_row_floats));
    }
    std::vector<int> pos;
    for (size_t i : kept_idx) pos.push_back(m_prot_pos[i]);
    m_prot_pos = std::move(pos);
  }
  for (Layer& L : m_layer) refresh_pointers(L);
  update_bytes();
}

KvLayerView KvCache::view(int layer) const {
  const Layer& L = m_layer[size_t(layer)];
  KvLayerView v;
  v.n_pages = int(m_page_pos0.size());
  v.block_size = m_block;
  v.n_kv_head = m_kv_heads;
  v.d = m_d;
  v.page_pos0 = m_page_pos0.data();
  v.page_rows = m_page_rows.data();
  v.fmt = m_fmt;
  if (m_fmt.bits) {
    v.k_codes = L.kc.data();
    v.v_codes = L.vc.data();
    v.k_scales = L.ks.data();
    v.v_scales = L.vs.data();
    v.n_prot = int(m_prot_pos.size());
    v.prot_pos = m_prot_pos.data();
    v.prot_k = L.prot_k.data();
    v.prot_v = L.prot_v.data();
  } else {
    v.k_f32 = L.kf.data();
    v.v_f32 = L.vf.data();
  }
  return v;
}

int64_t kv_capacity_tokens(const CacheSettings& s, int64_t max_tokens) {
  if (s.windowed()) return s.window_size + s.sink_keep_count;
  return s.per_request_limit_tokens > 0 ? std::min(max_tokens, s.per_request_limit_tokens)
                                        : max_tokens;
}

void check_request_limit(const CacheSettings& s, int64_t n0, int m) {
  if (!s.windowed() && s.per_request_limit_tokens > 0 && n0 + m > s.per_request_limit_tokens)
    throw BackendError("per_request_limit_tokens exceeded: " + std::to_string(n0) + " cached + " +
                       std::to_string(m) + " new tokens > the limit of " +
                       std::to_string(s.per_request_limit_tokens) + " tokens");
}

void check_global_limit(const CacheSettings& s, int64_t need, int m, int64_t bytes_per_token,
                        int block) {
  if (s.global_cache_limit_mib <= 0 || need <= s.global_cache_limit_mib * 1024 * 1024) return;
  throw BackendError("global_cache_limit_mib exceeded: " + std::to_string(m) +
                     " new tokens need " + mib(need) + " of KV cache (" +
                     std::to_string(bytes_per_token) + " bytes per token, " +
                     std::to_string(block) + "-token pages), over the limit of " +
                     std::to_string(s.global_cache_limit_mib) + " MiB");
}

}  // namespace sinkscope
