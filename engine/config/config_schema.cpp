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

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

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

using Pos = std::pair<int, int>;  // 1-based line, column; {0, 0} unknown

Pos pos_of(const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return {0, 0};
  return {m.line + 1, m.column + 1};
}

// yaml-cpp before 0.8.0 loops forever in LoadAll(), allocating a null document per round, on a
// stray token it cannot start a node with (a lone ',': jbeder/yaml-cpp#1040, fixed upstream by
// #1319; found by tests/fuzz/fuzz_config). A first pass that only records where each document
// starts stops as soon as a document starts where the previous one did, i.e. nothing was consumed.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// Where parsing stalls on a token no node can start with; nullopt when the stream is fine (or
// fails with a YAML::Exception, which the caller's LoadAll() then reports).
std::optional<YAML::Mark> stalled_at(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts d;
  while (parser.HandleNextDocument(d)) {
    const size_t n = d.starts.size();
    if (n >= 2 && d.starts[n - 1].pos == d.starts[n - 2].pos) return d.starts[n - 1];
  }
  return std::nullopt;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The closest candidate within a small edit distance, or "".
std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // A shortened word ("sliding" for "sliding_window") is too far by edits but clearly meant.
  if (best.empty() && word.size() >= 3)
    for (const std::string& c : candidates)
      if (c.rfind(word, 0) == 0) return c;
  return best;
}

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

std::string join(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (s.size() > 60) s = s.substr(0, 60) + "...";
      const bool quoted = n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str";
      return quoted ? "the string \"" + s + "\"" : "'" + s + "'";
    }
    default:
      return "nothing";
  }
}

// Well-formed UTF-8: no stray continuation bytes, no overlong forms, no surrogates, <= U+10FFFF.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if (b >= 0xc2 && b <= 0xdf) {
      n = 1, cp = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
      n = 2, cp = b & 0x0f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      n = 3, cp = b & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= size_t(n)) return false;
    for (int k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3f);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += size_t(n) + 1;
  }
  return true;
}

bool is_plain_scalar(const YAML::Node& n) {
  return n.Type() == YAML::NodeType::Scalar && n.Tag() != "!" && n.Tag() != "tag:yaml.org,2002:str";
}

std::optional<int64_t> scalar_int(const YAML::Node& n, bool* overflow) {
  if (!is_plain_scalar(n)) return std::nullopt;
  const std::string& s = n.Scalar();
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (first != last && *first == '+') ++first;
  if (first == last) return std::nullopt;
  int64_t v = 0;
  const auto r = std::from_chars(first, last, v);
  if (r.ptr != last) return std::nullopt;
  if (r.ec == std::errc::result_out_of_range) {
    *overflow = true;
    return std::nullopt;
  }
  if (r.ec != std::errc()) return std::nullopt;
  return v;
}

std::optional<double> scalar_real(const YAML::Node& n) {
  if (!is_plain_scalar(n)) return std::nullopt;
  const std::string& s = n.Scalar();
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return NAN;
  for (const char* inf : {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"})
    if (s == inf) return INFINITY;
  for (const char* inf : {"-.inf", "-.Inf", "-.INF"})
    if (s == inf) return -INFINITY;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (first != last && *first == '+') ++first;
  if (first == last) return std::nullopt;
  double v = 0;
  const auto r = std::from_chars(first, last, v);
  if (r.ptr != last || r.ec == std::errc::invalid_argument) return std::nullopt;
  // Out of range: from_chars leaves v alone; report it as infinite so the range check names it.
  if (r.ec == std::errc::result_out_of_range) return s[0] == '-' ? -INFINITY : INFINITY;
  return v;
}

std::optional<bool> scalar_bool(const YAML::Node& n) {
  if (!is_plain_scalar(n)) return std::nullopt;
  static const std::set<std::string> yes = {"true", "True", "TRUE", "yes", "Yes",
                                            "YES",  "on",   "On",   "ON"};
  static const std::set<std::string> no = {"false", "False", "FALSE", "no", "No",
                                           "NO",    "off",   "Off",   "OFF"};
  if (yes.count(n.Scalar())) return true;
  if (no.count(n.Scalar())) return false;
  return std::nullopt;
}

// A size in MiB: a number (MiB) or a number with a unit (KiB..TiB binary, KB..TB decimal,
// K/M/G/T binary).
std::optional<int64_t> size_mib(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return std::nullopt;
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + i, v);
  if (r.ptr != text.data() + i || !(v >= 0) || !std::isfinite(v)) return std::nullopt;
  std::string unit = text.substr(i);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char ch) { return std::tolower(ch); });
  static const std::map<std::string, double> mib_per = {{"", 1.0},
                                                        {"m", 1.0},
                                                        {"mib", 1.0},
                                                        {"mb", 1e6 / 1048576.0},
                                                        {"k", 1 / 1024.0},
                                                        {"kib", 1 / 1024.0},
                                                        {"kb", 1e3 / 1048576.0},
                                                        {"g", 1024.0},
                                                        {"gib", 1024.0},
                                                        {"gb", 1e9 / 1048576.0},
                                                        {"t", 1048576.0},
                                                        {"tib", 1048576.0},
                                                        {"tb", 1e12 / 1048576.0}};
  const auto it = mib_per.find(unit);
  if (it == mib_per.end()) return std::nullopt;
  const double mib = std::floor(v * it->second);
  if (mib > 9e15) return std::nullopt;
  return static_cast<int64_t>(mib);
}

class Reader {
 public:
  std::vector<ConfigProblem> problems;
  std::map<std::string, Pos> value_pos;  // canonical key path -> where its value is
  std::set<std::string> given;           // canonical key paths the file set

