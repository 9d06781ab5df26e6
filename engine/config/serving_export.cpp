// SPDX-License-Identifier: Apache-2.0
// The keys follow each engine's documentation:
//  - TensorRT-LLM: the LLM API arguments (LlmArgs) as YAML for `trtllm-serve MODEL --config`
//    (`--extra_llm_api_options`): max_seq_len, dtype, kv_cache_config (KvCacheConfig: dtype,
//    tokens_per_block, max_attention_window, sink_token_length, max_gpu_total_bytes) and
//    sparse_attention_config (SkipSoftmaxAttentionConfig: algorithm skip_softmax,
//    threshold_scale_factor per phase; the threshold is threshold_scale_factor / sequence
//    length, SinkScope's length_scaled lambda = c / L_kv).
//  - vLLM: engine arguments as YAML for `vllm serve MODEL --config` (max-model-len, dtype,
//    kv-cache-dtype auto | fp8 | fp8_e4m3 | fp8_e5m2, block-size).
//  - SGLang: server arguments as YAML for `python -m sglang.launch_server --config`
//    (context-length, dtype, kv-cache-dtype auto | fp8_e5m2 | fp8_e4m3, page-size).
//  - llama.cpp: llama-server flags (engine/config/llama_cpp_export.h).
#include "engine/config/serving_export.h"

#include <stdexcept>

#include "engine/config/llama_cpp_export.h"
#include "engine/util/paths.h"

#ifdef SINKSCOPE_HAVE_YAML_CPP
#include <yaml-cpp/yaml.h>
#endif

