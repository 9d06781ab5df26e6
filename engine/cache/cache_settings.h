// SPDX-License-Identifier: Apache-2.0
// KV-cache settings of a backend: the config schema's `inference.cache` and
// `inference.quantization` blocks (docs/architecture.md, "Sink-retaining KV cache" and "KV
// quantization"), member names identical to the schema keys. The enums are the config's own
// (engine/config/config.h), so a parsed config converts member by member.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/config.h"

namespace sinkscope {

struct KvQuantSettings {
  bool enabled = false;                        // off: the cache holds float32 (CPU) as before
  KvQuantDtype kv_dtype = KvQuantDtype::kInt8;  // int8 | int4, symmetric
  int group_size = 32;                         // elements per fp16 scale; divides head_dim
  bool protect_sink_positions = true;          // sinks (+ protected_positions) stay unquantized
};

struct CacheSettings {
  CacheStrategy strategy = CacheStrategy::kFull;  // full | sliding_window
  int64_t window_size = 4096;                     // W (sliding_window only)
  int64_t sink_keep_count = 0;                    // S, never evicted (sliding_window only)
  PositionMode position_mode = PositionMode::kCache;
  // Page = attention tile. 0: follow AttentionSettings::block_size; otherwise it must equal it.
  int block_size = 0;
  int64_t per_request_limit_tokens = 0;  // 0: none beyond the backend's max_context
  int64_t global_cache_limit_mib = 0;    // 0: no limit on cache memory
  KvQuantSettings quantization;
  // Extra positions kept unquantized when protect_sink_positions is on (e.g. flagged by the
  // sink detector, engine/eval/sinks.h); positions < sink_keep_count are always included.
  std::vector<int> protected_positions;

  bool windowed() const { return strategy == CacheStrategy::kSlidingWindow; }
};

// The backend's cache settings for a config file's inference block.
inline CacheSettings cache_settings_from(const CacheSection& c, const QuantizationSection& q) {
  CacheSettings s;
  s.strategy = c.strategy;
  s.window_size = c.window_size;
  s.sink_keep_count = c.sink_keep_count;
  s.position_mode = c.position_mode;
  s.block_size = c.block_size;
  s.per_request_limit_tokens = c.per_request_limit_tokens;
  s.global_cache_limit_mib = c.global_cache_limit_mib;
  s.quantization.enabled = q.enabled;
  s.quantization.kv_dtype = q.kv_dtype;
  s.quantization.group_size = q.group_size;
  s.quantization.protect_sink_positions = q.protect_sink_positions;
  return s;
}

// One-line human description, e.g. "sliding_window W=256 S=4 (cache positions), int8/32".
std::string describe(const CacheSettings& s);

}  // namespace sinkscope
