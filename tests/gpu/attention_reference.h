// SPDX-License-Identifier: Apache-2.0
// Float64 CPU reference of the attention kernels, with the skip rule evaluated at the same tile
// size (the tile-level oracle): dense softmax attention over the keys of the tiles it keeps.
#pragma once

#include <cstdint>
#include <vector>

#include "tests/gpu/attention_problem.h"

namespace sinkscope::testing {

struct RefTile {
  std::vector<double> out;        // [rows][d]
  std::vector<uint8_t> skip;      // per visible KV tile: 1 skipped, 0 kept
  std::vector<uint8_t> ambiguous; // per visible KV tile: decision within the margin
  int n_visible_tiles = 0;
};

// Query rows [row0, row0 + rows) of query head `head` form one query tile (prefill: the kernels'
// kPrefillQueryTile = 64-row tile; decode: 1 row). The vote for KV tile t: every row r with a visible key in t
// must satisfy (max_t s_r - m_r) < ln(lambda), m_r the running max over the kept tiles before
// t; tile 0 never skips; lambda = 0 never skips. A tile whose deciding margin is within
// `margin` (natural-log units, scaled by max(1, |m|)) is ambiguous: there the GPU's decision
// (gpu_mask[t], when given) is used to build the reference output. keep_exp: the kernels'
// skip_softmax_exp = false -- the keys of skipped tiles stay in the softmax denominator (only
// their P V is dropped).
RefTile reference_query_tile(const HostProblem& p, int head, int64_t row0, int rows,
                             double lambda, const uint8_t* gpu_mask, double margin = 1e-3,
                             bool keep_exp = false);

}  // namespace sinkscope::testing
