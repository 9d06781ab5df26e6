// SPDX-License-Identifier: Apache-2.0
// Reading the config YAML: the schema walk. Every key is looked up in its section's list;
// unknown keys, wrong types and bad enum values become problems with the full key path and the
// line/column yaml-cpp recorded; then check_config() adds range and consistency problems, placed
// at the offending value's position.
//
// Types are strict: a quoted "4096" is a string, not an integer; 4096.0 is not an integer.
// Booleans accept YAML 1.1 spellings too (yes/no/on/off). A null string value reads as "".
// A null section (`cache:` with nothing under it) means "all defaults".
//
// Deployment-guide spellings (accepted with a warning, written back in the schema's spelling):
//  - top-level `cache`, `attention`, `quantization`, `max_context_length` (the guides' snippets
//    sometimes omit `inference:`) -> inference.*;
//  - attention.threshold / attention.sparse_threshold -> both threshold_prefill and
//    threshold_decode, unless those are given;
//  - attention.enable / attention.enable_sparse: false -> type dense; true -> type
//    dynamic_sparse unless type is given (true with type dense is an error);
//  - attention.block_size -> inference.cache.block_size (the KV tile is the KV page);
//  - cache.global_cache_limit: a size ("8GiB", "8192 MiB", "16GB", or a number of MiB). A text
//    that is not a size (the guide's placeholder "按显存预算设定") is a warning and sets no limit.
#include "engine/config/config.h"

#if SINKSCOPE_HAVE_YAML_CPP

#include <yaml-cpp/yaml.h>

#include "engine/config/yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace sinkscope {

bool config_yaml_supported() {
  return true;
}

