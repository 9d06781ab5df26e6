// SPDX-License-Identifier: Apache-2.0
// KV capacity planner, checked against numbers computed by hand for SmolLM2-135M
// (30 layers, 3 KV heads, head dim 64):
//   16-bit: 2 (K, V) x 30 x 3 x 64 x 2 B            = 23040 B/token
//   int8, groups of 32: 2 x 30 x 3 x (64 + 2 x 2)   = 12240 B/token
//   int4, groups of 32: 2 x 30 x 3 x (32 + 2 x 2)   =  6480 B/token
#include <gtest/gtest.h>

#include <stdexcept>

#include "engine/cache/capacity.h"

using namespace sinkscope;

namespace {

SinkScopeConfig sliding(int64_t sinks, int64_t window) {
  SinkScopeConfig c;
  c.inference.cache.strategy = CacheStrategy::kSlidingWindow;
  c.inference.cache.sink_keep_count = sinks;
  c.inference.cache.window_size = window;
  return c;
}

}  // namespace

TEST(Capacity, BytesPerToken) {
  EXPECT_EQ(kv_vector_bytes(64, AttentionDtype::kBfloat16), 128);
  EXPECT_EQ(kv_vector_bytes(64, AttentionDtype::kFloat32), 256);
  EXPECT_EQ(kv_vector_bytes_quantized(64, KvQuantDtype::kInt8, 32), 68);
  EXPECT_EQ(kv_vector_bytes_quantized(64, KvQuantDtype::kInt8, 64), 66);
  EXPECT_EQ(kv_vector_bytes_quantized(64, KvQuantDtype::kInt4, 32), 36);
  EXPECT_EQ(kv_vector_bytes_quantized(128, KvQuantDtype::kInt4, 128), 66);
  EXPECT_EQ(kv_bytes_per_token(kSmolLM2Shape, AttentionDtype::kBfloat16), 23040);
  EXPECT_EQ(kv_bytes_per_token(kSmolLM2Shape, AttentionDtype::kFloat16), 23040);
  EXPECT_EQ(kv_bytes_per_token(kSmolLM2Shape, AttentionDtype::kFloat32), 46080);
  EXPECT_EQ(kv_bytes_per_token_quantized(kSmolLM2Shape, KvQuantDtype::kInt8, 32), 12240);
  EXPECT_EQ(kv_bytes_per_token_quantized(kSmolLM2Shape, KvQuantDtype::kInt4, 32), 6480);
  // A Llama-3-8B-like shape: 32 layers, 8 KV heads, head dim 128 -> 128 KiB per token.
  EXPECT_EQ(kv_bytes_per_token({32, 8, 128}, AttentionDtype::kBfloat16), 131072);
}

TEST(Capacity, FullCacheDense) {
  const KvEstimate e = estimate_kv(kSmolLM2Shape, SinkScopeConfig{});
  EXPECT_EQ(e.tokens_per_request, 8192);
  EXPECT_EQ(e.main_slots, 8192);
  EXPECT_EQ(e.bytes_per_request, 8192LL * 23040);  // 188743680 B = 180 MiB
  EXPECT_DOUBLE_EQ(e.mib_per_request(), 180.0);
  const KvEstimate b = estimate_kv(kSmolLM2Shape, SinkScopeConfig{}, 8);
  EXPECT_EQ(b.bytes_total, 8 * 188743680LL);
  EXPECT_DOUBLE_EQ(b.mib_total(), 1440.0);
}

TEST(Capacity, PerRequestLimitAndPageRounding) {
  SinkScopeConfig c;
  c.inference.cache.per_request_limit_tokens = 1000;  // 16 pages of 64 = 1024 slots
  KvEstimate e = estimate_kv(kSmolLM2Shape, c);
  EXPECT_EQ(e.tokens_per_request, 1000);
  EXPECT_EQ(e.main_slots, 1024);
  EXPECT_EQ(e.bytes_per_request, 1024LL * 23040);  // 23592960
  c.inference.cache.block_size = 128;              // 8 pages of 128 = 1024 slots
  EXPECT_EQ(estimate_kv(kSmolLM2Shape, c).bytes_per_request, 23592960);
}

