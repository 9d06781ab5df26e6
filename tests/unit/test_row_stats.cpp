// SPDX-License-Identifier: Apache-2.0
// LogitsMode::kLastRowStats and Backend::kl_rows on the CPU backend, against the same forward's
// all-position logits reduced here in double (an independent loop, no engine statistics code):
// per-row log-sum-exp, argmax and next-token logit, the last row's logits, and KL(p || q) of two
// runs from their final hidden states; with the full cache and a sliding window.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "engine/backend/backend.h"
#include "engine/format/gguf_writer.h"
#include "engine/model/session.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const Model> small_model() {
  fs::path dir = fs::temp_directory_path() / "sinkscope_test_models";
  fs::create_directories(dir);
  const fs::path p = dir / "row_stats.gguf";
  TestModelShape shape;
  shape.n_layer = 2;
  shape.n_embd = 64;
  shape.n_head = 4;
  shape.n_head_kv = 2;
  shape.n_vocab = 500;
  make_random_llama(shape, 41).write(p);
  return Model::load(p);
}

std::vector<TokenId> ids_of(int n, int vocab) {
  std::mt19937 g(7);
  std::vector<TokenId> ids(static_cast<size_t>(n));
  for (TokenId& t : ids) t = TokenId(g() % uint32_t(vocab));
  return ids;
}

struct Direct {
  std::vector<double> lse;
  std::vector<int> top1;
};

Direct reduce(const std::vector<float>& logits, int n, int nv) {
  Direct d;
  for (int i = 0; i < n; ++i) {
    const float* r = logits.data() + size_t(i) * nv;
    double mx = -1e300;
    int arg = 0;
    for (int t = 0; t < nv; ++t)
      if (double(r[t]) > mx) mx = r[t], arg = t;
    double s = 0;
    for (int t = 0; t < nv; ++t) s += std::exp(double(r[t]) - mx);
    d.lse.push_back(mx + std::log(s));
    d.top1.push_back(arg);
  }
  return d;
}

void expect_stats_match(Backend& be, const std::vector<TokenId>& ids) {
  const int n = int(ids.size()), nv = be.model().config().n_vocab;
  std::vector<float> all, last;
  be.reset();
  be.forward(ids, LogitsMode::kAll, all);
  const Direct d = reduce(all, n, nv);
  be.reset();
  be.forward(ids, LogitsMode::kLastRowStats, last);
  RowStats st;
  ASSERT_TRUE(be.last_row_stats(&st));
  ASSERT_EQ(st.lse.size(), size_t(n));
  ASSERT_EQ(st.top1.size(), size_t(n));
  ASSERT_EQ(st.next_logit.size(), size_t(n - 1));
  ASSERT_TRUE(st.hidden);
  EXPECT_EQ(st.hidden->n, n);
  EXPECT_EQ(st.hidden->x.size(), size_t(n) * be.model().config().n_embd);
  ASSERT_EQ(last.size(), size_t(nv));
  EXPECT_TRUE(std::equal(last.begin(), last.end(), all.end() - nv));
  for (int i = 0; i < n; ++i) {
    EXPECT_NEAR(st.lse[size_t(i)], d.lse[size_t(i)], 1e-9 * std::max(1.0, std::abs(d.lse[size_t(i)])))
        << "row " << i;
    EXPECT_EQ(st.top1[size_t(i)], d.top1[size_t(i)]) << "row " << i;
    if (i + 1 < n) {
      EXPECT_EQ(st.next_logit[size_t(i)], all[size_t(i) * nv + size_t(ids[size_t(i) + 1])]);
    }
  }
}

TEST(RowStats, EqualTheAllPositionLogitsReducedInDouble) {
  auto model = small_model();
  const auto ids = ids_of(150, model->config().n_vocab);
  auto be = make_cpu_backend(model, {});
  expect_stats_match(*be, ids);
}

