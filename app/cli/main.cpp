// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli: the headless front end. Everything but argv handling lives in run_cli().
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/commands.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  const std::vector<std::string> args(argv + 1, argv + argc);
  return sinkscope::cli::run_cli(args, std::cout, std::cerr);
}
