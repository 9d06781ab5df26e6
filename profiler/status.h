// SPDX-License-Identifier: Apache-2.0
// Result of a profiler operation. The profiler never exits or throws on a tool failure (a CUPTI
// error, an unwritable trace file): it returns the message, and the caller shows it
// (docs/architecture.md, design principle 14).
#pragma once

#include <string>
#include <utility>

namespace sinkscope::prof {

struct Status {
  bool ok = true;
  std::string message;  // empty when ok

  static Status success() { return {}; }
  static Status error(std::string m) { return {false, std::move(m)}; }
  explicit operator bool() const { return ok; }
};

}  // namespace sinkscope::prof
