// SPDX-License-Identifier: Apache-2.0
// CUPTI record-set presets by name (profiler/cupti_options.cpp; every build parses them, the
// CLI and GUI read SINKSCOPE_TRACE): what each name switches on, and names that are refused.
#include <gtest/gtest.h>

#include "profiler/cupti_collector.h"

namespace sinkscope::prof {
namespace {

TEST(CuptiPresets, SampledKeepsDefaultDeviceBuffersAndParsesItsPeriod) {
  CuptiOptions o;
  ASSERT_TRUE(CuptiOptions::from_name("sampled", &o));
  EXPECT_EQ(o.sample_every, 32);
  EXPECT_TRUE(o.kernels);
  EXPECT_TRUE(o.runtime_api);  // eager launches keep their host links
  // Each sampled step ends in a flush; large device buffers made that flush cost a decode step.
  EXPECT_EQ(o.device_buffer_bytes, 0u);
  EXPECT_EQ(o.semaphore_preallocate, 0u);
  EXPECT_EQ(o.preset, "sampled");
  ASSERT_TRUE(CuptiOptions::from_name("sampled:8", &o));
  EXPECT_EQ(o.sample_every, 8);
  EXPECT_EQ(o.preset, "sampled:8");
  for (const char* bad : {"sampled:0", "sampled:x", "sampled:8x", "sampled:", "bogus", ""})
    EXPECT_FALSE(CuptiOptions::from_name(bad, &o)) << bad;
}

TEST(CuptiPresets, FullRecordsEverythingEveryStep) {
  CuptiOptions o;
  ASSERT_TRUE(CuptiOptions::from_name("full", &o));
  EXPECT_LE(o.sample_every, 1);  // every step
  EXPECT_TRUE(o.kernels && o.nvtx && o.memory && o.sync && o.driver_api && o.runtime_api);
  ASSERT_TRUE(CuptiOptions::from_name("no-kernels", &o));
  EXPECT_FALSE(o.kernels);
  ASSERT_TRUE(CuptiOptions::from_name("graph-level", &o));
  EXPECT_TRUE(o.graph_level);
}

}  // namespace
}  // namespace sinkscope::prof
