// SPDX-License-Identifier: Apache-2.0
// Sink detection (docs/architecture.md, "Sink detection"): alpha_k = mean over queries i >= k of
// the attention probability P[i, k], per (layer, head), from the attention's column-mass probe
// (AttentionProbes::col_mass). Key k is a sink of a head when alpha_k > epsilon (0.3, after Gu et
// al. 2024); per position we report the share of (layer, head) pairs where it is a sink and
// recommend the smallest sink_keep_count covering every position flagged in >= 10 % of heads
// (capped at 16).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"

namespace sinkscope {

struct SinkCriteria {
  double epsilon = 0.3;         // alpha threshold for "sink of this head"
  double min_head_share = 0.1;  // a position needs this share of (layer, head) pairs
  int max_keep = 16;            // cap of the recommendation
};

struct SinkReport {
  int n_layer = 0, n_head = 0, n_pos = 0;
  SinkCriteria criteria;
  std::vector<double> alpha;        // (layer, head, position)
  std::vector<int> sink_heads;      // per position: (layer, head) pairs where alpha > epsilon
  std::vector<double> head_share;   // per position: sink_heads / (n_layer * n_head)
  std::vector<int> flagged;         // positions with head_share >= min_head_share, ascending
  int recommended_sink_keep = 0;    // max(flagged) + 1, capped; 0 when nothing is flagged
  int64_t n_queries = 0;            // tokens the statistics were gathered over
  double alpha_at(int layer, int head, int pos) const {
    return alpha[(size_t(layer) * n_head + head) * n_pos + pos];
  }
};

// From raw column mass (layer, head, position) and per-position query counts.
SinkReport analyze_sinks(int n_layer, int n_head, int n_pos, const std::vector<double>& col_mass,
                         const std::vector<int64_t>& col_queries, const SinkCriteria& c = {});

// The smallest count covering every flagged position, capped (the contract's recommendation).
int recommend_sink_keep(const std::vector<int>& flagged, int cap);

// Runs tokens once through a fresh cache with the column-mass probe over the first n_pos
// positions and analyses it. The backend is reset before and left holding the tokens.
SinkReport detect_sinks(Backend& backend, const std::vector<TokenId>& tokens, int n_pos,
                        const SinkCriteria& c = {});

}  // namespace sinkscope
