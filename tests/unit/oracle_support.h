// SPDX-License-Identifier: Apache-2.0
// What the transformers-oracle tests share: reading a data folder's manifest.json (written by the
// scripts in tests/oracle), its cases and token-id prompts, and the logit comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/util/json_io.h"
#include "engine/model/sampler.h"
#include "engine/tokenizer/tokenizer.h"

namespace sinkscope::oracle {

// float32 models with logits of a few units agree with transformers to float32 rounding.
inline constexpr double kMaxLogitDiff = 1e-3;

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The case named `name` in a manifest's "cases".
inline const Json& find_case(const Json& manifest, const std::string& name) {
  for (const auto& c : manifest.at("cases"))
    if (c.at("name").get<std::string>() == name) return c;
  throw std::runtime_error(name + " missing from manifest.json");
}

inline std::vector<TokenId> ids_of(const Json& arr) {
  std::vector<TokenId> v;
  for (const auto& x : arr) v.push_back(TokenId(x.get<int64_t>()));
  return v;
}

// max |ours - ref| over n logits; a non-finite logit of ours fails the test and gives infinity.
inline double max_diff(const float* ours, const float* ref, size_t n, const std::string& what) {
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(ours[i])) {
      ADD_FAILURE() << what << ": non-finite logit at " << i;
      return INFINITY;
    }
    worst = std::max(worst, std::abs(double(ours[i]) - double(ref[i])));
  }
  return worst;
}

// One prompt against the reference logits `ref` (n x V, row-major): a prefill over the whole
// prompt, then half the prompt and one token at a time (the cache, positions > 0 in a fresh call,
// the single-token products). Folds the worst differences and the argmax agreements into `out`.
struct PromptAgreement {
  double prefill = 0, decode = 0;
  int agree = 0, agree_dec = 0, total = 0;
};
inline void check_prompt(Backend& be, const std::vector<TokenId>& ids,
                         const std::vector<TokenId>& want, const float* ref, int V,
                         const std::string& name, PromptAgreement& out) {
  const size_t n = ids.size();
  auto top = [&](const std::vector<float>& l, size_t i) {
    return argmax(std::span<const float>(l.data() + i * V, size_t(V)));
  };
  be.reset();
  std::vector<float> logits;
  be.forward(ids, LogitsMode::kAll, logits);
  ASSERT_EQ(logits.size(), n * size_t(V));
  out.prefill = std::max(out.prefill, max_diff(logits.data(), ref, n * V, name + " prefill"));
  for (size_t i = 0; i < n; ++i) out.agree += top(logits, i) == want[i];
  be.reset();
  const size_t n0 = n / 2;
  be.forward(std::span<const TokenId>(ids.data(), n0), LogitsMode::kAll, logits);
  out.decode = std::max(out.decode, max_diff(logits.data(), ref, n0 * V, name + " half prefill"));
  for (size_t i = 0; i < n0; ++i) out.agree_dec += top(logits, i) == want[i];
  for (size_t i = n0; i < n; ++i) {
    be.forward(std::span<const TokenId>(&ids[i], 1), LogitsMode::kLast, logits);
    ASSERT_EQ(logits.size(), size_t(V));
    out.decode = std::max(out.decode, max_diff(logits.data(), ref + i * V, V, name + " decode"));
    out.agree_dec += top(logits, 0) == want[i];
  }
  out.total += int(n);
}

// Every prompt of a manifest case (token-id arrays, or objects with "ids") against its logits
// file in `dir`, each on a CPU backend made with options_for(the prompt's length): prefill, then
// prefill + decode (check_prompt). Fails when the file's size does not match the prompts.
inline PromptAgreement check_case(const std::shared_ptr<const Model>& model, const Json& c,
                                  const std::filesystem::path& dir,
                                  const std::function<BackendOptions(size_t)>& options_for) {
  const int V = model->config().n_vocab;
  const std::string name = c.at("name").get<std::string>();
  const std::string bin = read_file(dir / c.at("logits_file").get<std::string>());
  auto ids_at = [&](size_t i) {
    const Json& p = c.at("prompts")[i];
    return ids_of(p.is_array() ? p : p.at("ids"));
  };
  size_t rows = 0;
  for (size_t i = 0; i < c.at("prompts").size(); ++i) rows += ids_at(i).size();
  PromptAgreement g;
  EXPECT_EQ(bin.size(), rows * size_t(V) * sizeof(float)) << name << ": logits file size";
  if (bin.size() != rows * size_t(V) * sizeof(float)) return g;
  const float* ref = reinterpret_cast<const float*>(bin.data());
  size_t row0 = 0;
  for (size_t i = 0; i < c.at("prompts").size(); ++i) {
    const auto ids = ids_at(i);
    auto be = make_cpu_backend(model, options_for(ids.size()));
    check_prompt(*be, ids, ids_of(c.at("argmax")[i]), ref + row0 * V, V, name, g);
    if (::testing::Test::HasFatalFailure()) return g;
    row0 += ids.size();
  }
  return g;
}

// The usual verdict on a case: both passes within kMaxLogitDiff, the same argmax everywhere.
inline void expect_agreement(const PromptAgreement& g, const std::string& name) {
  EXPECT_LE(g.prefill, kMaxLogitDiff) << name << ": prefill";
  EXPECT_LE(g.decode, kMaxLogitDiff) << name << ": prefill + decode";
  EXPECT_EQ(g.agree, g.total) << name << ": argmax agreement (prefill)";
  EXPECT_EQ(g.agree_dec, g.total) << name << ": argmax agreement (prefill + decode)";
  std::printf("[oracle] %-20s max |dlogit| prefill %.2e, prefill+decode %.2e, argmax %d/%d\n",
              name.c_str(), g.prefill, g.decode, g.agree, g.total);
}

}  // namespace sinkscope::oracle
