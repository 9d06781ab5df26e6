// SPDX-License-Identifier: Apache-2.0
// High-level runs over a backend: generation and perplexity, with timings.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/sampler.h"

namespace sinkscope {

struct GenerateOptions {
  int max_tokens = 64;
  SamplerParams sampler;
  bool stop_at_eog = true;
  // When set, the prefill writes the logits of every prompt position there ((n, n_vocab), the
  // vector reused), and the first token is sampled from its last row.
  std::vector<float>* prompt_logits = nullptr;
  // When set (and prompt_logits is not), the prefill computes per-row statistics of every
  // prompt position where the logits are (LogitsMode::kLastRowStats) and writes them here.
  RowStats* prompt_row_stats = nullptr;
  // The backend already holds the prompt (rewound to the end of an earlier prefill) and
  // *prompt_logits its logits: no reset, no prefill (prefill_ms is 0).
  bool prompt_in_cache = false;
  // Called once the prompt is in the cache, before the first token is sampled (e.g. to read the
  // prefill's probes or start work on the prompt's logits).
  std::function<void()> on_prefill_done;
};

struct GenerateResult {
  std::vector<TokenId> prompt_tokens;
  std::vector<TokenId> tokens;  // generated
  std::string text;             // decoded generated text
  std::string stop_reason;      // "eog" | "max_tokens" | "context_full"
  double prefill_ms = 0;        // prompt forward (includes time to first token's logits)
  double decode_ms = 0;         // all later forwards
  double prefill_tokens_per_s() const;
  double decode_tokens_per_s() const;
};

// Generates from prompt token ids on a fresh cache (the backend is reset first, unless
// options.prompt_in_cache). on_token is called with each new token as soon as it is sampled.
GenerateResult generate(Backend& backend, const std::vector<TokenId>& prompt,
                        const GenerateOptions& options,
                        const std::function<void(TokenId)>& on_token = {});

struct PerplexityResult {
  double perplexity = 0;
  double mean_nll = 0;    // nats per predicted token
  int64_t n_predicted = 0;
  int n_chunks = 0;
  double seconds = 0;
  std::vector<double> chunk_ppl;
  AttentionProbes probes;  // tile counts summed over every chunk
};

struct PerplexityProgress {
  int chunk = 0, n_chunks = 0;
  double eta_s = 0;
};

// Splits tokens into chunks of ctx tokens, runs each on a fresh cache and scores tokens of the
// second half of every chunk (the first half is context), like llama.cpp's perplexity tool;
// with ctx >= n it scores all but the first token. Throws when fewer than 2 tokens.
PerplexityResult perplexity(Backend& backend, const std::vector<TokenId>& tokens, int ctx,
                            const std::function<void(const PerplexityProgress&)>& progress = {});

}  // namespace sinkscope
