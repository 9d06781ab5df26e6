// SPDX-License-Identifier: Apache-2.0
// KV-cache capacity planner: the memory a config's cache policy needs for one request and for a
// batch, and the largest batch a memory budget holds. Pure arithmetic, no model weights needed.
//
// Model of the storage (docs/architecture.md, "Sink-retaining KV cache"):
//  - per token and layer, K and V each hold n_head_kv vectors of head_dim elements;
//  - 16-bit (or float32) storage: head_dim * element bytes per vector;
//  - int8 / int4: head_dim * bits / 8 bytes plus one 16-bit scale per group of group_size
//    elements of the vector (symmetric, per-token groups);
//  - protected sink tokens (quantization with protect_sink_positions) stay in the attention dtype;
//  - tokens a request can hold: full -> max_context_length; sliding_window -> sinks + window;
//    both capped by the per-request limit;
//  - pages of block_size tokens: the protected sinks take their own pages (their element type
//    differs), the rest are rounded up to whole pages. Positions the sink detector flags beyond
//    the first S are not known in advance and are not counted.
#pragma once

#include <cstdint>
#include <string>

#include "engine/config/config.h"

namespace sinkscope {

struct KvModelShape {
  int n_layer = 0;
  int n_head_kv = 0;
  int head_dim = 0;
};

// SmolLM2-135M-Instruct, the default model: 30 layers, 3 KV heads, head dim 64.
inline constexpr KvModelShape kSmolLM2Shape{30, 3, 64};

// Bytes of one head's K (or V) vector for one token.
int64_t kv_vector_bytes(int head_dim, AttentionDtype dtype);
int64_t kv_vector_bytes_quantized(int head_dim, KvQuantDtype dtype, int group_size);

// Bytes of one token's K and V over all layers and KV heads.
int64_t kv_bytes_per_token(const KvModelShape& m, AttentionDtype dtype);
int64_t kv_bytes_per_token_quantized(const KvModelShape& m, KvQuantDtype dtype, int group_size);

struct KvEstimate {
  int64_t tokens_per_request = 0;  // tokens one request's cache can hold
  int64_t sink_tokens = 0;         // of which protected sinks kept in the attention dtype
  int64_t sink_slots = 0;          // token slots of the protected-sink pages
  int64_t main_slots = 0;          // token slots of the other pages (kv dtype)
  int64_t sink_bytes_per_token = 0;
  int64_t main_bytes_per_token = 0;
  int64_t bytes_per_request = 0;
  int64_t batch = 1;
  int64_t bytes_total = 0;  // bytes_per_request * batch
  double mib_per_request() const { return double(bytes_per_request) / (1024.0 * 1024.0); }
  double mib_total() const { return double(bytes_total) / (1024.0 * 1024.0); }
};

// The estimate for `batch` concurrent requests that each fill their cache. Throws
// std::invalid_argument on a shape or batch that is not positive, or a total beyond int64.
KvEstimate estimate_kv(const KvModelShape& m, const SinkScopeConfig& c, int64_t batch = 1);

// The largest number of full requests whose caches fit in budget_bytes (0 when not even one).
int64_t max_batch_for_budget(const KvModelShape& m, const SinkScopeConfig& c, int64_t budget_bytes);

// "91.41 MiB", "1.50 GiB", "512 B".
std::string format_bytes(int64_t bytes);

}  // namespace sinkscope
