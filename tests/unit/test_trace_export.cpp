// SPDX-License-Identifier: Apache-2.0
// Chrome trace export: valid JSON (parsed back with nlohmann-json), every event well formed,
// ordering and nesting preserved, escaping, atomic write.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/util/json_io.h"
#include "profiler/chrome_trace.h"
#include "profiler/span_timeline.h"
#include "profiler/spans.h"

namespace sinkscope::prof {
namespace {

std::shared_ptr<const Timeline> sample() {
  TimelineBuilder b;
  b.info().source = "test";
  b.info().device = "Test GPU \"X\"";
  b.info().notes.push_back("a note\nwith a newline");
  const uint32_t cpu = b.lane(LaneKind::kCpuThread, 0, 0, {}, {}, 42);
  const uint32_t nv = b.lane(LaneKind::kNvtx, 42, 0, "SinkScope", {}, 42);
  const uint32_t gpu = b.lane(LaneKind::kCudaStream, 7, 0);
  auto add_range = [&](uint32_t lane, const char* n, int64_t s, int64_t e) {
    Event ev;
    ev.name = b.intern(n);
    ev.start_ns = 1'000'000 + s;
    ev.end_ns = 1'000'000 + e;
    b.add(lane, ev);
  };
  add_range(cpu, "run", 0, 10'000);
  add_range(cpu, "layer 0", 100, 5'000);
  add_range(cpu, "attention", 200, 1'234);
  add_range(nv, "layer 0", 100, 5'000);
  add_range(nv, "weird \"name\" \\ \t\x01 \xff end", 300, 300);  // escapes, bad UTF-8, dur 0
  Event k;
  k.kind = EventKind::kKernel;
  k.name = b.intern("void attn<64>(float const*)");
  k.start_ns = 1'000'000 + 400;
  k.end_ns = 1'000'000 + 1'400;
  k.grid[0] = 9;
  k.grid[1] = 3;
  k.grid[2] = 1;
  k.block[0] = 128;
  k.block[1] = k.block[2] = 1;
  k.correlation = 11;
  k.launch_thread = 42;
  k.launch_ns = 1'000'000 + 250;
  k.bytes = 1'000'000;
  b.add(gpu, k);
  Event m;
  m.kind = EventKind::kMemcpy;
  m.copy_kind = CopyKind::kHtoD;
  m.name = b.intern("memcpy HtoD");
  m.start_ns = 1'000'000 + 50;
  m.end_ns = 1'000'000 + 90;
  m.bytes = 4096;
  b.add(gpu, m);
  return b.build();
}

TEST(ChromeTrace, ParsesBackAndEveryEventIsWellFormed) {
  const auto t = sample();
  const std::string text = chrome_trace_json(*t);
  const Json doc = Json::parse(text);
  ASSERT_TRUE(doc.is_object());
  const auto& events = doc.at("traceEvents");
  EXPECT_EQ(doc.at("displayTimeUnit").get<std::string>(), "ns");
  EXPECT_EQ(doc.at("otherData").at("device").get<std::string>(), "Test GPU \"X\"");
  EXPECT_EQ(doc.at("otherData").at("notes")[0].get<std::string>(), "a note\nwith a newline");

  size_t complete = 0;
  bool metadata_done = false;
  double last_ts = -1;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;
  for (const auto& e : events) {
    ASSERT_TRUE(e.is_object());
    const std::string ph = e.at("ph").get<std::string>();
    ASSERT_TRUE(e.at("name").is_string());
    ASSERT_TRUE(e.at("pid").is_number_integer());
    ASSERT_TRUE(e.at("tid").is_number_integer());
    ASSERT_TRUE(e.at("args").is_object());
    if (ph == "M") {
      EXPECT_FALSE(metadata_done) << "metadata first";
      if (e.at("name").get<std::string>() == "thread_name")
        thread_names[{e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()}] = e.at("args").at("name").get<std::string>();
      continue;
    }
    metadata_done = true;
    ASSERT_EQ(ph, "X");
    ++complete;
    ASSERT_TRUE(e.at("cat").is_string());
    const double ts = e.at("ts").get<double>();
    const double dur = e.at("dur").get<double>();
    EXPECT_GE(ts, 0.0);
    EXPECT_GE(dur, 0.0);
    EXPECT_GE(ts, last_ts) << "sorted by ts";
    last_ts = ts;
    EXPECT_TRUE(thread_names.count({e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>()}))
        << "every lane is named";
  }
  EXPECT_EQ(complete, t->event_count());
  EXPECT_EQ(thread_names.size(), t->lanes().size());
}

TEST(ChromeTrace, TimesInMicrosecondsAndNestingPreserved) {
  const auto t = sample();
  const Json doc = Json::parse(chrome_trace_json(*t));
  std::vector<const Json*> cpu;
  const Json* kernel = nullptr;
  const Json* weird = nullptr;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph").get<std::string>() != "X") continue;
    if (e.at("pid").get<int64_t>() == 1) cpu.push_back(&e);
    if (e.at("cat").get<std::string>() == "kernel") kernel = &e;
    if (e.at("name").get<std::string>().rfind("weird", 0) == 0) weird = &e;
  }
  ASSERT_EQ(cpu.size(), 3u);
  // run > layer 0 > attention: each starts no earlier and ends no later than its parent.
  EXPECT_EQ((*cpu[0]).at("name").get<std::string>(), "run");
  EXPECT_EQ((*cpu[1]).at("name").get<std::string>(), "layer 0");
  EXPECT_EQ((*cpu[1]).at("args").at("layer").get<int64_t>(), 0);
  EXPECT_EQ((*cpu[2]).at("name").get<std::string>(), "attention");
  for (size_t i = 1; i < cpu.size(); ++i) {
    const double ps = (*cpu[i - 1]).at("ts").get<double>(), pd = (*cpu[i - 1]).at("dur").get<double>();
    const double cs = (*cpu[i]).at("ts").get<double>(), cd = (*cpu[i]).at("dur").get<double>();
    EXPECT_GE(cs, ps);
    EXPECT_LE(cs + cd, ps + pd + 1e-9);
  }
  EXPECT_DOUBLE_EQ((*cpu[2]).at("ts").get<double>(), 0.2);     // 200 ns after the first event
  EXPECT_DOUBLE_EQ((*cpu[2]).at("dur").get<double>(), 1.034);  // fractional microseconds
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ((*kernel).at("args").at("grid")[0].get<int64_t>(), 9);
  EXPECT_EQ((*kernel).at("args").at("block")[0].get<int64_t>(), 128);
  EXPECT_EQ((*kernel).at("args").at("layer").get<int64_t>(), 0);
  // The NVTX lane of the launching thread wins over its CPU lane (same thread, 42).
  EXPECT_EQ((*kernel).at("args").at("range").get<std::string>(), "layer 0");
  EXPECT_EQ((*kernel).at("args").at("bytes").get<int64_t>(), 1'000'000);
  EXPECT_DOUBLE_EQ((*kernel).at("args").at("GB/s").get<double>(), 1000.0);
  ASSERT_NE(weird, nullptr);
  EXPECT_EQ((*weird).at("name").get<std::string>(), "weird \"name\" \\ \t\x01 \xEF\xBF\xBD end");
  EXPECT_EQ((*weird).at("dur").get<double>(), 0.0);
}

TEST(ChromeTrace, JsonQuote) {
  EXPECT_EQ(json_quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(json_quote("\x1f"), "\"\\u001f\"");
  EXPECT_EQ(json_quote("\xc3\xa9"), "\"\xc3\xa9\"");  // valid UTF-8 kept
  EXPECT_EQ(json_quote("\xc3"), "\"\xEF\xBF\xBD\"");  // truncated sequence
  EXPECT_EQ(json_quote("\xc0\xaf"), "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // overlong
}

TEST(ChromeTrace, EmptyTimelineIsValid) {
  TimelineBuilder b;
  const auto t = b.build();
  const Json doc = Json::parse(chrome_trace_json(*t));
  EXPECT_EQ(doc.at("traceEvents").size(), 0u);
}

TEST(ChromeTrace, WritesAtomically) {
  const auto dir = std::filesystem::temp_directory_path() / "sinkscope_trace_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto path = dir / "trace.json";
  {
    std::ofstream(path) << "old";
  }
  SpanRecorder r;
  r.set_enabled(true);
  {
    ScopedSpan a(&r, "prefill");
    ScopedSpan b(&r, "layer", 3);
  }
  const auto t = timeline_from_spans(r.take());
  ASSERT_TRUE(write_chrome_trace(*t, path));
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  const Json doc = Json::parse(ss.str());
  EXPECT_EQ(doc.at("otherData").at("source").get<std::string>(), "cpu-spans");
  size_t files = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u) << "no temporary file left behind";
  const Status bad = write_chrome_trace(*t, dir / "missing" / "trace.json");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.message.find("missing"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sinkscope::prof
