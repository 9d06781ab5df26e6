// SPDX-License-Identifier: Apache-2.0
#include "app/cli/args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include <CLI/CLI.hpp>

namespace sinkscope::cli {

namespace {

std::string quote_value(std::string_view s) {
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
    throw UsageError(std::string(option) + ": expected an integer, got " + quote_value(text));
  if (r.ec == std::errc::result_out_of_range || v < lo || v > hi)
    throw UsageError(std::string(option) + ": " + quote_value(text) + " is out of range [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

uint64_t parse_uint64(std::string_view option, std::string_view text) {
  uint64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ptr != text.data() + text.size() || r.ec == std::errc::invalid_argument)
    throw UsageError(std::string(option) + ": expected a non-negative integer, got " +
                     quote_value(text));
  if (r.ec == std::errc::result_out_of_range)
    throw UsageError(std::string(option) + ": " + quote_value(text) + " does not fit in 64 bits");
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
    throw UsageError(std::string(option) + ": expected a number, got " + quote_value(text));
  const bool below = min_exclusive ? !(v > lo) : v < lo;
  if (r.ec == std::errc::result_out_of_range || below || v > hi || !std::isfinite(v))
    throw UsageError(std::string(option) + ": " + quote_value(text) + " is out of range " +
                     (min_exclusive ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + "]");
  return v;
}

namespace {

// The help layout: "Usage: ..." and the summary first, then the options, then the epilog (the
// app's footer). Names read "-h, --help"; a value option shows its metavar ("--seed S").
class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter(std::string usage, std::string summary)
      : m_usage(std::move(usage)), m_summary(std::move(summary)) {
    label("OPTIONS", "Options");
  }
  std::string make_description(const CLI::App*) const override { return {}; }
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: " + m_usage + "\n\n" + m_summary + "\n";
  }
  std::string make_option_name(const CLI::Option* opt, bool positional) const override {
    if (positional) return CLI::Formatter::make_option_name(opt, positional);
    std::string out;
    for (const auto& n : opt->get_snames()) out += (out.empty() ? "-" : ", -") + n;
    for (const auto& n : opt->get_lnames()) out += (out.empty() ? "--" : ", --") + n;
    return out;
  }
  // -h, --help last, after the command's own options.
  std::string make_group(std::string group, bool positional,
                         std::vector<const CLI::Option*> opts) const override {
    std::stable_partition(opts.begin(), opts.end(), [](const CLI::Option* o) {
      return o->get_lnames() != std::vector<std::string>{"help"};
    });
    return CLI::Formatter::make_group(std::move(group), positional, std::move(opts));
  }
  std::string make_footer(const CLI::App* app) const override {
    const std::string& f = app->get_footer();
    if (f.empty()) return {};
    return f + (f.back() == '\n' ? "" : "\n");  // the options end in a blank line
  }

 private:
  std::string m_usage, m_summary;
};

bool is_help(std::string_view a) { return a == "--help" || a == "-h"; }

}  // namespace

ArgParser::ArgParser(std::string usage, std::string summary)
    : m_app(std::make_unique<CLI::App>()) {
  m_app->formatter(std::make_shared<HelpFormatter>(std::move(usage), std::move(summary)));
  m_app->set_help_flag("-h,--help", "show this help and exit");
  m_app->allow_extras();  // reported by parse() in the CLI's words
}

ArgParser::~ArgParser() = default;
ArgParser::ArgParser(ArgParser&&) noexcept = default;
ArgParser& ArgParser::operator=(ArgParser&&) noexcept = default;

ArgParser& ArgParser::flag(std::string name, std::string help) {
  // Names only: add_flag(name, string&) would bind the string as the flag's result variable.
  CLI::Option* o = m_app->add_flag(name)->description(std::move(help));
  o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  m_specs.push_back({std::move(name), "", false, o});
  return *this;
}

ArgParser& ArgParser::option(std::string name, std::string metavar, std::string help) {
  CLI::Option* o = m_app->add_option(name)->description(std::move(help));
  o->option_text(metavar);
  o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);  // repeats: reported by parse()
  m_specs.push_back({std::move(name), std::move(metavar), true, o});
  return *this;
}

ArgParser& ArgParser::epilog(std::string text) {
  m_app->footer(std::move(text));
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

// What CLI11 would accept but the CLI refuses: a value option followed by another option (a
// forgotten value: "--prompt --json" is not a prompt reading "--json"), a value given to a flag.
void ArgParser::check_before_cli11(std::span<const std::string> args) const {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const size_t eq = a.find('=');
    const Spec* spec = a.rfind("--", 0) == 0 ? find_spec(std::string_view(a).substr(0, eq)) : nullptr;
    if (!spec) continue;
    if (!spec->takes_value) {
      if (eq != std::string::npos) throw UsageError(spec->name + " is a flag and takes no value");
      continue;
    }
    if (eq != std::string::npos) continue;
    if (i + 1 >= args.size() || is_help(args[i + 1]) ||
        find_spec(std::string_view(args[i + 1]).substr(0, args[i + 1].find('='))))
      throw UsageError("missing value for " + spec->name + " (expected " + spec->metavar + ")");
    ++i;  // the value, whatever it looks like ("-1")
  }
}

void ArgParser::parse(std::span<const std::string> args) {
  m_help = false;
  // --help stops parsing: what comes before it must be right, what follows is not looked at.
  size_t end = 0;
  for (; end < args.size(); ++end) {
    if (is_help(args[end])) break;
    const Spec* spec = find_spec(std::string_view(args[end]).substr(0, args[end].find('=')));
    if (spec && spec->takes_value && args[end].find('=') == std::string::npos) ++end;  // its value
  }
  const std::span<const std::string> mine = args.subspan(0, std::min(end, args.size()));
  check_before_cli11(mine);
  std::vector<std::string> reversed(mine.rbegin(), mine.rend());  // CLI11 takes them last first
  try {
    m_app->parse(reversed);
  } catch (const CLI::ArgumentMismatch& e) {
    const std::string what = e.what();
    const Spec* spec = find_spec(std::string_view(what).substr(0, what.find(':')));
    if (spec && spec->takes_value)
      throw UsageError("missing value for " + spec->name + " (expected " + spec->metavar + ")");
    throw UsageError(what);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  for (const std::string& a : m_app->remaining()) {
    if (a.size() > 1 && a[0] == '-') {
      if (a.rfind("--", 0) != 0 || a.size() < 3)
        throw UsageError("unknown option " + quote_value(a) + " (options are long, e.g. --help)");
      throw UsageError("unknown option " + quote_value(a.substr(0, a.find('='))));
    }
    throw UsageError("unexpected argument " + quote_value(a) +
                     " (values follow their option, e.g. --prompt \"...\")");
  }
  for (const Spec& s : m_specs)
    if (s.option->count() > 1) throw UsageError(s.name + " is given more than once");
  m_help = end < args.size();
}

bool ArgParser::has(std::string_view name) const {
  const Spec* s = find_spec(name);
  return s && s->option->count() > 0;
}

std::optional<std::string> ArgParser::get(std::string_view name) const {
  const Spec& s = spec_or_throw(name);
  if (s.option->count() == 0) return std::nullopt;
  if (!s.takes_value) return std::string();
  return s.option->results().front();
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
  // The descriptions start two columns after the longest "--name METAVAR" (two of indent).
  size_t width = std::string("-h, --help").size();
  for (const Spec& s : m_specs)
    width = std::max(width, s.name.size() + (s.takes_value ? 1 + s.metavar.size() : 0));
  m_app->get_formatter()->column_width(2 + width + 2);
  return m_app->help();
}

}  // namespace sinkscope::cli
