// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli: the headless front end. Everything but argv handling lives in run_cli().
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/commands.h"
#include "app/cli/world.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  const std::vector<std::string> args(argv + 1, argv + argc);
  const int status = sinkscope::cli::run_cli(args, std::cout, std::cerr);
  sinkscope::cli::world_finalize();
  return status;
}
