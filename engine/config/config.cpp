// SPDX-License-Identifier: Apache-2.0
// The config struct's helpers: enum spellings, conversion to the engine's settings, range and
// consistency checks, deterministic YAML output and the quality gates. Reading YAML lives in
// config_schema.cpp.
#include "engine/config/config.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/atomic_file.h"

#if SINKSCOPE_HAVE_YAML_CPP
#include <yaml-cpp/yaml.h>
#endif

namespace sinkscope {

// --- enums ------------------------------------------------------------------------------------
const char* to_string(CacheStrategy v) {
  return v == CacheStrategy::kFull ? "full" : "sliding_window";
}
const char* to_string(PositionMode v) {
  return v == PositionMode::kCache ? "cache" : "original";
}
const char* to_string(AttentionDtype v) {
  switch (v) {
    case AttentionDtype::kBfloat16:
      return "bfloat16";
    case AttentionDtype::kFloat16:
      return "float16";
    case AttentionDtype::kFloat32:
      return "float32";
  }
  return "?";
}
const char* to_string(KvQuantDtype v) {
  return v == KvQuantDtype::kInt8 ? "int8" : "int4";
}
const char* to_string(AttentionType v) {
  return v == AttentionType::kDense ? "dense" : "dynamic_sparse";
}
const char* to_string(ThresholdMode v) {
  return v == ThresholdMode::kFixed ? "fixed" : "length_scaled";
}
int dtype_bytes(AttentionDtype v) {
  return v == AttentionDtype::kFloat32 ? 4 : 2;
}

AttentionSettings to_attention_settings(const SinkScopeConfig& c) {
  AttentionSettings s = c.inference.attention;
  s.block_size = c.inference.cache.block_size;  // the schema keeps it with the cache
  return s;
}

int64_t request_token_limit(const SinkScopeConfig& c) {
  const int64_t lim = c.inference.cache.per_request_limit_tokens;
  return lim > 0 ? lim : c.inference.max_context_length;
}

// --- equality ---------------------------------------------------------------------------------
bool same_number(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

bool ValidationResults::operator==(const ValidationResults& o) const {
  return same_number(ppl_delta_pct, o.ppl_delta_pct) && same_number(kl_mean, o.kl_mean) &&
         same_number(top1_agreement, o.top1_agreement) && same_number(rouge_l, o.rouge_l) &&
         same_number(passkey_accuracy, o.passkey_accuracy) &&
         same_number(baseline_passkey_accuracy, o.baseline_passkey_accuracy) &&
         same_number(sparsity_prefill, o.sparsity_prefill) &&
         same_number(sparsity_decode, o.sparsity_decode) && same_number(ttft_ms, o.ttft_ms) &&
         same_number(tpot_ms, o.tpot_ms) && same_number(peak_kv_mib, o.peak_kv_mib);
}

bool QualityGates::operator==(const QualityGates& o) const {
  return same_number(ppl_delta_pct_max, o.ppl_delta_pct_max) &&
         same_number(similarity_min, o.similarity_min);
}

// --- numbers as text --------------------------------------------------------------------------
namespace {

// Shortest text that reads back to the same double, spelled so that YAML 1.1 and 1.2 readers
// both see a float: "5.0", "0.02", "1.0e-05", ".nan", ".inf".
std::string yaml_float(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  const size_t e = s.find_first_of("eE");
  if (s.find('.') == std::string::npos) s.insert(e == std::string::npos ? s.size() : e, ".0");
  return s;
}

// Numbers in messages: the shortest round-trip text, without YAML's spelling.
std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

bool is_sha256_text(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char ch) {
           return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
         });
}

class Checker {
 public:
  explicit Checker(std::vector<ConfigProblem>& out) : m_out(out) {}
  void error(std::string key, std::string message) {
    m_out.push_back({Severity::kError, std::move(key), 0, 0, std::move(message)});
  }
  void warning(std::string key, std::string message) {
    m_out.push_back({Severity::kWarning, std::move(key), 0, 0, std::move(message)});
  }
  void int_range(const std::string& key, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      error(key, std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  }
  void one_of(const std::string& key, int64_t v, std::initializer_list<int64_t> allowed) {
    if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return;
    std::string list;
    for (int64_t a : allowed) list += (list.empty() ? "" : ", ") + std::to_string(a);
    error(key, std::to_string(v) + " is not allowed (allowed: " + list + ")");
  }
  // NaN allowed ("not measured"); otherwise finite and in [lo, hi].
  void metric(const std::string& key, double v, double lo, double hi) {
    if (std::isnan(v)) return;
    if (!std::isfinite(v) || v < lo || v > hi)
      error(key,
            num(v) + " is out of range [" + num(lo) + ", " + num(hi) + "] (.nan: not measured)");
  }
  void sha(const std::string& key, const std::string& v) {
    if (!v.empty() && !is_sha256_text(v))
      error(key, "'" + v.substr(0, 80) + "' is not a sha256 (expected 64 hex digits, or empty)");
  }

 private:
  std::vector<ConfigProblem>& m_out;
};

}  // namespace

// --- checks -----------------------------------------------------------------------------------
std::vector<ConfigProblem> check_config(const SinkScopeConfig& c) {
  std::vector<ConfigProblem> out;
  Checker k(out);
  if (c.sinkscope_config_version != kConfigVersion)
    k.error("sinkscope_config_version",
            std::to_string(c.sinkscope_config_version) + " is not supported (allowed: 1)");
  k.sha("model.sha256", c.model.sha256);
  if (c.model.architecture.empty()) k.error("model.architecture", "must not be empty");

  const InferenceSection& in = c.inference;
  k.int_range("inference.max_context_length", in.max_context_length, 1, kConfigMaxTokens);
  const CacheSection& cache = in.cache;
  k.int_range("inference.cache.window_size", cache.window_size, 1, kConfigMaxTokens);
  if (cache.sink_keep_count < 0 || cache.sink_keep_count > kConfigMaxSinkKeep) {
    k.int_range("inference.cache.sink_keep_count", cache.sink_keep_count, 0, kConfigMaxSinkKeep);
  } else if (cache.sink_keep_count > cache.window_size && cache.window_size >= 1) {
    k.error("inference.cache.sink_keep_count",
            std::to_string(cache.sink_keep_count) + " is out of range [0, " +
                std::to_string(cache.window_size) + "]: it may not exceed window_size (" +
                std::to_string(cache.window_size) + ")");
  }
  k.one_of("inference.cache.block_size", cache.block_size, {64, 128});
  if (in.max_context_length >= 1)
    k.int_range("inference.cache.per_request_limit_tokens", cache.per_request_limit_tokens, 0,
                in.max_context_length);
  k.int_range("inference.cache.global_cache_limit_mib", cache.global_cache_limit_mib, 0,
              kConfigMaxMib);

  const AttentionSection& a = in.attention;
  for (const auto& [name, v] : {std::pair{"threshold_prefill", a.threshold_prefill},
                                std::pair{"threshold_decode", a.threshold_decode}}) {
    const std::string key = std::string("inference.attention.") + name;
    if (!std::isfinite(v)) {
      k.error(key, num(v) + " is not a finite number");
    } else if (a.threshold_mode == ThresholdMode::kFixed && (v < 0.0 || v >= 1.0)) {
      k.error(key, num(v) + " is out of range [0, 1) for threshold_mode fixed (lambda)");
    } else if (a.threshold_mode == ThresholdMode::kLengthScaled &&
               (v < 0.0 || v > double(kConfigMaxTokens))) {
      k.error(key, num(v) + " is out of range [0, " + std::to_string(kConfigMaxTokens) +
                       "] for threshold_mode length_scaled (c, lambda = c / L_kv)");
    }
  }
  k.int_range("inference.attention.min_sequence_length", a.min_sequence_length, 0,
              kConfigMaxTokens);
  k.one_of("inference.quantization.group_size", in.quantization.group_size, {32, 64, 128});

  if (c.validation) {
    const ValidationSection& v = *c.validation;
    if (v.baseline != "dense")
      k.error("validation.baseline", "'" + v.baseline + "' is not one of: dense");
    k.int_range("validation.dataset.samples", v.dataset.samples, 0, int64_t(1) << 40);
    k.sha("validation.dataset.sha256", v.dataset.sha256);
    const ValidationResults& r = v.results;
    const std::string p = "validation.results.";
    const double big = 1e12;
    k.metric(p + "ppl_delta_pct", r.ppl_delta_pct, -100.0, big);
    k.metric(p + "kl_mean", r.kl_mean, 0.0, big);
    k.metric(p + "top1_agreement", r.top1_agreement, 0.0, 1.0);
    k.metric(p + "rouge_l", r.rouge_l, 0.0, 1.0);
    k.metric(p + "passkey_accuracy", r.passkey_accuracy, 0.0, 1.0);
    k.metric(p + "baseline_passkey_accuracy", r.baseline_passkey_accuracy, 0.0, 1.0);
    k.metric(p + "sparsity_prefill", r.sparsity_prefill, 0.0, 1.0);
    k.metric(p + "sparsity_decode", r.sparsity_decode, 0.0, 1.0);
    k.metric(p + "ttft_ms", r.ttft_ms, 0.0, big);
    k.metric(p + "tpot_ms", r.tpot_ms, 0.0, big);
    k.metric(p + "peak_kv_mib", r.peak_kv_mib, 0.0, big);
    const double pm = v.gates.ppl_delta_pct_max, sm = v.gates.similarity_min;
    if (!std::isfinite(pm) || pm < 0.0 || pm > 1000.0)
      k.error("validation.gates.ppl_delta_pct_max", num(pm) + " is out of range [0, 1000]");
    if (!std::isfinite(sm) || sm < 0.0 || sm > 1.0)
      k.error("validation.gates.similarity_min", num(sm) + " is out of range [0, 1]");
    if (v.passed) {
      const GateReport g = evaluate_gates(r, v.gates);
      if (!g.passed)
        k.error("validation.passed", "true, but the results fail the gates: " + g.summary());
    }
  }
  return out;
}

std::vector<ConfigProblem> check_against_model(const SinkScopeConfig& c, int head_dim,
                                               int64_t n_ctx_train) {
  std::vector<ConfigProblem> out;
  Checker k(out);
  const QuantizationSection& q = c.inference.quantization;
  if (q.enabled && head_dim > 0 && head_dim % q.group_size != 0)
    k.error("inference.quantization.group_size",
            std::to_string(q.group_size) + " does not divide the model's head_dim (" +
                std::to_string(head_dim) + "): groups are runs of one head's K or V vector");
  if (n_ctx_train > 0 && c.inference.max_context_length > n_ctx_train)
    k.warning("inference.max_context_length",
              std::to_string(c.inference.max_context_length) +
                  " exceeds the model's trained context (" + std::to_string(n_ctx_train) +
                  "); quality beyond it is not what the model was trained for");
  return out;
}

// --- problems ---------------------------------------------------------------------------------
std::string format_problem(const ConfigProblem& p, std::string_view source) {
  std::string s;
  if (!source.empty()) s += std::string(source) + ":";
  if (p.line > 0) s += std::to_string(p.line) + ":" + std::to_string(p.column) + ":";
  if (!s.empty()) s += " ";
  s += p.severity == Severity::kError ? "error: " : "warning: ";
  if (!p.key.empty()) s += p.key + ": ";
  return s + p.message;
}

size_t ConfigParseResult::error_count() const {
  return static_cast<size_t>(std::count_if(problems.begin(), problems.end(), [](const auto& p) {
    return p.severity == Severity::kError;
  }));
}
bool ConfigParseResult::ok() const {
  return error_count() == 0;
}

ConfigParseResult load_config_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error("cannot read " + path.string() + ": it is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw std::runtime_error("cannot read " + path.string() + ": read error");
  return parse_config(ss.str());
}

SinkScopeConfig load_config_or_throw(const std::filesystem::path& path) {
  ConfigParseResult r = load_config_file(path);
  if (r.ok()) return r.config;
  std::string msg = path.string() + " is not a valid config:";
  for (const ConfigProblem& p : r.problems)
    if (p.severity == Severity::kError) msg += "\n  " + format_problem(p, path.string());
  throw ConfigError(msg, std::move(r.problems));
}

// --- writing ----------------------------------------------------------------------------------
namespace {

#if SINKSCOPE_HAVE_YAML_CPP

// The config as one YAML::Emitter block mapping: yaml-cpp does the layout and the quoting.
// Strings are double-quoted so that no value can read back as a number, bool or null; floats are
// yaml_float()'s text written as a plain scalar. yaml-cpp writes UTF-8 text: bytes that are not
// UTF-8 come out as U+FFFD, which is why the reader refuses them (config_schema.cpp).
class YamlOut {
 public:
  YamlOut() { m_y << YAML::BeginMap; }
  void begin(const char* key) { m_y << YAML::Key << key << YAML::Value << YAML::BeginMap; }
  void end() { m_y << YAML::EndMap; }
  void str(const char* key, const std::string& v) {
    m_y << YAML::Key << key << YAML::Value << YAML::DoubleQuoted << v;
  }
  void word(const char* key, const char* v) { m_y << YAML::Key << key << YAML::Value << v; }
  void integer(const char* key, int64_t v) { m_y << YAML::Key << key << YAML::Value << v; }
  void real(const char* key, double v) {
    m_y << YAML::Key << key << YAML::Value << yaml_float(v);
  }
  void boolean(const char* key, bool v) { m_y << YAML::Key << key << YAML::Value << v; }
  std::string take() {
    m_y << YAML::EndMap;
    if (!m_y.good()) throw std::logic_error("format_config: " + m_y.GetLastError());
    return std::string(m_y.c_str(), m_y.size()) + "\n";
  }

