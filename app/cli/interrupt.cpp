// SPDX-License-Identifier: Apache-2.0
#include "app/cli/interrupt.h"

#include <csignal>

namespace sinkscope::cli {

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int sig) {
  g_interrupted.store(true, std::memory_order_relaxed);
  std::signal(sig, SIG_DFL);  // a second Ctrl-C ends the process
}

}  // namespace

const std::atomic<bool>* interrupt_flag() {
  g_interrupted.store(false, std::memory_order_relaxed);
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  return &g_interrupted;
}

}  // namespace sinkscope::cli
