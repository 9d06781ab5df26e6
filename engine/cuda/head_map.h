// SPDX-License-Identifier: Apache-2.0
// The workbench's attention map of one head computed on the GPU (kernels/head_map.h) from host
// Q/K: what app/gui/models/head_attention.cpp headMapFromQK computes on the host, for prompts
// where the host's O(n^2 d) work would take seconds (32K tokens: ~4 s on the host, tens of
// milliseconds here). No CUDA headers: callable from the Qt-side code.
#pragma once

#include <cmath>
#include <vector>

namespace sinkscope::gpu {

// The visibility rule and score transforms of the map (kernels/visibility.h).
struct HeadMapRule {
  int sinks = 0, window = 0, own_window = 0;
  float softcap = 0.0f;          // 0: none
  float sink_logit = -INFINITY;  // a learned sink logit (-inf: none)
};

struct HeadMapSums {
  int bins = 0;
  std::vector<float> cells;     // (bins, bins): each cell's mean probability (sum / its size)
  std::vector<double> col_sum;  // (n): per key, the sum of its probabilities over all queries
  double gpu_ms = 0;            // the two kernels' time (CUDA events)
};

// q, k: host (n, d) row-major floats; edges: the bin edges shared by rows and columns
// (bins + 1 of them, 0 .. n, increasing). Runs on the current device on a stream of its own,
// with stream-ordered allocations (it does not wait for other streams' work). Throws
// std::invalid_argument for bad arguments and BackendError for CUDA failures.
HeadMapSums head_map_on_gpu(const float* q, const float* k, int n, int d, float scale,
                            const HeadMapRule& rule, const std::vector<int>& edges);

}  // namespace sinkscope::gpu
