// SPDX-License-Identifier: Apache-2.0
// The default model against the independent oracle: HF transformers (float32) loading the same
// GGUF. Golden data: tests/golden/logits, written by tests/oracle/make_logits_golden.py.
// Tolerances from the foundation issue: max |dlogit| <= 1e-2, argmax agreement 100 %, the
// 32-token greedy continuation identical.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/backend/backend.h"
#include "engine/util/json_io.h"
#include "engine/model/sampler.h"
#include "engine/model/session.h"
#include "engine/util/sha256.h"
#include "test_support.h"

namespace sinkscope {
namespace {

constexpr double kMaxLogitDiff = 1e-2;

struct Golden {
  Json manifest;
  std::vector<float> rows;
  int n_vocab = 0;
};

Golden load_golden() {
  Golden g;
  const auto dir = test::golden_dir() / "logits";
  std::ifstream mf(dir / "manifest.json");
  std::stringstream ss;
  ss << mf.rdbuf();
  g.manifest = Json::parse(ss.str());
  const auto& lf = g.manifest.at("logits_file");
  const int64_t n_rows = lf.at("shape")[0].get<int64_t>();
  g.n_vocab = int(lf.at("shape")[1].get<int64_t>());
  std::ifstream bf(dir / lf.at("path").get<std::string>(), std::ios::binary);
  g.rows.resize(size_t(n_rows) * size_t(g.n_vocab));
  bf.read(reinterpret_cast<char*>(g.rows.data()), std::streamsize(g.rows.size() * sizeof(float)));
  EXPECT_EQ(size_t(bf.gcount()), g.rows.size() * sizeof(float)) << "logits.bin is truncated";
  return g;
}

std::vector<TokenId> ids_of(const Json& arr) {
  std::vector<TokenId> v;
  for (const auto& x : arr) v.push_back(TokenId(x.get<int64_t>()));
  return v;
}

TEST(ModelGolden, GoldenFilesAreIntact) {
  Golden g = load_golden();
  std::string bytes(reinterpret_cast<const char*>(g.rows.data()), g.rows.size() * sizeof(float));
  EXPECT_EQ(sha256_hex(bytes), g.manifest.at("logits_file").at("sha256").get<std::string>());
}

TEST(ModelGolden, LogitsArgmaxAndGreedyContinuationMatchTransformers) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(path);
  Golden g = load_golden();
  auto model = Model::load(path);
  ASSERT_EQ(model->config().n_vocab, g.n_vocab);
  auto be = make_cpu_backend(model, {});
  const int V = g.n_vocab;
  int prompts_checked = 0;
  for (const auto& p : g.manifest.at("prompts")) {
    const std::string name = p.at("name").get<std::string>();
    const auto ids = ids_of(p.at("ids"));
    const auto argmaxes = ids_of(p.at("argmax"));
    std::vector<float> logits;
    be->reset();
    be->forward(ids, LogitsMode::kAll, logits);
    ASSERT_EQ(logits.size(), ids.size() * size_t(V));

    // argmax at every position.
    int agree = 0;
    for (size_t i = 0; i < ids.size(); ++i)
      agree += argmax(std::span<const float>(logits.data() + i * V, size_t(V))) == argmaxes[i];
    EXPECT_EQ(agree, int(ids.size())) << name << ": argmax agreement " << agree << "/" << ids.size();

    // Full-vocabulary rows at the stored positions.
    const int64_t row0 = p.at("logits_row_offset").get<int64_t>();
    double worst = 0;
    const auto& positions = p.at("logits_positions");
    for (size_t r = 0; r < positions.size(); ++r) {
      const int64_t pos = positions[r].get<int64_t>();
      const float* ours = logits.data() + pos * V;
      const float* ref = g.rows.data() + (row0 + int64_t(r)) * V;
      for (int v = 0; v < V; ++v) {
        ASSERT_TRUE(std::isfinite(ours[v])) << name << " pos " << pos;
        worst = std::max(worst, std::abs(double(ours[v]) - double(ref[v])));
      }
    }
    EXPECT_LE(worst, kMaxLogitDiff) << name;
    std::printf("[golden] %s: %zu tokens, max |dlogit| = %.2e over %zu full rows\n", name.c_str(),
                ids.size(), worst, positions.size());

    // 32-token greedy continuation through the decode path (quantized gemv, KV cache).
    GenerateOptions o;
    o.max_tokens = int(p.at("continuation").size());
    o.stop_at_eog = false;
    auto r = generate(*be, ids, o);
    EXPECT_EQ(r.tokens, ids_of(p.at("continuation"))) << name;
    ++prompts_checked;
  }
  EXPECT_GE(prompts_checked, 3);
}

}  // namespace
}  // namespace sinkscope
