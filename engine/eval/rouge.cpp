// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/rouge.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace sinkscope {

size_t lcsLength(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const std::vector<int32_t>& outer = a.size() >= b.size() ? a : b;
  const std::vector<int32_t>& inner = a.size() >= b.size() ? b : a;
  std::vector<size_t> prev(inner.size() + 1, 0), cur(inner.size() + 1, 0);
  for (int32_t x : outer) {
    for (size_t j = 1; j <= inner.size(); ++j)
      cur[j] = x == inner[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    std::swap(prev, cur);
  }
  return prev[inner.size()];
}

double rougeLF1(const std::vector<int32_t>& reference, const std::vector<int32_t>& candidate) {
  if (reference.empty() && candidate.empty()) return 1.0;
  if (reference.empty() || candidate.empty()) return 0.0;
  const double lcs = double(lcsLength(reference, candidate));
  if (lcs == 0) return 0.0;
  const double p = lcs / double(candidate.size());
  const double r = lcs / double(reference.size());
  return 2 * p * r / (p + r);
}

double rougeLF1Words(std::string_view reference, std::string_view candidate) {
  std::unordered_map<std::string, int32_t> ids;
  auto words = [&ids](std::string_view s) {
    std::vector<int32_t> out;
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
      size_t j = i;
      while (j < s.size() && !(s[j] == ' ' || s[j] == '\n' || s[j] == '\t' || s[j] == '\r')) ++j;
      if (j > i) out.push_back(ids.emplace(std::string(s.substr(i, j - i)), int32_t(ids.size())).first->second);
      i = j;
    }
    return out;
  };
  const auto ref = words(reference);
  const auto cand = words(candidate);
  return rougeLF1(ref, cand);
}

}  // namespace sinkscope
