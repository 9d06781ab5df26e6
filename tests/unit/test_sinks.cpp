// SPDX-License-Identifier: Apache-2.0
// Sink detection: the column-mass probe against float64 softmax probabilities, the analysis
// rules (epsilon, head share, recommendation and cap) and a run on a random model.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "engine/backend/cpu_attention.h"
#include "engine/format/gguf_writer.h"
#include "engine/eval/sinks.h"

namespace sinkscope {
namespace {

TEST(Sinks, ColumnMassProbeMatchesFloat64Probabilities) {
  const int n = 150, H = 3, HK = 1, d = 16, N = 8;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(size_t(n) * H * d), k(size_t(n) * HK * d), v(k.size());
  for (auto& x : q) x = nd(rng);
  for (auto& x : k) x = nd(rng);
  for (auto& x : v) x = nd(rng);
  for (int i = 0; i < n; ++i) q[size_t(i) * H * d] += 3.0f;  // heads 0 share a direction ...
  k[0] = 6.0f;                                              // ... that key 0 carries: a sink
  std::vector<float> out(q.size());
  std::vector<double> mass(size_t(H) * N, 0.0);
  CpuAttentionArgs a;
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.out = out.data();
  a.n_q = n;
  a.n_kv = n;
  a.n_head = H;
  a.n_head_kv = HK;
  a.d = d;
  a.scale = 0.25f;
  a.block_size = 64;
  a.q_tile = 64;
  a.col_mass = mass.data();
  a.col_n = N;
  cpu_attention(a, nullptr);
  for (int h = 0; h < H; ++h) {
    std::vector<double> ref(size_t(N), 0.0);
    for (int i = 0; i < n; ++i) {
      std::vector<double> s(size_t(i + 1));
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j <= i; ++j) {
        double acc = 0;
        for (int t = 0; t < d; ++t) acc += double(q[(size_t(i) * H + h) * d + t]) * k[size_t(j) * d + t];
        s[size_t(j)] = acc * 0.25;
        mx = std::max(mx, s[size_t(j)]);
      }
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int j = 0; j < std::min(N, i + 1); ++j) ref[size_t(j)] += s[size_t(j)] / sum;
    }
    for (int j = 0; j < N; ++j) EXPECT_NEAR(mass[size_t(h) * N + j], ref[size_t(j)], 1e-4 * n) << h << " " << j;
  }
  // Key 0 is a sink of head 0: alpha_0 = mass / n queries.
  EXPECT_GT(mass[0] / n, 0.3);
}

TEST(Sinks, AnalysisFlagsPositionsAndRecommendsTheCoveringCount) {
  const int L = 2, H = 5, N = 20;  // 10 (layer, head) pairs; 10 % = 1 pair
  std::vector<double> mass(size_t(L) * H * N, 0.0);
  std::vector<int64_t> queries(static_cast<size_t>(N));
  for (int k = 0; k < N; ++k) queries[size_t(k)] = 100 - k;
  auto set_alpha = [&](int l, int h, int k, double alpha) {
    mass[(size_t(l) * H + h) * N + k] = alpha * double(queries[size_t(k)]);
  };
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) set_alpha(l, h, 0, 0.8);  // position 0: every head
  set_alpha(1, 3, 2, 0.31);                                 // position 2: one head (10 %)
  set_alpha(0, 1, 5, 0.30);                                 // not > epsilon
  SinkReport r = analyze_sinks(L, H, N, mass, queries);
  EXPECT_EQ(r.sink_heads[0], 10);
  EXPECT_DOUBLE_EQ(r.head_share[0], 1.0);
  EXPECT_EQ(r.sink_heads[2], 1);
  EXPECT_EQ(r.sink_heads[5], 0);
  EXPECT_EQ(r.flagged, (std::vector<int>{0, 2}));
  EXPECT_EQ(r.recommended_sink_keep, 3);
  EXPECT_NEAR(r.alpha_at(1, 3, 2), 0.31, 1e-12);
  SinkCriteria strict;
  strict.min_head_share = 0.15;
  EXPECT_EQ(analyze_sinks(L, H, N, mass, queries, strict).recommended_sink_keep, 1);
  set_alpha(0, 0, 19, 0.9);  // a far position beyond the cap: not a reason to keep more
  EXPECT_EQ(analyze_sinks(L, H, N, mass, queries).recommended_sink_keep, 3);
  EXPECT_EQ(recommend_sink_keep({}, 16), 0);
  EXPECT_EQ(recommend_sink_keep({0, 37}, 16), 1);   // S = 16 would keep no more than S = 1
  EXPECT_EQ(recommend_sink_keep({0, 15}, 16), 16);  // the last position the cap allows
  EXPECT_EQ(recommend_sink_keep({20, 37}, 16), 0);  // none within the cap
  EXPECT_THROW(analyze_sinks(L, H, N + 1, mass, queries), BackendError);
}

