// SPDX-License-Identifier: Apache-2.0
// The exported config file (schema in docs/config.md): the settings a run
// used and, once validated, the evidence that they hold up against the dense baseline.
//
//  - SinkScopeConfig mirrors the YAML schema key for key; every member's default is the value an
//    omitted key takes, so a file may hold only the blocks it changes.
//  - parse_config() reads YAML (yaml-cpp) and collects every problem with its full key path,
//    line and column; format_config() writes deterministic YAML in schema order that parses back
//    to the same struct; save_config() writes it atomically.
//  - evaluate_gates() applies the quality gates to measured metrics.
//
// Deployment-guide spellings are accepted with a warning and normalised (see config_schema.cpp):
// attention.threshold / sparse_threshold (both phases), attention.enable / enable_sparse,
// attention.block_size (-> cache.block_size), cache.global_cache_limit (a size such as "8GiB").
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/attention.h"

namespace sinkscope {

inline constexpr int kConfigVersion = 1;
// Upper bounds for token counts and memory sizes: large enough for any model we can load,
// small enough that products of them cannot overflow int64.
inline constexpr int64_t kConfigMaxTokens = int64_t(1) << 24;  // 16 M tokens
inline constexpr int64_t kConfigMaxMib = int64_t(1) << 24;     // 16 TiB
inline constexpr int kConfigMaxSinkKeep = 1024;

enum class CacheStrategy { kFull, kSlidingWindow };
enum class PositionMode { kCache, kOriginal };
enum class KvQuantDtype { kInt8, kInt4 };

struct ModelSection {
  std::string path;    // GGUF file; empty: the default model
  std::string sha256;  // empty or 64 hex digits
  std::string architecture = "llama";
  bool operator==(const ModelSection&) const = default;
};

struct CacheSection {
  CacheStrategy strategy = CacheStrategy::kFull;  // full: the dense baseline's cache
  int64_t window_size = 4096;                     // W, >= 1 (used by sliding_window)
  int64_t sink_keep_count = 4;                    // S, <= W and <= 1024
  PositionMode position_mode = PositionMode::kCache;
  int block_size = 64;                   // KV page = attention tile: 64 | 128
  int64_t per_request_limit_tokens = 0;  // 0: max_context_length; else <= it
  int64_t global_cache_limit_mib = 0;    // 0: no global limit
  bool operator==(const CacheSection&) const = default;
};

// The attention block is the engine's own AttentionSettings (engine/backend/attention.h).
using AttentionSection = AttentionSettings;

struct QuantizationSection {
  bool enabled = false;
  KvQuantDtype kv_dtype = KvQuantDtype::kInt8;
  // Elements per 16-bit scale along one head's K or V vector: 32 | 64 | 128, and it must divide
  // the model's head_dim (checked against the model: check_against_model()).
  int group_size = 32;
  bool protect_sink_positions = true;  // the S sink tokens stay 16-bit
  bool operator==(const QuantizationSection&) const = default;
};

struct InferenceSection {
  int64_t max_context_length = 8192;  // SmolLM2-135M's trained context
  CacheSection cache;
  AttentionSection attention;
  QuantizationSection quantization;
  bool operator==(const InferenceSection&) const = default;
};

// Equality of measured numbers treats NaN as equal to NaN ("not measured" reads back the same).
bool same_number(double a, double b);

struct ValidationResults {
  // NaN: not measured. Fractions are in [0, 1]; times in ms; memory in MiB.
  double ppl_delta_pct = NAN;  // (ppl_variant / ppl_dense - 1) * 100
  double kl_mean = NAN;        // mean next-token KL(dense || variant), nats
  double top1_agreement = NAN;
  double rouge_l = NAN;  // ROUGE-L F1 of greedy generations vs the dense ones
  double passkey_accuracy = NAN;
  // Extension to the schema: the dense baseline's passkey accuracy on the same tasks, so that
  // the "not lower than the baseline" gate can be re-checked from the file alone.
  double baseline_passkey_accuracy = NAN;
  double sparsity_prefill = NAN;
  double sparsity_decode = NAN;
  double ttft_ms = NAN;
  double tpot_ms = NAN;
  double peak_kv_mib = NAN;
  bool operator==(const ValidationResults& o) const;
};

struct QualityGates {
  double ppl_delta_pct_max = 5.0;  // perplexity may rise at most this many percent
  double similarity_min = 0.95;    // applied to rouge_l and top1_agreement
  bool operator==(const QualityGates& o) const;
};

struct DatasetInfo {
  std::string name;
  int64_t samples = 0;
  std::string sha256;  // empty or 64 hex digits
  bool operator==(const DatasetInfo&) const = default;
};

struct ValidationSection {
  std::string baseline = "dense";  // the only baseline: dense attention, full 16-bit cache
  DatasetInfo dataset;
  ValidationResults results;
  QualityGates gates;
  bool passed = false;
  bool operator==(const ValidationSection&) const = default;
};

struct Provenance {
  std::string engine_version;
  std::string git_sha;
  std::string device;
  std::string created;  // ISO 8601, UTC
  bool operator==(const Provenance&) const = default;
  bool empty() const {
    return engine_version.empty() && git_sha.empty() && device.empty() && created.empty();
  }
};

struct SinkScopeConfig {
  int sinkscope_config_version = kConfigVersion;
  ModelSection model;
  InferenceSection inference;
  std::optional<ValidationSection> validation;  // absent on an unvalidated config
  Provenance provenance;
  bool operator==(const SinkScopeConfig&) const = default;
};

// --- enum spellings (the YAML values) ---------------------------------------------------------
const char* to_string(CacheStrategy v);
const char* to_string(PositionMode v);
const char* to_string(AttentionDtype v);
const char* to_string(KvQuantDtype v);
const char* to_string(AttentionType v);
const char* to_string(ThresholdMode v);
int dtype_bytes(AttentionDtype v);  // 2, 2, 4

// The engine's attention settings for this config (block_size comes from the cache section:
// the KV tile is the KV page).
AttentionSettings to_attention_settings(const SinkScopeConfig& c);
// Tokens one request may hold: per_request_limit_tokens, or max_context_length when it is 0.
int64_t request_token_limit(const SinkScopeConfig& c);

// --- problems ---------------------------------------------------------------------------------
enum class Severity { kError, kWarning };

struct ConfigProblem {
  Severity severity = Severity::kError;
  std::string key;      // full key path, e.g. "inference.cache.window_size" ("" for the file)
  int line = 0;         // 1-based; 0 when unknown
  int column = 0;       // 1-based; 0 when unknown
  std::string message;  // e.g. "0 is out of range [1, 16777216]"
};

// "FILE:LINE:COL: error: KEY: MESSAGE" (parts that are unknown are left out).
std::string format_problem(const ConfigProblem& p, std::string_view source = {});

struct ConfigParseResult {
  SinkScopeConfig config;  // defaults where the file had nothing usable
  std::vector<ConfigProblem> problems;
  bool ok() const;  // no errors (warnings allowed)
  size_t error_count() const;
};

// Whether this build can read YAML (yaml-cpp found at configure time).
bool config_yaml_supported();

// Parses and checks a config text. Never throws for bad input: syntax errors, unknown keys, wrong
// types, out-of-range values and contradictions all become problems, every one of them.
ConfigParseResult parse_config(std::string_view yaml_text);

// Reads a file; throws std::runtime_error ("cannot read FILE: ...") when it cannot be read.
ConfigParseResult load_config_file(const std::filesystem::path& path);

// A config that failed to load, with its problems.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& what, std::vector<ConfigProblem> problems)
      : std::runtime_error(what), m_problems(std::move(problems)) {}
  const std::vector<ConfigProblem>& problems() const { return m_problems; }

