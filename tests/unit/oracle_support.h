// SPDX-License-Identifier: Apache-2.0
// What the transformers-oracle tests share: reading a data folder's manifest.json (written by the
// scripts in tests/oracle), its cases and token-id prompts, and the logit comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/json_io.h"
#include "engine/tokenizer.h"

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

}  // namespace sinkscope::oracle
