// SPDX-License-Identifier: Apache-2.0
#include "engine/model/session.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "engine/eval/logit_stats.h"
#include "profiler/spans.h"

namespace sinkscope {

double GenerateResult::prefill_tokens_per_s() const {
  return prefill_ms > 0 ? double(prompt_tokens.size()) * 1000.0 / prefill_ms : 0.0;
}

double GenerateResult::decode_tokens_per_s() const {
  // The first generated token comes from the prefill logits; later ones each cost a forward.
  const size_t steps = tokens.size() > 0 ? tokens.size() - 1 : 0;
  return decode_ms > 0 && steps > 0 ? double(steps) * 1000.0 / decode_ms : 0.0;
}

GenerateResult generate(Backend& backend, const std::vector<TokenId>& prompt,
                        const GenerateOptions& options,
                        const std::function<void(TokenId)>& on_token) {
  if (prompt.empty()) throw BackendError("generate: the prompt is empty (0 tokens)");
  if (options.max_tokens < 1) throw BackendError("generate: max_tokens must be >= 1");
  if (int64_t(prompt.size()) >= backend.capacity())
    throw BackendError("generate: the prompt has " + std::to_string(prompt.size()) +
                       " tokens, which leaves no room in a context of " +
                       std::to_string(backend.capacity()) + " tokens");
  const size_t nv = size_t(backend.model().config().n_vocab);
  if (options.prompt_in_cache &&
      (!options.prompt_logits || options.prompt_logits->size() != prompt.size() * nv ||
       backend.n_past() != int64_t(prompt.size())))
    throw BackendError("generate: prompt_in_cache needs the backend at the prompt's end and its "
                       "logits in prompt_logits");
  const Tokenizer& tok = backend.model().tokenizer();
  GenerateResult r;
  r.prompt_tokens = prompt;
  Sampler sampler(options.sampler);
  std::vector<float> logits;

  if (!options.prompt_in_cache) {
    backend.reset();
    const int64_t t0 = prof::now_ns();
    if (options.prompt_logits) {
      backend.forward(prompt, LogitsMode::kAll, *options.prompt_logits);
    } else if (options.prompt_row_stats) {
      backend.forward(prompt, LogitsMode::kLastRowStats, logits);
      if (!backend.last_row_stats(options.prompt_row_stats))
        throw BackendError("generate: the " + backend.name() +
                           " backend computed no row statistics for the prompt");
    } else {
      backend.forward(prompt, LogitsMode::kLast, logits);
    }
    r.prefill_ms = double(prof::now_ns() - t0) / 1e6;
  }
  if (options.on_prefill_done) options.on_prefill_done();
  // The row the first token is sampled from.
  std::span<const float> row(logits);
  if (options.prompt_logits) row = std::span<const float>(*options.prompt_logits).last(nv);

  const int64_t t1 = prof::now_ns();
  r.stop_reason = "max_tokens";
  for (int i = 0; i < options.max_tokens; ++i) {
    const TokenId next = sampler.sample(row);
    r.tokens.push_back(next);
    if (on_token) on_token(next);
    if (options.stop_at_eog && tok.is_eog(next)) {
      r.stop_reason = "eog";
      break;
    }
    if (i + 1 == options.max_tokens) break;
    if (backend.n_past() >= backend.capacity()) {
      r.stop_reason = "context_full";
      break;
    }
    const TokenId one[1] = {next};
    backend.forward(one, LogitsMode::kLast, logits);
    row = logits;
  }
  r.decode_ms = double(prof::now_ns() - t1) / 1e6;
  r.text = tok.decode(r.tokens, /*skip_special=*/true);
  return r;
}

PerplexityResult perplexity(Backend& backend, const std::vector<TokenId>& tokens, int ctx,
                            const std::function<void(const PerplexityProgress&)>& progress) {
  if (tokens.size() < 2) throw BackendError("perplexity: need at least 2 tokens");
  if (ctx < 2) throw BackendError("perplexity: ctx must be >= 2");
  if (ctx > backend.capacity())
    throw BackendError("perplexity: ctx " + std::to_string(ctx) + " exceeds the capacity of " +
                       std::to_string(backend.capacity()) + " tokens");
  PerplexityResult r;
  const int n_vocab = backend.model().config().n_vocab;
  const int64_t n = int64_t(tokens.size());
  const bool single = n <= ctx;
  const int n_chunks = single ? 1 : int(n / ctx);
  const int64_t t0 = prof::now_ns();
  std::vector<float> logits;
  double nll_total = 0.0;
  for (int c = 0; c < n_chunks; ++c) {
    const int64_t begin = int64_t(c) * ctx;
    const int64_t len = single ? n : ctx;
    // Score the second half of each chunk (the first half is context), or all but the first
    // token for a single short text.
    const int64_t first_scored = single ? 1 : len / 2;
    backend.reset();
    std::span<const TokenId> chunk(tokens.data() + begin, size_t(len));
    backend.forward(chunk, LogitsMode::kAll, logits);
    double nll = 0.0;
    int64_t count = 0;
    for (int64_t i = first_scored; i < len; ++i) {
      // logits row i-1 predicts token i.
      const float* row = logits.data() + (i - 1) * n_vocab;
      nll += token_nll_of(row, n_vocab, chunk[size_t(i)]);
      ++count;
    }
    nll_total += nll;
    const AttentionProbes& bp = backend.probes();
    if (c == 0) r.probes.reset(bp.n_layer, bp.n_head);
    for (size_t i = 0; i < bp.prefill.size(); ++i) r.probes.prefill[i].add(bp.prefill[i]);
    for (size_t i = 0; i < bp.decode.size(); ++i) r.probes.decode[i].add(bp.decode[i]);
    r.n_predicted += count;
    r.chunk_ppl.push_back(std::exp(nll / double(std::max<int64_t>(1, count))));
    if (progress) {
      const double elapsed = double(prof::now_ns() - t0) / 1e9;
      progress({c + 1, n_chunks, elapsed / double(c + 1) * double(n_chunks - c - 1)});
    }
  }
  r.n_chunks = n_chunks;
  r.mean_nll = nll_total / double(std::max<int64_t>(1, r.n_predicted));
  r.perplexity = std::exp(r.mean_nll);
  r.seconds = double(prof::now_ns() - t0) / 1e9;
  return r;
}

}  // namespace sinkscope