 private:
  std::vector<ConfigProblem> m_problems;
};

// load_config_file(), throwing ConfigError (listing every error) when the config is invalid.
SinkScopeConfig load_config_or_throw(const std::filesystem::path& path);

// Range and consistency checks on a config built in code (the ones parse_config applies after
// reading the keys). Key paths are filled in; line/column are 0.
std::vector<ConfigProblem> check_config(const SinkScopeConfig& c);

// Checks that need the model: group_size divides head_dim, max_context_length vs the trained
// context (a warning: RoPE models degrade beyond it).
std::vector<ConfigProblem> check_against_model(const SinkScopeConfig& c, int head_dim,
                                               int64_t n_ctx_train);

// --- writing ----------------------------------------------------------------------------------
// Deterministic YAML in schema order; floats in the shortest text that reads back to the same
// double (always with a '.' so YAML 1.1 readers also see a float); strings double-quoted, UTF-8
// (yaml-cpp's emitter); `validation` only when present, `provenance` only when not empty.
std::string format_config(const SinkScopeConfig& c);

// format_config() written atomically (base/atomic_file.h).
void save_config(const std::filesystem::path& path, const SinkScopeConfig& c);

// --- quality gates ----------------------------------------------------------------------------
struct GateOutcome {
  std::string name;  // "ppl_delta_pct", "rouge_l", "top1_agreement", "passkey_accuracy"
  bool passed = false;
  double value = NAN;  // the measured metric
  double limit = NAN;  // the bound it is held to
  std::string reason;  // e.g. "ppl_delta_pct 6.1 > ppl_delta_pct_max 5"
};

struct GateReport {
  bool passed = false;  // every gate passed
  std::vector<GateOutcome> gates;
  std::string summary() const;  // the failed gates' reasons joined by "; " (or "all gates passed")
};

// The gates against the dense baseline (bounds inclusive: a metric exactly at its bound passes):
//  - perplexity:  ppl_delta_pct <= ppl_delta_pct_max;
//  - similarity:  rouge_l >= similarity_min and top1_agreement >= similarity_min. The guide's
//    "similarity of the outputs" is ROUGE-L F1 of greedy generations; top-1 agreement is the same
//    requirement per token under teacher forcing, so both are held to it;
//  - passkey:     passkey_accuracy >= baseline_passkey_accuracy.
// A NaN metric, baseline or bound fails its gate with a reason that says so.
GateReport evaluate_gates(const ValidationResults& results, const QualityGates& gates,
                          double baseline_passkey_accuracy);
// The same with results.baseline_passkey_accuracy as the baseline.
GateReport evaluate_gates(const ValidationResults& results, const QualityGates& gates);

}  // namespace sinkscope
