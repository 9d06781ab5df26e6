// SPDX-License-Identifier: Apache-2.0
// Timeline model: ordering, nesting, window queries (against brute force), linking GPU work to
// enclosing ranges, aggregates per kernel / range / layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "profiler/timeline.h"
#include "profiler/timeline_stats.h"

namespace sinkscope::prof {
namespace {

Event range(TimelineBuilder& b, const char* name, int64_t s, int64_t e, int64_t arg = kNoArg) {
  Event ev;
  ev.kind = EventKind::kRange;
  ev.name = b.intern(name);
  ev.start_ns = s;
  ev.end_ns = e;
  ev.arg = arg;
  return ev;
}

Event kernel(TimelineBuilder& b, const char* name, int64_t s, int64_t e, uint32_t thread,
             int64_t launch) {
  Event ev;
  ev.kind = EventKind::kKernel;
  ev.name = b.intern(name);
  ev.start_ns = s;
  ev.end_ns = e;
  ev.launch_thread = thread;
  ev.launch_ns = launch;
  return ev;
}

// CPU lane (os thread 77): prefill [0,1000) > layer 0 [10,400) > {attention [20,200),
// mlp [200,390)}, layer 1 [400,990) > mlp [410,980). Stream lane: kernels launched inside them.
std::shared_ptr<const Timeline> sample() {
  TimelineBuilder b;
  const uint32_t cpu = b.lane(LaneKind::kCpuThread, 0, 0, {}, {}, 77);
  const uint32_t gpu = b.lane(LaneKind::kCudaStream, 7, 0);
  // Added out of order on purpose.
  b.add(cpu, range(b, "mlp", 410, 980));
  b.add(cpu, range(b, "layer", 400, 990, 1));
  b.add(cpu, range(b, "prefill", 0, 1000));
  b.add(cpu, range(b, "attention", 20, 200));
  b.add(cpu, range(b, "layer", 10, 400, 0));
  b.add(cpu, range(b, "mlp", 200, 390));
  b.add(gpu, kernel(b, "attn_kernel", 100, 300, 77, 30));
  b.add(gpu, kernel(b, "gemm", 300, 500, 77, 250));
  b.add(gpu, kernel(b, "gemm", 500, 900, 77, 450));
  b.add(gpu, kernel(b, "orphan", 950, 960, 12345, 450));  // another thread: no range
  return b.build();
}

TEST(Timeline, SortedAndNested) {
  const auto t = sample();
  const auto ev = t->events(0);
  ASSERT_EQ(ev.size(), 6u);
  for (size_t i = 1; i < ev.size(); ++i) EXPECT_LE(ev[i - 1].start_ns, ev[i].start_ns);
  EXPECT_EQ(t->name(ev[0].name), "prefill");
  EXPECT_EQ(ev[0].depth, 0);
  EXPECT_EQ(t->name(ev[1].name), "layer");
  EXPECT_EQ(ev[1].depth, 1);
  EXPECT_EQ(ev[2].depth, 2);
  EXPECT_EQ(t->event(ev[2].parent).arg, 0);
  EXPECT_EQ(t->max_depth(0), 2);
  EXPECT_EQ(t->begin_ns(), 0);
  EXPECT_EQ(t->end_ns(), 1000);
  EXPECT_EQ(t->display_name(ev[1]), "layer 0");
}

TEST(Timeline, KernelsLinkToEnclosingRangeOfLaunchingThread) {
  const auto t = sample();
  const auto k = t->events(1);
  ASSERT_EQ(k.size(), 4u);
  EXPECT_EQ(t->name(t->event(k[0].parent).name), "attention");
  EXPECT_EQ(t->layer_of({1, 0}), 0);
  EXPECT_EQ(t->layer_of(k[1].parent), 0);  // launched at 250: mlp of layer 0
  EXPECT_EQ(t->layer_of(k[2].parent), 1);
  EXPECT_FALSE(k[3].parent.valid());
  EXPECT_EQ(t->layer_of({1, 3}), -1);
}

TEST(Timeline, NameWithTrailingIntegerBecomesArg) {
  TimelineBuilder b;
  const uint32_t l = b.lane(LaneKind::kNvtx, 5, 0, "SinkScope", {}, 5);
  b.add(l, range(b, "layer 12", 0, 10));
  b.add(l, range(b, "decode step", 10, 20));
  const auto t = b.build();
  EXPECT_EQ(t->name(t->events(0)[0].name), "layer");
  EXPECT_EQ(t->events(0)[0].arg, 12);
  EXPECT_EQ(t->display_name(t->events(0)[0]), "layer 12");
  EXPECT_EQ(t->events(0)[1].arg, kNoArg);
}

TEST(Timeline, LayerIndexFromSiblingOrderWhenMissing) {
  TimelineBuilder b;
  const uint32_t l = b.lane(LaneKind::kCpuThread, 0);
  for (int step = 0; step < 2; ++step) {
    const int64_t base = step * 1000;
    b.add(l, range(b, "decode step", base, base + 900));
    for (int i = 0; i < 3; ++i) b.add(l, range(b, "layer", base + 10 + i * 100, base + 100 + i * 100));
  }
  const auto t = b.build();
  const auto layers = layer_stats(*t);
  ASSERT_EQ(layers.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(layers[i].layer, i);
    EXPECT_EQ(layers[i].ranges, 2u);
    EXPECT_EQ(layers[i].range_ns, 2 * 90);
  }
}

TEST(Timeline, WindowQueryMatchesBruteForce) {
  std::mt19937 rng(42);
  TimelineBuilder b;
  const uint32_t cpu = b.lane(LaneKind::kCpuThread, 0);
  const uint32_t gpu = b.lane(LaneKind::kCudaStream, 1, 0);
  // Properly nested random ranges (recursive subdivision) and back-to-back kernels.
  std::function<void(int64_t, int64_t, int)> nest = [&](int64_t s, int64_t e, int d) {
    b.add(cpu, range(b, d == 0 ? "root" : "op", s, e));
    if (d == 4 || e - s < 8) return;
    int64_t cur = s + 1;
    while (cur + 4 < e) {
      const int64_t len = 1 + static_cast<int64_t>(rng() % std::max<int64_t>(1, (e - cur) / 2));
      const int64_t ce = std::min(e - 1, cur + len);
      if (ce <= cur) break;
      nest(cur, ce, d + 1);
      cur = ce + static_cast<int64_t>(rng() % 3);
    }
  };
  nest(0, 100000, 0);
  int64_t cur = 0;
  for (int i = 0; i < 3000; ++i) {
    const int64_t len = static_cast<int64_t>(rng() % 50);  // zero-length ones too
    b.add(gpu, kernel(b, "k", cur, cur + len, 0, -1));
    cur += len + static_cast<int64_t>(rng() % 3);
  }
  const auto t = b.build();
  for (int q = 0; q < 300; ++q) {
    const int64_t t0 = static_cast<int64_t>(rng() % 110000) - 5000;
    const int64_t t1 = t0 + static_cast<int64_t>(rng() % 3000) + 1;
    for (uint32_t l = 0; l < 2; ++l) {
      std::vector<uint32_t> want;
      const auto ev = t->events(l);
      for (uint32_t i = 0; i < ev.size(); ++i) {
        const int64_t end = std::max(ev[i].end_ns, ev[i].start_ns + 1);
        if (ev[i].start_ns < t1 && end > t0) want.push_back(i);
      }
      EXPECT_EQ(t->window(l, t0, t1), want) << "lane " << l << " [" << t0 << ", " << t1 << ")";
    }
  }
  EXPECT_TRUE(t->window(0, 10, 10).empty());
}

TEST(Timeline, OverlappingEventsGetSeparateRows) {
  TimelineBuilder b;
  const uint32_t gpu = b.lane(LaneKind::kCudaStream, 1, 0);
  b.add(gpu, kernel(b, "a", 0, 100, 0, -1));
  b.add(gpu, kernel(b, "b", 50, 150, 0, -1));  // overlaps a (e.g. programmatic launch)
  b.add(gpu, kernel(b, "c", 150, 200, 0, -1));
  const auto t = b.build();
  EXPECT_EQ(t->events(0)[1].depth, 1);
  EXPECT_EQ(t->events(0)[2].depth, 0);
  EXPECT_EQ(t->window(0, 120, 160), (std::vector<uint32_t>{1, 2}));
}

TEST(TimelineStats, KernelAggregates) {
  const auto t = sample();
  const auto k = kernel_stats(*t);
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[0].name, "gemm");
  EXPECT_EQ(k[0].count, 2u);
  EXPECT_EQ(k[0].total_ns, 600);
  EXPECT_EQ(k[0].min_ns, 200);
  EXPECT_EQ(k[0].max_ns, 400);
  EXPECT_DOUBLE_EQ(k[0].mean_ns(), 300.0);
  EXPECT_DOUBLE_EQ(k[0].share, 600.0 / 810.0);
  double sum = 0;
  for (const auto& s : k) sum += s.share;
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

TEST(TimelineStats, RangeSelfTimeAndLayers) {
  const auto t = sample();
  const auto r = range_stats(*t);
  auto find = [&](const char* n) {
    return *std::find_if(r.begin(), r.end(), [&](const NameStats& s) { return s.name == n; });
  };
  EXPECT_EQ(find("prefill").total_ns, 1000);
  EXPECT_EQ(find("prefill").self_ns, 1000 - 390 - 590);
  EXPECT_EQ(find("layer").total_ns, 390 + 590);
  EXPECT_EQ(find("layer").self_ns, (390 - 180 - 190) + (590 - 570));
  EXPECT_EQ(find("mlp").count, 2u);
  double sum = 0;
  for (const auto& s : r) sum += s.share;
  EXPECT_NEAR(sum, 1.0, 1e-12);

  const auto layers = layer_stats(*t);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[0].kernels, 2u);
  EXPECT_EQ(layers[0].kernel_ns, 400);
  EXPECT_EQ(layers[1].kernels, 1u);
  EXPECT_EQ(layers[1].kernel_ns, 400);
  EXPECT_DOUBLE_EQ(layers[0].share, 0.5);
}

TEST(TimelineStats, AchievedThroughput) {
  TimelineBuilder b;
  const uint32_t gpu = b.lane(LaneKind::kCudaStream, 1, 0);
  Event e = kernel(b, "copy", 0, 1000, 0, -1);  // 1 us
  e.bytes = 4000;                               // 4 GB/s
  e.flops = 2e6;                                // 2 TFLOP/s
  b.add(gpu, e);
  const auto t = b.build();
  EXPECT_DOUBLE_EQ(t->events(0)[0].achieved_gbps(), 4.0);
  EXPECT_DOUBLE_EQ(t->events(0)[0].achieved_tflops(), 2.0);
  const auto k = kernel_stats(*t);
  EXPECT_DOUBLE_EQ(k[0].gbps, 4.0);
  EXPECT_DOUBLE_EQ(k[0].tflops, 2.0);
}

TEST(Timeline, SnapshotIsShareable) {
  std::shared_ptr<const Timeline> a = sample();
  std::shared_ptr<const Timeline> b = a;  // the GUI and the CLI hold the same immutable data
  EXPECT_EQ(a->event_count(), b->event_count());
  EXPECT_EQ(a->event_count(), 10u);
}

}  // namespace
}  // namespace sinkscope::prof
