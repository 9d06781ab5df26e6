// SPDX-License-Identifier: Apache-2.0
// `config export --to trtllm|vllm|sglang|llamacpp` (engine/config/serving_export.h): every output is
// checked against the keys, types and value sets of that engine's documented format (the subset
// written here), carries the config's values, and names every setting it cannot express.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "engine/config/config.h"
#include "engine/config/serving_export.h"

#ifdef SINKSCOPE_HAVE_YAML_CPP
#include <yaml-cpp/yaml.h>
#endif

namespace sinkscope {
namespace {

SinkScopeConfig dense_full() { return SinkScopeConfig{}; }

SinkScopeConfig window_sparse(ThresholdMode mode) {
  SinkScopeConfig c;
  c.inference.cache.strategy = CacheStrategy::kSlidingWindow;
  c.inference.cache.window_size = 2048;
  c.inference.cache.sink_keep_count = 4;
  c.inference.attention.type = AttentionType::kDynamicSparse;
  c.inference.attention.threshold_mode = mode;
  c.inference.attention.threshold_prefill = mode == ThresholdMode::kFixed ? 0.01 : 20.0;
  c.inference.attention.threshold_decode = mode == ThresholdMode::kFixed ? 0.005 : 8.0;
  return c;
}

// Everything the exports must handle at once: window in original positions, length-scaled
// skipping with a minimum length and exact denominators, int4 KV with protected sinks, a memory
// limit, a request limit, float32, and validation evidence.
SinkScopeConfig everything() {
  SinkScopeConfig c = window_sparse(ThresholdMode::kLengthScaled);
  c.inference.cache.position_mode = PositionMode::kOriginal;
  c.inference.cache.block_size = 128;
  c.inference.cache.global_cache_limit_mib = 4096;
  c.inference.cache.per_request_limit_tokens = 6000;
  c.inference.attention.min_sequence_length = 1024;
  c.inference.attention.skip_softmax_exp = false;
  c.inference.attention.dtype = AttentionDtype::kFloat32;
  c.inference.quantization.enabled = true;
  c.inference.quantization.kv_dtype = KvQuantDtype::kInt4;
  c.inference.quantization.group_size = 64;
  c.validation = ValidationSection{};
  return c;
}

bool noted(const ServingExport& e, const std::string& what) {
  return std::any_of(e.notes.begin(), e.notes.end(),
                     [&](const std::string& n) { return n.find(what) != std::string::npos; });
}

#ifdef SINKSCOPE_HAVE_YAML_CPP

bool is_int(const YAML::Node& n, int64_t lo = 0) {
  try {
    return n.IsScalar() && n.as<int64_t>() >= lo;
  } catch (const YAML::Exception&) {
    return false;
  }
}
bool is_float(const YAML::Node& n) {
  try {
    return n.IsScalar() && n.as<double>() >= 0;
  } catch (const YAML::Exception&) {
    return false;
  }
}
bool one_of(const YAML::Node& n, std::set<std::string> values) {
  return n.IsScalar() && values.count(n.as<std::string>()) == 1;
}

using Check = std::function<bool(const YAML::Node&)>;

// Every key of `map` is documented (in `schema`) and its value passes the key's check.
void expectSchema(const YAML::Node& map, const std::map<std::string, Check>& schema,
                  const std::string& where) {
  ASSERT_TRUE(map.IsMap()) << where;
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    const auto it = schema.find(key);
    ASSERT_NE(it, schema.end()) << where << ": key '" << key << "' is not in the documented format";
    EXPECT_TRUE(it->second(kv.second)) << where << ": bad value for '" << key << "'";
  }
}

// TensorRT-LLM: LlmArgs as YAML (trtllm-serve --config / --extra_llm_api_options).
void expectTrtLlmSchema(const YAML::Node& y) {
  const std::set<std::string> dtypes = {"auto", "bfloat16", "float16", "float32"};
  expectSchema(
      y,
      {{"max_seq_len", [](const YAML::Node& n) { return is_int(n, 1); }},
       {"dtype", [&](const YAML::Node& n) { return one_of(n, dtypes); }},
       {"kv_cache_config", [](const YAML::Node& n) { return n.IsMap(); }},
       {"sparse_attention_config", [](const YAML::Node& n) { return n.IsMap(); }}},
      "trtllm");
  expectSchema(
      y["kv_cache_config"],
      {{"dtype", [](const YAML::Node& n) { return one_of(n, {"auto", "fp8", "nvfp4"}); }},
       {"tokens_per_block",
        [](const YAML::Node& n) {
          return is_int(n, 1) && (n.as<int64_t>() & (n.as<int64_t>() - 1)) == 0;
        }},
       {"max_attention_window",
        [](const YAML::Node& n) {
          if (!n.IsSequence() || n.size() == 0) return false;
          for (const auto& v : n)
            if (!is_int(v, 1)) return false;
          return true;
        }},
       {"sink_token_length", [](const YAML::Node& n) { return is_int(n, 0); }},
       {"max_gpu_total_bytes", [](const YAML::Node& n) { return is_int(n, 0); }}},
      "trtllm kv_cache_config");
  if (y["sparse_attention_config"]) {
    expectSchema(y["sparse_attention_config"],
                 {{"algorithm", [](const YAML::Node& n) { return one_of(n, {"skip_softmax"}); }},
                  {"threshold_scale_factor",
                   [](const YAML::Node& n) {
                     if (is_float(n)) return true;
                     if (!n.IsMap()) return false;
                     for (const auto& kv : n)
                       if (!one_of(kv.first, {"prefill", "decode"}) || !is_float(kv.second))
                         return false;
                     return true;
                   }}},
                 "trtllm sparse_attention_config");
  }
}

// vLLM engine arguments as YAML (vllm serve --config).
void expectVllmSchema(const YAML::Node& y) {
  expectSchema(
      y,
      {{"max-model-len", [](const YAML::Node& n) { return is_int(n, 1); }},
       {"dtype",
        [](const YAML::Node& n) {
          return one_of(n, {"auto", "half", "float16", "bfloat16", "float", "float32"});
        }},
       {"kv-cache-dtype",
        [](const YAML::Node& n) { return one_of(n, {"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}); }},
       {"block-size",
        [](const YAML::Node& n) { return one_of(n, {"1", "8", "16", "32", "64", "128"}); }}},
      "vllm");
}

// SGLang server arguments as YAML (sglang.launch_server --config).
void expectSglangSchema(const YAML::Node& y) {
  expectSchema(
      y,
      {{"context-length", [](const YAML::Node& n) { return is_int(n, 1); }},
       {"dtype",
        [](const YAML::Node& n) {
          return one_of(n, {"auto", "half", "float16", "bfloat16", "float", "float32"});
        }},
       {"kv-cache-dtype",
        [](const YAML::Node& n) { return one_of(n, {"auto", "fp8_e5m2", "fp8_e4m3"}); }},
       {"page-size", [](const YAML::Node& n) { return is_int(n, 1); }}},
      "sglang");
}

YAML::Node parsed(const ServingExport& e) {
  // The file as written (comments first) parses to the same document as the bare text.
  const YAML::Node bare = YAML::Load(e.text);
  const YAML::Node file = YAML::Load(e.format());
  EXPECT_EQ(YAML::Dump(bare), YAML::Dump(file));
  return bare;
}

TEST(ServingExport, TrtLlmFollowsItsSchemaAndCarriesTheWindowAndSkipping) {
  const SinkScopeConfig c = window_sparse(ThresholdMode::kLengthScaled);
  const ServingExport e = export_serving(ServingEngine::kTrtLlm, c);
  const YAML::Node y = parsed(e);
  expectTrtLlmSchema(y);
  EXPECT_EQ(y["max_seq_len"].as<int64_t>(), request_token_limit(c));
  EXPECT_EQ(y["kv_cache_config"]["max_attention_window"][0].as<int64_t>(), 2048 + 4);
  EXPECT_EQ(y["kv_cache_config"]["sink_token_length"].as<int64_t>(), 4);
  EXPECT_EQ(y["kv_cache_config"]["tokens_per_block"].as<int>(), 64);
  EXPECT_EQ(y["sparse_attention_config"]["algorithm"].as<std::string>(), "skip_softmax");
  EXPECT_DOUBLE_EQ(y["sparse_attention_config"]["threshold_scale_factor"]["prefill"].as<double>(),
                   20.0);
  EXPECT_DOUBLE_EQ(y["sparse_attention_config"]["threshold_scale_factor"]["decode"].as<double>(),
                   8.0);
  EXPECT_FALSE(noted(e, "has no equivalent")) << "everything here has an equivalent";
}

TEST(ServingExport, TrtLlmNamesAFixedThresholdAndRunsDense) {
  const ServingExport e = export_serving(ServingEngine::kTrtLlm, window_sparse(ThresholdMode::kFixed));
  const YAML::Node y = parsed(e);
  expectTrtLlmSchema(y);
  EXPECT_FALSE(y["sparse_attention_config"]);
  EXPECT_TRUE(noted(e, "threshold_mode fixed"));
}

TEST(ServingExport, VllmAndSglangFollowTheirSchemas) {
  for (const SinkScopeConfig& c : {dense_full(), window_sparse(ThresholdMode::kFixed), everything()}) {
    const ServingExport v = export_serving(ServingEngine::kVllm, c);
    const YAML::Node vy = parsed(v);
    expectVllmSchema(vy);
    EXPECT_EQ(vy["max-model-len"].as<int64_t>(), request_token_limit(c));
    EXPECT_EQ(vy["block-size"].as<int>(), c.inference.cache.block_size);
    EXPECT_EQ(vy["kv-cache-dtype"].as<std::string>(), "auto");
    const ServingExport s = export_serving(ServingEngine::kSglang, c);
    const YAML::Node sy = parsed(s);
    expectSglangSchema(sy);
    EXPECT_EQ(sy["context-length"].as<int64_t>(), request_token_limit(c));
    EXPECT_EQ(sy["page-size"].as<int>(), c.inference.cache.block_size);
  }
}

TEST(ServingExport, NothingIsDroppedSilently) {
  const SinkScopeConfig c = everything();
  for (ServingEngine engine : {ServingEngine::kTrtLlm, ServingEngine::kVllm, ServingEngine::kSglang,
                               ServingEngine::kLlamaCpp}) {
    const ServingExport e = export_serving(engine, c);
    const std::string name = to_string(engine);
    const bool trt = engine == ServingEngine::kTrtLlm;
    const bool llama = engine == ServingEngine::kLlamaCpp;
    // Each non-default setting: expressed in the output, or named in a note.
    if (!trt && !llama) {
      EXPECT_TRUE(noted(e, "sliding_window")) << name;
    }
    if (!trt) {
      EXPECT_TRUE(noted(e, "dynamic_sparse")) << name;
    }
    EXPECT_TRUE(noted(e, "position_mode original")) << name;
    if (trt) {
      EXPECT_TRUE(noted(e, "min_sequence_length")) << name;
    }
    if (trt) {
      EXPECT_TRUE(noted(e, "skip_softmax_exp")) << name;
    }
    EXPECT_TRUE(noted(e, llama ? "protect_sink_positions" : "KV quantization int4")) << name;
    if (!trt) {
      EXPECT_TRUE(noted(e, "global_cache_limit_mib")) << name;
    }
    EXPECT_TRUE(noted(e, "re-validate")) << name;
    if (!llama) {
      const YAML::Node y = YAML::Load(e.text);
      EXPECT_EQ(y["dtype"].as<std::string>(), "float32") << name;
    }
  }
  // TensorRT-LLM expresses the memory limit itself.
  const YAML::Node t = YAML::Load(export_serving(ServingEngine::kTrtLlm, c).text);
  EXPECT_EQ(t["kv_cache_config"]["max_gpu_total_bytes"].as<int64_t>(), int64_t(4096) << 20);
  EXPECT_EQ(t["max_seq_len"].as<int64_t>(), 6000);
}

#endif  // SINKSCOPE_HAVE_YAML_CPP

TEST(ServingExport, LlamaCppIsAShellLineWithTheDocumentedFlags) {
  const ServingExport e = export_serving(ServingEngine::kLlamaCpp, window_sparse(ThresholdMode::kFixed));
  EXPECT_FALSE(e.yaml());
  const std::string f = e.format();
  EXPECT_EQ(f.rfind("#!/bin/sh\n", 0), 0u);
  // Flags of llama-server's documentation only.
  const std::set<std::string> flags = {"-m", "-c", "--keep", "--context-shift", "-fa", "-ctk", "-ctv"};
  std::istringstream words(e.text);
  std::string w;
  words >> w;
  EXPECT_EQ(w, "llama-server");
  while (words >> w) {
    if (w.rfind("-", 0) == 0) {
      EXPECT_EQ(flags.count(w), 1u) << w;
    }
  }
  EXPECT_TRUE(noted(e, "dynamic_sparse"));
}

TEST(ServingExport, EngineNamesParse) {
  for (ServingEngine e : {ServingEngine::kTrtLlm, ServingEngine::kVllm, ServingEngine::kSglang,
                          ServingEngine::kLlamaCpp})
    EXPECT_EQ(parse_serving_engine(to_string(e)), e);
  EXPECT_FALSE(parse_serving_engine("tensorrt"));
  EXPECT_FALSE(parse_serving_engine(""));
}

}  // namespace
}  // namespace sinkscope
