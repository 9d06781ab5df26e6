// SPDX-License-Identifier: Apache-2.0
// Quality of a variant against the dense baseline (docs/architecture.md, "Quality against the dense
// baseline"): mean next-token KL(dense || variant) in nats, top-1 agreement, and the perplexity
// change, all from per-position logits of the same token sequence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/backend.h"

namespace sinkscope {

struct LogitComparison {
  int64_t positions = 0;
  double kl_sum = 0;        // sum over positions of KL(dense || variant), nats
  double kl_max = 0;
  int64_t top1_agree = 0;
  double nll_dense = 0;     // sum of -log p(next token), where the next token is known
  double nll_variant = 0;
  int64_t scored = 0;       // positions with a known next token
  double kl_mean() const { return positions ? kl_sum / double(positions) : 0.0; }
  double top1_agreement() const { return positions ? double(top1_agree) / double(positions) : 0.0; }
  double ppl_dense() const;
  double ppl_variant() const;
  double ppl_delta_pct() const;  // (ppl_variant / ppl_dense - 1) * 100
  void add(const LogitComparison& o);
};

// Compares rows of logits (rows x vocab each). next[i] is the token that follows row i, or -1
// when unknown (then the row counts for KL and top-1 only). KL and log-probabilities are
// computed in double from log-softmax.
LogitComparison compare_logits(std::span<const float> dense, std::span<const float> variant,
                               int vocab, std::span<const TokenId> next);

// Runs `tokens` through `backend` as one prefill over the first n_prefill tokens (all logits)
// followed by teacher-forced single-token decode steps for the rest, returning every row of
// logits (tokens.size() rows). The backend is reset first.
std::vector<float> teacher_forced_logits(Backend& backend, std::span<const TokenId> tokens,
                                         int n_prefill);

}  // namespace sinkscope
