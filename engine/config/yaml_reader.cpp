// SPDX-License-Identifier: Apache-2.0
// Positions, strict scalars and suggestions for the config reader (engine/config/yaml_reader.h).
#include "engine/config/config.h"

#if SINKSCOPE_HAVE_YAML_CPP

#include "engine/config/yaml_reader.h"

#include <yaml-cpp/eventhandler.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

namespace sinkscope::yaml_read {

namespace {
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

bool is_plain_scalar(const YAML::Node& n) {
  return n.Type() == YAML::NodeType::Scalar && n.Tag() != "!" && n.Tag() != "tag:yaml.org,2002:str";
}

}  // namespace

Pos pos_of(const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return {0, 0};
  return {m.line + 1, m.column + 1};
}

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


}  // namespace sinkscope::yaml_read

#endif  // SINKSCOPE_HAVE_YAML_CPP
