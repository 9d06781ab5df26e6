// SPDX-License-Identifier: Apache-2.0
// Token sampling: greedy, temperature, top-k, top-p; seeded and deterministic (its own PRNG,
// independent of the standard library's distributions, so results match across platforms).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace sinkscope {

struct SamplerParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax, lowest id on ties)
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerParams p);
  TokenId sample(std::span<const float> logits);
  const SamplerParams& params() const { return m_params; }

 private:
  double next_uniform();  // [0, 1)
  SamplerParams m_params;
  uint64_t m_state;
  std::vector<std::pair<float, TokenId>> m_scratch;
};

TokenId argmax(std::span<const float> logits);

}  // namespace sinkscope
