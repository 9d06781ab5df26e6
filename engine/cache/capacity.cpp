// SPDX-License-Identifier: Apache-2.0
#include "engine/cache/capacity.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace sinkscope {

namespace {

constexpr int64_t kScaleBytes = 2;  // one 16-bit scale per group

int64_t round_up(int64_t v, int64_t to) {
  return (v + to - 1) / to * to;
}

int64_t per_vector_count(const KvModelShape& m) {
  if (m.n_layer <= 0 || m.n_head_kv <= 0 || m.head_dim <= 0)
    throw std::invalid_argument("KV model shape must be positive (layers, KV heads, head dim)");
  return 2 * int64_t(m.n_layer) * m.n_head_kv;  // K and V, every layer and KV head
}

}  // namespace

int64_t kv_vector_bytes(int head_dim, AttentionDtype dtype) {
  return int64_t(head_dim) * dtype_bytes(dtype);
}

int64_t kv_vector_bytes_quantized(int head_dim, KvQuantDtype dtype, int group_size) {
  const int bits = dtype == KvQuantDtype::kInt8 ? 8 : 4;
  const int64_t groups = (int64_t(head_dim) + group_size - 1) / group_size;
  return (int64_t(head_dim) * bits + 7) / 8 + groups * kScaleBytes;
}

int64_t kv_bytes_per_token(const KvModelShape& m, AttentionDtype dtype) {
  return per_vector_count(m) * kv_vector_bytes(m.head_dim, dtype);
}

int64_t kv_bytes_per_token_quantized(const KvModelShape& m, KvQuantDtype dtype, int group_size) {
  return per_vector_count(m) * kv_vector_bytes_quantized(m.head_dim, dtype, group_size);
}

namespace {

KvEstimate per_request(const KvModelShape& m, const SinkScopeConfig& c) {
  const CacheSection& cache = c.inference.cache;
  const QuantizationSection& q = c.inference.quantization;
  const int64_t block = std::max(1, cache.block_size);
  const int64_t limit = request_token_limit(c);
  KvEstimate e;
  e.tokens_per_request = cache.strategy == CacheStrategy::kFull
                             ? limit
                             : std::min(limit, cache.sink_keep_count + cache.window_size);
  const int64_t dense = kv_bytes_per_token(m, c.inference.attention.dtype);
  if (q.enabled) {
    e.main_bytes_per_token = kv_bytes_per_token_quantized(m, q.kv_dtype, q.group_size);
    if (q.protect_sink_positions) {
      e.sink_tokens = std::clamp<int64_t>(cache.sink_keep_count, 0, e.tokens_per_request);
      e.sink_bytes_per_token = dense;
    }
  } else {
    e.main_bytes_per_token = dense;
  }
  e.sink_slots = round_up(e.sink_tokens, block);
  e.main_slots = round_up(e.tokens_per_request - e.sink_tokens, block);
  e.bytes_per_request =
      e.sink_slots * e.sink_bytes_per_token + e.main_slots * e.main_bytes_per_token;
  return e;
}

}  // namespace

KvEstimate estimate_kv(const KvModelShape& m, const SinkScopeConfig& c, int64_t batch) {
  if (batch <= 0) throw std::invalid_argument("batch must be at least 1");
  KvEstimate e = per_request(m, c);
  if (e.bytes_per_request > 0 && batch > std::numeric_limits<int64_t>::max() / e.bytes_per_request)
    throw std::invalid_argument("batch " + std::to_string(batch) + " is too large to estimate");
  e.batch = batch;
  e.bytes_total = e.bytes_per_request * batch;
  return e;
}

int64_t max_batch_for_budget(const KvModelShape& m, const SinkScopeConfig& c,
                             int64_t budget_bytes) {
  const KvEstimate e = per_request(m, c);
  if (budget_bytes <= 0 || e.bytes_per_request <= 0) return 0;
  return budget_bytes / e.bytes_per_request;
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  const double b = double(bytes);
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  } else if (b < 1024.0 * 1024.0) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  } else if (b < 1024.0 * 1024.0 * 1024.0) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
  }
  return buf;
}

}  // namespace sinkscope
