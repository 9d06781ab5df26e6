// SPDX-License-Identifier: Apache-2.0
// The profiler's operations return the shared Status (base/status.h): it never exits or throws on
// a tool failure (a CUPTI error, an unwritable trace file), it returns the message and the
// caller shows it (docs/architecture.md, design principle 14).
#pragma once

#include "base/status.h"

namespace sinkscope::prof {

using sinkscope::Status;

}  // namespace sinkscope::prof
