// SPDX-License-Identifier: Apache-2.0
// The CLI's subcommand options on CLI11: long options only ("--name value" or "--name=value"),
// flags without values, typed getters with range checks. CLI11 matches the arguments and
// formats --help; every problem is a UsageError whose message names the option and what is
// wrong with it (CLI11's own errors are translated into these).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace sinkscope::cli {

// A mistake in how the program was called (exit status 2).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Strict number parsing shared by the getters: the whole text must be the number.
int64_t parse_int(std::string_view option, std::string_view text, int64_t lo, int64_t hi);
uint64_t parse_uint64(std::string_view option, std::string_view text);
// min_exclusive: the value must be strictly greater than lo.
double parse_double(std::string_view option, std::string_view text, double lo, double hi,
                    bool min_exclusive = false);

// A comma-separated list ("1024,2048") of integers or doubles, each range-checked like the
// scalar getters; throws UsageError naming the option for an empty list or a bad item.
template <typename T>
std::vector<T> parse_list(const std::string& option, const std::string& text, double lo,
                          double hi, bool min_exclusive = false) {
  std::vector<T> out;
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if constexpr (std::is_integral_v<T>) {
      out.push_back(T(parse_int(option, item, int64_t(lo), int64_t(hi))));
    } else {
      out.push_back(T(parse_double(option, item, lo, hi, min_exclusive)));
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (out.empty()) throw UsageError(option + ": empty list");
  return out;
}

class ArgParser {
 public:
  // usage: e.g. "sinkscope-cli generate [options]"; summary: one line of what it does.
  ArgParser(std::string usage, std::string summary);
  ~ArgParser();
  ArgParser(ArgParser&&) noexcept;
  ArgParser& operator=(ArgParser&&) noexcept;

  ArgParser& flag(std::string name, std::string help);                         // "--json"
  ArgParser& option(std::string name, std::string metavar, std::string help);  // "--seed", "S"
  ArgParser& epilog(std::string text);  // extra help text (examples, notes)

  // Parses arguments (without the program and subcommand names). "--help" / "-h" stops parsing
  // and sets help_requested(). Throws UsageError on an unknown option, a missing value, a value
  // given to a flag, a repeated option or a positional argument.
  void parse(std::span<const std::string> args);

  bool help_requested() const { return m_help; }
  std::string help() const;

  bool has(std::string_view name) const;  // given on the command line (flag or option)
  std::optional<std::string> get(std::string_view name) const;
  int64_t get_int(std::string_view name, int64_t fallback, int64_t lo, int64_t hi) const;
  uint64_t get_uint64(std::string_view name, uint64_t fallback) const;
  double get_double(std::string_view name, double fallback, double lo, double hi,
                    bool min_exclusive = false) const;

 private:
  struct Spec {
    std::string name, metavar;
    bool takes_value;
    CLI::Option* option;  // owned by m_app
  };
  const Spec* find_spec(std::string_view name) const;
  const Spec& spec_or_throw(std::string_view name) const;
  void check_before_cli11(std::span<const std::string> args) const;

  std::unique_ptr<CLI::App> m_app;
  std::vector<Spec> m_specs;
  bool m_help = false;
};

}  // namespace sinkscope::cli
