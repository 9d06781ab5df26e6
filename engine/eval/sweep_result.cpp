// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/sweep_result.h"

#include <cmath>

namespace sinkscope {

SweepFormatError::SweepFormatError(const std::string& key, const std::string& problem)
    : std::runtime_error(key.empty() ? problem : key + ": " + problem),
      m_key(key),
      m_problem(problem) {}

SweepFormatError SweepFormatError::under(const std::string& parent) const {
  return SweepFormatError(m_key.empty() ? parent : parent + "." + m_key, m_problem);
}

namespace {

const Json* member(const Json& o, const char* key) {
  const auto it = o.find(key);
  return it == o.end() ? nullptr : &*it;
}

std::string string_member(const Json& o, const char* key, bool required) {
  const Json* v = member(o, key);
  if (!v && !required) return {};
  if (!v) throw SweepFormatError(key, "missing");
  if (!v->is_string()) throw SweepFormatError(key, "expected a string");
  return v->get<std::string>();
}

bool bool_member(const Json& o, const char* key, bool required) {
  const Json* v = member(o, key);
  if (!v && !required) return false;
  if (!v) throw SweepFormatError(key, "missing");
  if (!v->is_boolean()) throw SweepFormatError(key, "expected true or false");
  return v->get<bool>();
}

// A number, or NaN for null / absent.
double number_member(const Json& o, const char* key) {
  const Json* v = member(o, key);
  if (!v || v->is_null()) return NAN;
  if (!v->is_number()) throw SweepFormatError(key, "expected a number or null");
  return v->get<double>();
}

}  // namespace

void to_json(Json& j, const ValidationResults& r) {
  j = Json::object();
  j["ppl_delta_pct"] = number_or_null(r.ppl_delta_pct);
  j["kl_mean"] = number_or_null(r.kl_mean);
  j["top1_agreement"] = number_or_null(r.top1_agreement);
  j["rouge_l"] = number_or_null(r.rouge_l);
  j["passkey_accuracy"] = number_or_null(r.passkey_accuracy);
  j["baseline_passkey_accuracy"] = number_or_null(r.baseline_passkey_accuracy);
  j["sparsity_prefill"] = number_or_null(r.sparsity_prefill);
  j["sparsity_decode"] = number_or_null(r.sparsity_decode);
  j["ttft_ms"] = number_or_null(r.ttft_ms);
  j["tpot_ms"] = number_or_null(r.tpot_ms);
  j["peak_kv_mib"] = number_or_null(r.peak_kv_mib);
}

void from_json(const Json& j, ValidationResults& r) {
  if (!j.is_object()) throw SweepFormatError("", "expected an object");
  r.ppl_delta_pct = number_member(j, "ppl_delta_pct");
  r.kl_mean = number_member(j, "kl_mean");
  r.top1_agreement = number_member(j, "top1_agreement");
  r.rouge_l = number_member(j, "rouge_l");
  r.passkey_accuracy = number_member(j, "passkey_accuracy");
  r.baseline_passkey_accuracy = number_member(j, "baseline_passkey_accuracy");
  r.sparsity_prefill = number_member(j, "sparsity_prefill");
  r.sparsity_decode = number_member(j, "sparsity_decode");
  r.ttft_ms = number_member(j, "ttft_ms");
  r.tpot_ms = number_member(j, "tpot_ms");
  r.peak_kv_mib = number_member(j, "peak_kv_mib");
}

void to_json(Json& j, const SweepPointResult& p) {
  j = Json::object();
  j["index"] = p.index;
  j["label"] = p.label;
  Json& settings = j["settings"] = Json::object();
  for (const auto& [k, v] : p.settings) settings[k] = v;
  j["valid"] = p.valid;
  if (!p.valid) {
    j["invalid"] = p.invalid;
  } else {
    j["passed"] = p.passed;
    j["results"] = p.results;
    j["gates"] = p.gates;
  }
  j["pareto_sparsity"] = p.pareto_sparsity;
  j["pareto_memory"] = p.pareto_memory;
  j["config_yaml"] = p.config_yaml;
}

void from_json(const Json& j, SweepPointResult& p) {
  if (!j.is_object()) throw SweepFormatError("", "expected an object");
  p = SweepPointResult{};
  const double index = number_member(j, "index");
  p.index = std::isnan(index) ? -1 : int64_t(index);
  p.label = string_member(j, "label", true);
  if (const Json* s = member(j, "settings")) {
    if (!s->is_object()) throw SweepFormatError("settings", "expected an object");
    for (const auto& [k, v] : s->items()) {
      if (!v.is_string()) throw SweepFormatError("settings." + k, "expected a string");
      p.settings.emplace_back(k, v.get<std::string>());
    }
  }
  p.valid = bool_member(j, "valid", true);
  p.invalid = string_member(j, "invalid", false);
  p.passed = bool_member(j, "passed", false);
  p.gates = string_member(j, "gates", false);
  p.pareto_sparsity = bool_member(j, "pareto_sparsity", false);
  p.pareto_memory = bool_member(j, "pareto_memory", false);
  p.config_yaml = string_member(j, "config_yaml", true);
  const Json* res = member(j, "results");
  if (res && res->is_object()) {
    try {
      p.results = res->get<ValidationResults>();
    } catch (const SweepFormatError& e) {
      throw e.under("results");
    }
  } else if (res && !res->is_null()) {
    throw SweepFormatError("results", "expected an object");
  } else if (p.valid) {
    throw SweepFormatError("results", "missing on a valid point");
  }
}

void to_json(Json& j, const SweepResult& s) {
  j = Json::object();
  j["grid"] = s.grid;
  j["dataset"] = s.dataset;
  j["dataset_sha256"] = s.dataset_sha256;
  j["samples"] = s.samples;
  j["model_sha256"] = s.model_sha256;
  j["device"] = s.device;
  j["points"] = s.points;
}

void from_json(const Json& j, SweepResult& s) {
  if (!j.is_object())
    throw SweepFormatError("", "not a sweep result: expected a JSON object with \"points\"");
  const Json* points = member(j, "points");
  if (!points || !points->is_array())
    throw SweepFormatError("points", std::string(points ? "expected an array" : "missing") +
                                         " (is this a `sinkscope-cli sweep --json-out` file?)");
  s = SweepResult{};
  s.grid = string_member(j, "grid", false);
  s.dataset = string_member(j, "dataset", false);
  s.dataset_sha256 = string_member(j, "dataset_sha256", false);
  s.model_sha256 = string_member(j, "model_sha256", false);
  s.device = string_member(j, "device", false);
  const double samples = number_member(j, "samples");
  s.samples = std::isnan(samples) ? 0 : int64_t(samples);
  for (size_t i = 0; i < points->size(); ++i) {
    SweepPointResult p;
    try {
      p = (*points)[i].get<SweepPointResult>();
    } catch (const SweepFormatError& e) {
      throw e.under("points[" + std::to_string(i) + "]");
    }
    if (p.index < 0) p.index = int64_t(i);  // absent: the position in the file
    s.points.push_back(std::move(p));
  }
}

}  // namespace sinkscope