TEST(RowStats, EqualThemWithASlidingWindowCache) {
  auto model = small_model();
  const auto ids = ids_of(400, model->config().n_vocab);
  BackendOptions o;
  o.attention.block_size = 64;
  o.cache.strategy = CacheStrategy::kSlidingWindow;
  o.cache.window_size = 128;
  o.cache.sink_keep_count = 4;
  auto be = make_cpu_backend(model, o);
  expect_stats_match(*be, ids);
}

TEST(RowStats, KlRowsIsTheKlOfTheTwoRunsLogits) {
  auto model = small_model();
  const int nv = model->config().n_vocab;
  const auto ids = ids_of(300, nv);
  const int n = int(ids.size());
  BackendOptions sparse;  // an int4 KV cache: logits that surely differ from dense
  sparse.cache.quantization.enabled = true;
  sparse.cache.quantization.kv_dtype = KvQuantDtype::kInt4;
  sparse.cache.quantization.group_size = 16;
  sparse.cache.quantization.protect_sink_positions = false;
  auto bd = make_cpu_backend(model, {});
  auto bs = make_cpu_backend(model, sparse);
  std::vector<float> zd, zs, unused;
  bd->forward(ids, LogitsMode::kAll, zd);
  bs->forward(ids, LogitsMode::kAll, zs);
  bd->reset();
  bs->reset();
  RowStats sd, ss;
  bd->forward(ids, LogitsMode::kLastRowStats, unused);
  ASSERT_TRUE(bd->last_row_stats(&sd));
  bs->forward(ids, LogitsMode::kLastRowStats, unused);
  ASSERT_TRUE(bs->last_row_stats(&ss));
  const std::vector<double> kl = bs->kl_rows(*sd.hidden, *ss.hidden);
  ASSERT_EQ(kl.size(), size_t(n));
  const Direct dd = reduce(zd, n, nv), ds = reduce(zs, n, nv);
  double total = 0;
  for (int i = 0; i < n; ++i) {
    double want = 0;
    for (int t = 0; t < nv; ++t) {
      const double lp = double(zd[size_t(i) * nv + t]) - dd.lse[size_t(i)];
      const double lq = double(zs[size_t(i) * nv + t]) - ds.lse[size_t(i)];
      want += std::exp(lp) * (lp - lq);
    }
    total += want;
    EXPECT_NEAR(kl[size_t(i)], std::max(want, 0.0), 1e-9) << "row " << i;
  }
  EXPECT_GT(total, 1e-6);
  for (double v : bd->kl_rows(*sd.hidden, *sd.hidden)) EXPECT_EQ(v, 0.0);
}

TEST(RowStats, KlRowsNamesAShapeMismatch) {
  auto model = small_model();
  auto be = make_cpu_backend(model, {});
  HiddenRows a, b;
  a.n = 3;
  a.n_embd = model->config().n_embd;
  a.x.assign(size_t(a.n) * a.n_embd, 0.5f);
  b = a;
  b.n = 2;
  b.x.resize(size_t(b.n) * b.n_embd);
  try {
    (void)be->kl_rows(a, b);
    FAIL() << "a mismatch must throw";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("3 x 64 and 2 x 64"), std::string::npos) << e.what();
  }
}

TEST(RowStats, GenerateSamplesTheSameTokensFromThem) {
  auto model = small_model();
  const auto ids = ids_of(90, model->config().n_vocab);
  auto be = make_cpu_backend(model, {});
  std::vector<float> logits;
  GenerateOptions a;
  a.max_tokens = 6;
  a.stop_at_eog = false;
  a.prompt_logits = &logits;
  const GenerateResult ga = generate(*be, ids, a);
  GenerateOptions b = a;
  RowStats st;
  b.prompt_logits = nullptr;
  b.prompt_row_stats = &st;
  const GenerateResult gb = generate(*be, ids, b);
  EXPECT_EQ(gb.tokens, ga.tokens);
  EXPECT_EQ(st.lse.size(), ids.size());
}

}  // namespace
}  // namespace sinkscope
