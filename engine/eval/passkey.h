// SPDX-License-Identifier: Apache-2.0
// Passkey retrieval (Mohtashami & Jaggi 2023 style): a number hidden at a chosen depth inside
// repetitive filler of a chosen token length, then the question. The generator is
// deterministic for a seed; the scorer takes the first run of digits of the greedy answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/tokenizer/tokenizer.h"

namespace sinkscope {

struct PasskeyTask {
  std::string passkey;          // 5 digits
  std::string prompt;           // the whole text, ending in "The pass key is"
  std::vector<TokenId> tokens;  // prompt tokens (bos first when the tokenizer adds one)
  int target_tokens = 0;        // requested length
  double depth = 0;             // requested depth in [0, 1]
  int needle_token = 0;         // token index where the passkey sentence starts
  uint64_t seed = 0;
};

// Throws std::invalid_argument for target_tokens too small to hold the frame (< ~96) or depth
// outside [0, 1].
PasskeyTask make_passkey_task(const Tokenizer& tok, int target_tokens, double depth,
                              uint64_t seed);

// The first run of ASCII digits in text ("" when none).
std::string first_digits(const std::string& text);
bool passkey_correct(const std::string& answer, const std::string& passkey);

struct PasskeyOutcome {
  std::string answer;  // decoded greedy continuation
  std::string digits;  // first_digits(answer)
  bool correct = false;
  int prompt_tokens = 0;
};

// Greedy continuation of max_new_tokens on a fresh cache, scored.
PasskeyOutcome run_passkey(Backend& backend, const PasskeyTask& task, int max_new_tokens = 10);

}  // namespace sinkscope
