// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's host-side KV bookkeeping (engine/cache/kv_page_plan.h) against the CPU cache
// (engine/cache/kv_cache.h): same live pages, evictions, statistics and budget errors; page ids
// recycled; the append ring never wraps inside a pass; unsupported settings named.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "engine/backend/attention.h"
#include "engine/backend/backend.h"
#include "engine/cache/kv_cache.h"
#include "engine/cache/kv_page_plan.h"

namespace sinkscope {
namespace {

constexpr int kLayers = 3, kHeads = 2, kDim = 32;
constexpr int64_t kRowBytes = 2 * kHeads * kDim * 2;  // bf16 K + V of one position, one layer

CacheSettings window(int64_t w, int64_t s) {
  CacheSettings c;
  c.strategy = CacheStrategy::kSlidingWindow;
  c.window_size = w;
  c.sink_keep_count = s;
  return c;
}

// Feeds the same chunks to a CPU cache and a plan and compares the live pages after each.
void stream_both(const CacheSettings& s, int bs, int total, int device_batch) {
  KvCache cpu(kLayers, kHeads, kDim, bs, 1 << 20, s);
  const int chunk = windowed_chunk(s, bs, device_batch);
  const int64_t pool = windowed_pool_positions(s, chunk);
  KvPagePlan plan(kLayers, kRowBytes, bs, 1 << 20, pool, s);
  std::vector<float> k(size_t(chunk) * kHeads * kDim, 1.0f), v = k;
  std::mt19937 rng(7);
  int done = 0;
  while (done < total) {
    const int m = std::min<int>(total - done, 1 + int(rng() % uint32_t(chunk)));
    cpu.reserve(m);
    for (int l = 0; l < kLayers; ++l) cpu.write(l, m, k.data(), v.data());
    plan.reserve(m);
    // Every reserved position has exactly one append entry, inside the ring.
    std::set<int32_t> pages;
    for (auto [idx, page] : plan.append_entries()) {
      EXPECT_GE(idx, 0);
      EXPECT_LT(int64_t(idx) * bs, plan.ring_positions());
      EXPECT_TRUE(pages.insert(page).second);
    }
    EXPECT_GE(plan.ring_pos(done), 0);
    EXPECT_LE(plan.ring_pos(done + m), plan.ring_positions());
    const KvLayerView view = cpu.view(0);
    ASSERT_EQ(int(plan.tile_pos0().size()), view.n_pages);
    for (int t = 0; t < view.n_pages; ++t) EXPECT_EQ(plan.tile_pos0()[size_t(t)], view.page_pos0[t]);
    std::set<int32_t> live(plan.tile_page().begin(), plan.tile_page().end());
    EXPECT_EQ(live.size(), plan.tile_page().size()) << "a page id is used twice";
    for (int32_t id : live) EXPECT_LT(id, plan.pool_pages());
    cpu.commit(m);
    plan.commit(m);
    done += m;
    EXPECT_EQ(plan.stats().n_cached, cpu.stats().n_cached);
    EXPECT_EQ(plan.stats().evicted, cpu.stats().evicted);
    EXPECT_EQ(plan.stats().pages, cpu.stats().pages);
  }
}

TEST(KvPagePlan, WindowMatchesCpuCacheAndStreamsPastThePool) {
  for (int bs : {64, 128})
    for (int64_t s : {0, 4, 130})
      for (int64_t w : {1, 100, 256, 1000}) stream_both(window(w, s), bs, 5000, 2048);
}

TEST(KvPagePlan, DeviceChunksAreWholeCpuChunksOfQueryTiles) {
  static_assert(kQueryTileRows == 64, "the chunk sizes below assume 64-row query tiles");
  // W = 256: the CPU's 256-token chunks are four query tiles; the device takes eight at once.
  EXPECT_EQ(windowed_chunk(window(256, 4), 64, 2048), 2048);
  EXPECT_EQ(windowed_chunk(window(384, 4), 128, 2048), 1920);
  EXPECT_EQ(windowed_chunk(window(4096, 4), 64, 2048), 2048);  // capped by the batch
  // W = 192: three 64-row query tiles, not whole 128-row device CTAs: the CPU's chunk (a CTA
  // would straddle two CPU chunks, which no GPU test covers yet).
  EXPECT_EQ(windowed_chunk(window(192, 4), 64, 2048), 192);
  // W = 16: the CPU's chunk is one page = one query tile, not a whole CTA: the CPU's chunk.
  EXPECT_EQ(windowed_chunk(window(16, 4), 64, 2048), 64);
  // Not whole query tiles: the CPU's chunk, so the tiles start where the CPU's do.
  EXPECT_EQ(windowed_chunk(window(200, 4), 64, 2048), 200);
  EXPECT_EQ(windowed_chunk(window(300, 4), 128, 2048), 300);
  // A cache memory limit: the CPU's chunk (a larger pass could be refused where the CPU's is not).
  CacheSettings limited = window(256, 4);
  limited.global_cache_limit_mib = 64;
  EXPECT_EQ(windowed_chunk(limited, 64, 2048), 256);
  // The large passes stream like the CPU cache (random pass sizes up to the device chunk).
  stream_both(window(256, 4), 64, 9000, 2048);
}

TEST(KvPagePlan, FullCacheBudgetsAndStats) {
  CacheSettings s;
  s.per_request_limit_tokens = 100;
  KvPagePlan plan(kLayers, kRowBytes, 64, 8192, 0, s);
  EXPECT_EQ(plan.stats().capacity_tokens, 100);
  EXPECT_EQ(plan.stats().bytes_per_token, kRowBytes * kLayers);
  plan.reserve(64);
  plan.commit(64);
  EXPECT_EQ(plan.stats().pages, 1);
  EXPECT_EQ(plan.stats().bytes_allocated, 64 * kRowBytes * kLayers);
  try {
    plan.reserve(40);
    FAIL() << "expected a BackendError";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("per_request_limit_tokens"), std::string::npos);
  }
  EXPECT_EQ(plan.n_past(), 64);  // nothing appended
  plan.reserve(36);
  plan.commit(36);
  EXPECT_EQ(plan.stats().high_water_bytes, 2 * 64 * kRowBytes * kLayers);
}

// truncate() goes back to a shorter full cache exactly as if the later positions had never
// been committed; windows, protected pages and a pending reserve refuse it.
TEST(KvPagePlan, TruncateEqualsTheShorterCache) {
  CacheSettings s;
  KvPagePlan plan(kLayers, kRowBytes, 64, 8192, 0, s);
  KvPagePlan shorter(kLayers, kRowBytes, 64, 8192, 0, s);
  plan.reserve(300);
  plan.commit(300);
  shorter.reserve(130);
  shorter.commit(130);
  EXPECT_FALSE(plan.truncate(301));
  EXPECT_FALSE(plan.truncate(-1));
  ASSERT_TRUE(plan.truncate(130));
  EXPECT_EQ(plan.n_past(), 130);
  EXPECT_EQ(plan.stats().pages, shorter.stats().pages);
  EXPECT_EQ(plan.stats().bytes_allocated, shorter.stats().bytes_allocated);
  EXPECT_EQ(plan.stats().n_cached, 130);
  plan.reserve(70);  // grows again from there, page by page
  shorter.reserve(70);
  EXPECT_FALSE(plan.truncate(100));  // a reserve is pending
  plan.commit(70);
  shorter.commit(70);
  EXPECT_EQ(plan.stats().pages, shorter.stats().pages);
  CacheSettings w;
  w.strategy = CacheStrategy::kSlidingWindow;
  w.window_size = 128;
  KvPagePlan win(kLayers, kRowBytes, 64, 1 << 20, windowed_pool_positions(w, 64), w);
  win.reserve(64);
  win.commit(64);
  EXPECT_FALSE(win.truncate(10));
  CacheSettings q;
  q.quantization.enabled = true;
  KvPagePlan prot(kLayers, kRowBytes / 2, 64, 8192, 0, q, kRowBytes);
  prot.reserve(64);
  prot.commit(64);
  EXPECT_FALSE(prot.truncate(10));
}

TEST(KvPagePlan, GlobalLimitNamesTheLimitAndChangesNothing) {
  CacheSettings s;
  s.global_cache_limit_mib = 1;  // 1 MiB / (64 * 768 B) = 21 pages of 64
  KvPagePlan plan(kLayers, kRowBytes, 64, 1 << 20, 0, s);
  plan.reserve(64 * 21);
  plan.commit(64 * 21);
  const KvCacheStats before = plan.stats();
  EXPECT_THROW(
      {
        try {
          plan.reserve(1);
        } catch (const BackendError& e) {
          EXPECT_NE(std::string(e.what()).find("global_cache_limit_mib"), std::string::npos);
          throw;
        }
      },
      BackendError);
  EXPECT_EQ(plan.stats().bytes_allocated, before.bytes_allocated);
  EXPECT_EQ(plan.n_past(), before.n_past);
}

TEST(KvPagePlan, RollbackRestoresPagesAndRing) {
  const CacheSettings s = window(100, 4);
  const int chunk = windowed_chunk(s, 64, 2048);
  KvPagePlan plan(kLayers, kRowBytes, 64, 1 << 20, windowed_pool_positions(s, chunk), s);
  for (int i = 0; i < 20; ++i) {
    plan.reserve(chunk);
    plan.commit(chunk);
  }
  const auto pos0 = plan.tile_pos0();
  const auto pages = plan.tile_page();
  const int64_t ring = plan.ring_pos(plan.n_past());
  plan.reserve(chunk);
  plan.rollback();
  EXPECT_EQ(plan.tile_pos0(), pos0);
  EXPECT_EQ(plan.tile_page(), pages);
  EXPECT_EQ(plan.ring_pos(plan.n_past()), ring);
}

TEST(KvPagePlan, WindowCapacityOverTheRequestLimitIsRejected) {
  CacheSettings s = window(256, 4);
  s.per_request_limit_tokens = 200;
  EXPECT_THROW(KvPagePlan(kLayers, kRowBytes, 64, 1 << 20, 1024, s), BackendError);
}

TEST(KvPagePlan, CudaNamesUnsupportedSettings) {
  CacheSettings s = window(256, 4);
  EXPECT_EQ(cuda_cache_unsupported(s), "");
  s.quantization.enabled = true;
  s.quantization.kv_dtype = KvQuantDtype::kInt4;
  EXPECT_EQ(cuda_cache_unsupported(s), "");  // int8 / int4 with groups of 32 run on the GPU
  s.quantization.kv_dtype = KvQuantDtype::kInt8;
  EXPECT_EQ(cuda_cache_unsupported(s), "");
  s.quantization.group_size = 64;
  const std::string why = cuda_cache_unsupported(s);
  EXPECT_NE(why.find("group_size 64"), std::string::npos);
  EXPECT_NE(why.find("quantization"), std::string::npos);
}

// Quantized KV with protected positions: the plan's statistics equal the CPU cache's (pages,
// protected rows, evictions, bytes per token) step by step; protected pages carry -1 - j ids,
// exactly the pages holding a protected position, each protected-pool page used once; the bytes
// count quantized pages + bf16 protected pages.
void quant_both(CacheSettings s, int bs, int total, bool protect, KvQuantDtype dt) {
  s.quantization.enabled = true;
  s.quantization.kv_dtype = dt;
  s.quantization.protect_sink_positions = protect;
  s.protected_positions = {1, 70, 300, 301, 900};
  const KvQuantFormat f{dt == KvQuantDtype::kInt8 ? 8 : 4, 32};
  const int64_t q_row = 2 * kHeads * (f.code_bytes(kDim) + 2 * f.scales(kDim));
  const int64_t prot_row = 4 * kHeads * kDim;
  KvCache cpu(kLayers, kHeads, kDim, bs, 1 << 20, s);
  const int chunk = s.windowed() ? windowed_chunk(s, bs, 128) : 128;
  const int64_t pool = s.windowed() ? windowed_pool_positions(s, chunk) : 0;
  KvPagePlan plan(kLayers, q_row, bs, 1 << 20, pool, s, prot_row);
  EXPECT_EQ(plan.protects(), protect);
  const int64_t prot_cap = protected_pool_positions(s, 4096, pool) / bs;
  std::vector<float> k(size_t(chunk) * kHeads * kDim, 0.5f), v = k;
  std::mt19937 rng(11);
  int done = 0;
  while (done < total) {
    const int m = std::min<int>(total - done, 1 + int(rng() % uint32_t(chunk)));
    cpu.reserve(m);
    for (int l = 0; l < kLayers; ++l) cpu.write(l, m, k.data(), v.data());
    plan.reserve(m);
    if (rng() % 5 == 0) {  // a cancelled forward, then the same reserve again
      cpu.rollback();
      plan.rollback();
      cpu.reserve(m);
      for (int l = 0; l < kLayers; ++l) cpu.write(l, m, k.data(), v.data());
      plan.reserve(m);
    }
    cpu.commit(m);
    plan.commit(m);
    done += m;
    const KvCacheStats& a = cpu.stats();
    const KvCacheStats& b = plan.stats();
    ASSERT_EQ(a.pages, b.pages) << done;
    ASSERT_EQ(a.protected_rows, b.protected_rows) << done;
    ASSERT_EQ(a.n_cached, b.n_cached);
    ASSERT_EQ(a.evicted, b.evicted);
    ASSERT_EQ(a.bytes_per_token, b.bytes_per_token);
    int64_t n_prot = 0;
    if (s.windowed()) {
      std::set<int32_t> used;
      for (size_t i = 0; i < plan.tile_page().size(); ++i) {
        const int32_t pg = plan.tile_page()[i];
        const int64_t p0 = plan.tile_pos0()[i];
        bool holds = false;
        for (int64_t p = p0; p < p0 + bs; ++p) holds |= kv_position_protected(s, p);
        EXPECT_EQ(pg < 0, holds && protect) << "page at " << p0;
        if (pg < 0) {
          ++n_prot;
          EXPECT_LT(-1 - pg, prot_cap);
          EXPECT_TRUE(used.insert(pg).second);
        }
      }
    } else {
      for (int32_t pg : plan.full_page_table(b.pages)) n_prot += pg < 0;
    }
    EXPECT_EQ(plan.protected_pages(), n_prot);
    EXPECT_EQ(b.bytes_allocated,
              ((b.pages - n_prot) * q_row + n_prot * prot_row) * bs * kLayers);
    EXPECT_GE(b.high_water_bytes, b.bytes_allocated);
  }
  if (!s.windowed()) {
    const std::vector<int32_t> t = plan.full_page_table(4096 / bs);
    for (size_t i = 0, j = 0; i < t.size(); ++i) {
      bool holds = false;
      for (int64_t p = int64_t(i) * bs; p < int64_t(i + 1) * bs; ++p)
        holds |= kv_position_protected(s, p);
      if (holds && protect) {
        EXPECT_EQ(t[i], -1 - int32_t(j++));
        EXPECT_LT(int64_t(j), prot_cap + 1);
      } else {
        EXPECT_EQ(t[i], int32_t(i));
      }
    }
  }
}

TEST(KvPagePlan, QuantizedProtectedPagesMatchCpuCache) {
  for (int bs : {64, 128})
    for (bool protect : {true, false})
      for (KvQuantDtype dt : {KvQuantDtype::kInt8, KvQuantDtype::kInt4}) {
        SCOPED_TRACE(testing::Message() << "bs " << bs << " protect " << protect);
        CacheSettings full;
        full.sink_keep_count = 4;
        quant_both(full, bs, 1500, protect, dt);
        quant_both(window(256, 4), bs, 1500, protect, dt);
        quant_both(window(200, 0), bs, 1500, protect, dt);
        quant_both(window(64, 130), bs, 1200, protect, dt);
      }
}

TEST(KvPagePlan, ProtectedPositionRule) {
  CacheSettings s = window(256, 4);
  s.protected_positions = {9};
  EXPECT_FALSE(kv_position_protected(s, 0));  // quantization off: nothing protected
  s.quantization.enabled = true;
  EXPECT_TRUE(kv_position_protected(s, 3));
  EXPECT_FALSE(kv_position_protected(s, 4));
  EXPECT_TRUE(kv_position_protected(s, 9));
  s.quantization.protect_sink_positions = false;
  EXPECT_FALSE(kv_position_protected(s, 3));
  EXPECT_EQ(protected_pool_positions(s, 1 << 20, 1024), 0);
  s.quantization.protect_sink_positions = true;
  // Sinks in page 0 + position 9 in the same page: one page of either size.
  EXPECT_EQ(protected_pool_positions(s, 1 << 20, 1024), 128);
}

}  // namespace
}  // namespace sinkscope