// A prompt's last keys average too few queries to be judged: with a causal prefill of N = 20
// tokens key k has N - k queries, so keys 5..19 (fewer than 16) are never flagged, however
// high their alpha; key 4 (16 queries) and before are. analyze_alpha with the same counts
// agrees, without counts judges every position, and the verdict names the unjudged ones.
TEST(Sinks, PositionsWithTooFewQueriesAreNotJudged) {
  const int L = 1, H = 4, N = 20;
  std::vector<double> mass(size_t(L) * H * N, 0.0);
  std::vector<int64_t> queries(static_cast<size_t>(N));
  for (int k = 0; k < N; ++k) queries[size_t(k)] = N - k;
  auto set_alpha = [&](int h, int k, double alpha) {
    mass[size_t(h) * N + k] = alpha * double(queries[size_t(k)]);
  };
  for (int h = 0; h < H; ++h) {
    set_alpha(h, 0, 0.8);
    set_alpha(h, 4, 0.5);   // 16 queries: judged
    set_alpha(h, 5, 0.5);   // 15 queries: not judged
    set_alpha(h, 19, 1.0);  // the last key, its own query only
  }
  const SinkReport r = analyze_sinks(L, H, N, mass, queries);
  EXPECT_EQ(r.sink_heads[19], H);  // counted for the table ...
  EXPECT_EQ(r.flagged, (std::vector<int>{0, 4}));  // ... but not flagged
  EXPECT_EQ(r.recommended_sink_keep, 5);
  EXPECT_TRUE(r.judged(4));
  EXPECT_FALSE(r.judged(5));
  EXPECT_EQ(r.unjudged(), 15);
  EXPECT_NE(sink_verdict(r).find("15 positions have fewer than 16 queries"), std::string::npos)
      << sink_verdict(r);
  const SinkReport same = analyze_alpha(L, H, N, r.alpha, {}, r.queries);
  EXPECT_EQ(same.flagged, r.flagged);
  const SinkReport all = analyze_alpha(L, H, N, r.alpha);
  EXPECT_EQ(all.flagged, (std::vector<int>{0, 4, 5, 19}));
  EXPECT_EQ(all.unjudged(), 0);
  SinkCriteria loose;
  loose.min_queries = 1;
  EXPECT_EQ(analyze_sinks(L, H, N, mass, queries, loose).flagged, (std::vector<int>{0, 4, 5, 19}));
  EXPECT_THROW(analyze_alpha(L, H, N, r.alpha, {}, std::vector<int64_t>(N - 1, 100)), BackendError);
}

// A report of 10 heads x 50 positions: position 0 a sink of every head, 5 of two heads and 42
// of one (layer 1, head 3); 7 a sink of no head.
SinkReport synthetic_report() {
  const int L = 2, H = 5, N = 50;
  std::vector<double> alpha(size_t(L) * H * N, 0.01);
  auto at = [&](int l, int h, int k) -> double& { return alpha[(size_t(l) * H + h) * N + k]; };
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) at(l, h, 0) = 0.8;
  at(0, 2, 5) = 0.4;
  at(1, 4, 5) = 0.35;
  at(1, 3, 42) = 0.5;
  at(0, 0, 7) = 0.3;  // not > epsilon
  return analyze_alpha(L, H, N, alpha);
}

