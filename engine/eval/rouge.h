// SPDX-License-Identifier: Apache-2.0
// ROUGE-L (Lin, 2004): F1 of the longest common subsequence of two sequences. The contract's
// generation-similarity metric; used on greedy token sequences.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sinkscope {

// Length of the longest common subsequence (O(n*m) time, O(min(n, m)) memory).
size_t lcsLength(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

// F1 of LCS-based precision (lcs / |candidate|) and recall (lcs / |reference|). Two empty
// sequences score 1; one empty sequence scores 0.
double rougeLF1(const std::vector<int32_t>& reference, const std::vector<int32_t>& candidate);

// The same over whitespace-separated words of two texts.
double rougeLF1Words(std::string_view reference, std::string_view candidate);

}  // namespace sinkscope
