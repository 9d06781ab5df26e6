// SPDX-License-Identifier: Apache-2.0
// The families' own parts of a Hugging Face config.json (hf_config_reader.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/format/hf_config_reader.h"

namespace sinkscope::hf_detail {

int window_value(const ConfigReader& r, const char* key) {
  if (!r.has(key)) return 0;
  const Json& v = r.json().at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t(1) << 30))
    r.fail(std::string("'") + key + "' = " + v.dump() + " is not a window (an integer in 0 .. 2^30)");
  return int(v.get<int64_t>());
}

// The model's own sliding window, as transformers applies it: MistralForCausalLM and
// Phi3ForCausalLM on every layer (config.sliding_window; null = none), Qwen2ForCausalLM only
// with use_sliding_window and on the layers layer_types calls sliding (by default those from
// max_window_layers on). LlamaForCausalLM ignores the key and so does SinkScope; gpt_oss reads
// its own alternating pattern; qwen3's windows are refused.
void read_hf_window(const ConfigReader& r, const std::string& type, ModelConfig& c) {
  if (type == "mistral" || type == "phi3") {
    c.sliding_window = window_value(r, "sliding_window");
    c.swa_pattern = 0;
  } else if (type == "qwen2" && r.get_bool_or("use_sliding_window", false)) {
    c.sliding_window = window_value(r, "sliding_window");
    if (c.sliding_window == 0) return;
    std::vector<char> local(size_t(c.n_layer));
    auto lt = r.json().find("layer_types");
    if (lt != r.json().end() && !lt->is_null()) {
      if (!lt->is_array() || int(lt->size()) != c.n_layer)
        r.fail("layer_types must list " + std::to_string(c.n_layer) + " layer kinds");
      for (int l = 0; l < c.n_layer; ++l) {
        const Json& k = (*lt)[size_t(l)];
        const std::string kind = k.is_string() ? k.get<std::string>() : k.dump();
        if (kind != "sliding_attention" && kind != "full_attention")
          r.fail("layer_types[" + std::to_string(l) + "] = '" + kind +
                 "' (supported: sliding_attention, full_attention)");
        local[size_t(l)] = kind == "sliding_attention";
      }
    } else {
      const int first = r.has("max_window_layers")
                            ? int(r.json().at("max_window_layers").get<int64_t>()) : 28;
      for (int l = 0; l < c.n_layer; ++l) local[size_t(l)] = l >= first;
    }
    const auto n_local = std::count(local.begin(), local.end(), char(1));
    if (n_local == 0) c.sliding_window = 0;
    else if (n_local < c.n_layer) c.local_layers = std::move(local);
    c.swa_pattern = 0;
  } else if (type == "qwen3" && r.get_bool_or("use_sliding_window", false)) {
    r.fail("sliding_window attention is not supported for qwen3 (use_sliding_window is set)");
  }
}

// LongRoPE (Phi3 "longrope", formerly "su"; transformers' _compute_longrope_parameters):
// per-pair factors for a sequence up to original_max_position_embeddings (short_factor) and
// beyond (long_factor); cos and sin times attention_factor, by default
// sqrt(1 + ln(s) / ln(orig)) with s = factor, else max_position_embeddings / orig.
void read_hf_longrope(const ConfigReader& r, const Json& rope, ModelConfig& c) {
  int orig = 0;
  if (rope.contains("original_max_position_embeddings") &&
      !rope["original_max_position_embeddings"].is_null())
    orig = r.positive("original_max_position_embeddings", rope["original_max_position_embeddings"]);
  else
    orig = r.get_int("original_max_position_embeddings");
  for (const char* key : {"long_factor", "short_factor"}) {
    if (!rope.contains(key) || !rope[key].is_array() || int(rope[key].size()) != c.rope_dim / 2)
      r.fail(std::string("rope scaling 'longrope' needs '") + key + "' with " +
             std::to_string(c.rope_dim / 2) + " numbers (one per rotated pair)");
    for (const Json& v : rope[key])
      if (!v.is_number() || !(v.get<double>() > 0))
        r.fail(std::string("rope scaling 'longrope': '") + key + "' holds " + v.dump() +
               " (each factor must be > 0)");
  }
  double factor = double(c.n_ctx_train) / orig;
  if (rope.contains("factor") && rope["factor"].is_number()) factor = rope["factor"].get<double>();
  double attn = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(double(orig)));
  if (rope.contains("attention_factor") && rope["attention_factor"].is_number())
    attn = rope["attention_factor"].get<double>();
  if (!(attn > 0)) r.fail("rope scaling 'longrope': attention_factor must be > 0");
  c.rope_scaling = RopeScalingType::kNone;
  c.long_rope = true;
  c.rope_orig_ctx = orig;
  c.rope_attn_factor = float(attn);
}