namespace sinkscope {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

// Notes every engine here shares: settings with no equivalent in any of them.
void common_notes(const SinkScopeConfig& c, const char* engine, bool sinks_and_window,
                  bool sparse, bool memory_limit, std::vector<std::string>& n) {
  const CacheSection& cache = c.inference.cache;
  const AttentionSection& att = c.inference.attention;
  const QuantizationSection& q = c.inference.quantization;
  if (cache.strategy == CacheStrategy::kSlidingWindow && !sinks_and_window)
    n.push_back(std::string("sliding_window (") + num(cache.sink_keep_count) + " sinks + " +
                num(cache.window_size) + " window, position_mode " +
                to_string(cache.position_mode) + ") has no equivalent: " + engine +
                " applies a sliding window only where the model defines one and keeps no sink "
                "tokens, so this export runs with the full cache (the dense baseline's: more "
                "memory than validated, quality at least the dense one)");
  if (att.type == AttentionType::kDynamicSparse && !sparse)
    n.push_back(std::string("attention type dynamic_sparse has no equivalent: ") + engine +
                " computes dense attention, so threshold_prefill, threshold_decode, "
                "threshold_mode, min_sequence_length, skip_value_load and skip_softmax_exp do "
                "not apply (quality at least the dense one, the speed-up is lost)");
  if (q.enabled)
    n.push_back(std::string("KV quantization ") + to_string(q.kv_dtype) + " (groups of " +
                num(q.group_size) + " with 16-bit scales" +
                (q.protect_sink_positions ? ", sink tokens kept 16-bit" : "") +
                ") has no equivalent: " + engine +
                " quantizes a KV cache with per-tensor scales (fp8 and the like) and keeps no "
                "16-bit sink tokens, so this export keeps the 16-bit cache (KV cache dtype "
                "auto); its fp8 cache is the nearest and was not validated");
  if (cache.global_cache_limit_mib > 0 && !memory_limit)
    n.push_back(std::string("global_cache_limit_mib ") + num(cache.global_cache_limit_mib) +
                " has no equivalent: " + engine +
                " sizes its KV pool from the free GPU memory (a memory fraction); set it so the "
                "pool stays within " + num(cache.global_cache_limit_mib) + " MiB");
  if (c.validation)
    n.push_back(std::string("the validation evidence in this config was measured with "
                            "SinkScope's engine; re-validate the ") +
                engine + " deployment against its own dense baseline");
}

#ifdef SINKSCOPE_HAVE_YAML_CPP

ServingExport trtllm(const SinkScopeConfig& c) {
  ServingExport e;
  e.engine = ServingEngine::kTrtLlm;
  e.usage = "trtllm-serve MODEL --config FILE (MODEL: the Hugging Face checkpoint of " +
            (c.model.path.empty() ? std::string(kDefaultModelFile) : c.model.path) + ")";
  const CacheSection& cache = c.inference.cache;
  const AttentionSection& att = c.inference.attention;
  auto& n = e.notes;
  const bool windowed = cache.strategy == CacheStrategy::kSlidingWindow;
  const bool length_scaled =
      att.type == AttentionType::kDynamicSparse && att.threshold_mode == ThresholdMode::kLengthScaled;

  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "max_seq_len" << YAML::Value << request_token_limit(c);
  y << YAML::Key << "dtype" << YAML::Value << to_string(att.dtype);
  y << YAML::Key << "kv_cache_config" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "dtype" << YAML::Value << "auto";
  y << YAML::Key << "tokens_per_block" << YAML::Value << cache.block_size;
  if (windowed) {
    // The cyclic cache of one request holds the sink tokens and the window.
    y << YAML::Key << "max_attention_window" << YAML::Value << YAML::Flow << YAML::BeginSeq
      << cache.sink_keep_count + cache.window_size << YAML::EndSeq;
    y << YAML::Key << "sink_token_length" << YAML::Value << cache.sink_keep_count;
  }
  if (cache.global_cache_limit_mib > 0)
    y << YAML::Key << "max_gpu_total_bytes" << YAML::Value
      << cache.global_cache_limit_mib * 1024 * 1024;
  y << YAML::EndMap;
  if (length_scaled) {
    y << YAML::Key << "sparse_attention_config" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "algorithm" << YAML::Value << "skip_softmax";
    y << YAML::Key << "threshold_scale_factor" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "prefill" << YAML::Value << att.threshold_prefill;
    y << YAML::Key << "decode" << YAML::Value << att.threshold_decode;
    y << YAML::EndMap << YAML::EndMap;
  }
  y << YAML::EndMap;
  e.text = std::string(y.c_str()) + "\n";

  if (windowed) {
    n.push_back("max_attention_window is S + W = " +
                num(cache.sink_keep_count + cache.window_size) +
                ": the tokens one request's cyclic cache holds, the " +
                num(cache.sink_keep_count) + " sink tokens included");
    if (cache.position_mode == PositionMode::kOriginal)
      n.push_back(
          "position_mode original has no equivalent: TensorRT-LLM's StreamingLLM cache gives "
          "keys their positions inside the cache (SinkScope's position_mode cache)");
  }
  if (att.type == AttentionType::kDynamicSparse) {
    if (!length_scaled)
      n.push_back(
          "threshold_mode fixed has no equivalent: TensorRT-LLM's skip-softmax threshold is "
          "threshold_scale_factor / sequence length (SinkScope's length_scaled mode); this "
          "export runs dense attention. Calibrate with threshold_mode length_scaled to export "
          "the skipping");
    else {
      n.push_back(
          "the skip rule is the same (a KV tile is skipped when exp(tile max - running max) < "
          "threshold_scale_factor / sequence length), but TensorRT-LLM's kernels choose their "
          "own tile size; block_size " + num(cache.block_size) +
          " sets only the KV page (tokens_per_block)");
      if (att.min_sequence_length > 0)
        n.push_back("min_sequence_length " + num(att.min_sequence_length) +
                    " has no equivalent: TensorRT-LLM skips at every length");
      if (!att.skip_softmax_exp)
        n.push_back(
            "skip_softmax_exp false has no equivalent: skip softmax leaves a skipped tile out "
            "of the softmax sum too (SinkScope's skip_softmax_exp true)");
    }
  }
  common_notes(c, "TensorRT-LLM", /*sinks_and_window=*/true, /*sparse=*/true,
               /*memory_limit=*/true, n);
  return e;
}

ServingExport vllm_or_sglang(ServingEngine engine, const SinkScopeConfig& c) {
  const bool vllm = engine == ServingEngine::kVllm;
  ServingExport e;
  e.engine = engine;
  const std::string model =
      c.model.path.empty() ? std::string(kDefaultModelFile) : c.model.path;
  e.usage = vllm ? "vllm serve MODEL --config FILE (MODEL: the Hugging Face checkpoint of " +
                       model + ")"
                 : "python -m sglang.launch_server --model-path MODEL --config FILE (MODEL: the "
                   "Hugging Face checkpoint of " + model + ")";
  const CacheSection& cache = c.inference.cache;
  const AttentionSection& att = c.inference.attention;
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << (vllm ? "max-model-len" : "context-length") << YAML::Value
    << request_token_limit(c);
  y << YAML::Key << "dtype" << YAML::Value << to_string(att.dtype);
  y << YAML::Key << "kv-cache-dtype" << YAML::Value << "auto";
  y << YAML::Key << (vllm ? "block-size" : "page-size") << YAML::Value << cache.block_size;
  y << YAML::EndMap;
  e.text = std::string(y.c_str()) + "\n";
  e.notes.push_back(std::string(vllm ? "block-size" : "page-size") + " " +
                    num(cache.block_size) +
                    " is the KV page only (SinkScope's block_size is also the attention tile)");
  common_notes(c, vllm ? "vLLM" : "SGLang", /*sinks_and_window=*/false, /*sparse=*/false,
               /*memory_limit=*/false, e.notes);
  return e;
}

#endif

}  // namespace

