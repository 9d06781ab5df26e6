// SPDX-License-Identifier: Apache-2.0
// Replays the fuzz targets' committed inputs -- the seed corpora (tests/fuzz/corpus/<target>/) and
// the reproducers of crashes the fuzzers found (tests/fuzz/regressions/<target>/) -- through the
// same bodies libFuzzer runs, so every build (gcc, ASan, no clang) keeps them fixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/config_target.h"
#include "tests/fuzz/gguf_target.h"
#include "tests/fuzz/hf_target.h"
#include "tests/fuzz/tokenizer_target.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;
using Body = void (*)(const uint8_t*, size_t);

std::vector<fs::path> inputs(const std::string& target) {
  std::vector<fs::path> out;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "fuzz" / kind / target;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file() && e.path().filename() != "README.md") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void replay(const std::string& target, Body body, size_t min_inputs) {
  const std::vector<fs::path> files = inputs(target);
  EXPECT_GE(files.size(), min_inputs) << "the committed corpus of " << target << " is missing";
  for (const fs::path& p : files) {
    std::ifstream in(p, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    try {
      body(bytes.data(), bytes.size());
    } catch (const fuzz::PropertyViolation& e) {
      ADD_FAILURE() << p << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << p << ": unexpected exception: " << e.what();
    }
  }
  ::testing::Test::RecordProperty("inputs", static_cast<int>(files.size()));
}

TEST(MalformedCorpus, Gguf) { replay("gguf", fuzz::gguf_one_input, 5); }
TEST(MalformedCorpus, Tokenizer) { replay("tokenizer", fuzz::tokenizer_one_input, 5); }
TEST(MalformedCorpus, HfCheckpoint) { replay("hf", fuzz::hf_one_input, 5); }
TEST(MalformedCorpus, Config) {
  if (!config_yaml_supported()) GTEST_SKIP() << "built without yaml-cpp";
  replay("config", fuzz::config_one_input, 5);
}

}  // namespace
}  // namespace sinkscope
