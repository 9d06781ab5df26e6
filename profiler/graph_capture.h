// SPDX-License-Identifier: Apache-2.0
// Recording the layout of a CUDA graph while it is captured (profiler/graph_layout.h), so the
// timeline can place the kernels of its replays in their layers. The engine opens a
// GraphRegionScope where it would open a ScopedSpan if it were not capturing:
//
//   prof::GraphLayoutRecorder rec(stream);          // before cudaStreamBeginCapture returns work
//   { prof::GraphRegionScope r(&rec, "layer", l); ...enqueue... }
//   cudaStreamEndCapture(stream, &graph); cudaGraphInstantiate(&exec, graph, 0);
//   rec.publish(graph, exec);                       // before cudaGraphDestroy(graph)
//
// A region is the range of nodes the capture added while it was open (cudaStreamGetCaptureInfo
// + cudaGraphGetNodes). Active only when this process already has a usable CUPTI collector
// (CuptiCollector::ready(): it never initialises CUPTI), so untraced processes pay nothing.
// CUDA types are passed as void* to keep this header free of CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/graph_layout.h"

namespace sinkscope::prof {

class GraphLayoutRecorder {
 public:
  explicit GraphLayoutRecorder(void* capturing_stream);  // cudaStream_t
  bool active() const { return m_active; }
  void push(const char* name, int64_t arg = kNoArg);
  void pop();
  // After instantiation, before the graph is destroyed: reads the node kinds, checks that the
  // nodes form the captured chain in order, and hands the layout to the collector under CUPTI's
  // ids of `graph` (cudaGraph_t) and `exec` (cudaGraphExec_t). False (nothing registered) when
  // inactive or the graph is not a chain.
  bool publish(void* graph, void* exec);

 private:
  uint32_t node_count() const;
  void* m_stream = nullptr;
  bool m_active = false;
  std::vector<GraphRegion> m_regions;
  std::vector<size_t> m_open;  // indices into m_regions
};

// RAII region on a recorder; a null or inactive recorder makes it a no-op.
class GraphRegionScope {
 public:
  GraphRegionScope(GraphLayoutRecorder* r, const char* name, int64_t arg = kNoArg)
      : m_r(r && r->active() ? r : nullptr) {
    if (m_r) m_r->push(name, arg);
  }
  ~GraphRegionScope() {
    if (m_r) m_r->pop();
  }
  GraphRegionScope(const GraphRegionScope&) = delete;
  GraphRegionScope& operator=(const GraphRegionScope&) = delete;

 private:
  GraphLayoutRecorder* m_r;
};

}  // namespace sinkscope::prof
