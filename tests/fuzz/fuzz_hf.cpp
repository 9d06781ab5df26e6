// SPDX-License-Identifier: Apache-2.0
// libFuzzer entry point; the body lives in tests/fuzz/hf_target.h (shared with the gtest replay
// of the committed corpora, tests/unit/test_malformed_corpus.cpp).
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "tests/fuzz/hf_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    sinkscope::fuzz::hf_one_input(data, size);
  } catch (const sinkscope::fuzz::PropertyViolation& e) {
    std::fprintf(stderr, "property violated: %s\n", e.what());
    std::abort();
  }
  return 0;
}
