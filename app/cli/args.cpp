// SPDX-License-Identifier: Apache-2.0
#include "app/cli/args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

namespace sinkscope::cli {

namespace {

std::string quoted(std::string_view s) {
  // Values are echoed in errors; keep them short so a pasted prompt does not flood the terminal.
  constexpr size_t kMax = 40;
  std::string out = "'";
  out += s.size() > kMax ? std::string(s.substr(0, kMax)) + "..." : std::string(s);
  out += "'";
  return out;
}

std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

int64_t parse_int(std::string_view option, std::string_view text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (!text.empty() && text[0] == '+') ++first;  // from_chars rejects a leading '+'
  const auto r = std::from_chars(first, last, v);
  if (text.empty() || r.ptr != last || r.ec == std::errc::invalid_argument)
    throw UsageError(std::string(option) + ": expected an integer, got " + quoted(text));
  if (r.ec == std::errc::result_out_of_range || v < lo || v > hi)
    throw UsageError(std::string(option) + ": " + quoted(text) + " is out of range [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

uint64_t parse_uint64(std::string_view option, std::string_view text) {
  uint64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ptr != text.data() + text.size() || r.ec == std::errc::invalid_argument)
    throw UsageError(std::string(option) + ": expected a non-negative integer, got " +
                     quoted(text));
  if (r.ec == std::errc::result_out_of_range)
    throw UsageError(std::string(option) + ": " + quoted(text) + " does not fit in 64 bits");
  return v;
}

double parse_double(std::string_view option, std::string_view text, double lo, double hi,
                    bool min_exclusive) {
  double v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (!text.empty() && text[0] == '+') ++first;
  const auto r = std::from_chars(first, last, v);
  if (text.empty() || r.ptr != last || r.ec == std::errc::invalid_argument || std::isnan(v))
    throw UsageError(std::string(option) + ": expected a number, got " + quoted(text));
  const bool below = min_exclusive ? !(v > lo) : v < lo;
  if (r.ec == std::errc::result_out_of_range || below || v > hi || !std::isfinite(v))
    throw UsageError(std::string(option) + ": " + quoted(text) + " is out of range " +
                     (min_exclusive ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + "]");
  return v;
}

ArgParser::ArgParser(std::string usage, std::string summary)
    : m_usage(std::move(usage)), m_summary(std::move(summary)) {}

ArgParser& ArgParser::flag(std::string name, std::string help) {
  m_specs.push_back({std::move(name), "", std::move(help), false});
  return *this;
}

ArgParser& ArgParser::option(std::string name, std::string metavar, std::string help) {
  m_specs.push_back({std::move(name), std::move(metavar), std::move(help), true});
  return *this;
}

ArgParser& ArgParser::epilog(std::string text) {
  m_epilog = std::move(text);
  return *this;
}

const ArgParser::Spec* ArgParser::find_spec(std::string_view name) const {
  for (const Spec& s : m_specs)
    if (s.name == name) return &s;
  return nullptr;
}

const ArgParser::Spec& ArgParser::spec_or_throw(std::string_view name) const {
  if (const Spec* s = find_spec(name)) return *s;
  // A programming error (getter for an undeclared option), not a usage error.
  throw std::logic_error("ArgParser: undeclared option " + std::string(name));
}

void ArgParser::parse(std::span<const std::string> args) {
  m_values.clear();
  m_help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      m_help = true;
      return;
    }
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      if (!a.empty() && a[0] == '-' && a != "-")
        throw UsageError("unknown option " + quoted(a) + " (options are long, e.g. --help)");
      throw UsageError("unexpected argument " + quoted(a) +
                       " (values follow their option, e.g. --prompt \"...\")");
    }
    std::string name = a;
    std::optional<std::string> inline_value;
    if (const size_t eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
    }
    const Spec* spec = find_spec(name);
    if (!spec) throw UsageError("unknown option " + quoted(name));
    if (has(name)) throw UsageError(name + " is given more than once");
    if (!spec->takes_value) {
      if (inline_value) throw UsageError(name + " is a flag and takes no value");
      m_values.emplace_back(name, "");
      continue;
    }
    if (inline_value) {
      m_values.emplace_back(name, *inline_value);
      continue;
    }
    // "--prompt --json" is a forgotten value, not a prompt reading "--json".
    if (i + 1 >= args.size() || find_spec(args[i + 1].substr(0, args[i + 1].find('='))) ||
        args[i + 1] == "--help")
      throw UsageError("missing value for " + name + " (expected " + spec->metavar + ")");
    m_values.emplace_back(name, args[++i]);
  }
}

bool ArgParser::has(std::string_view name) const {
  for (const auto& [n, v] : m_values)
    if (n == name) return true;
  return false;
}

std::optional<std::string> ArgParser::get(std::string_view name) const {
  spec_or_throw(name);
  for (const auto& [n, v] : m_values)
    if (n == name) return v;
  return std::nullopt;
}

int64_t ArgParser::get_int(std::string_view name, int64_t fallback, int64_t lo, int64_t hi) const {
  const auto v = get(name);
  return v ? parse_int(name, *v, lo, hi) : fallback;
}

uint64_t ArgParser::get_uint64(std::string_view name, uint64_t fallback) const {
  const auto v = get(name);
  return v ? parse_uint64(name, *v) : fallback;
}

double ArgParser::get_double(std::string_view name, double fallback, double lo, double hi,
                             bool min_exclusive) const {
  const auto v = get(name);
  return v ? parse_double(name, *v, lo, hi, min_exclusive) : fallback;
}

std::string ArgParser::help() const {
  std::ostringstream os;
  os << "Usage: " << m_usage << "\n\n" << m_summary << "\n\nOptions:\n";
  size_t width = 0;
  std::vector<std::string> heads;
  for (const Spec& s : m_specs) {
    heads.push_back(s.takes_value ? s.name + " " + s.metavar : s.name);
    width = std::max(width, heads.back().size());
  }
  heads.push_back("-h, --help");
  width = std::max(width, heads.back().size());
  for (size_t i = 0; i < heads.size(); ++i) {
    const std::string& help = i < m_specs.size() ? m_specs[i].help : "show this help and exit";
    os << "  " << heads[i] << std::string(width - heads[i].size() + 2, ' ') << help << "\n";
  }
  if (!m_epilog.empty()) os << "\n" << m_epilog;
  if (!m_epilog.empty() && m_epilog.back() != '\n') os << "\n";
  return os.str();
}

}  // namespace sinkscope::cli
