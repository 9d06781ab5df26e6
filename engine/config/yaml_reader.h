// SPDX-License-Identifier: Apache-2.0
// The generic half of reading the config YAML (engine/config/config_schema.cpp holds the schema
// walk): positions, strict scalar parsing, "did you mean" suggestions, and Reader, which walks a
// mapping against a list of known keys and records every problem with its key path and the
// line/column yaml-cpp recorded. Internal to engine/config; built only with yaml-cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/config/config.h"

namespace sinkscope::yaml_read {

using Pos = std::pair<int, int>;  // 1-based line, column; {0, 0} unknown

Pos pos_of(const YAML::Mark& m);
// Where parsing stalls on a token no node can start with (yaml-cpp < 0.8 loops forever there);
// nullopt when the stream is fine or fails with an exception LoadAll() will report.
std::optional<YAML::Mark> stalled_at(const std::string& text);
// The closest candidate within a small edit distance (or by prefix), or "".
std::string closest(std::string_view word, const std::vector<std::string>& candidates);
std::string join(const std::string& parent, const std::string& key);
// A node as a message names it: null, a list, a mapping, 'plain', the string "quoted".
std::string describe(const YAML::Node& n);
// Well-formed UTF-8: no stray continuation bytes, no overlong forms, no surrogates, <= U+10FFFF.
bool valid_utf8(std::string_view s);
// Strict scalars: a quoted value is a string; 4096.0 is not an integer; YAML 1.1 booleans.
std::optional<int64_t> scalar_int(const YAML::Node& n, bool* overflow);
std::optional<double> scalar_real(const YAML::Node& n);
std::optional<bool> scalar_bool(const YAML::Node& n);
// A size in MiB: a number (MiB) or a number with a unit (KiB..TiB binary, KB..TB decimal,
// K/M/G/T binary); nullopt when the text is not a size.
std::optional<int64_t> size_mib(const std::string& text);

class Reader {
 public:
  // known_paths: every canonical key path of the schema, to say where a misplaced key belongs.
  explicit Reader(const std::vector<std::string>& known_paths) : known_paths(known_paths) {}

  const std::vector<std::string>& known_paths;
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
    for (const std::string& p : known_paths) {
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


}  // namespace sinkscope::yaml_read