std::optional<ServingEngine> parse_serving_engine(std::string_view name) {
  if (name == "llamacpp") return ServingEngine::kLlamaCpp;
  if (name == "trtllm") return ServingEngine::kTrtLlm;
  if (name == "vllm") return ServingEngine::kVllm;
  if (name == "sglang") return ServingEngine::kSglang;
  return std::nullopt;
}

const char* to_string(ServingEngine e) {
  switch (e) {
    case ServingEngine::kLlamaCpp:
      return "llamacpp";
    case ServingEngine::kTrtLlm:
      return "trtllm";
    case ServingEngine::kVllm:
      return "vllm";
    case ServingEngine::kSglang:
      return "sglang";
  }
  return "?";
}

std::string ServingExport::format() const {
#ifdef SINKSCOPE_HAVE_YAML_CPP
  if (yaml()) {
    // YAML comments through the emitter, which also keeps a note's line breaks inside comments.
    YAML::Emitter y;
    y << YAML::Comment(usage) << YAML::Newline;
    for (const std::string& note : notes) y << YAML::Comment(note) << YAML::Newline;
    return std::string(y.c_str(), y.size()) + text;
  }
#endif
  // The llama.cpp shell script (shell comments), or a build without yaml-cpp.
  std::string s;
  if (engine == ServingEngine::kLlamaCpp) s = "#!/bin/sh\n";
  s += "# " + usage + "\n";
  for (const std::string& note : notes) s += "# " + note + "\n";
  return s + text;
}

ServingExport export_serving(ServingEngine engine, const SinkScopeConfig& c) {
  if (engine == ServingEngine::kLlamaCpp) {
    const LlamaCppExport l = export_llama_cpp(c);
    ServingExport e;
    e.engine = engine;
    e.text = l.command_line() + "\n";
    e.notes = l.notes;
    e.usage = "sh FILE (llama-server with these flags)";
    return e;
  }
#ifdef SINKSCOPE_HAVE_YAML_CPP
  if (engine == ServingEngine::kTrtLlm) return trtllm(c);
  return vllm_or_sglang(engine, c);
#else
  throw std::runtime_error(std::string("exporting for ") + to_string(engine) +
                           " needs YAML output: this build has no yaml-cpp");
#endif
}

}  // namespace sinkscope