TEST(Sinks, AnalyzeAlphaMatchesAnalyzeSinks) {
  const int L = 1, H = 2, N = 3;
  const std::vector<double> mass = {10, 1, 0.5, 0.2, 9, 0.1};
  const std::vector<int64_t> queries = {20, 18, 16};
  const SinkReport a = analyze_sinks(L, H, N, mass, queries);
  std::vector<double> alpha = mass;
  for (int lh = 0; lh < L * H; ++lh)
    for (int k = 0; k < N; ++k) alpha[size_t(lh) * N + k] /= double(queries[size_t(k)]);
  const SinkReport b = analyze_alpha(L, H, N, alpha, {}, queries);
  EXPECT_FALSE(a.flagged.empty());
  EXPECT_EQ(a.flagged, b.flagged);
  EXPECT_EQ(a.sink_heads, b.sink_heads);
  EXPECT_EQ(a.recommended_sink_keep, b.recommended_sink_keep);
  EXPECT_EQ(a.queries, queries);
  EXPECT_EQ(a.n_queries, 20);
  EXPECT_THROW(analyze_alpha(L, H, N + 1, alpha), BackendError);
}

TEST(Sinks, HeadSinksArePerHead) {
  const SinkReport r = synthetic_report();
  EXPECT_EQ(r.flagged, (std::vector<int>{0, 5, 42}));
  EXPECT_EQ(head_sinks(r, 1, 3), (std::vector<int>{0, 42}));
  EXPECT_EQ(head_sinks(r, 0, 2), (std::vector<int>{0, 5}));
  EXPECT_EQ(head_sinks(r, 0, 0), (std::vector<int>{0}));  // 7 sits at epsilon, not above
  EXPECT_TRUE(head_sinks(r, 2, 0).empty());
  EXPECT_TRUE(head_sinks(r, 0, -1).empty());
}

TEST(Sinks, CoverageSplitsFlaggedPositionsAtS) {
  const SinkReport r = synthetic_report();
  EXPECT_EQ(r.recommended_sink_keep, 6);  // 0 and 5; 42 lies beyond the cap of 16
  const SinkCoverage rec = sink_coverage(r, r.recommended_sink_keep);
  EXPECT_EQ(rec.kept, (std::vector<int>{0, 5}));
  EXPECT_EQ(rec.not_kept, (std::vector<int>{42}));
  EXPECT_TRUE(rec.beyond_cap);
  const SinkCoverage four = sink_coverage(r, 4);
  EXPECT_EQ(four.kept, (std::vector<int>{0}));
  EXPECT_EQ(four.not_kept, (std::vector<int>{5, 42}));
  const SinkCoverage none = sink_coverage(r, 0);
  EXPECT_TRUE(none.kept.empty());
  EXPECT_EQ(none.not_kept.size(), 3u);
  SinkReport near = synthetic_report();
  near.flagged = {0, 5};
  EXPECT_FALSE(sink_coverage(near, 4).beyond_cap);
}

TEST(Sinks, VerdictGivesEachFlaggedPositionItsHeadShare) {
  const SinkReport r = synthetic_report();
  EXPECT_EQ(sink_verdict(r), "position 0 in 100 % of heads; 5 in 20 %; 42 in 10 %");
  SinkReport none = analyze_alpha(1, 1, 2, {0.1, 0.1});
  EXPECT_EQ(sink_verdict(none), "no position is a sink in 10 % of heads or more");
}

TEST(Sinks, RecommendationSaysWhatItKeepsAndWhy) {
  const SinkReport r = synthetic_report();
  const std::string rec = sink_recommendation(r);
  EXPECT_NE(rec.find("recommended sink_keep_count = 6:"), std::string::npos) << rec;
  EXPECT_NE(rec.find("keeps position(s) 0, 5"), std::string::npos) << rec;
  EXPECT_NE(rec.find("does not keep 42"), std::string::npos) << rec;
  EXPECT_NE(rec.find("cap of 16"), std::string::npos) << rec;
  const std::string four = describe_sink_keep(r, 4);
  EXPECT_NE(four.find("S = 4 keeps position(s) 0;"), std::string::npos) << four;
  EXPECT_NE(four.find("does not keep 5, 42"), std::string::npos) << four;
  EXPECT_NE(four.find("5 lie(s) beyond the first 4 keys: S = 6"), std::string::npos) << four;
  EXPECT_NE(describe_sink_keep(r, 43).find("every flagged position"), std::string::npos);
  SinkReport none = analyze_alpha(1, 1, 2, {0.1, 0.1});
  EXPECT_NE(sink_recommendation(none).find("nothing to keep"), std::string::npos);
}

