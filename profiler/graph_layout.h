// SPDX-License-Identifier: Apache-2.0
// What a captured CUDA graph does, in the engine's terms. A replayed graph emits no host ranges:
// its kernels only carry the graph's id and their launch (one cudaGraphLaunch per decode step).
// The engine therefore describes each graph once, at capture: its GPU nodes in execution order
// and named regions over them ("layer 3", optionally ops nested inside). The timeline maps the
// records of one replay, sorted by start, onto the nodes of the same kind by ordinal, and so
// onto their regions (TimelineBuilder::add_graph_layout). Plain data: CPU builds and unit tests
// use it without CUDA.
//
// Capture side (CUDA builds): GraphLayoutRecorder, profiler/graph_capture.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/spans.h"

namespace sinkscope::prof {

enum class GraphNodeKind : uint8_t { kKernel, kMemcpy, kMemset, kOther };

struct GraphRegion {
  std::string name;       // "layer"
  int64_t arg = kNoArg;   // 3
  uint32_t begin = 0;     // node indices [begin, end) of GraphLayout::nodes
  uint32_t end = 0;
};

struct GraphLayout {
  std::vector<GraphNodeKind> nodes;  // in execution order (a captured single-stream chain)
  std::vector<GraphRegion> regions;  // enclosing regions before the regions they contain

  uint32_t count(GraphNodeKind k) const {
    uint32_t n = 0;
    for (GraphNodeKind x : nodes) n += x == k;
    return n;
  }
};

}  // namespace sinkscope::prof