  void error(const std::string& key, Pos p, std::string msg) {
    problems.push_back({Severity::kError, key, p.first, p.second, std::move(msg)});
  }
  void warning(const std::string& key, Pos p, std::string msg) {
    problems.push_back({Severity::kWarning, key, p.first, p.second, std::move(msg)});
  }

  void mark(const std::string& path, const YAML::Node& v, Pos key_pos) {
    Pos p = pos_of(v.Mark());
    if (p.first == 0 || v.IsNull()) p = key_pos;
    value_pos[path] = p;
    given.insert(path);
  }

  // Walks a mapping: calls handle(key, value, path, key position) for every known key; unknown
  // and duplicate keys are reported. Returns false when the node is not a mapping (or null).
  using Handler =
      std::function<void(const std::string&, const YAML::Node&, const std::string&, Pos)>;
  bool section(const YAML::Node& n, const std::string& path, Pos where,
               const std::vector<std::string>& keys, const std::vector<std::string>& aliases,
               const Handler& handle) {
    if (n.IsNull()) return true;
    if (!n.IsMap()) {
      error(path, pos_of(n.Mark()).first ? pos_of(n.Mark()) : where,
            "expected a mapping of keys, got " + describe(n));
      return false;
    }
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      // Copies: the iterator hands out a temporary pair, references into it would dangle.
      const YAML::Node k = it->first;
      const YAML::Node v = it->second;
      const Pos kp = pos_of(k.Mark());
      if (!k.IsScalar()) {
        error(path, kp, "keys must be plain words, got " + describe(k));
        continue;
      }
      const std::string key = k.Scalar();
      const std::string full = join(path, key);
      if (!seen.insert(key).second) {
        error(full, kp, "duplicate key (each key may appear once)");
        continue;
      }
      const bool known = std::find(keys.begin(), keys.end(), key) != keys.end() ||
                         std::find(aliases.begin(), aliases.end(), key) != aliases.end();
      if (!known) {
        error(full, kp, "unknown key" + suggestion(key, path, keys));
        continue;
      }
      handle(key, v, full, kp);
    }
    return true;
  }

  std::string suggestion(const std::string& key, const std::string& path,
                         const std::vector<std::string>& keys) {
    const std::string near = closest(key, keys);
    if (!near.empty()) return " (did you mean " + near + "?)";
    // The right word in the wrong block?
    for (const std::string& p : all_paths()) {
      const size_t dot = p.rfind('.');
      const std::string leaf = dot == std::string::npos ? p : p.substr(dot + 1);
      if (leaf == key && p != join(path, key)) return " (did you mean " + p + "?)";
    }
    std::string list;
    for (const std::string& k : keys) list += (list.empty() ? "" : ", ") + k;
    return " (expected one of: " + list + ")";
  }

  void integer(const YAML::Node& v, const std::string& path, Pos kp, int64_t& out) {
    mark(path, v, kp);
    bool overflow = false;
    if (auto x = scalar_int(v, &overflow)) {
      out = *x;
    } else if (overflow) {
      error(path, value_pos[path], describe(v) + " is out of range (too large)");
    } else {
      error(path, value_pos[path], "expected an integer, got " + describe(v));
    }
  }
  void small_int(const YAML::Node& v, const std::string& path, Pos kp, int& out,
                 const char* allowed) {
    int64_t x = out;
    const size_t before = problems.size();
    integer(v, path, kp, x);
    if (problems.size() != before) return;
    if (x < INT_MIN || x > INT_MAX) {
      error(path, value_pos[path], std::to_string(x) + " is not allowed (" + allowed + ")");
      return;
    }
    out = static_cast<int>(x);
  }
  void real(const YAML::Node& v, const std::string& path, Pos kp, double& out) {
    mark(path, v, kp);
    if (auto x = scalar_real(v)) {
      out = *x;
    } else {
      error(path, value_pos[path], "expected a number, got " + describe(v));
    }
  }
  void boolean(const YAML::Node& v, const std::string& path, Pos kp, bool& out) {
    mark(path, v, kp);
    if (auto x = scalar_bool(v)) {
      out = *x;
    } else {
      error(path, value_pos[path], "expected true or false, got " + describe(v));
    }
  }
  void string(const YAML::Node& v, const std::string& path, Pos kp, std::string& out) {
    mark(path, v, kp);
    if (v.IsNull()) {
      out.clear();
    } else if (v.IsScalar() && !valid_utf8(v.Scalar())) {
      // YAML text is Unicode, and format_config() could not write these bytes back.
      error(path, value_pos[path], "expected UTF-8 text, got bytes that are not valid UTF-8");
    } else if (v.IsScalar()) {
      out = v.Scalar();
    } else {
      error(path, value_pos[path], "expected a string, got " + describe(v));
    }
  }
  template <typename E>
  void enumeration(const YAML::Node& v, const std::string& path, Pos kp, E& out,
                   std::initializer_list<E> values) {
    mark(path, v, kp);
    std::vector<std::string> names;
    for (E e : values) names.push_back(to_string(e));
    if (v.IsScalar()) {
      for (E e : values)
        if (v.Scalar() == to_string(e)) {
          out = e;
          return;
        }
    }
    std::string list;
    for (const std::string& nme : names) list += (list.empty() ? "" : ", ") + nme;
    std::string msg = describe(v) + " is not one of: " + list;
    if (v.IsScalar())
      if (const std::string near = closest(v.Scalar(), names); !near.empty())
        msg += " (did you mean " + near + "?)";
    error(path, value_pos[path], msg);
  }
};

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
  Reader r;
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
