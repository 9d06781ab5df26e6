// SPDX-License-Identifier: Apache-2.0
// Config texts that once hung the parser (found by tests/fuzz/fuzz_config). test_config.cpp covers
// invalid values, keys and types; these are inputs yaml-cpp itself mishandles.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "engine/config/config.h"

namespace sinkscope {
namespace {

// yaml-cpp < 0.8 loops forever in LoadAll() (allocating until the process dies) on a token no node
// can start with, such as a lone ',' (jbeder/yaml-cpp#1040). parse_config must return an error.
TEST(MalformedConfig, StrayFlowTokenIsAnErrorNotAHang) {
  if (!config_yaml_supported()) GTEST_SKIP() << "built without yaml-cpp";
  for (const std::string text : {",", "a: 1\n---\n,\n", "# comment\n\n  ,", ",,,,"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const ConfigParseResult r = parse_config(text);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5)) << text;
    ASSERT_FALSE(r.ok()) << text;
    ASSERT_EQ(r.problems.size(), 1u) << text;
    EXPECT_NE(r.problems[0].message.find("invalid YAML"), std::string::npos)
        << r.problems[0].message;
    EXPECT_GT(r.problems[0].line, 0) << text;  // points at the offending character
  }
  // Valid multi-document and empty files are unaffected.
  EXPECT_TRUE(parse_config("").ok());
  EXPECT_TRUE(parse_config("---\n...\n").ok());
  const ConfigParseResult two = parse_config("sinkscope_config_version: 1\n---\nmodel: {}\n");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.problems[0].message.find("2 YAML documents"), std::string::npos)
      << two.problems[0].message;
}

}  // namespace
}  // namespace sinkscope
