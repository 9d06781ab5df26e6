// SPDX-License-Identifier: Apache-2.0
// The timeline model (docs/architecture.md, design principle 4): flat, time-sorted arrays of
// events, one array per lane.
//   lanes:  a CPU thread (spans), an NVTX domain on one thread, a CUDA stream;
//   events: ranges (CPU span / NVTX range: name, depth, optional int arg such as the layer
//           index), kernels, memcpy, memset, synchronisation.
// GPU work is linked to the range that encloses its launch: CUPTI correlates each kernel with
// the runtime/driver call that launched it (thread + time), and the deepest range of that
// thread containing the launch time is its parent. A Timeline is immutable once built and is
// shared as std::shared_ptr<const Timeline> (the GUI's snapshot). Times are steady_clock ns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profiler/graph_layout.h"
#include "profiler/spans.h"

namespace sinkscope::prof {

enum class LaneKind : uint8_t { kCpuThread, kNvtx, kCudaStream };
const char* lane_kind_name(LaneKind k);  // "cpu_thread" | "nvtx" | "cuda_stream"

struct Lane {
  LaneKind kind = LaneKind::kCpuThread;
  uint32_t id = 0;         // CPU: thread index; NVTX: OS thread id; stream: CUDA stream id
  uint32_t os_thread = 0;  // CPU / NVTX lanes: OS thread id (links launches to ranges); 0 unknown
  uint32_t device = 0;     // stream lanes: CUDA device ordinal
  std::string domain;      // NVTX lanes: the NVTX domain ("" = the default domain)
  std::string name;        // shown in viewers: "CPU thread 0", "GPU 0 stream 7", ...
};

enum class EventKind : uint8_t { kRange, kKernel, kMemcpy, kMemset, kSync };
const char* event_kind_name(EventKind k);  // "range" | "kernel" | "memcpy" | "memset" | "sync"

enum class CopyKind : uint8_t { kUnknown, kHtoD, kDtoH, kDtoD, kHtoH, kPeer };
const char* copy_kind_name(CopyKind k);  // "HtoD", ...

inline constexpr uint32_t kNoIndex = std::numeric_limits<uint32_t>::max();

struct EventRef {
  uint32_t lane = kNoIndex;
  uint32_t index = kNoIndex;  // into Timeline::events(lane)
  bool valid() const { return lane != kNoIndex && index != kNoIndex; }
  bool operator==(const EventRef&) const = default;
};

struct Event {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name = 0;  // Timeline::name(id); ranges: "layer 3" is stored as name "layer", arg 3
  EventKind kind = EventKind::kRange;
  CopyKind copy_kind = CopyKind::kUnknown;  // memcpy
  uint16_t depth = 0;  // ranges: nesting depth in the lane; others: row (0 unless overlapping)
  int64_t arg = kNoArg;  // ranges: optional integer argument (layer index)
  // GPU work (kernel, memcpy, memset, sync):
  uint32_t correlation = 0;    // CUPTI correlation id; 0 none
  uint32_t launch_thread = 0;  // OS thread of the launching API call; 0 unknown
  int64_t launch_ns = -1;      // start of the launching API call; -1 unknown
  // Ranges: the enclosing range of the same lane. GPU work: the deepest range that encloses
  // its launch on the launching thread (NVTX lanes preferred over CPU lanes).
  EventRef parent;
  int32_t grid[3] = {0, 0, 0};   // kernels
  int32_t block[3] = {0, 0, 0};  // kernels
  uint64_t bytes = 0;            // memcpy / memset size; kernels: bytes moved, when annotated
  double flops = 0;              // kernels: floating-point operations, when annotated
  uint32_t graph_id = 0;         // GPU work replayed from a CUDA graph: CUPTI's graph id; 0 none

  int64_t duration_ns() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
  double achieved_gbps() const;    // bytes / duration in GB/s (1e9 B/s); 0 when unknown
  double achieved_tflops() const;  // flops / duration in TFLOP/s; 0 when unknown
};

struct TimelineInfo {
  std::string source;            // "cpu-spans" | "cupti" | "" (hand-built)
  std::string device;            // GPU name, or "cpu"
  uint64_t dropped_spans = 0;    // CPU spans beyond the recorder's cap
  uint64_t dropped_records = 0;  // CUPTI records lost (buffer pool exhausted, record cap)
  std::vector<std::string> notes;
  // GPU-work attribution (TimelineBuilder::build): records placed by their graph layout, by the
  // kernel before them on their stream (no launch record), only in their phase, and launch
  // links dropped because the work ran outside the phase that launched it.
  uint64_t graph_attributed = 0, inherited = 0, phase_only = 0, inconsistent_launches = 0;
};

// The synthetic lane of GPU-time phases (kind kNvtx, this domain, os_thread 0): one range per
// phase / layer / region instance that has GPU work, spanning that work's device time.
inline constexpr const char* kGpuPhasesDomain = "SinkScope GPU";

class Timeline {
 public:
  const std::vector<Lane>& lanes() const { return m_lanes; }
  std::span<const Event> events(uint32_t lane) const { return m_data[lane].events; }
  const Event& event(EventRef r) const { return m_data[r.lane].events[r.index]; }
  size_t event_count() const;
  const TimelineInfo& info() const { return m_info; }

