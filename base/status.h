// SPDX-License-Identifier: Apache-2.0
// The result of an operation that reports failure instead of throwing: the kernel launchers
// (a bad shape, a launch error) and the profiler (a CUPTI error, an unwritable trace file; it
// never exits or throws on a tool failure, the caller shows the message).
#pragma once

#include <string>
#include <utility>

namespace sinkscope {

struct Status {
  bool ok = true;
  std::string message;  // empty when ok

  static Status success() { return {}; }
  static Status error(std::string m) { return {false, std::move(m)}; }
  explicit operator bool() const { return ok; }
};

}  // namespace sinkscope