 private:
  YAML::Emitter m_y;
};

#else  // !SINKSCOPE_HAVE_YAML_CPP: builds without yaml-cpp (the GPU machines) still write configs.

// The same block layout written by hand: two spaces per level, strings double-quoted with C-style
// escapes. Both builds write the same text for the same config, except for control characters
// other than \t \n \r, which the two escape differently but which read back the same.
std::string yaml_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

class YamlOut {
 public:
  void begin(const char* key) {
    line(key) += ":\n";
    ++m_depth;
  }
  void end() { --m_depth; }
  void str(const char* key, std::string_view v) { line(key) += ": " + yaml_string(v) + "\n"; }
  void word(const char* key, const char* v) { line(key) += std::string(": ") + v + "\n"; }
  void integer(const char* key, int64_t v) { line(key) += ": " + std::to_string(v) + "\n"; }
  void real(const char* key, double v) { line(key) += ": " + yaml_float(v) + "\n"; }
  void boolean(const char* key, bool v) { word(key, v ? "true" : "false"); }
  std::string take() { return std::move(m_out); }

 private:
  std::string& line(const char* key) {
    m_out.append(size_t(m_depth) * 2, ' ');
    m_out += key;
    return m_out;
  }
  std::string m_out;
  int m_depth = 0;
};

#endif

}  // namespace

std::string format_config(const SinkScopeConfig& c) {
  YamlOut y;
  y.integer("sinkscope_config_version", c.sinkscope_config_version);
  y.begin("model");
  y.str("path", c.model.path);
  y.str("sha256", c.model.sha256);
  y.str("architecture", c.model.architecture);
  y.end();

  const InferenceSection& in = c.inference;
  y.begin("inference");
  y.integer("max_context_length", in.max_context_length);
  y.begin("cache");
  y.word("strategy", to_string(in.cache.strategy));
  y.integer("window_size", in.cache.window_size);
  y.integer("sink_keep_count", in.cache.sink_keep_count);
  y.word("position_mode", to_string(in.cache.position_mode));
  y.integer("block_size", in.cache.block_size);
  y.integer("per_request_limit_tokens", in.cache.per_request_limit_tokens);
  y.integer("global_cache_limit_mib", in.cache.global_cache_limit_mib);
  y.end();
  y.begin("attention");
  y.word("dtype", to_string(in.attention.dtype));
  y.word("type", to_string(in.attention.type));
  y.word("threshold_mode", to_string(in.attention.threshold_mode));
  y.real("threshold_prefill", in.attention.threshold_prefill);
  y.real("threshold_decode", in.attention.threshold_decode);
  y.integer("min_sequence_length", in.attention.min_sequence_length);
  y.boolean("skip_value_load", in.attention.skip_value_load);
  y.boolean("skip_softmax_exp", in.attention.skip_softmax_exp);
  y.end();
  y.begin("quantization");
  y.boolean("enabled", in.quantization.enabled);
  y.word("kv_dtype", to_string(in.quantization.kv_dtype));
  y.integer("group_size", in.quantization.group_size);
  y.boolean("protect_sink_positions", in.quantization.protect_sink_positions);
  y.end();
  y.end();

  if (c.validation) {
    const ValidationSection& v = *c.validation;
    y.begin("validation");
    y.str("baseline", v.baseline);
    y.begin("dataset");
    y.str("name", v.dataset.name);
    y.integer("samples", v.dataset.samples);
    y.str("sha256", v.dataset.sha256);
    y.end();
    const ValidationResults& r = v.results;
    y.begin("results");
    y.real("ppl_delta_pct", r.ppl_delta_pct);
    y.real("kl_mean", r.kl_mean);
    y.real("top1_agreement", r.top1_agreement);
    y.real("rouge_l", r.rouge_l);
    y.real("passkey_accuracy", r.passkey_accuracy);
    y.real("baseline_passkey_accuracy", r.baseline_passkey_accuracy);
    y.real("sparsity_prefill", r.sparsity_prefill);
    y.real("sparsity_decode", r.sparsity_decode);
    y.real("ttft_ms", r.ttft_ms);
    y.real("tpot_ms", r.tpot_ms);
    y.real("peak_kv_mib", r.peak_kv_mib);
    y.end();
    y.begin("gates");
    y.real("ppl_delta_pct_max", v.gates.ppl_delta_pct_max);
    y.real("similarity_min", v.gates.similarity_min);
    y.end();
    y.boolean("passed", v.passed);
    y.end();
  }
  if (!c.provenance.empty()) {
    y.begin("provenance");
    y.str("engine_version", c.provenance.engine_version);
    y.str("git_sha", c.provenance.git_sha);
    y.str("device", c.provenance.device);
    y.str("created", c.provenance.created);
    y.end();
  }
  return y.take();
}

void save_config(const std::filesystem::path& path, const SinkScopeConfig& c) {
  write_file_atomic(path, format_config(c));
}

// --- gates ------------------------------------------------------------------------------------
namespace {

// value <= limit (upper) or value >= limit (lower); NaN on either side fails.
GateOutcome gate(const char* name, double value, const char* limit_name, double limit, bool upper) {
  GateOutcome g;
  g.name = name;
  g.value = value;
  g.limit = limit;
  if (std::isnan(value)) {
    g.reason = std::string(name) + " is NaN (not measured, or the run diverged)";
  } else if (std::isnan(limit)) {
    g.reason = std::string(limit_name) + " is NaN, so " + name + " cannot be judged";
  } else {
    g.passed = upper ? value <= limit : value >= limit;
    g.reason = std::string(name) + " " + num(value) +
               (g.passed ? (upper ? " <= " : " >= ") : (upper ? " > " : " < ")) + limit_name + " " +
               num(limit);
  }
  return g;
}

}  // namespace

GateReport evaluate_gates(const ValidationResults& r, const QualityGates& g,
                          double baseline_passkey_accuracy) {
  GateReport rep;
  rep.gates.push_back(
      gate("ppl_delta_pct", r.ppl_delta_pct, "ppl_delta_pct_max", g.ppl_delta_pct_max, true));
  rep.gates.push_back(gate("rouge_l", r.rouge_l, "similarity_min", g.similarity_min, false));
  rep.gates.push_back(
      gate("top1_agreement", r.top1_agreement, "similarity_min", g.similarity_min, false));
  rep.gates.push_back(gate("passkey_accuracy", r.passkey_accuracy, "baseline_passkey_accuracy",
                           baseline_passkey_accuracy, false));
  rep.passed = std::all_of(rep.gates.begin(), rep.gates.end(), [](auto& o) { return o.passed; });
  return rep;
}

GateReport evaluate_gates(const ValidationResults& r, const QualityGates& g) {
  return evaluate_gates(r, g, r.baseline_passkey_accuracy);
}

std::string GateReport::summary() const {
  std::string s;
  for (const GateOutcome& g : gates)
    if (!g.passed) s += (s.empty() ? "" : "; ") + g.reason;
  return s.empty() ? "all gates passed" : s;
}

}  // namespace sinkscope
