// SPDX-License-Identifier: Apache-2.0
// The workbench's attention map of one head on the GPU (app/gui/models/head_attention.h): the
// softmax probabilities of the head's queries against its keys under the visibility rule of
// kernels/visibility.h, summed into bins x bins cells and per-key column sums, without an n x n
// matrix. Two passes over 64 x 64 score tiles: per-row max and softmax denominator (online,
// the denominator in double), then the probabilities, summed in double per cell and per key.
// The probabilities are formed as the CPU map forms them (float scores, soft-cap, exp; the
// learned sink logit joins every row's denominator), so the two agree to float rounding.
// Plain C++ (no CUDA headers); device pointers are raw, the stream is a cudaStream_t as void*.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/status.h"

namespace sinkscope::kernels {

struct HeadMapProblem {
  const float* q = nullptr;  // device (n, d) row-major, post-RoPE queries of the head
  const float* k = nullptr;  // device (n, d), its keys
  int n = 0, d = 0;
  float scale = 1.0f;  // score = (q . k) * scale
  // Visibility (kernels/visibility.h): the cache's kept sinks and window, the layer's own window.
  int sinks = 0, window = 0, own_window = 0;
  float softcap = 0.0f;           // > 0: s -> tanh(s / softcap) * softcap
  float sink_logit = -INFINITY;   // a learned sink logit in every row's denominator (-inf: none)
  const int32_t* bin_of = nullptr;  // device (n): the bin of each position (rows = columns)
  int bins = 0;
  float* row_max = nullptr;   // device (n) scratch: each row's max logit
  float* row_inv = nullptr;   // device (n) scratch: 1 / each row's denominator
  double* cells = nullptr;    // device (bins, bins): summed probabilities (zeroed here)
  double* col_sum = nullptr;  // device (n): per-key probability sums over queries (zeroed here)
};

// Runs both passes on `stream` (asynchronous). Errors name the bad field or the failed launch.
Status launch_head_map(const HeadMapProblem& p, void* stream);

}  // namespace sinkscope::kernels
