// SPDX-License-Identifier: Apache-2.0
// Sink detection (docs/architecture.md, "Sink detection"): alpha_k = mean over queries i >= k of
// the attention probability P[i, k], per (layer, head), from the attention's column-mass probe
// (AttentionProbes::col_mass). Key k is a sink of a head when alpha_k > epsilon (0.3, after Gu et
// al. 2024); per position we report the share of (layer, head) pairs where it is a sink and
// recommend the smallest sink_keep_count covering every position flagged in >= 10 % of heads
// (capped at 16); positions with fewer than 16 queries at or after them are not judged. The
// helpers below read a report per head and say what a given S keeps.
// Learned sinks (a per-head logit in the softmax denominator, gpt-oss) are reported apart, as the
// mean probability they take per query (learned_mass), next to alpha_k of the real keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"

namespace sinkscope {

struct SinkCriteria {
  double epsilon = 0.3;         // alpha threshold for "sink of this head"
  double min_head_share = 0.1;  // a position needs this share of (layer, head) pairs
  int max_keep = 16;            // cap of the recommendation
  // A position is judged (can be flagged) only with at least this many queries at or after it:
  // alpha of a prompt's last keys averages one or a few queries (the last key's own attention
  // to itself), not a pattern.
  int64_t min_queries = 16;
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
  // Per position, the queries its alpha averages (the most of any layer); empty when unknown
  // (analyze_alpha without counts: every position is judged).
  std::vector<int64_t> queries;
  bool judged(int pos) const {
    return queries.empty() || queries[size_t(pos)] >= criteria.min_queries;
  }
  int unjudged() const {
    int n = 0;
    for (int k = 0; k < n_pos; ++k) n += !judged(k);
    return n;
  }
  // Learned sinks (gpt-oss): the mean probability each (layer, head)'s sink logit takes per
  // query, (layer, head); empty for a model without them. They are parameters, not keys: no
  // window evicts them and the recommendation above (of positions to keep) does not count them.
  std::vector<double> learned_mass;
  double learned_at(int layer, int head) const {
    return learned_mass.empty() ? 0.0 : learned_mass[size_t(layer) * n_head + head];
  }
  double alpha_at(int layer, int head, int pos) const {
    return alpha[(size_t(layer) * n_head + head) * n_pos + pos];
  }
};

// From raw column mass (layer, head, position) and query counts: per position (n_pos), or per
// layer and position (n_layer * n_pos, AttentionProbes::col_queries_layer) where layers have
// windows of their own.
SinkReport analyze_sinks(int n_layer, int n_head, int n_pos, const std::vector<double>& col_mass,
                         const std::vector<int64_t>& col_queries, const SinkCriteria& c = {});

// The same analysis from alpha (layer, head, position) already divided by the query counts;
// n_queries stays 0. queries: per position, the counts (SinkReport::queries) that decide which
// positions are judged; empty: all. Throws BackendError when the sizes disagree.
SinkReport analyze_alpha(int n_layer, int n_head, int n_pos, std::vector<double> alpha,
                         const SinkCriteria& c = {}, std::vector<int64_t> queries = {});

// The smallest count covering every flagged position below the cap (the contract's
// recommendation): flagged positions at the cap or beyond are kept by no S within it.
int recommend_sink_keep(const std::vector<int>& flagged, int cap);

// The sinks of one (layer, head): positions with alpha_k > epsilon, ascending. Empty for a
// (layer, head) outside the report.
std::vector<int> head_sinks(const SinkReport& r, int layer, int head);

// What keeping the first `keep` keys does to the flagged positions. A flagged position at or
// beyond `keep` is evicted by a sliding window once the sequence moves past it; keeping it would
// need a larger S, which the cap may forbid.
struct SinkCoverage {
  int keep = 0;                // the S considered
  std::vector<int> kept;       // flagged positions < keep
  std::vector<int> not_kept;   // flagged positions >= keep
  bool beyond_cap = false;     // some not-kept position needs S > criteria.max_keep
};
SinkCoverage sink_coverage(const SinkReport& r, int keep);

// The model-level verdict: each flagged position with its share of (layer, head) pairs, most
// shared first, e.g. "position 0 in 87 % of heads; 42 in 12 %"; "no position ..." when none is
// flagged.
std::string sink_verdict(const SinkReport& r);

// "15 positions have fewer than 16 queries at or after them and are not judged"; empty when
// every position was judged.
std::string unjudged_note(const SinkReport& r);

// What S = keep does in words: which flagged positions it keeps, which it does not and why (a
// position beyond the first S keys, which a larger S would keep, or beyond the cap, which only a
// larger window protects).
std::string describe_sink_keep(const SinkReport& r, int keep);
// The same for the recommended S, prefixed "recommended sink_keep_count = S: ".
std::string sink_recommendation(const SinkReport& r);

// The learned sinks in words: their mean mass over every (layer, head) and the largest with its
// (layer, head); "" for a report without them.
std::string learned_sink_summary(const SinkReport& r);

// Runs tokens once through a fresh cache with the column-mass probe over the first n_pos
// positions and analyses it. The backend is reset before and left holding the tokens.
SinkReport detect_sinks(Backend& backend, const std::vector<TokenId>& tokens, int n_pos,
                        const SinkCriteria& c = {});

}  // namespace sinkscope
