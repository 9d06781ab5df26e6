// SPDX-License-Identifier: Apache-2.0
// The check log of the plain GPU test programs: "PASS|FAIL <check>: <detail>" per check (flushed,
// so a crash keeps what came before), "RESULT: PASS|FAIL (N checks, M failed)" last, exit 1 on
// a failure. No engine or CUDA dependency (the kernel-only programs use it too).
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace sinkscope::gpu_test {

inline int g_checks = 0, g_failed = 0;
inline std::string g_filter;  // run(): only the sections whose name contains it

inline void check(bool ok, const std::string& name, const std::string& detail) {
  ++g_checks;
  if (!ok) ++g_failed;
  std::printf("%s %s: %s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.c_str());
  std::fflush(stdout);
}

// One named section; an exception is a failed check that names it.
inline void run(const std::string& name, const std::function<void()>& fn) {
  if (!g_filter.empty() && name.find(g_filter) == std::string::npos) return;
  try {
    fn();
  } catch (const std::exception& e) {
    check(false, name, std::string("exception: ") + e.what());
  }
}

// Prints the RESULT line; the program's exit status.
inline int finish_checks() {
  std::printf("RESULT: %s (%d checks, %d failed)\n", g_failed ? "FAIL" : "PASS", g_checks,
              g_failed);
  return g_failed ? 1 : 0;
}

// "1,2.5,3" -> {1, 2.5, 3} (empty items skipped; std::stod throws on a bad number).
inline std::vector<double> parse_list(const std::string& s) {
  std::vector<double> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) v.push_back(std::stod(item));
  return v;
}

}  // namespace sinkscope::gpu_test
