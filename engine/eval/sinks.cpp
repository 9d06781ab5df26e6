// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/sinks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace sinkscope {

int recommend_sink_keep(const std::vector<int>& flagged, int cap) {
  // The flagged positions an S within the cap can keep decide; those at the cap or beyond are
  // not kept by any such S, and keeping more keys for them would buy nothing.
  int need = 0;
  for (int k : flagged)
    if (k < cap) need = std::max(need, k + 1);
  return need;
}

SinkReport analyze_alpha(int n_layer, int n_head, int n_pos, std::vector<double> alpha,
                         const SinkCriteria& c, std::vector<int64_t> queries) {
  if (n_layer < 0 || n_head < 0 || n_pos < 0 ||
      alpha.size() != size_t(n_layer) * n_head * size_t(n_pos) ||
      (!queries.empty() && queries.size() != size_t(n_pos)))
    throw BackendError("analyze_sinks: alpha does not match " + std::to_string(n_layer) +
                       " layers x " + std::to_string(n_head) + " heads x " +
                       std::to_string(n_pos) + " positions");
  SinkReport r;
  r.n_layer = n_layer;
  r.n_head = n_head;
  r.n_pos = n_pos;
  r.criteria = c;
  r.alpha = std::move(alpha);
  r.queries = std::move(queries);
  r.sink_heads.assign(size_t(n_pos), 0);
  r.head_share.assign(size_t(n_pos), 0.0);
  const int pairs = n_layer * n_head;
  for (int lh = 0; lh < pairs; ++lh)
    for (int k = 0; k < n_pos; ++k)
      if (r.alpha[size_t(lh) * n_pos + k] > c.epsilon) ++r.sink_heads[size_t(k)];
  for (int k = 0; k < n_pos; ++k) {
    r.head_share[size_t(k)] = pairs > 0 ? double(r.sink_heads[size_t(k)]) / pairs : 0.0;
    if (r.sink_heads[size_t(k)] > 0 && r.head_share[size_t(k)] >= c.min_head_share &&
        r.judged(k))
      r.flagged.push_back(k);
  }
  r.recommended_sink_keep = recommend_sink_keep(r.flagged, c.max_keep);
  return r;
}

SinkReport analyze_sinks(int n_layer, int n_head, int n_pos, const std::vector<double>& col_mass,
                         const std::vector<int64_t>& col_queries, const SinkCriteria& c) {
  const bool per_layer = col_queries.size() == size_t(n_layer) * size_t(n_pos) && n_layer > 1;
  if (col_mass.size() != size_t(n_layer) * n_head * size_t(n_pos) ||
      (col_queries.size() != size_t(n_pos) && !per_layer))
    throw BackendError("analyze_sinks: column-mass arrays do not match " +
                       std::to_string(n_layer) + " layers x " + std::to_string(n_head) +
                       " heads x " + std::to_string(n_pos) + " positions");
  std::vector<double> alpha(col_mass.size(), 0.0);
  const int pairs = n_layer * n_head;
  for (int lh = 0; lh < pairs; ++lh)
    for (int k = 0; k < n_pos; ++k) {
      const size_t i = size_t(lh) * n_pos + k;
      const int64_t q = col_queries[per_layer ? size_t(lh / n_head) * n_pos + k : size_t(k)];
      alpha[i] = q > 0 ? col_mass[i] / double(q) : 0.0;
    }
  // Per position, the most queries any layer's alpha averages (a global layer's count).
  std::vector<int64_t> queries(size_t(n_pos), 0);
  for (int l = 0; l < (per_layer ? n_layer : 1); ++l)
    for (int k = 0; k < n_pos; ++k)
      queries[size_t(k)] = std::max(queries[size_t(k)], col_queries[size_t(l) * n_pos + k]);
  SinkReport r = analyze_alpha(n_layer, n_head, n_pos, std::move(alpha), c, queries);
  // Per layer, a global layer's count of key 0 is the number of queries.
  if (n_pos > 0) r.n_queries = r.queries[0];
  return r;
}

std::vector<int> head_sinks(const SinkReport& r, int layer, int head) {
  std::vector<int> out;
  if (layer < 0 || head < 0 || layer >= r.n_layer || head >= r.n_head) return out;
  for (int k = 0; k < r.n_pos; ++k)
    if (r.alpha_at(layer, head, k) > r.criteria.epsilon) out.push_back(k);
  return out;
}

