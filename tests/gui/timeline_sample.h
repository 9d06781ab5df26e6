// SPDX-License-Identifier: Apache-2.0
// A hand-built timeline for the Timeline view's tests: two CPU threads and two GPU streams,
// added out of order (stream 9 before thread 1), times in µs.
//   CPU thread 0 (os 77): prefill [0, 1000) > layer 0 [10, 400) > {attention [20, 200), mlp
//     [200, 390)}, layer 1 [400, 990) > mlp [410, 980)
//   CPU thread 1 (os 78): layer 0 [200, 380) > mlp [210, 370)
//   GPU stream 9: gemm [300, 500) launched at 250 from thread 0 (grid 128 x 1 x 1, block 256)
//   GPU stream 7: attn_kernel [100, 300) launched at 30 from thread 0
#pragma once

#include <memory>

#include "profiler/timeline.h"

namespace sinkscope::gui::test {

inline std::shared_ptr<const prof::Timeline> sampleTimeline() {
  using namespace prof;
  constexpr int64_t us = 1000;
  TimelineBuilder b;
  auto range = [&](const char* name, int64_t s, int64_t e, int64_t arg = kNoArg) {
    Event ev;
    ev.name = b.intern(name);
    ev.start_ns = s * us;
    ev.end_ns = e * us;
    ev.arg = arg;
    return ev;
  };
  auto kernel = [&](const char* name, int64_t s, int64_t e, int64_t launch) {
    Event ev;
    ev.kind = EventKind::kKernel;
    ev.name = b.intern(name);
    ev.start_ns = s * us;
    ev.end_ns = e * us;
    ev.launch_thread = 77;
    ev.launch_ns = launch * us;
    ev.grid[0] = 128;
    ev.grid[1] = ev.grid[2] = 1;
    ev.block[0] = 256;
    ev.block[1] = ev.block[2] = 1;
    return ev;
  };
  const uint32_t cpu0 = b.lane(LaneKind::kCpuThread, 0, 0, {}, "CPU thread 0", 77);
  const uint32_t gpu9 = b.lane(LaneKind::kCudaStream, 9, 0, {}, "GPU 0 stream 9");
  const uint32_t cpu1 = b.lane(LaneKind::kCpuThread, 1, 0, {}, "CPU thread 1", 78);
  const uint32_t gpu7 = b.lane(LaneKind::kCudaStream, 7, 0, {}, "GPU 0 stream 7");
  b.add(cpu0, range("prefill", 0, 1000));
  b.add(cpu0, range("layer", 10, 400, 0));
  b.add(cpu0, range("attention", 20, 200));
  b.add(cpu0, range("mlp", 200, 390));
  b.add(cpu0, range("layer", 400, 990, 1));
  b.add(cpu0, range("mlp", 410, 980));
  b.add(cpu1, range("layer", 200, 380, 0));
  b.add(cpu1, range("mlp", 210, 370));
  b.add(gpu9, kernel("gemm", 300, 500, 250));
  b.add(gpu7, kernel("attn_kernel", 100, 300, 30));
  return b.build();
}

}  // namespace sinkscope::gui::test
