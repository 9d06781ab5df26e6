// SPDX-License-Identifier: Apache-2.0
#include "engine/cuda/fault_injection.h"

#include <atomic>

namespace sinkscope::gpu {
namespace {

constexpr int kKinds = 2;
// Checks left before the armed failure (-1: disarmed), and failures fired, per kind.
std::atomic<int> g_countdown[kKinds] = {-1, -1};
std::atomic<int> g_fired[kKinds] = {0, 0};

}  // namespace

void inject_fault(Fault fault, int after_n) {
  g_countdown[int(fault)].store(after_n < 0 ? -1 : after_n);
}

void clear_faults() {
  for (auto& c : g_countdown) c.store(-1);
}

int faults_fired(Fault fault) { return g_fired[int(fault)].load(); }

bool fault_fires(Fault fault) {
  std::atomic<int>& left = g_countdown[int(fault)];
  int v = left.load(std::memory_order_relaxed);
  // Count down to 0; the check that finds 0 fails and leaves -1 (disarmed).
  while (v >= 0) {
    if (left.compare_exchange_weak(v, v - 1)) {
      if (v != 0) return false;
      g_fired[int(fault)].fetch_add(1);
      return true;
    }
  }
  return false;
}

}  // namespace sinkscope::gpu