// Gemma 2 / Gemma 3 text (Gemma2ForCausalLM, Gemma3ForCausalLM): GeGLU with the tanh GELU,
// scaled embeddings, post-norms (the engine's `gemma`), the query scale from
// query_pre_attn_scalar, soft-caps (null: none), the window on the layers layer_types calls
// sliding (by default Gemma 2 alternates from a sliding layer 0; Gemma 3 has five sliding to
// one full), Gemma 3's Q/K norms.
void read_hf_gemma(const ConfigReader& r, ModelConfig& c) {
  const bool gemma2 = c.architecture == "gemma2";
  c.gemma = true;
  c.qk_norm = !gemma2;
  const std::string act = r.get_string_or(
      "hidden_activation", r.get_string_or("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    r.fail("hidden_activation '" + act + "' is not supported (gelu_pytorch_tanh)");
  const double qpas = r.get_float_or("query_pre_attn_scalar", c.head_dim);
  if (!(qpas > 0)) r.fail("query_pre_attn_scalar must be > 0");
  c.query_scale = float(1.0 / std::sqrt(qpas));
  auto cap = [&](const char* key) {
    const double v = r.get_float_or(key, 0.0);
    if (!(v >= 0) || !std::isfinite(v)) r.fail(std::string("'") + key + "' must be >= 0");
    return float(v);
  };
  c.attn_softcap = cap("attn_logit_softcapping");
  c.final_softcap = cap("final_logit_softcapping");
  c.sliding_window = window_value(r, "sliding_window");
  c.swa_pattern = gemma2 ? 2 : 6;
  auto lt = r.json().find("layer_types");
  if (c.sliding_window > 0 && lt != r.json().end() && !lt->is_null()) {
    if (!lt->is_array() || int(lt->size()) != c.n_layer)
      r.fail("layer_types must list " + std::to_string(c.n_layer) + " layer kinds");
    std::vector<char> local(size_t(c.n_layer));
    for (int l = 0; l < c.n_layer; ++l) {
      const Json& k = (*lt)[size_t(l)];
      const std::string kind = k.is_string() ? k.get<std::string>() : k.dump();
      if (kind != "sliding_attention" && kind != "full_attention")
        r.fail("layer_types[" + std::to_string(l) + "] = '" + kind +
               "' (supported: sliding_attention, full_attention)");
      local[size_t(l)] = kind == "sliding_attention";
    }
    bool pattern = true;
    for (int l = 0; l < c.n_layer; ++l) pattern = pattern && bool(local[size_t(l)]) == c.layer_local(l);
    if (!pattern) c.local_layers = std::move(local);
  }
  if (c.sliding_window == 0) c.swa_pattern = 0;
}

// Gemma's per-layer-type RoPE (transformers 5): the sliding layers' entry must be unscaled;
// its base becomes rope_theta_local.
void read_hf_gemma_local_rope(const ConfigReader& r, const Json& rope, ModelConfig& c) {
  if (c.sliding_window == 0 || !rope.contains("sliding_attention")) return;
  const Json& s = rope["sliding_attention"];
  if (!s.is_object()) r.fail("rope_parameters['sliding_attention'] is not an object");
  const std::string type = s.contains("rope_type") && s["rope_type"].is_string()
                               ? s["rope_type"].get<std::string>() : "default";
  if (type != "default")
    r.fail("rope_parameters['sliding_attention'] of type '" + type +
           "' is not supported (the local layers' RoPE must be unscaled)");
  const double theta = s.contains("rope_theta") && s["rope_theta"].is_number()
                           ? s["rope_theta"].get<double>() : 10000.0;
  if (!(theta > 0)) r.fail("rope_parameters['sliding_attention'] rope_theta must be > 0");
  c.rope_theta_local = float(theta);
}

}  // namespace sinkscope::hf_detail
