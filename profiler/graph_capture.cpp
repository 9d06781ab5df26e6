// SPDX-License-Identifier: Apache-2.0
#include "profiler/graph_capture.h"

#include <algorithm>

#include "profiler/cupti_collector.h"

#if SINKSCOPE_PROFILER_CUPTI
#include <cuda_runtime_api.h>
#include <cupti.h>
#endif

namespace sinkscope::prof {

#if SINKSCOPE_PROFILER_CUPTI

GraphLayoutRecorder::GraphLayoutRecorder(void* stream)
    : m_stream(stream), m_active(CuptiCollector::instance().ready()) {}

uint32_t GraphLayoutRecorder::node_count() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  unsigned long long id = 0;
  size_t n = 0;
  if (cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(m_stream), &status, &id, &graph) !=
          cudaSuccess ||
      status != cudaStreamCaptureStatusActive || !graph ||
      cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return static_cast<uint32_t>(n);
}

void GraphLayoutRecorder::push(const char* name, int64_t arg) {
  if (!m_active) return;
  const uint32_t n = node_count();
  m_open.push_back(m_regions.size());
  m_regions.push_back({name, arg, n, n});
}

void GraphLayoutRecorder::pop() {
  if (!m_active || m_open.empty()) return;
  m_regions[m_open.back()].end = node_count();
  m_open.pop_back();
}

bool GraphLayoutRecorder::publish(void* graph_ptr, void* exec_ptr) {
  if (!m_active || !graph_ptr || !exec_ptr) return false;
  auto graph = static_cast<cudaGraph_t>(graph_ptr);
  size_t n = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  std::vector<cudaGraphNode_t> nodes(n);
  if (n && cudaGraphGetNodes(graph, nodes.data(), &n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  GraphLayout layout;
  layout.nodes.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    layout.nodes.push_back(t == cudaGraphNodeTypeKernel   ? GraphNodeKind::kKernel
                           : t == cudaGraphNodeTypeMemcpy ? GraphNodeKind::kMemcpy
                           : t == cudaGraphNodeTypeMemset ? GraphNodeKind::kMemset
                                                          : GraphNodeKind::kOther);
    // Regions are node-index ranges: valid only if the listing order is the execution order,
    // i.e. each node depends on the one listed before it (a single-stream capture).
    if (i == 0) continue;
    size_t nd = 0;
#if CUDART_VERSION >= 13000
    cudaError_t e = cudaGraphNodeGetDependencies(nodes[i], nullptr, nullptr, &nd);
#else
    cudaError_t e = cudaGraphNodeGetDependencies(nodes[i], nullptr, &nd);
#endif
    std::vector<cudaGraphNode_t> deps(nd);
#if CUDART_VERSION >= 13000
    // Edge data must be taken: PDL edges are programmatic, and a query without it is "lossy".
    std::vector<cudaGraphEdgeData> edges(nd);
    if (e == cudaSuccess && nd)
      e = cudaGraphNodeGetDependencies(nodes[i], deps.data(), edges.data(), &nd);
#else
    if (e == cudaSuccess && nd) e = cudaGraphNodeGetDependencies(nodes[i], deps.data(), &nd);
#endif
    bool chained = false;
    for (size_t k = 0; e == cudaSuccess && k < nd; ++k) chained |= deps[k] == nodes[i - 1];
    if (!chained) {
      (void)cudaGetLastError();
      return false;
    }
  }
  for (GraphRegion& r : m_regions) {
    r.end = std::min<uint32_t>(r.end, uint32_t(n));
    r.begin = std::min(r.begin, r.end);
  }
  layout.regions = m_regions;
  uint32_t graph_id = 0, exec_id = 0;
  if (cuptiGetGraphId(graph, &graph_id) != CUPTI_SUCCESS) graph_id = 0;
  if (cuptiGetGraphExecId(static_cast<cudaGraphExec_t>(exec_ptr), &exec_id) != CUPTI_SUCCESS)
    exec_id = 0;
  if (!graph_id && !exec_id) return false;
  CuptiCollector::instance().add_graph_layout(graph_id, exec_id, std::move(layout));
  return true;
}

#else

GraphLayoutRecorder::GraphLayoutRecorder(void* stream) : m_stream(stream) {}
uint32_t GraphLayoutRecorder::node_count() const { return 0; }
void GraphLayoutRecorder::push(const char*, int64_t) {}
void GraphLayoutRecorder::pop() {}
bool GraphLayoutRecorder::publish(void*, void*) { return false; }

#endif

}  // namespace sinkscope::prof
