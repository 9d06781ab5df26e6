// SPDX-License-Identifier: Apache-2.0
#include "engine/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace sinkscope {

TokenId argmax(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("argmax: empty logits");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;  // strict: lowest id wins ties
  return TokenId(best);
}

Sampler::Sampler(SamplerParams p) : m_params(p) {
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    throw std::invalid_argument("top_p must be in (0, 1], got " + std::to_string(p.top_p));
  if (p.top_k < 0) throw std::invalid_argument("top_k must be >= 0");
  if (!std::isfinite(p.temperature)) throw std::invalid_argument("temperature must be finite");
  // splitmix64 of the seed, so nearby seeds give unrelated streams.
  uint64_t z = p.seed + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  m_state = (z ^ (z >> 31)) | 1;
}

double Sampler::next_uniform() {
  // xorshift64*: small, fast, and the same sequence on every platform.
  m_state ^= m_state >> 12;
  m_state ^= m_state << 25;
  m_state ^= m_state >> 27;
  const uint64_t r = m_state * 0x2545F4914F6CDD1Dull;
  return double(r >> 11) * (1.0 / 9007199254740992.0);
}

TokenId Sampler::sample(std::span<const float> logits) {
  if (m_params.temperature <= 0.0f) return argmax(logits);
  const size_t n = logits.size();
  if (n == 0) throw std::invalid_argument("sample: empty logits");
  m_scratch.resize(n);
  for (size_t i = 0; i < n; ++i) m_scratch[i] = {logits[i], TokenId(i)};
  // Sort by logit (descending, then id) so top-k/top-p and the draw are deterministic.
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t keep = n;
  if (m_params.top_k > 0) keep = std::min(keep, size_t(m_params.top_k));
  std::partial_sort(m_scratch.begin(), m_scratch.begin() + long(keep), m_scratch.end(), by_logit);
  m_scratch.resize(keep);

  const double inv_t = 1.0 / double(m_params.temperature);
  const double mx = m_scratch[0].first;
  std::vector<double> p(keep);
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    p[i] = std::exp((double(m_scratch[i].first) - mx) * inv_t);
    sum += p[i];
  }
  if (m_params.top_p < 1.0f) {
    double cum = 0.0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      cum += p[i] / sum;
      if (cum >= double(m_params.top_p)) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    sum = 0.0;
    for (size_t i = 0; i < keep; ++i) sum += p[i];
  }
  double u = next_uniform() * sum;
  for (size_t i = 0; i < keep; ++i) {
    u -= p[i];
    if (u < 0.0) return m_scratch[i].second;
  }
  return m_scratch[keep - 1].second;
}

}  // namespace sinkscope