TEST(Sinks, DetectionOnARandomModelIsConsistent) {
  namespace fs = std::filesystem;
  fs::path p = fs::temp_directory_path() / "sinkscope_test_models" / "sinks_random.gguf";
  fs::create_directories(p.parent_path());
  TestModelShape shape;
  make_random_llama(shape, 31).write(p);
  auto model = Model::load(p);
  auto be = make_cpu_backend(model, {});
  std::mt19937 rng(4);
  std::vector<TokenId> ids(100);
  for (auto& t : ids) t = TokenId(rng() % uint32_t(model->config().n_vocab));
  // Every position examined: each query's probabilities sum to 1 over its keys.
  SinkReport r = detect_sinks(*be, ids, 100);
  const AttentionProbes& pr = be->probes();
  EXPECT_EQ(pr.col_n, 0);  // the probe is switched off again
  EXPECT_EQ(r.n_queries, 100);
  for (int l = 0; l < r.n_layer; ++l)
    for (int h = 0; h < r.n_head; ++h) {
      double total = 0;
      for (int k = 0; k < 100; ++k) {
        const double a = r.alpha_at(l, h, k);
        EXPECT_GE(a, 0.0);
        EXPECT_LE(a, 1.0 + 1e-6);
        total += a * double(100 - k);
      }
      EXPECT_NEAR(total, 100.0, 1e-3);
    }
  // Position 0 is seen alone by query 0 (P = 1), so alpha_0 >= 1/100 in every head.
  EXPECT_GE(r.alpha_at(0, 0, 0), 0.01);
  // The probe does not change the forward's logits.
  std::vector<float> with, without;
  be->reset();
  be->forward(ids, LogitsMode::kLast, without);
  be->request_column_mass(8);
  be->reset();
  be->forward(ids, LogitsMode::kLast, with);
  EXPECT_EQ(with, without);
  EXPECT_EQ(be->probes().col_queries[3], 97);
  // No learned sinks in a Llama: nothing reported for them.
  EXPECT_TRUE(r.learned_mass.empty());
  EXPECT_EQ(learned_sink_summary(r), "");
}

// gpt-oss (the transformers oracle's tiny model): the report carries each head's learned sink
// mass, and on a global layer with every position examined it is exactly what the keys' alpha
// leaves of each query (alpha_k * queries summed over k, plus the sink mass, is one per query).
// The recommendation counts keys only.
TEST(Sinks, LearnedSinksAreReportedNextToAlpha) {
  auto model = Model::load(std::filesystem::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" /
                           "oracles" / "gpt_oss_mxfp4.gguf");
  const ModelConfig& c = model->config();
  auto be = make_cpu_backend(model, {});
  std::mt19937 rng(5);
  const int n = 40;
  std::vector<TokenId> ids(static_cast<size_t>(n));
  for (auto& t : ids) t = TokenId(rng() % uint32_t(c.n_vocab));
  const SinkReport r = detect_sinks(*be, ids, n);
  ASSERT_EQ(r.learned_mass.size(), size_t(c.n_layer) * c.n_head);
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head; ++h) {
      const double sink = r.learned_at(l, h);
      EXPECT_GT(sink, 0.0);
      EXPECT_LT(sink, 1.0);
      if (c.layer_window(l) != 0) continue;  // the global layer: every query sees every key
      double keys = 0;
      for (int k = 0; k < n; ++k) keys += r.alpha_at(l, h, k) * double(n - k);
      EXPECT_NEAR(keys / n + sink, 1.0, 1e-5) << "layer " << l << " head " << h;
    }
  const std::string summary = learned_sink_summary(r);
  EXPECT_NE(summary.find("learned sinks: mean mass"), std::string::npos) << summary;
  EXPECT_NE(summary.find("outside sink_keep_count"), std::string::npos) << summary;
  EXPECT_LE(r.recommended_sink_keep, r.criteria.max_keep);
}

}  // namespace
}  // namespace sinkscope
