// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/sweep.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

namespace sinkscope {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

bool to_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return errno == 0 && end == s.c_str() + s.size() && std::isfinite(out);
}

bool to_int(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  out = std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && end == s.c_str() + s.size();
}

const std::set<std::string>& known_keys() {
  static const std::set<std::string> k = {"lambda", "lambda_prefill", "lambda_decode", "mode",
                                          "min_seq", "window", "sinks", "position", "block",
                                          "kv", "group", "protect"};
  return k;
}

// Checks one value's syntax for its key (ranges are check_config()'s job).
void check_value(const std::string& key, const std::string& v) {
  double d;
  int64_t i;
  auto bad = [&](const char* what) {
    return GridError("grid: " + key + "=" + v + ": expected " + what);
  };
  if (key == "lambda" || key == "lambda_prefill" || key == "lambda_decode") {
    if (!to_double(v, d) || d < 0) throw bad("a number >= 0");
  } else if (key == "mode") {
    if (v != "fixed" && v != "length_scaled") throw bad("fixed or length_scaled");
  } else if (key == "window") {
    if (v != "full" && (!to_int(v, i) || i < 0)) throw bad("a token count or 'full'");
  } else if (key == "min_seq" || key == "sinks" || key == "block" || key == "group") {
    if (!to_int(v, i) || i < 0) throw bad("an integer >= 0");
  } else if (key == "position") {
    if (v != "cache" && v != "original") throw bad("cache or original");
  } else if (key == "kv") {
    if (v != "off" && v != "int8" && v != "int4") throw bad("off, int8 or int4");
  } else if (key == "protect") {
    if (v != "true" && v != "false") throw bad("true or false");
  }
}

}  // namespace

std::vector<GridAxis> parse_grid(std::string_view text, size_t max_points) {
  std::vector<GridAxis> axes;
  std::set<std::string> seen;
  size_t points = 1;
  while (!text.empty()) {
    const size_t semi = text.find(';');
    const std::string_view part = trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view() : text.substr(semi + 1);
    if (part.empty()) continue;
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos)
      throw GridError("grid: '" + std::string(part) + "' has no '=' (expected key=v1,v2,...)");
    GridAxis a;
    a.key = std::string(trim(part.substr(0, eq)));
    if (!known_keys().count(a.key))
      throw GridError("grid: unknown key '" + a.key +
                      "' (known: lambda, lambda_prefill, lambda_decode, mode, min_seq, window, "
                      "sinks, position, block, kv, group, protect)");
    if (!seen.insert(a.key).second) throw GridError("grid: key '" + a.key + "' is given twice");
    std::string_view vals = part.substr(eq + 1);
    while (true) {
      const size_t comma = vals.find(',');
      const std::string v(trim(vals.substr(0, comma)));
      if (v.empty()) throw GridError("grid: " + a.key + ": empty value");
      check_value(a.key, v);
      if (std::find(a.values.begin(), a.values.end(), v) != a.values.end())
        throw GridError("grid: " + a.key + ": value " + v + " is given twice");
      a.values.push_back(v);
      if (comma == std::string_view::npos) break;
      vals.remove_prefix(comma + 1);
    }
    points *= a.values.size();
    if (points > max_points)
      throw GridError("grid: more than " + std::to_string(max_points) + " points");
    axes.push_back(std::move(a));
  }
  if (axes.empty()) throw GridError("grid: no axes (expected e.g. \"lambda=0.001,0.01;window=512,2048\")");
  return axes;
}

std::vector<GridPoint> expand_grid(const std::vector<GridAxis>& axes) {
  std::vector<GridPoint> out(1);
  for (const auto& a : axes) {
    std::vector<GridPoint> next;
    for (const auto& p : out)
      for (const auto& v : a.values) {
        GridPoint q = p;
        q.emplace_back(a.key, v);
        next.push_back(std::move(q));
      }
    out = std::move(next);
  }
  return out;
}

std::string describe(const GridPoint& p) {
  std::string s;
  for (const auto& [k, v] : p) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

SinkScopeConfig apply_point(const SinkScopeConfig& base, const GridPoint& p) {
  SinkScopeConfig c = base;
  c.validation.reset();
  c.provenance = {};
  auto& att = c.inference.attention;
  auto& cache = c.inference.cache;
  auto& q = c.inference.quantization;
  for (const auto& [k, v] : p) {
    double d = 0;
    int64_t i = 0;
    if (k == "lambda") {
      to_double(v, d);
      att.type = d > 0 ? AttentionType::kDynamicSparse : AttentionType::kDense;
      att.threshold_prefill = att.threshold_decode = d;
    } else if (k == "lambda_prefill") {
      to_double(v, d);
      att.type = AttentionType::kDynamicSparse;
      att.threshold_prefill = d;
    } else if (k == "lambda_decode") {
      to_double(v, d);
      att.type = AttentionType::kDynamicSparse;
      att.threshold_decode = d;
    } else if (k == "mode") {
      att.threshold_mode = v == "fixed" ? ThresholdMode::kFixed : ThresholdMode::kLengthScaled;
    } else if (k == "min_seq") {
      to_int(v, i);
      att.min_sequence_length = i;
    } else if (k == "window") {
      if (v == "full" || (to_int(v, i) && i == 0)) {
        cache.strategy = CacheStrategy::kFull;
      } else {
        to_int(v, i);
        cache.strategy = CacheStrategy::kSlidingWindow;
        cache.window_size = i;
      }
    } else if (k == "sinks") {
      to_int(v, i);
      cache.sink_keep_count = i;
    } else if (k == "position") {
      cache.position_mode = v == "cache" ? PositionMode::kCache : PositionMode::kOriginal;
    } else if (k == "block") {
      to_int(v, i);
      cache.block_size = int(i);
    } else if (k == "kv") {
      q.enabled = v != "off";
      if (v == "int8") q.kv_dtype = KvQuantDtype::kInt8;
      if (v == "int4") q.kv_dtype = KvQuantDtype::kInt4;
    } else if (k == "group") {
      to_int(v, i);
      q.group_size = int(i);
    } else if (k == "protect") {
      q.protect_sink_positions = v == "true";
    }
  }
  return c;
}

namespace {

std::vector<bool> front(const std::vector<double>& x, const std::vector<double>& y, bool max_x) {
  const size_t n = x.size();
  std::vector<bool> on(n, false);
  for (size_t i = 0; i < n && i < y.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) continue;
    bool dominated = false;
    for (size_t j = 0; j < n && !dominated; ++j) {
      if (j == i || std::isnan(x[j]) || std::isnan(y[j])) continue;
      const bool x_ge = max_x ? x[j] >= x[i] : x[j] <= x[i];
      const bool x_gt = max_x ? x[j] > x[i] : x[j] < x[i];
      dominated = x_ge && y[j] <= y[i] && (x_gt || y[j] < y[i]);
    }
    on[i] = !dominated;
  }
  return on;
}

}  // namespace

std::vector<bool> pareto_front_max_min(const std::vector<double>& x, const std::vector<double>& y) {
  return front(x, y, true);
}

std::vector<bool> pareto_front_min_min(const std::vector<double>& x, const std::vector<double>& y) {
  return front(x, y, false);
}

}  // namespace sinkscope