namespace {

using namespace yaml_read;

// Every canonical key path, to say where a key that is misplaced belongs.
const std::vector<std::string>& all_paths() {
  static const std::vector<std::string> paths = {"sinkscope_config_version",
                                                 "model.path",
                                                 "model.sha256",
                                                 "model.architecture",
                                                 "inference.max_context_length",
                                                 "inference.cache.strategy",
                                                 "inference.cache.window_size",
                                                 "inference.cache.sink_keep_count",
                                                 "inference.cache.position_mode",
                                                 "inference.cache.block_size",
                                                 "inference.cache.per_request_limit_tokens",
                                                 "inference.cache.global_cache_limit_mib",
                                                 "inference.attention.dtype",
                                                 "inference.attention.type",
                                                 "inference.attention.threshold_mode",
                                                 "inference.attention.threshold_prefill",
                                                 "inference.attention.threshold_decode",
                                                 "inference.attention.min_sequence_length",
                                                 "inference.attention.skip_value_load",
                                                 "inference.attention.skip_softmax_exp",
                                                 "inference.quantization.enabled",
                                                 "inference.quantization.kv_dtype",
                                                 "inference.quantization.group_size",
                                                 "inference.quantization.protect_sink_positions",
                                                 "validation.baseline",
                                                 "validation.dataset.name",
                                                 "validation.dataset.samples",
                                                 "validation.dataset.sha256",
                                                 "validation.results.ppl_delta_pct",
                                                 "validation.results.kl_mean",
                                                 "validation.results.top1_agreement",
                                                 "validation.results.rouge_l",
                                                 "validation.results.passkey_accuracy",
                                                 "validation.results.baseline_passkey_accuracy",
                                                 "validation.results.sparsity_prefill",
                                                 "validation.results.sparsity_decode",
                                                 "validation.results.ttft_ms",
                                                 "validation.results.tpot_ms",
                                                 "validation.results.peak_kv_mib",
                                                 "validation.gates.ppl_delta_pct_max",
                                                 "validation.gates.similarity_min",
                                                 "validation.passed",
                                                 "provenance.engine_version",
                                                 "provenance.git_sha",
                                                 "provenance.device",
                                                 "provenance.created"};
  return paths;
}

// Values read through deployment-guide aliases, applied after the canonical keys.
struct Aliases {
  std::optional<double> threshold;
  std::optional<bool> enable;
  std::optional<int> attention_block_size;
  std::optional<int64_t> global_cache_limit_mib;
  Pos threshold_pos, enable_pos, block_pos, limit_pos;
};

const std::vector<std::string> kTopKeys = {"sinkscope_config_version", "model", "inference",
                                           "validation", "provenance"};
const std::vector<std::string> kTopAliases = {"cache", "attention", "quantization",
                                              "max_context_length"};

void read_cache(Reader& r, const YAML::Node& n, const std::string& path, Pos where, CacheSection& c,
                Aliases& al) {
  r.section(
      n, path, where,
      {"strategy", "window_size", "sink_keep_count", "position_mode", "block_size",
       "per_request_limit_tokens", "global_cache_limit_mib"},
      {"global_cache_limit"},
      [&](const std::string& key, const YAML::Node& v, const std::string& p, Pos kp) {
        if (key == "strategy")
          r.enumeration(v, p, kp, c.strategy,
                        {CacheStrategy::kFull, CacheStrategy::kSlidingWindow});
        else if (key == "window_size")
          r.integer(v, p, kp, c.window_size);
        else if (key == "sink_keep_count")
          r.integer(v, p, kp, c.sink_keep_count);
        else if (key == "position_mode")
          r.enumeration(v, p, kp, c.position_mode, {PositionMode::kCache, PositionMode::kOriginal});
        else if (key == "block_size")
          r.small_int(v, p, kp, c.block_size, "allowed: 64, 128");
        else if (key == "per_request_limit_tokens")
          r.integer(v, p, kp, c.per_request_limit_tokens);
        else if (key == "global_cache_limit_mib")
          r.integer(v, p, kp, c.global_cache_limit_mib);
        else if (key == "global_cache_limit") {
          al.limit_pos = pos_of(v.Mark()).first ? pos_of(v.Mark()) : kp;
          if (!v.IsScalar()) {
            r.error(p, al.limit_pos, "expected a size such as \"8GiB\", got " + describe(v));
          } else if (auto mib = size_mib(v.Scalar())) {
            al.global_cache_limit_mib = *mib;
            r.warning(
                p, kp,
                "deployment-guide key; read as global_cache_limit_mib: " + std::to_string(*mib));
          } else {
            r.warning(p, al.limit_pos,
                      describe(v) +
                          " is not a size (e.g. \"8GiB\" or a number of MiB); "
                          "no global cache limit is set: give "
                          "global_cache_limit_mib");
          }
        }
      });
}

void read_attention(Reader& r, const YAML::Node& n, const std::string& path, Pos where,
                    AttentionSection& a, Aliases& al) {
  r.section(
      n, path, where,
      {"dtype", "type", "threshold_mode", "threshold_prefill", "threshold_decode",
       "min_sequence_length", "skip_value_load", "skip_softmax_exp"},
      {"threshold", "sparse_threshold", "enable", "enable_sparse", "block_size"},
      [&](const std::string& key, const YAML::Node& v, const std::string& p, Pos kp) {
        if (key == "dtype")
          r.enumeration(
              v, p, kp, a.dtype,
              {AttentionDtype::kBfloat16, AttentionDtype::kFloat16, AttentionDtype::kFloat32});
        else if (key == "type")
          r.enumeration(v, p, kp, a.type, {AttentionType::kDense, AttentionType::kDynamicSparse});
        else if (key == "threshold_mode")
          r.enumeration(v, p, kp, a.threshold_mode,
                        {ThresholdMode::kFixed, ThresholdMode::kLengthScaled});
        else if (key == "threshold_prefill")
          r.real(v, p, kp, a.threshold_prefill);
        else if (key == "threshold_decode")
          r.real(v, p, kp, a.threshold_decode);
        else if (key == "min_sequence_length")
          r.integer(v, p, kp, a.min_sequence_length);
        else if (key == "skip_value_load")
          r.boolean(v, p, kp, a.skip_value_load);
        else if (key == "skip_softmax_exp")
          r.boolean(v, p, kp, a.skip_softmax_exp);
        else if (key == "threshold" || key == "sparse_threshold") {
          double x = NAN;
          const size_t before = r.problems.size();
          r.real(v, p, kp, x);
          r.given.erase(p);
          if (r.problems.size() != before) return;
          al.threshold = x;
          al.threshold_pos = r.value_pos[p];
          r.warning(p, kp, "deployment-guide key; read as threshold_prefill and threshold_decode");
        } else if (key == "enable" || key == "enable_sparse") {
          bool x = false;
          const size_t before = r.problems.size();
          r.boolean(v, p, kp, x);
          r.given.erase(p);
          if (r.problems.size() != before) return;
          al.enable = x;
          al.enable_pos = kp;
          r.warning(p, kp,
                    std::string("deployment-guide key; read as type: ") +
                        (x ? "dynamic_sparse" : "dense"));
        } else if (key == "block_size") {
          int x = 0;
          const size_t before = r.problems.size();
          r.small_int(v, p, kp, x, "allowed: 64, 128");
          r.given.erase(p);
          if (r.problems.size() != before) return;
          al.attention_block_size = x;
          al.block_pos = r.value_pos[p];
          r.warning(p, kp, "read as inference.cache.block_size (the KV tile is the KV page)");
        }
      });
}

void read_quantization(Reader& r, const YAML::Node& n, const std::string& path, Pos where,
                       QuantizationSection& q) {
  r.section(n, path, where, {"enabled", "kv_dtype", "group_size", "protect_sink_positions"}, {},
            [&](const std::string& key, const YAML::Node& v, const std::string& p, Pos kp) {
              if (key == "enabled")
                r.boolean(v, p, kp, q.enabled);
              else if (key == "kv_dtype")
                r.enumeration(v, p, kp, q.kv_dtype, {KvQuantDtype::kInt8, KvQuantDtype::kInt4});
              else if (key == "group_size")
                r.small_int(v, p, kp, q.group_size, "allowed: 32, 64, 128");
              else if (key == "protect_sink_positions")
                r.boolean(v, p, kp, q.protect_sink_positions);
            });
}

void read_validation(Reader& r, const YAML::Node& n, Pos where, ValidationSection& val) {
  r.section(
      n, "validation", where, {"baseline", "dataset", "results", "gates", "passed"}, {},
      [&](const std::string& key, const YAML::Node& v, const std::string& p, Pos kp) {
        if (key == "baseline")
          r.string(v, p, kp, val.baseline);
        else if (key == "passed")
          r.boolean(v, p, kp, val.passed);
        else if (key == "dataset")
          r.section(
              v, p, kp, {"name", "samples", "sha256"}, {},
              [&](const std::string& k2, const YAML::Node& v2, const std::string& p2, Pos kp2) {
                if (k2 == "name")
                  r.string(v2, p2, kp2, val.dataset.name);
                else if (k2 == "samples")
                  r.integer(v2, p2, kp2, val.dataset.samples);
                else
                  r.string(v2, p2, kp2, val.dataset.sha256);
              });
        else if (key == "gates")
          r.section(
              v, p, kp, {"ppl_delta_pct_max", "similarity_min"}, {},
              [&](const std::string& k2, const YAML::Node& v2, const std::string& p2, Pos kp2) {
                r.real(v2, p2, kp2,
                       k2 == "ppl_delta_pct_max" ? val.gates.ppl_delta_pct_max
                                                 : val.gates.similarity_min);
              });
        else if (key == "results") {
          ValidationResults& res = val.results;
          const std::vector<std::pair<std::string, double*>> fields = {
              {"ppl_delta_pct", &res.ppl_delta_pct},
              {"kl_mean", &res.kl_mean},
              {"top1_agreement", &res.top1_agreement},
              {"rouge_l", &res.rouge_l},
              {"passkey_accuracy", &res.passkey_accuracy},
              {"baseline_passkey_accuracy", &res.baseline_passkey_accuracy},
              {"sparsity_prefill", &res.sparsity_prefill},
              {"sparsity_decode", &res.sparsity_decode},
              {"ttft_ms", &res.ttft_ms},
              {"tpot_ms", &res.tpot_ms},
              {"peak_kv_mib", &res.peak_kv_mib}};
          std::vector<std::string> names;
          for (const auto& f : fields) names.push_back(f.first);
          r.section(
              v, p, kp, names, {},
              [&](const std::string& k2, const YAML::Node& v2, const std::string& p2, Pos kp2) {
                for (const auto& f : fields)
                  if (f.first == k2) r.real(v2, p2, kp2, *f.second);
              });
        }
      });
}

void apply_aliases(Reader& r, SinkScopeConfig& c, const Aliases& al) {
  AttentionSection& a = c.inference.attention;
  const std::string ap = "inference.attention.";
  if (al.threshold) {
    for (auto [name, field] : {std::pair{"threshold_prefill", &a.threshold_prefill},
                               std::pair{"threshold_decode", &a.threshold_decode}}) {
      if (r.given.count(ap + name)) continue;  // the explicit key wins
      *field = *al.threshold;
      r.value_pos[ap + name] = al.threshold_pos;
    }
  }
  if (al.enable) {
    if (!r.given.count(ap + "type")) {
      a.type = *al.enable ? AttentionType::kDynamicSparse : AttentionType::kDense;
    } else if (*al.enable && a.type == AttentionType::kDense) {
      r.error(ap + "enable", al.enable_pos, "true contradicts type: dense");
    } else if (!*al.enable) {
      a.type = AttentionType::kDense;
    }
  }
  const std::string bp = "inference.cache.block_size";
  if (al.attention_block_size) {
    if (!r.given.count(bp)) {
      c.inference.cache.block_size = *al.attention_block_size;
      r.value_pos[bp] = al.block_pos;
    } else if (c.inference.cache.block_size != *al.attention_block_size) {
      r.error(ap + "block_size", al.block_pos,
              std::to_string(*al.attention_block_size) +
                  " contradicts inference.cache.block_size: " +
                  std::to_string(c.inference.cache.block_size));
    }
  }
  const std::string gp = "inference.cache.global_cache_limit_mib";
  if (al.global_cache_limit_mib) {
    if (!r.given.count(gp)) {
      c.inference.cache.global_cache_limit_mib = *al.global_cache_limit_mib;
      r.value_pos[gp] = al.limit_pos;
    } else if (c.inference.cache.global_cache_limit_mib != *al.global_cache_limit_mib) {
      r.error("inference.cache.global_cache_limit", al.limit_pos,
              "contradicts global_cache_limit_mib: " +
                  std::to_string(c.inference.cache.global_cache_limit_mib));
    }
  }
}

// Where a problem from check_config() points: its key's value, else the nearest given parent.
Pos locate(const Reader& r, std::string key) {
  while (!key.empty()) {
    if (auto it = r.value_pos.find(key); it != r.value_pos.end()) return it->second;
    const size_t dot = key.rfind('.');
    key = dot == std::string::npos ? "" : key.substr(0, dot);
  }
  return {0, 0};
}

}  // namespace

