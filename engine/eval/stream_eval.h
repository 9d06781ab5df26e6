// SPDX-License-Identifier: Apache-2.0
// Streaming evaluation (issue 5): perplexity of a long token stream fed through a backend's
// (bounded) KV cache in chunks, overall and per segment; and the reference "sliding window with
// re-computation", where each scored token's logits come from a fresh forward over its last W
// tokens (StreamingLLM's baseline; O(W) work per token, so it can score every k-th token).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/eval/quality.h"

namespace sinkscope {

struct StreamOptions {
  int chunk = 1;           // tokens per forward (1: token by token)
  int segment = 1000;      // tokens per reported segment
  int64_t max_tokens = 0;  // 0: the whole stream
  int score_stride = 1;    // stream_perplexity: score tokens i % score_stride == 0 only (every
                           // token is still fed); the tokens recompute_perplexity(stride) scores
};

struct StreamSegment {
  int64_t begin = 0, end = 0;  // token indices [begin, end) of the stream
  int64_t scored = 0;          // tokens predicted inside it
  double mean_nll = 0, perplexity = 0;
};

struct StreamResult {
  int64_t tokens = 0;       // stream length used
  int64_t scored = 0;       // tokens predicted (all but the first, or every stride-th)
  double mean_nll = 0, perplexity = 0;
  double seconds = 0;
  std::vector<StreamSegment> segments;
  std::vector<float> nll;   // per scored token, in stream order
  std::vector<int64_t> scored_index;  // the stream index of each nll entry
  KvCacheStats cache;       // at the end (high-water mark included)
};

struct StreamProgress {
  int64_t done = 0, total = 0;  // tokens fed (or scored, for recompute)
  double eta_s = 0;
  double perplexity_so_far = 0;
};
using StreamProgressFn = std::function<void(const StreamProgress&)>;

// Resets the backend, then feeds tokens [0, n) in chunks; token i >= 1 (with i % score_stride
// == 0) is scored with the logits of token i - 1. Throws BackendError for fewer than 2 tokens,
// a chunk < 1 or a score_stride < 1.
StreamResult stream_perplexity(Backend& backend, const std::vector<TokenId>& tokens,
                               const StreamOptions& options, const StreamProgressFn& progress = {});

// Sliding window with re-computation: scores tokens i = stride, 2*stride, ... (i >= 1) from a
// fresh forward over tokens [max(0, i - window), i). The backend should use a full cache.
StreamResult recompute_perplexity(Backend& backend, const std::vector<TokenId>& tokens, int window,
                                  int stride, const StreamOptions& options,
                                  const StreamProgressFn& progress = {});

// Streams the same tokens through two backends in lock step (the same chunks) and compares their
// next-token distributions: KL(reference || variant), top-1 agreement and both perplexities, over
// the tokens stream_perplexity would score (i >= 1, i % score_stride == 0), overall and per
// segment (LogitComparison per segment). Used for "int8/int4 KV vs unquantized KV" under one cache
// policy. Both backends are reset first; their vocabularies must match.
struct StreamComparison {
  int64_t tokens = 0;
  LogitComparison total;
  std::vector<std::pair<int64_t, LogitComparison>> segments;  // (segment begin, figures)
  KvCacheStats reference_cache, variant_cache;
  double seconds = 0;
};
StreamComparison compare_streams(Backend& reference, Backend& variant,
                                 const std::vector<TokenId>& tokens, const StreamOptions& options,
                                 const StreamProgressFn& progress = {});

// -log softmax(row)[target] in double.
double token_nll(const float* logits_row, int n_vocab, TokenId target);

}  // namespace sinkscope
