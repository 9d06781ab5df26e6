// SPDX-License-Identifier: Apache-2.0
// Reading a Hugging Face config.json (engine/format/hf_checkpoint.cpp): the checked accessors and
// the families' own parts (windows, LongRoPE, Gemma), kept apart from the weight loading.
#pragma once

#include <string>

#include "engine/model/model.h"
#include "engine/util/json_io.h"

namespace sinkscope::hf_detail {

class ConfigReader {
 public:
  ConfigReader(const Json& j, std::string file) : m_j(j), m_file(std::move(file)) {}
  [[noreturn]] void fail(const std::string& what) const { throw ModelError(m_file + ": " + what); }
  bool has(const char* key) const {
    auto it = m_j.find(key);
    return it != m_j.end() && !it->is_null();
  }
  int get_int(const char* key) const {
    if (!has(key)) fail(std::string("missing key '") + key + "'");
    return positive(key, m_j.at(key));
  }
  int get_int_or(const char* key, int fallback) const { return has(key) ? get_int(key) : fallback; }
  double get_float_or(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const Json& v = m_j.at(key);
    if (!v.is_number()) fail(std::string("'") + key + "' is not a number");
    return v.get<double>();
  }
  bool get_bool_or(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const Json& v = m_j.at(key);
    if (!v.is_boolean()) fail(std::string("'") + key + "' is not true or false");
    return v.get<bool>();
  }
  std::string get_string_or(const char* key, std::string fallback) const {
    if (!has(key)) return fallback;
    const Json& v = m_j.at(key);
    if (!v.is_string()) fail(std::string("'") + key + "' is not a string");
    return v.get<std::string>();
  }
  int positive(const std::string& key, const Json& v) const {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (int64_t(1) << 30))
      fail("'" + key + "' = " + v.dump() + " is not an integer in 1 .. 2^30");
    return int(v.get<int64_t>());
  }
  const Json& json() const { return m_j; }

 private:
  const Json& m_j;
  std::string m_file;
};

// A window setting: absent or null = none (0), else an integer >= 0.
int window_value(const ConfigReader& r, const char* key);
// The model's own sliding window as transformers applies it (mistral, phi3, qwen2).
void read_hf_window(const ConfigReader& r, const std::string& type, ModelConfig& c);
// LongRoPE (phi3): orig context, attention factor; the factor lists are checked.
void read_hf_longrope(const ConfigReader& r, const Json& rope, ModelConfig& c);
// Gemma 2 / Gemma 3 text: activation, query scale, soft-caps, window and layer kinds, Q/K norm.
void read_hf_gemma(const ConfigReader& r, ModelConfig& c);
// Gemma's per-layer-type RoPE: the sliding layers' base (unscaled) as rope_theta_local.
void read_hf_gemma_local_rope(const ConfigReader& r, const Json& rope, ModelConfig& c);

}  // namespace sinkscope::hf_detail