SinkCoverage sink_coverage(const SinkReport& r, int keep) {
  SinkCoverage c;
  c.keep = std::max(0, keep);
  for (int k : r.flagged) {
    if (k < c.keep) {
      c.kept.push_back(k);
    } else {
      c.not_kept.push_back(k);
      if (k >= r.criteria.max_keep) c.beyond_cap = true;
    }
  }
  return c;
}

namespace {

std::string percent(double share) {
  const double p = share * 100.0;
  // Whole percent, but never "0 %" for a share that is there.
  const long rounded = std::lround(p);
  return std::to_string(rounded == 0 && p > 0 ? 1 : rounded) + " %";
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

std::string unjudged_note(const SinkReport& r) {
  const int u = r.unjudged();
  if (u == 0) return {};
  return std::to_string(u) + (u == 1 ? " position has" : " positions have") + " fewer than " +
         std::to_string(r.criteria.min_queries) + " queries at or after " +
         (u == 1 ? "it and is" : "them and are") + " not judged";
}

std::string sink_verdict(const SinkReport& r) {
  const std::string note = unjudged_note(r);
  const std::string unjudged = note.empty() ? "" : " (" + note + ")";
  if (r.flagged.empty())
    return "no position is a sink in " + percent(r.criteria.min_head_share) +
           " of heads or more" + unjudged;
  std::vector<int> order = r.flagged;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return r.head_share[size_t(a)] > r.head_share[size_t(b)];
  });
  std::string s;
  for (size_t i = 0; i < order.size(); ++i) {
    const int k = order[i];
    s += i == 0 ? "position " + std::to_string(k) + " in " + percent(r.head_share[size_t(k)]) + " of heads"
                : "; " + std::to_string(k) + " in " + percent(r.head_share[size_t(k)]);
  }
  return s + unjudged;
}

std::string describe_sink_keep(const SinkReport& r, int keep) {
  const SinkCoverage c = sink_coverage(r, keep);
  std::string t = "S = " + std::to_string(c.keep);
  if (r.flagged.empty()) return t + ": no position is flagged, so there is nothing to keep";
  t += " keeps " + (c.kept.empty() ? std::string("no flagged position") : "position(s) " + join(c.kept));
  if (c.not_kept.empty()) return t + ", every flagged position";
  std::vector<int> capped, raisable;
  for (int k : c.not_kept) (k >= r.criteria.max_keep ? capped : raisable).push_back(k);
  t += "; it does not keep " + join(c.not_kept) + ".";
  if (!raisable.empty())
    t.append(" ").append(join(raisable)) += " lie(s) beyond the first " +
                                            std::to_string(c.keep) + " keys: S = " +
                                            std::to_string(raisable.back() + 1) +
                                            " would keep them.";
  if (!capped.empty())
    t.append(" ").append(join(capped)) +=
        " lie(s) beyond the cap of " + std::to_string(r.criteria.max_keep) +
        " kept keys, so no S within it keeps them: a sliding window evicts them once the "
        "sequence moves W tokens past them, so protect them with a larger window or accept the "
        "loss.";
  return t;
}

std::string sink_recommendation(const SinkReport& r) {
  if (r.flagged.empty()) return "recommended sink_keep_count = 0: no position is flagged, nothing to keep";
  return "recommended sink_keep_count = " + std::to_string(r.recommended_sink_keep) + ": " +
         describe_sink_keep(r, r.recommended_sink_keep);
}

std::string learned_sink_summary(const SinkReport& r) {
  if (r.learned_mass.empty()) return "";
  double sum = 0, best = -1;
  size_t at = 0;
  for (size_t i = 0; i < r.learned_mass.size(); ++i) {
    sum += r.learned_mass[i];
    if (r.learned_mass[i] > best) best = r.learned_mass[i], at = i;
  }
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "learned sinks: mean mass %.3f per query over %zu heads, largest %.3f (layer %zu, "
                "head %zu); parameters, not keys: always kept, outside sink_keep_count",
                sum / double(r.learned_mass.size()), r.learned_mass.size(), best,
                at / size_t(std::max(1, r.n_head)), at % size_t(std::max(1, r.n_head)));
  return buf;
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
  SinkReport r = analyze_sinks(p.n_layer, p.n_head, n_pos, p.col_mass, p.alpha_queries(), c);
  if (!p.sink_mass.empty() && p.sink_queries > 0) {
    r.learned_mass.resize(p.sink_mass.size());
    for (size_t i = 0; i < p.sink_mass.size(); ++i)
      r.learned_mass[i] = p.sink_mass[i] / double(p.sink_queries);
  }
  backend.request_column_mass(0);
  return r;
}

}  // namespace sinkscope
