// SPDX-License-Identifier: Apache-2.0
// Attribution of GPU work on synthetic CUPTI-like records (profiler/gpu_attribution.cpp):
// graph replays through their layout, work without launch records, launch links that
// contradict device time, and the GPU-phases lane.
#include <gtest/gtest.h>

#include "profiler/timeline.h"
#include "profiler/timeline_stats.h"

namespace sinkscope::prof {
namespace {

constexpr uint32_t kThread = 42;

Event range(TimelineBuilder& b, const char* name, int64_t s, int64_t e, int64_t arg = kNoArg) {
  Event ev;
  ev.kind = EventKind::kRange;
  ev.name = b.intern(name);
  ev.start_ns = s;
  ev.end_ns = e;
  ev.arg = arg;
  return ev;
}

Event work(TimelineBuilder& b, EventKind kind, const char* name, int64_t s, int64_t e,
           int64_t launch = -1, uint32_t graph = 0, uint32_t corr = 0) {
  Event ev;
  ev.kind = kind;
  ev.name = b.intern(name);
  ev.start_ns = s;
  ev.end_ns = e;
  ev.graph_id = graph;
  ev.correlation = corr;
  if (launch >= 0) {
    ev.launch_thread = kThread;
    ev.launch_ns = launch;
  }
  return ev;
}

// Layout of a 2-layer decode graph: memcpy (step record), per layer {norm, gemm, attn},
// final norm, lm-head gemm, memcpy (logits out).
GraphLayout decode_layout(bool with_memset = false) {
  using K = GraphNodeKind;
  GraphLayout g;
  g.nodes = {K::kMemcpy, K::kKernel, K::kKernel, K::kKernel, K::kKernel, K::kKernel, K::kKernel,
             K::kKernel, K::kKernel, K::kMemcpy};
  if (with_memset) g.nodes.insert(g.nodes.begin() + 2, K::kMemset);  // inside layer 0
  const uint32_t s = with_memset ? 1 : 0;
  g.regions = {{"layer", 0, 1, 4 + s}, {"layer", 1, 4 + s, 7 + s}, {"lm-head", kNoArg, 7 + s, 9 + s}};
  return g;
}

struct Built {
  std::shared_ptr<const Timeline> t;
  uint32_t stream = 0;
};

// run [0, 10000) > prefill [100, 3000) > layer 0/1 (eager, host launch links);
// decode step [3000, 6000) and [6000, 9000): one graph replay each (graph 7), no layer ranges.
// second_without_kernels: the second replay recorded no kernels (a sampled preset's step).
Built sample(bool memset_as_kernel = false, bool register_layout = true,
             bool second_without_kernels = false) {
  TimelineBuilder b;
  const uint32_t nv = b.lane(LaneKind::kNvtx, kThread, 0, "SinkScope", {}, kThread);
  const uint32_t st = b.lane(LaneKind::kCudaStream, 7, 0);
  b.add(nv, range(b, "run", 0, 10000));
  b.add(nv, range(b, "prefill", 100, 3000));
  b.add(nv, range(b, "layer", 110, 200, 0));
  b.add(nv, range(b, "layer", 200, 300, 1));
  b.add(nv, range(b, "decode step", 3000, 6000));
  b.add(nv, range(b, "decode step", 6000, 9000));
  // Prefill: eager; the gemms have no launch record (driver API off).
  b.add(st, work(b, EventKind::kKernel, "norm", 400, 500, 120));
  b.add(st, work(b, EventKind::kKernel, "gemm", 500, 700));
  b.add(st, work(b, EventKind::kKernel, "attn", 700, 800, 150));
  b.add(st, work(b, EventKind::kKernel, "norm", 800, 900, 210));
  b.add(st, work(b, EventKind::kKernel, "gemm", 900, 1000));
  b.add(st, work(b, EventKind::kKernel, "attn", 1000, 1100, 250));
  b.add(st, work(b, EventKind::kKernel, "gemm", 1100, 1200));  // lm-head: after layer 1
  // Two replays; kernels overlap slightly (PDL). The second replay's launch record is wrong
  // (names the prefill): placed by time.
  for (int step = 0; step < 2; ++step) {
    const int64_t t0 = 3100 + step * 3000;
    const int64_t launch = step == 0 ? 3010 : 150;
    const uint32_t corr = 100 + step;
    b.add(st, work(b, EventKind::kMemcpy, "memcpy HtoD", t0, t0 + 10, launch, 7, corr));
    int64_t t = t0 + 20;
    const char* names[] = {"norm", "gemm", "attn", "norm", "gemm", "attn", "norm", "gemm"};
    for (int k = 0; k < 8 && !(second_without_kernels && step == 1); ++k) {
      if (memset_as_kernel && k == 1)  // CUPTI's reading of a memset node
        b.add(st, work(b, EventKind::kKernel, "memset32", t - 5, t - 1, launch, 7, corr));
      b.add(st, work(b, EventKind::kKernel, names[k], t, t + 100, launch, 7, corr));
      t += 95;  // 5 ns overlap with the next kernel
    }
    b.add(st, work(b, EventKind::kMemcpy, "memcpy DtoH", t + 10, t + 20, launch, 7, corr));
  }
  if (register_layout) b.add_graph_layout(7, true, decode_layout(memset_as_kernel));
  return {b.build(), st};
}

std::string path_of(const Timeline& t, EventRef r) {
  std::string s;
  for (r = t.event(r).parent; r.valid(); r = t.event(r).parent)
    s = t.display_name(t.event(r)) + (s.empty() ? "" : " > " + s);
  return s;
}

TEST(GpuAttribution, EveryKernelInItsPhaseAndLayer) {
  const Built b = sample();
  const Timeline& t = *b.t;
  const auto ev = t.events(b.stream);
  std::vector<std::string> paths;
  for (uint32_t i = 0; i < ev.size(); ++i) paths.push_back(path_of(t, {b.stream, i}));
  // Prefill: host links, inherited links for the gemms.
  EXPECT_EQ(paths[0], "run > prefill > layer 0");
  EXPECT_EQ(paths[1], "run > prefill > layer 0");
  EXPECT_EQ(paths[2], "run > prefill > layer 0");
  EXPECT_EQ(paths[3], "run > prefill > layer 1");
  EXPECT_EQ(paths[4], "run > prefill > layer 1");
  EXPECT_EQ(paths[6], "run > prefill > layer 1");  // known limit: no record, follows layer 1
  // Decode steps: GPU-phases twins.
  for (int step = 0; step < 2; ++step) {
    const size_t o = 7 + size_t(step) * 10;
    EXPECT_EQ(paths[o], "run > decode step");  // step-record copy: before layer 0
    EXPECT_EQ(paths[o + 1], "run > decode step > layer 0");
    EXPECT_EQ(paths[o + 3], "run > decode step > layer 0");
    EXPECT_EQ(paths[o + 4], "run > decode step > layer 1");
    EXPECT_EQ(paths[o + 6], "run > decode step > layer 1");
    EXPECT_EQ(paths[o + 7], "run > decode step > lm-head");
    EXPECT_EQ(paths[o + 9], "run > decode step");
    EXPECT_EQ(t.layer_of({b.stream, uint32_t(o + 5)}), 1);
  }
  EXPECT_EQ(t.info().graph_attributed, 20u);
  EXPECT_EQ(t.info().inherited, 3u);
  EXPECT_EQ(t.info().inconsistent_launches, 10u);  // the second replay's wrong launch record
  EXPECT_EQ(t.info().phase_only, 0u);
}

TEST(GpuAttribution, GpuPhasesLaneNestsOnDeviceTime) {
  const Built b = sample();
  const Timeline& t = *b.t;
  uint32_t lane = kNoIndex;
  for (uint32_t l = 0; l < t.lanes().size(); ++l)
    if (t.is_gpu_phases(l)) lane = l;
  ASSERT_NE(lane, kNoIndex);
  const auto ev = t.events(lane);
  // run, prefill, layer 0, layer 1, 2 x (decode step, layer 0, layer 1, lm-head)
  ASSERT_EQ(ev.size(), 12u);
  EXPECT_EQ(t.display_name(ev[0]), "run");
  EXPECT_EQ(ev[0].start_ns, 400);
  EXPECT_EQ(t.display_name(ev[1]), "prefill");
  EXPECT_EQ(ev[1].end_ns, 1200);
  // Layer ranges of a replay are disjoint siblings inside their step even though kernels overlap.
  for (uint32_t i = 1; i < ev.size(); ++i) {
    if (!ev[i].parent.valid()) continue;
    const Event& p = t.event(ev[i].parent);
    EXPECT_LE(p.start_ns, ev[i].start_ns);
    EXPECT_GE(p.end_ns, ev[i].end_ns);
  }
  for (int d = 0; d <= t.max_depth(lane); ++d) {
    int64_t last_end = INT64_MIN;
    for (const Event& e : ev)
      if (e.depth == d) {
        EXPECT_GE(e.start_ns, last_end);
        last_end = e.end_ns;
      }
  }
  // Twins are not counted as host ranges.
  for (const auto& s : layer_stats(t)) EXPECT_EQ(s.ranges, 1u);
  // Per layer: 3 prefill kernels + 3 per replay (layer 1 also has the inherited lm-head gemm).
  const auto ls = layer_stats(t);
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_EQ(ls[0].kernels, 9u);
  EXPECT_EQ(ls[1].kernels, 10u);
}

TEST(GpuAttribution, MemsetNodesReportedAsKernels) {
  const Built b = sample(/*memset_as_kernel=*/true);
  const Timeline& t = *b.t;
  const auto ev = t.events(b.stream);
  EXPECT_EQ(t.info().graph_attributed, 22u);
  for (uint32_t i = 0; i < ev.size(); ++i)
    if (t.name(ev[i].name) == "memset32") {
      EXPECT_EQ(path_of(t, {b.stream, i}), "run > decode step > layer 0");
    }
}

TEST(GpuAttribution, ReplayWithoutKernelRecordsPlacesItsCopies) {
  const Built b = sample(false, true, /*second_without_kernels=*/true);
  const Timeline& t = *b.t;
  const auto ev = t.events(b.stream);
  ASSERT_EQ(ev.size(), 19u);  // 7 prefill, 10 of the first replay, 2 copies of the second
  EXPECT_EQ(path_of(t, {b.stream, 7}), "run > decode step");
  EXPECT_EQ(path_of(t, {b.stream, 8}), "run > decode step > layer 0");
  EXPECT_EQ(path_of(t, {b.stream, 17}), "run > decode step");
  EXPECT_EQ(path_of(t, {b.stream, 18}), "run > decode step");
  EXPECT_EQ(t.info().graph_attributed, 12u);
  for (const std::string& n : t.info().notes)
    EXPECT_EQ(n.find("no matching layout"), std::string::npos) << n;
}

TEST(GpuAttribution, WithoutLayoutReplaysKeepTheirPhase) {
  const Built b = sample(false, /*register_layout=*/false);
  const Timeline& t = *b.t;
  const auto ev = t.events(b.stream);
  for (uint32_t i = 7; i < ev.size(); ++i) {
    EXPECT_EQ(path_of(t, {b.stream, i}), "run > decode step") << i;
    EXPECT_EQ(t.layer_of({b.stream, i}), -1);
  }
  EXPECT_EQ(t.info().graph_attributed, 0u);
  EXPECT_EQ(t.info().phase_only, 10u);  // the second replay (launch link dropped)
  ASSERT_FALSE(t.info().notes.empty());
}

TEST(GpuAttribution, LayoutWithOtherCountsIsNotUsed) {
  TimelineBuilder b;
  const uint32_t nv = b.lane(LaneKind::kNvtx, kThread, 0, "SinkScope", {}, kThread);
  const uint32_t st = b.lane(LaneKind::kCudaStream, 7, 0);
  b.add(nv, range(b, "decode step", 0, 1000));
  for (int k = 0; k < 3; ++k)
    b.add(st, work(b, EventKind::kKernel, "k", 100 + k * 100, 150 + k * 100, 10, 9, 1));
  b.add_graph_layout(9, true, decode_layout());  // 8 kernels: does not fit 3
  const auto t = b.build();
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(t->layer_of({st, i}), -1);
  EXPECT_EQ(t->info().graph_attributed, 0u);
}

TEST(GpuAttribution, TemplateIdUsedWhenNoExecLayout) {
  TimelineBuilder b;
  const uint32_t nv = b.lane(LaneKind::kNvtx, kThread, 0, "SinkScope", {}, kThread);
  const uint32_t st = b.lane(LaneKind::kCudaStream, 7, 0);
  b.add(nv, range(b, "decode step", 0, 1000));
  GraphLayout g;
  g.nodes = {GraphNodeKind::kKernel, GraphNodeKind::kKernel};
  g.regions = {{"layer", 4, 0, 1}, {"layer", 5, 1, 2}};
  b.add_graph_layout(3, false, g);
  b.add(st, work(b, EventKind::kKernel, "a", 100, 200, -1, 3));
  b.add(st, work(b, EventKind::kKernel, "b", 200, 300, -1, 3));
  const auto t = b.build();
  EXPECT_EQ(t->layer_of({st, 0}), 4);
  EXPECT_EQ(t->layer_of({st, 1}), 5);
}

}  // namespace
}  // namespace sinkscope::prof
