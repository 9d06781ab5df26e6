// SPDX-License-Identifier: Apache-2.0
#include "engine/sinks.h"

#include <algorithm>
#include <string>

namespace sinkscope {

int recommend_sink_keep(const std::vector<int>& flagged, int cap) {
  if (flagged.empty()) return 0;
  const int need = *std::max_element(flagged.begin(), flagged.end()) + 1;
  return std::min(need, cap);
}

SinkReport analyze_sinks(int n_layer, int n_head, int n_pos, const std::vector<double>& col_mass,
                         const std::vector<int64_t>& col_queries, const SinkCriteria& c) {
  if (col_mass.size() != size_t(n_layer) * n_head * size_t(n_pos) ||
      col_queries.size() != size_t(n_pos))
    throw BackendError("analyze_sinks: column-mass arrays do not match " +
                       std::to_string(n_layer) + " layers x " + std::to_string(n_head) +
                       " heads x " + std::to_string(n_pos) + " positions");
  SinkReport r;
  r.n_layer = n_layer;
  r.n_head = n_head;
  r.n_pos = n_pos;
  r.criteria = c;
  r.alpha.assign(col_mass.size(), 0.0);
  r.sink_heads.assign(size_t(n_pos), 0);
  r.head_share.assign(size_t(n_pos), 0.0);
  r.n_queries = n_pos > 0 ? col_queries[0] : 0;
  const int pairs = n_layer * n_head;
  for (int lh = 0; lh < pairs; ++lh)
    for (int k = 0; k < n_pos; ++k) {
      const size_t i = size_t(lh) * n_pos + k;
      const int64_t q = col_queries[size_t(k)];
      r.alpha[i] = q > 0 ? col_mass[i] / double(q) : 0.0;
      if (r.alpha[i] > c.epsilon) ++r.sink_heads[size_t(k)];
    }
  for (int k = 0; k < n_pos; ++k) {
    r.head_share[size_t(k)] = pairs > 0 ? double(r.sink_heads[size_t(k)]) / pairs : 0.0;
    if (r.sink_heads[size_t(k)] > 0 && r.head_share[size_t(k)] >= c.min_head_share)
      r.flagged.push_back(k);
  }
  r.recommended_sink_keep = recommend_sink_keep(r.flagged, c.max_keep);
  return r;
}

SinkReport detect_sinks(Backend& backend, const std::vector<TokenId>& tokens, int n_pos,
                        const SinkCriteria& c) {
  if (tokens.empty()) throw BackendError("detect_sinks: no tokens");
  n_pos = std::min<int>(n_pos, int(tokens.size()));
  backend.request_column_mass(n_pos);
  backend.reset();
  backend.request_column_mass(n_pos);
  std::vector<float> logits;
  backend.forward(tokens, LogitsMode::kLast, logits);
  const AttentionProbes& p = backend.probes();
  SinkReport r = analyze_sinks(p.n_layer, p.n_head, n_pos, p.col_mass, p.col_queries, c);
  backend.request_column_mass(0);
  return r;
}

}  // namespace sinkscope
