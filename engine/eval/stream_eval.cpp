// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/stream_eval.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/eval/logit_stats.h"
#include "profiler/spans.h"

namespace sinkscope {
namespace {

void finish(StreamResult& r, const StreamOptions& o) {
  double total = 0;
  for (float v : r.nll) total += double(v);
  r.scored = int64_t(r.nll.size());
  r.mean_nll = r.scored ? total / double(r.scored) : 0.0;
  r.perplexity = std::exp(r.mean_nll);
  const int64_t seg = std::max(1, o.segment);
  for (size_t i = 0; i < r.nll.size(); ++i) {
    const int64_t s = r.scored_index[i] / seg;
    while (int64_t(r.segments.size()) <= s) {
      StreamSegment g;
      g.begin = int64_t(r.segments.size()) * seg;
      g.end = std::min(r.tokens, g.begin + seg);
      r.segments.push_back(g);
    }
    r.segments[size_t(s)].scored += 1;
    r.segments[size_t(s)].mean_nll += double(r.nll[i]);
  }
  for (auto& g : r.segments) {
    if (g.scored) g.mean_nll /= double(g.scored);
    g.perplexity = std::exp(g.mean_nll);
  }
}

int64_t stream_length(const std::vector<TokenId>& tokens, const StreamOptions& o) {
  int64_t n = int64_t(tokens.size());
  if (o.max_tokens > 0) n = std::min(n, o.max_tokens);
  if (n < 2) throw BackendError("stream evaluation: need at least 2 tokens, got " + std::to_string(n));
  return n;
}

}  // namespace

double token_nll(const float* row, int n_vocab, TokenId target) {
  return token_nll_of(row, n_vocab, target);
}

StreamResult stream_perplexity(Backend& backend, const std::vector<TokenId>& tokens,
                               const StreamOptions& o, const StreamProgressFn& progress) {
  if (o.chunk < 1) throw BackendError("stream evaluation: chunk must be >= 1");
  if (o.score_stride < 1) throw BackendError("stream evaluation: score stride must be >= 1");
  StreamResult r;
  r.tokens = stream_length(tokens, o);
  const int V = backend.model().config().n_vocab;
  backend.reset();
  const int64_t t0 = prof::now_ns();
  std::vector<float> logits;
  std::vector<float> prev(static_cast<size_t>(V));
  double running = 0;
  for (int64_t off = 0; off < r.tokens; off += o.chunk) {
    const int64_t m = std::min<int64_t>(o.chunk, r.tokens - off);
    std::span<const TokenId> chunk(tokens.data() + off, size_t(m));
    backend.forward(chunk, LogitsMode::kAll, logits);
    // Token off is predicted by the previous chunk's last row; tokens off+1.. by this chunk.
    for (int64_t i = 0; i < m; ++i) {
      const int64_t idx = off + i;
      if (idx == 0 || idx % o.score_stride != 0) continue;
      const float* row = i == 0 ? prev.data() : logits.data() + size_t(i - 1) * V;
      const double v = token_nll(row, V, tokens[size_t(idx)]);
      r.nll.push_back(float(v));
      r.scored_index.push_back(idx);
      running += v;
    }
    std::copy_n(logits.data() + size_t(m - 1) * V, V, prev.data());
    if (progress) {
      const double el = double(prof::now_ns() - t0) / 1e9;
      const int64_t done = off + m;
      progress({done, r.tokens, el / double(done) * double(r.tokens - done),
                r.nll.empty() ? 0.0 : std::exp(running / double(r.nll.size()))});
    }
  }
  r.seconds = double(prof::now_ns() - t0) / 1e9;
  r.cache = backend.cache_stats();
  finish(r, o);
  return r;
}

StreamResult recompute_perplexity(Backend& backend, const std::vector<TokenId>& tokens, int window,
                                  int stride, const StreamOptions& o,
                                  const StreamProgressFn& progress) {
  if (window < 1) throw BackendError("recompute: window must be >= 1");
  if (stride < 1) throw BackendError("recompute: stride must be >= 1");
  StreamResult r;
  r.tokens = stream_length(tokens, o);
  const int V = backend.model().config().n_vocab;
  const int64_t t0 = prof::now_ns();
  std::vector<float> logits;
  double running = 0;
  const int64_t first = stride;  // token 0 has no context
  const int64_t total = (r.tokens - 1) / stride;
  for (int64_t idx = first; idx < r.tokens; idx += stride) {
    const int64_t b = std::max<int64_t>(0, idx - window);
    backend.reset();
    std::span<const TokenId> ctx(tokens.data() + b, size_t(idx - b));
    backend.forward(ctx, LogitsMode::kLast, logits);
    const double v = token_nll(logits.data(), V, tokens[size_t(idx)]);
    r.nll.push_back(float(v));
    r.scored_index.push_back(idx);
    running += v;
    if (progress) {
      const double el = double(prof::now_ns() - t0) / 1e9;
      const int64_t done = int64_t(r.nll.size());
      progress({done, total, el / double(done) * double(total - done),
                std::exp(running / double(done))});
    }
  }
  r.seconds = double(prof::now_ns() - t0) / 1e9;
  r.cache = backend.cache_stats();
  finish(r, o);
  return r;
}

StreamComparison compare_streams(Backend& reference, Backend& variant,
                                 const std::vector<TokenId>& tokens, const StreamOptions& o,
                                 const StreamProgressFn& progress) {
  if (o.chunk < 1) throw BackendError("stream comparison: chunk must be >= 1");
  if (o.score_stride < 1) throw BackendError("stream comparison: score stride must be >= 1");
  const int V = reference.model().config().n_vocab;
  if (variant.model().config().n_vocab != V)
    throw BackendError("stream comparison: the two backends' vocabularies differ");
  StreamComparison c;
  c.tokens = stream_length(tokens, o);
  const int64_t seg = std::max(1, o.segment);
  reference.reset();
  variant.reset();
  const int64_t t0 = prof::now_ns();
  std::vector<float> lr, lv, rows_r, rows_v;
  std::vector<TokenId> next;
  for (int64_t off = 0; off < c.tokens; off += o.chunk) {
    const int64_t m = std::min<int64_t>(o.chunk, c.tokens - off);
    std::span<const TokenId> chunk(tokens.data() + off, size_t(m));
    reference.forward(chunk, LogitsMode::kAll, lr);
    variant.forward(chunk, LogitsMode::kAll, lv);
    // Row i predicts token off + i + 1; compared rows are grouped by that token's segment.
    for (int64_t i = 0; i < m; ++i) {
      const int64_t target = off + i + 1;
      if (target >= c.tokens || target % o.score_stride != 0) continue;
      const std::span<const float> rr(lr.data() + size_t(i) * V, size_t(V));
      const std::span<const float> rv(lv.data() + size_t(i) * V, size_t(V));
      const TokenId nx = tokens[size_t(target)];
      const LogitComparison one = compare_logits(rr, rv, V, std::span<const TokenId>(&nx, 1));
      c.total.add(one);
      const int64_t s = target / seg;
      if (c.segments.empty() || c.segments.back().first != s * seg)
        c.segments.push_back({s * seg, LogitComparison{}});
      c.segments.back().second.add(one);
    }
    if (progress) {
      const double el = double(prof::now_ns() - t0) / 1e9;
      const int64_t done = off + m;
      progress({done, c.tokens, el / double(done) * double(c.tokens - done),
                c.total.scored ? c.total.ppl_variant() : 0.0});
    }
  }
  c.seconds = double(prof::now_ns() - t0) / 1e9;
  c.reference_cache = reference.cache_stats();
  c.variant_cache = variant.cache_stats();
  return c;
}

}  // namespace sinkscope