TEST(Capacity, SinksPlusWindow) {
  // 4 + 4096 = 4100 tokens -> 65 pages of 64 = 4160 slots.
  KvEstimate e = estimate_kv(kSmolLM2Shape, sliding(4, 4096));
  EXPECT_EQ(e.tokens_per_request, 4100);
  EXPECT_EQ(e.main_slots, 4160);
  EXPECT_EQ(e.bytes_per_request, 4160LL * 23040);  // 95846400 B = 91.40625 MiB
  EXPECT_DOUBLE_EQ(e.mib_per_request(), 91.40625);
  // Pages of 128: 33 pages = 4224 slots.
  SinkScopeConfig c = sliding(4, 4096);
  c.inference.cache.block_size = 128;
  EXPECT_EQ(estimate_kv(kSmolLM2Shape, c).bytes_per_request, 4224LL * 23040);  // 97320960
  // A plain sliding window (S = 0) of 4096 tokens fills exactly 64 pages.
  EXPECT_EQ(estimate_kv(kSmolLM2Shape, sliding(0, 4096)).bytes_per_request, 4096LL * 23040);
  // The window never holds more than the per-request limit.
  c = sliding(4, 4096);
  c.inference.max_context_length = 2048;
  EXPECT_EQ(estimate_kv(kSmolLM2Shape, c).tokens_per_request, 2048);
}

TEST(Capacity, QuantizedWithProtectedSinks) {
  SinkScopeConfig c = sliding(4, 4096);
  c.inference.quantization = {true, KvQuantDtype::kInt8, 32, true};
  KvEstimate e = estimate_kv(kSmolLM2Shape, c);
  // 4 sinks in one 16-bit page (64 slots), 4096 int8 tokens in 64 pages.
  EXPECT_EQ(e.sink_tokens, 4);
  EXPECT_EQ(e.sink_slots, 64);
  EXPECT_EQ(e.main_slots, 4096);
  EXPECT_EQ(e.sink_bytes_per_token, 23040);
  EXPECT_EQ(e.main_bytes_per_token, 12240);
  EXPECT_EQ(e.bytes_per_request, 64LL * 23040 + 4096LL * 12240);  // 51609600 B = 49.21875 MiB
  EXPECT_DOUBLE_EQ(e.mib_per_request(), 49.21875);
  // Unprotected: all 4100 tokens int8, 65 pages.
  c.inference.quantization.protect_sink_positions = false;
  e = estimate_kv(kSmolLM2Shape, c);
  EXPECT_EQ(e.sink_tokens, 0);
  EXPECT_EQ(e.bytes_per_request, 4160LL * 12240);  // 50918400
  // int4 with protected sinks.
  c.inference.quantization = {true, KvQuantDtype::kInt4, 32, true};
  EXPECT_EQ(estimate_kv(kSmolLM2Shape, c).bytes_per_request, 64LL * 23040 + 4096LL * 6480);
}

TEST(Capacity, LargestBatchForABudget) {
  SinkScopeConfig c = sliding(4, 4096);
  c.inference.quantization = {true, KvQuantDtype::kInt8, 32, true};
  // 8 GiB / 51609600 B = 166.4 -> 166.
  EXPECT_EQ(max_batch_for_budget(kSmolLM2Shape, c, 8LL << 30), 166);
  EXPECT_EQ(max_batch_for_budget(kSmolLM2Shape, c, 3 * 51609600LL), 3);  // exactly three
  EXPECT_EQ(max_batch_for_budget(kSmolLM2Shape, c, 3 * 51609600LL - 1), 2);
  EXPECT_EQ(max_batch_for_budget(kSmolLM2Shape, c, 51609600LL - 1), 0);  // not even one
  EXPECT_EQ(max_batch_for_budget(kSmolLM2Shape, c, 0), 0);
  // Dense full cache, 180 MiB per request: 1 GiB holds 5.
  EXPECT_EQ(max_batch_for_budget(kSmolLM2Shape, SinkScopeConfig{}, 1LL << 30), 5);
}

TEST(Capacity, RejectsBadInputs) {
  EXPECT_THROW(estimate_kv({0, 3, 64}, SinkScopeConfig{}), std::invalid_argument);
  EXPECT_THROW(estimate_kv(kSmolLM2Shape, SinkScopeConfig{}, 0), std::invalid_argument);
  EXPECT_THROW(estimate_kv(kSmolLM2Shape, SinkScopeConfig{}, int64_t(1) << 62),
               std::invalid_argument);
}

TEST(Capacity, FormatBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(51609600), "49.22 MiB");
  EXPECT_EQ(format_bytes(3LL << 30), "3.00 GiB");
}