  const std::string& name(uint32_t id) const { return m_names[id]; }
  const std::vector<std::string>& names() const { return m_names; }
  // name, or "name arg" for ranges with an argument ("layer 3").
  std::string display_name(const Event& e) const;

  // Earliest start and latest end over all events (0, 0 when empty).
  int64_t begin_ns() const { return m_begin; }
  int64_t end_ns() const { return m_end; }

  // Events of `lane` overlapping [t0, t1) (a zero-length event counts as 1 ns), sorted by start
  // (parents first). Each depth level is non-overlapping and sorted, so this is a binary search
  // per level: O(levels * log n + k).
  std::vector<uint32_t> window(uint32_t lane, int64_t t0, int64_t t1) const;
  // The same over all lanes, lane by lane.
  std::vector<EventRef> window(int64_t t0, int64_t t1) const;
  int max_depth(uint32_t lane) const;  // deepest level of the lane; -1 when empty

  // Deepest range on a range lane of OS thread `os_thread` containing time t (NVTX lanes
  // first, then CPU lanes); invalid when none.
  EventRef enclosing_range(uint32_t os_thread, int64_t t) const;
  // Layer index of an event: the arg of the nearest range named "layer" among the event (when
  // it is a range) and its ancestors; -1 when none.
  int64_t layer_of(EventRef r) const;
  // The name id of `text`, or kNoIndex when no event has that name.
  uint32_t find_name(std::string_view text) const;
  // Whether `lane` is the synthetic GPU-phases lane (its ranges mirror host ranges on GPU time).
  bool is_gpu_phases(uint32_t lane) const;

 private:
  friend class TimelineBuilder;
  struct LaneData {
    std::vector<Event> events;
    std::vector<std::vector<uint32_t>> levels;  // event indices per depth, sorted by start
  };
  EventRef deepest_containing(uint32_t lane, int64_t t) const;

  std::vector<Lane> m_lanes;
  std::vector<LaneData> m_data;
  std::vector<std::string> m_names;
  TimelineInfo m_info;
  int64_t m_begin = 0, m_end = 0;
  uint32_t m_layer_name = kNoIndex;
};

// Collects lanes and events in any order, then build() sorts, nests, links and freezes them.
class TimelineBuilder {
 public:
  TimelineBuilder();
  // The lane with this identity (kind, id, device, domain), created on first use; `name` is
  // used when creating it ("" = a default name).
  uint32_t lane(LaneKind kind, uint32_t id, uint32_t device = 0, std::string_view domain = {},
                std::string_view name = {}, uint32_t os_thread = 0);
  uint32_t intern(std::string_view name);
  // Adds an event. Ranges named "text N" become name "text" with arg N when arg is absent.
  void add(uint32_t lane, Event e);
  TimelineInfo& info() { return m_t->m_info; }
  size_t size() const { return m_count; }

  // A captured graph's layout, for records whose graph_id is `id` (`exec`: CUPTI's id of the
  // executable graph, else of the graph it was instantiated from; exec ids are tried first).
  void add_graph_layout(uint32_t id, bool exec, GraphLayout layout);
  // Names of the ranges the engine closes only after the device finished their work (it
  // synchronises before returning): GPU work running inside one belongs to it. Default:
  // "run", "prefill", "decode step".
  void set_synced_ranges(std::vector<std::string> names) { m_synced = std::move(names); }

  // Sorts each lane by (start, longer first), computes depths and range parents, fills layer
  // indices of "layer" ranges without one (their order among siblings), links GPU work to the
  // range enclosing its launch, then attributes GPU work without such a link
  // (profiler/gpu_attribution.cpp): graph replays through their layout, the rest through the
  // synced phase it ran in. The builder is empty afterwards.
  std::shared_ptr<const Timeline> build();

 private:
  // Sorts and nests one lane; *order (optional) receives the new index of each old index.
  static void nest_lane(Timeline& t, uint32_t lane, std::vector<uint32_t>* order);
  void attribute_gpu_work(Timeline& t);
  std::unordered_map<uint64_t, GraphLayout> m_layouts;  // (exec << 32) | id
  std::vector<std::string> m_synced = {"run", "prefill", "decode step"};
  std::unique_ptr<Timeline> m_t;
  std::unordered_map<std::string, uint32_t> m_name_ids;
  std::unordered_map<std::string, uint32_t> m_lane_ids;
  size_t m_count = 0;
};

}  // namespace sinkscope::prof
