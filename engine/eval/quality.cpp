// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/quality.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/eval/logit_stats.h"

namespace sinkscope {

double LogitComparison::ppl_dense() const {
  return scored ? std::exp(nll_dense / double(scored)) : 0.0;
}
double LogitComparison::ppl_variant() const {
  return scored ? std::exp(nll_variant / double(scored)) : 0.0;
}
double LogitComparison::ppl_delta_pct() const {
  const double d = ppl_dense();
  return d > 0 ? (ppl_variant() / d - 1.0) * 100.0 : 0.0;
}

void LogitComparison::add(const LogitComparison& o) {
  positions += o.positions;
  kl_sum += o.kl_sum;
  kl_max = std::max(kl_max, o.kl_max);
  top1_agree += o.top1_agree;
  nll_dense += o.nll_dense;
  nll_variant += o.nll_variant;
  scored += o.scored;
}

LogitComparison compare_logits(std::span<const float> dense, std::span<const float> variant,
                               int vocab, std::span<const TokenId> next) {
  if (vocab <= 0 || dense.size() != variant.size() || dense.size() % size_t(vocab) != 0)
    throw std::invalid_argument("compare_logits: logits shapes differ or are not rows of vocab");
  const size_t rows = dense.size() / size_t(vocab);
  if (next.size() != rows) throw std::invalid_argument("compare_logits: one next token per row");
  LogitComparison c;
  for (size_t r = 0; r < rows; ++r) {
    const float* p = dense.data() + r * vocab;
    const float* q = variant.data() + r * vocab;
    const int ap = row_argmax(p, vocab), aq = row_argmax(q, vocab);
    const double lp = log_sum_exp(p, vocab), lq = log_sum_exp(q, vocab);
    const double kl = row_kl(p, lp, q, lq, vocab);
    c.kl_sum += kl;
    c.kl_max = std::max(c.kl_max, kl);
    c.top1_agree += ap == aq;
    ++c.positions;
    const TokenId t = next[r];
    if (t >= 0 && t < vocab) {
      c.nll_dense -= double(p[t]) - lp;
      c.nll_variant -= double(q[t]) - lq;
      ++c.scored;
    }
  }
  return c;
}

std::vector<float> teacher_forced_logits(Backend& backend, std::span<const TokenId> tokens,
                                         int n_prefill) {
  if (n_prefill < 1 || size_t(n_prefill) > tokens.size())
    throw BackendError("teacher_forced_logits: n_prefill " + std::to_string(n_prefill) +
                       " is outside 1.." + std::to_string(tokens.size()));
  backend.reset();
  std::vector<float> all, step;
  backend.forward(tokens.first(size_t(n_prefill)), LogitsMode::kAll, all);
  for (size_t i = size_t(n_prefill); i < tokens.size(); ++i) {
    backend.forward(tokens.subspan(i, 1), LogitsMode::kLast, step);
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

}  // namespace sinkscope
