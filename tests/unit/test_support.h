// SPDX-License-Identifier: Apache-2.0
// Shared helpers for the unit tests: locating the default model and golden data.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace sinkscope::test {

// The default model: $SINKSCOPE_MODEL, else $SINKSCOPE_CACHE_DIR/SmolLM2-135M-Instruct.Q4_1.gguf,
// else $XDG_CACHE_HOME/sinkscope/..., else ~/.cache/sinkscope/... Empty when not present.
inline std::filesystem::path default_model_path() {
  namespace fs = std::filesystem;
  const char* name = "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (const char* m = std::getenv("SINKSCOPE_MODEL"); m && *m) return fs::exists(m) ? fs::path(m) : fs::path();
  fs::path dir;
  if (const char* c = std::getenv("SINKSCOPE_CACHE_DIR"); c && *c) {
    dir = c;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = fs::path(x) / "sinkscope";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = fs::path(h) / ".cache" / "sinkscope";
  }
  fs::path p = dir / name;
  return fs::exists(p) ? p : fs::path();
}

// Tests that need the real model call this. Without it they skip with the reason, except when
// SINKSCOPE_REQUIRE_MODEL=1 (set by the test command), where a missing model is a failure.
#define SINKSCOPE_REQUIRE_DEFAULT_MODEL(var)                                                   \
  const std::filesystem::path var = ::sinkscope::test::default_model_path();                   \
  if (var.empty()) {                                                                           \
    const char* req = std::getenv("SINKSCOPE_REQUIRE_MODEL");                                  \
    if (req && std::string(req) == "1") FAIL() << "default model not found (run scripts/setup.sh)"; \
    GTEST_SKIP() << "default model not found; run scripts/setup.sh to fetch it";             \
  }

inline std::filesystem::path golden_dir() { return SINKSCOPE_GOLDEN_DIR; }

}  // namespace sinkscope::test