ConfigParseResult parse_config(std::string_view text) {
  ConfigParseResult result;
  Reader r(all_paths());
  std::vector<YAML::Node> docs;
  try {
    const std::string yaml(text);
    if (const std::optional<YAML::Mark> m = stalled_at(yaml)) {
      const Pos p = pos_of(*m);
      result.problems.push_back(
          {Severity::kError, "", p.first, p.second, "invalid YAML: unexpected character"});
      return result;
    }
    docs = YAML::LoadAll(yaml);
  } catch (const YAML::Exception& e) {
    const Pos p = pos_of(e.mark);
    result.problems.push_back({Severity::kError, "", p.first, p.second, "invalid YAML: " + e.msg});
    return result;
  }
  if (docs.size() > 1) {
    r.error("", pos_of(docs[1].Mark()),
            "the file holds " + std::to_string(docs.size()) + " YAML documents; expected one");
  }
  SinkScopeConfig& c = result.config;
  Aliases al;
  if (!docs.empty()) {
    const YAML::Node& root = docs[0];
    std::map<std::string, Pos> top_alias_pos;  // "cache" etc. given at the top level
    r.section(
        root, "", {1, 1}, kTopKeys, kTopAliases,
        [&](const std::string& key, const YAML::Node& v, const std::string& p, Pos kp) {
          r.value_pos[p] = kp;
          if (key == "sinkscope_config_version") {
            r.small_int(v, p, kp, c.sinkscope_config_version, "allowed: 1");
          } else if (key == "model") {
            r.section(
                v, p, kp, {"path", "sha256", "architecture"}, {},
                [&](const std::string& k2, const YAML::Node& v2, const std::string& p2, Pos kp2) {
                  r.string(v2, p2, kp2,
                           k2 == "path"     ? c.model.path
                           : k2 == "sha256" ? c.model.sha256
                                            : c.model.architecture);
                });
          } else if (key == "inference") {
            r.section(
                v, p, kp, {"max_context_length", "cache", "attention", "quantization"}, {},
                [&](const std::string& k2, const YAML::Node& v2, const std::string& p2, Pos kp2) {
                  r.value_pos[p2] = kp2;
                  if (top_alias_pos.count(k2))
                    r.error(p2, kp2, "also given at the top level as " + k2);
                  if (k2 == "max_context_length")
                    r.integer(v2, p2, kp2, c.inference.max_context_length);
                  else if (k2 == "cache")
                    read_cache(r, v2, p2, kp2, c.inference.cache, al);
                  else if (k2 == "attention")
                    read_attention(r, v2, p2, kp2, c.inference.attention, al);
                  else
                    read_quantization(r, v2, p2, kp2, c.inference.quantization);
                });
            r.given.insert("inference");
          } else if (key == "validation") {
            c.validation.emplace();
            read_validation(r, v, kp, *c.validation);
          } else if (key == "provenance") {
            r.section(
                v, p, kp, {"engine_version", "git_sha", "device", "created"}, {},
                [&](const std::string& k2, const YAML::Node& v2, const std::string& p2, Pos kp2) {
                  Provenance& pv = c.provenance;
                  r.string(v2, p2, kp2,
                           k2 == "engine_version" ? pv.engine_version
                           : k2 == "git_sha"      ? pv.git_sha
                           : k2 == "device"       ? pv.device
                                                  : pv.created);
                });
          } else {
            // A guide snippet's block without the `inference:` parent.
            const std::string canon = "inference." + key;
            if (r.given.count(canon) || r.value_pos.count(canon))
              r.error(key, kp, "also given as " + canon);
            top_alias_pos[key] = kp;
            r.value_pos[canon] = kp;
            r.warning(key, kp, "read as " + canon);
            if (key == "max_context_length")
              r.integer(v, canon, kp, c.inference.max_context_length);
            else if (key == "cache")
              read_cache(r, v, canon, kp, c.inference.cache, al);
            else if (key == "attention")
              read_attention(r, v, canon, kp, c.inference.attention, al);
            else
              read_quantization(r, v, canon, kp, c.inference.quantization);
          }
        });
  }
  apply_aliases(r, c, al);
  for (ConfigProblem p : check_config(c)) {
    const Pos where = locate(r, p.key);
    p.line = where.first;
    p.column = where.second;
    r.problems.push_back(std::move(p));
  }
  result.problems = std::move(r.problems);
  std::stable_sort(result.problems.begin(), result.problems.end(),
                   [](const ConfigProblem& a, const ConfigProblem& b) {
                     const int la = a.line ? a.line : INT_MAX, lb = b.line ? b.line : INT_MAX;
                     return la != lb ? la < lb : a.column < b.column;
                   });
  return result;
}

}  // namespace sinkscope

#else  // !SINKSCOPE_HAVE_YAML_CPP: the engine still builds; reading configs reports why not.

namespace sinkscope {

bool config_yaml_supported() {
  return false;
}

ConfigParseResult parse_config(std::string_view) {
  ConfigParseResult r;
  r.problems.push_back({Severity::kError, "", 0, 0,
                        "this build has no YAML reader (yaml-cpp was not found at configure "
                        "time; scripts/setup.sh installs libyaml-cpp-dev)"});
  return r;
}

}  // namespace sinkscope

#endif
