// SPDX-License-Identifier: Apache-2.0
// CPU span recorder: nesting, args, cap + dropped count, clear per run, threads, conversion.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "engine/util/thread_pool.h"
#include "profiler/nvtx.h"
#include "profiler/span_timeline.h"
#include "profiler/spans.h"
#include "profiler/timeline_stats.h"

namespace sinkscope::prof {
namespace {

TEST(Spans, DisabledRecorderRecordsNothing) {
  SpanRecorder r;
  { ScopedSpan s(&r, "x"); }
  { ScopedSpan s(nullptr, "x"); }
  EXPECT_TRUE(r.take().empty());
}

TEST(Spans, NestingDepthArgAndOrder) {
  SpanRecorder r;
  r.set_enabled(true);
  {
    ScopedSpan a(&r, "prefill");
    for (int l = 0; l < 3; ++l) {
      ScopedSpan b(&r, "layer", l);
      ScopedSpan c(&r, "attention");
    }
  }
  const auto spans = r.take();
  ASSERT_EQ(spans.size(), 7u);
  EXPECT_EQ(spans[0].name, "prefill");
  EXPECT_EQ(spans[0].depth, 0);
  EXPECT_EQ(spans[0].arg, kNoArg);
  EXPECT_EQ(spans[1].name, "layer");
  EXPECT_EQ(spans[1].arg, 0);
  EXPECT_EQ(spans[1].depth, 1);
  EXPECT_EQ(spans[2].name, "attention");
  EXPECT_EQ(spans[2].depth, 2);
  EXPECT_EQ(spans[5].arg, 2);
  for (size_t i = 1; i < spans.size(); ++i) EXPECT_LE(spans[i - 1].start_ns, spans[i].start_ns);
  for (const auto& s : spans) {
    EXPECT_LE(s.start_ns, s.end_ns);
    EXPECT_NE(s.os_thread, 0u);
  }
  EXPECT_TRUE(r.take().empty());  // moved out
}

TEST(Spans, CapCountsDroppedAndClearResets) {
  SpanRecorder r;
  r.set_enabled(true);
  r.set_capacity(5);
  for (int i = 0; i < 12; ++i) ScopedSpan s(&r, "op");
  EXPECT_EQ(r.dropped(), 7u);
  EXPECT_EQ(r.take().size(), 5u);
  r.clear();
  EXPECT_EQ(r.dropped(), 0u);
  { ScopedSpan s(&r, "op"); }
  EXPECT_EQ(r.take().size(), 1u);
}

TEST(Spans, ThreadsGetTheirOwnLanes) {
  SpanRecorder r;
  r.set_enabled(true);
  auto work = [&] {
    ScopedSpan a(&r, "outer");
    ScopedSpan b(&r, "inner");
  };
  std::thread t1(work), t2(work);
  t1.join();
  t2.join();
  const auto t = timeline_from_spans(r.take());
  ASSERT_EQ(t->lanes().size(), 2u);
  for (uint32_t l = 0; l < 2; ++l) {
    ASSERT_EQ(t->events(l).size(), 2u);
    EXPECT_EQ(t->events(l)[1].depth, 1);
    EXPECT_TRUE(t->events(l)[1].parent.valid());
  }
}

// A pool's workers record their share of a parallel_for under the caller's op, inside a "layer"
// span with the caller's layer, on lanes of their own.
TEST(Spans, PoolWorkersRecordTheCallersOpAndLayer) {
  SpanRecorder r;
  r.set_enabled(true);
  sinkscope::ThreadPool pool(3);
  pool.set_span_recorder(&r);
  std::atomic<int> busy{0};
  {
    ScopedSpan layer(&r, "layer", 7);
    ScopedSpan op(&r, "mlp");
    // Each item waits until every thread holds one, so all three take part.
    pool.parallel_for(3, [&](int64_t) {
      ++busy;
      while (busy.load() < 3) std::this_thread::yield();
    });
  }
  pool.set_span_recorder(nullptr);
  pool.parallel_for(3, [](int64_t) {});  // not recorded
  const auto spans = r.take();
  const uint32_t caller = thread_index();
  std::set<uint32_t> workerThreads;
  for (const Span& s : spans) {
    if (s.thread == caller) continue;
    workerThreads.insert(s.thread);
    if (s.name == "layer") {
      EXPECT_EQ(s.arg, 7);
      EXPECT_EQ(s.depth, 0);
    } else {
      EXPECT_EQ(s.name, "mlp");
      EXPECT_EQ(s.depth, 1);
    }
  }
  EXPECT_EQ(workerThreads.size(), 2u);
  EXPECT_EQ(spans.size(), 2u + 2u * 2u);  // the caller's two, two per worker
  const auto t = timeline_from_spans(spans);
  ASSERT_EQ(t->lanes().size(), 3u);
}

TEST(Spans, TimelineFromSpansKeepsLayerArgs) {
  SpanRecorder r;
  r.set_enabled(true);
  for (int step = 0; step < 2; ++step) {
    ScopedSpan f(&r, "decode step");
    for (int l = 0; l < 4; ++l) {
      ScopedSpan s(&r, "layer", l * 10);
      ScopedSpan o(&r, "mlp");
    }
  }
  const auto t = timeline_from_spans(r.take(), 3);
  EXPECT_EQ(t->info().source, "cpu-spans");
  EXPECT_EQ(t->info().dropped_spans, 3u);
  const auto layers = layer_stats(*t);
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[1].layer, 10);
  EXPECT_EQ(layers[1].ranges, 2u);
}

TEST(Spans, NvtxMirrorIsHarmlessWithoutInjection) {
  // Without CUDA this is a no-op; with it, NVTX calls go nowhere unless a tool is injected.
  nvtx::set_mirror(true);
  EXPECT_EQ(nvtx::mirror(), nvtx::compiled());
  {
    Phase p(nullptr, "layer", 3);
    nvtx::Range n("x");
  }
  nvtx::set_mirror(false);
  EXPECT_FALSE(nvtx::mirror());
}

}  // namespace
}  // namespace sinkscope::prof
