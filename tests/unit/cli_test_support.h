// SPDX-License-Identifier: Apache-2.0
// Running the built sinkscope-cli from a test: arguments quoted for the shell, stdout and
// stderr captured, the exit status decoded. SINKSCOPE_CLI_PATH comes from tests/CMakeLists.txt.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace sinkscope::test {

struct CliRun {
  int status = -1;
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the built binary with the given arguments (and optional environment prefix).
inline CliRun run_binary(const std::vector<std::string>& args, const std::string& env = "") {
  namespace fs = std::filesystem;
  static int counter = 0;
  const fs::path dir =
      fs::temp_directory_path() /
      ("sinkscope_test_cli_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  fs::create_directories(dir);
  std::string cmd = env + " " + shell_quote(SINKSCOPE_CLI_PATH);
  for (const auto& a : args) {
    cmd += ' ';
    cmd += shell_quote(a);
  }
  cmd += " </dev/null >" + shell_quote((dir / "out").string()) + " 2>" +
         shell_quote((dir / "err").string());
  CliRun r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir / "out");
  r.err = slurp(dir / "err");
  fs::remove_all(dir);
  return r;
}

}  // namespace sinkscope::test
