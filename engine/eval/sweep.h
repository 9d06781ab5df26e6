// SPDX-License-Identifier: Apache-2.0
// Sweeps (issue 8): a grid of settings over a base config, each point validated against the
// dense baseline, and the Pareto front of efficiency (prefill sparsity, or KV memory) against
// quality (mean KL to the dense baseline).
//
// Grid text: axes separated by ';', each "key=v1,v2,...". Keys and what they set:
//   lambda          attention.type dynamic_sparse (0: dense) + threshold_prefill and _decode
//   lambda_prefill  threshold_prefill (type dynamic_sparse)
//   lambda_decode   threshold_decode (type dynamic_sparse)
//   mode            attention.threshold_mode: fixed | length_scaled
//   min_seq         attention.min_sequence_length (hybrid mode)
//   window          cache.strategy sliding_window + window_size ("full" or 0: strategy full)
//   sinks           cache.sink_keep_count
//   position        cache.position_mode: cache | original
//   block           cache.block_size: 64 | 128
//   kv              quantization: off | int8 | int4
//   group           quantization.group_size
//   protect         quantization.protect_sink_positions: true | false
// The points are the Cartesian product, the first axis varying slowest.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/config/config.h"

namespace sinkscope {

class GridError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct GridAxis {
  std::string key;
  std::vector<std::string> values;
};

using GridPoint = std::vector<std::pair<std::string, std::string>>;  // (key, value), axis order

// Parses the grid text; throws GridError naming the axis or value (unknown key, empty list,
// a value that does not parse for its key, a key given twice, more than max_points points).
std::vector<GridAxis> parse_grid(std::string_view text, size_t max_points = 4096);
std::vector<GridPoint> expand_grid(const std::vector<GridAxis>& axes);
// "lambda=0.01 window=512 sinks=4"
std::string describe(const GridPoint& p);

// base with the point's settings applied. The result may still be invalid as a whole (sinks >
// window, say): check it with check_config().
SinkScopeConfig apply_point(const SinkScopeConfig& base, const GridPoint& p);

// Non-dominated points for "maximise x, minimise y" (NaN entries are never on the front).
// A point is dominated when another has x >= and y <= with at least one strict.
std::vector<bool> pareto_front_max_min(const std::vector<double>& x, const std::vector<double>& y);
// The same for "minimise x, minimise y".
std::vector<bool> pareto_front_min_min(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace sinkscope
