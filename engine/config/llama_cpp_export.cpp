// SPDX-License-Identifier: Apache-2.0
// Flag names follow llama.cpp's tools/server/README.md ("Common params" / "Server-specific
// params"): -m, -c/--ctx-size, --keep, --context-shift, -fa/--flash-attn on|off|auto,
// -ctk/--cache-type-k and -ctv/--cache-type-v (f32, f16, bf16, q8_0, q4_0, ...), -np/--parallel.
#include "engine/config/llama_cpp_export.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "engine/util/paths.h"

namespace sinkscope {

namespace {

std::string shell_quote(const std::string& s) {
  const bool safe = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) ||
           std::string_view("-_./=:+,").find(ch) != std::string_view::npos;
  });
  if (safe) return s;
  std::string q(1, '\'');
  for (char ch : s) {
    if (ch == '\'')
      q.append("'\\''");
    else
      q += ch;
  }
  q += '\'';
  return q;
}

const char* cache_type(const SinkScopeConfig& c) {
  const QuantizationSection& q = c.inference.quantization;
  if (q.enabled) return q.kv_dtype == KvQuantDtype::kInt8 ? "q8_0" : "q4_0";
  switch (c.inference.attention.dtype) {
    case AttentionDtype::kBfloat16:
      return "bf16";
    case AttentionDtype::kFloat16:
      return "f16";
    case AttentionDtype::kFloat32:
      return "f32";
  }
  return "f16";
}

}  // namespace

LlamaCppExport export_llama_cpp(const SinkScopeConfig& c) {
  LlamaCppExport e;
  const CacheSection& cache = c.inference.cache;
  const AttentionSection& att = c.inference.attention;
  const QuantizationSection& q = c.inference.quantization;
  auto& a = e.args;
  auto& n = e.notes;

  a = {"llama-server", "-m", c.model.path.empty() ? std::string(kDefaultModelFile) : c.model.path};
  const int64_t limit = request_token_limit(c);
  if (cache.strategy == CacheStrategy::kFull) {
    a.insert(a.end(), {"-c", std::to_string(limit)});
  } else {
    const int64_t ctx = std::min(limit, cache.sink_keep_count + cache.window_size);
    a.insert(a.end(), {"-c", std::to_string(ctx), "--keep", std::to_string(cache.sink_keep_count),
                       "--context-shift"});
    n.push_back(
        "sliding_window is approximate: when the context is full, llama.cpp's context shift keeps "
        "the first --keep tokens and drops half of the rest at once (not one token at a time), so "
        "between " +
        std::to_string((ctx - cache.sink_keep_count) / 2) + " and " +
        std::to_string(ctx - cache.sink_keep_count) + " recent tokens stay instead of exactly " +
        std::to_string(cache.window_size) + "; --keep counts tokens of the initial prompt");
    if (cache.position_mode == PositionMode::kOriginal)
      n.push_back(
          "position_mode original has no equivalent: llama.cpp's context shift re-rotates the "
          "kept keys to their new positions (SinkScope's position_mode cache)");
  }
  // Flash attention: the tiled online-softmax kernel, and llama.cpp needs it for a quantized V.
  a.insert(a.end(), {"-fa", "on"});
  const std::string type = cache_type(c);
  a.insert(a.end(), {"-ctk", type, "-ctv", type});
  if (att.type == AttentionType::kDynamicSparse)
    n.push_back(
        "attention type dynamic_sparse has no equivalent: llama.cpp computes dense attention, so "
        "threshold_prefill, threshold_decode, threshold_mode, min_sequence_length, "
        "skip_value_load and skip_softmax_exp do not apply (quality is at least the dense one, "
        "the speed-up is lost)");
  if (q.enabled) {
    if (q.protect_sink_positions && c.inference.cache.sink_keep_count > 0)
      n.push_back(
          "protect_sink_positions has no equivalent: llama.cpp quantizes every cached token, the "
          "sink tokens included; re-check quality (the validated numbers assume 16-bit sinks)");
    if (q.group_size != 32)
      n.push_back("group_size " + std::to_string(q.group_size) + " has no equivalent: " + type +
                  " uses blocks of 32 values with a 16-bit scale (finer groups: slightly more "
                  "memory, at least the same accuracy)");
  } else if (att.dtype == AttentionDtype::kFloat32) {
    n.push_back(
        "dtype float32: only the cache type is set (f32); llama.cpp chooses its own "
        "compute precision");
  }
  n.push_back(
      "block_size has no equivalent: llama.cpp's KV cache is not paged by a chosen tile "
      "size (no effect on results)");
  if (cache.global_cache_limit_mib > 0)
    n.push_back(
        "global_cache_limit_mib has no equivalent: llama.cpp allocates the KV cache for -c "
        "up front (--cache-ram limits the host-side prompt cache, which is different)");
  n.push_back(
      "-c is the context of one request here; llama-server shares -c among its -np/"
      "--parallel slots, so for N concurrent requests use -np N and N times this -c");
  if (c.validation)
    n.push_back(
        "the validation evidence in this config was measured with SinkScope's engine; "
        "re-validate the llama.cpp deployment against its own dense baseline");
  return e;
}

std::string LlamaCppExport::command_line() const {
  std::string s;
  for (const std::string& a : args) {
    if (!s.empty()) s += ' ';
    s += shell_quote(a);
  }
  return s;
}

std::string LlamaCppExport::format() const {
  std::string s = command_line() + "\n";
  for (const std::string& note : notes) s.append("# ").append(note).append("\n");
  return s;
}

}  // namespace sinkscope
