// SPDX-License-Identifier: Apache-2.0
// Ctrl-C for long commands (validate, sweep): the first SIGINT / SIGTERM raises a flag the engine
// polls (the command then stops cleanly, writing nothing half-done); a second one ends the
// process the default way.
#pragma once

#include <atomic>

namespace sinkscope::cli {

// Installs the handlers (once) and returns the flag; cleared on every call.
const std::atomic<bool>* interrupt_flag();

// Exit status for an interrupted command (128 + SIGINT).
inline constexpr int kExitInterrupted = 130;

}  // namespace sinkscope::cli
