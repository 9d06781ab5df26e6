// SPDX-License-Identifier: Apache-2.0
// Attribution of GPU work that the launch link alone cannot place (TimelineBuilder::build).
//
// 1. Phase by device time. The engine synchronises before it closes "prefill" and "decode step"
//    (and "run"), so work running inside such a synced range belongs to it. A launch link that
//    names another synced range is wrong (e.g. graph-launch correlation ids CUPTI mixes up after
//    the first session, fixed in CUDA 13.1u1) and is dropped.
// 2. Graph replays. Records of one replay (same graph id, same synced range) are sorted by start
//    and matched by ordinal to the nodes of the graph's layout (profiler/graph_layout.h), which
//    names the region ("layer 3") of every node. CUPTI may report memset nodes as kernels; both
//    readings are tried. A replay without kernel records (kernel records switched off for it)
//    places its copies and memsets alone. A layout whose counts do not match is not used (the
//    work keeps its phase).
// 3. Work without a launch record (e.g. cuBLAS kernels launched through the driver API while
//    DRIVER records are off) inherits the range of the work before it on its stream in the same
//    phase: a stream runs in launch order, and every region of the engine begins with a kernel
//    of its own (runtime-launched), never with a library call.
// 4. A "GPU phases" lane of ranges on device time: for every range instance with GPU work (host
//    ranges and graph regions) one range spanning that work; siblings are clipped where
//    programmatic dependent launch overlaps them. Replayed work, and work with only a phase,
//    links to its range there; work with a host launch link keeps it.
#include <algorithm>
#include <map>

#include "profiler/timeline.h"

namespace sinkscope::prof {
namespace {

constexpr uint32_t kGpuPhasesLaneId = 0xfffffffdu;

struct Twin {
  uint32_t name = 0;
  int64_t arg = kNoArg;
  int64_t start = 0, end = 0;
  int32_t parent = -1;
  uint16_t level = 0;  // distance from the outermost twin of its chain (set top-down)
};

struct Rec {
  EventRef ref;
  EventRef phase;      // innermost synced range the work ran in
  int32_t group = -1;  // graph replay group
  uint32_t node = kNoIndex;
  bool unlinked = false;  // no usable launch record: may link to its phase's twin
};

struct Group {
  uint32_t graph_id = 0;
  const GraphLayout* layout = nullptr;
  std::vector<uint32_t> recs;  // indices into the Rec array
};

}  // namespace

void TimelineBuilder::attribute_gpu_work(Timeline& t) {
  std::vector<uint32_t> synced;
  for (const std::string& n : m_synced)
    if (auto it = m_name_ids.find(n); it != m_name_ids.end()) synced.push_back(it->second);
  auto is_synced = [&](const Event& e) {
    return e.kind == EventKind::kRange &&
           std::find(synced.begin(), synced.end(), e.name) != synced.end();
  };
  auto synced_ancestor = [&](EventRef r) -> EventRef {
    for (int guard = 0; r.valid() && guard < 1024; ++guard, r = t.event(r).parent)
      if (is_synced(t.event(r))) return r;
    return {};
  };
  std::vector<uint32_t> range_lanes;
  for (LaneKind k : {LaneKind::kNvtx, LaneKind::kCpuThread})
    for (uint32_t l = 0; l < t.m_lanes.size(); ++l)
      if (t.m_lanes[l].kind == k && !t.is_gpu_phases(l)) range_lanes.push_back(l);
  auto synced_at = [&](int64_t x) -> EventRef {
    for (uint32_t l : range_lanes)
      if (EventRef r = synced_ancestor(t.deepest_containing(l, x)); r.valid()) return r;
    return {};
  };

  // 1. Phases; drop launch links that contradict them.
  std::vector<Rec> recs;
  std::map<std::pair<uint32_t, uint64_t>, int32_t> group_of;  // (graph, phase or corr) -> group
  std::vector<Group> groups;
  for (uint32_t l = 0; l < t.m_lanes.size(); ++l) {
    if (t.m_lanes[l].kind != LaneKind::kCudaStream) continue;
    auto& ev = t.m_data[l].events;
    for (uint32_t i = 0; i < ev.size(); ++i) {
      Event& e = ev[i];
      if (e.kind == EventKind::kRange || e.kind == EventKind::kSync) continue;
      Rec r;
      r.ref = {l, i};
      const EventRef by_time = synced_at(e.start_ns + e.duration_ns() / 2);
      if (e.parent.valid()) {
        const EventRef by_launch = synced_ancestor(e.parent);
        if (by_time.valid() && by_launch.valid() && by_launch != by_time) {
          e.parent = {};
          r.unlinked = true;
          ++t.m_info.inconsistent_launches;
        }
        r.phase = by_time.valid() ? by_time : by_launch;
      } else {
        r.phase = by_time;
        // Launched on a thread without ranges: left unlinked, as the launch says.
        r.unlinked = e.launch_ns < 0 || e.graph_id != 0;
      }
      if (e.graph_id != 0) {
        const uint64_t where = r.phase.valid()
                                   ? (uint64_t(r.phase.lane) << 32 | r.phase.index)
                                   : (uint64_t(1) << 63 | e.correlation);
        auto [it, fresh] = group_of.try_emplace({e.graph_id, where}, int32_t(groups.size()));
        if (fresh) groups.push_back({e.graph_id, nullptr, {}});
        r.group = it->second;
        groups[size_t(r.group)].recs.push_back(uint32_t(recs.size()));
      }
      recs.push_back(r);
    }
  }

  // 2. Graph replays onto their layouts.
  uint64_t unmatched_groups = 0;
  auto try_layout = [&](Group& g, const GraphLayout& lay) -> bool {
    std::vector<uint32_t> by_kind[3];  // kernels, memcpys, memsets (Rec indices, by start)
    for (uint32_t ri : g.recs) {
      const EventKind k = t.event(recs[ri].ref).kind;
      by_kind[k == EventKind::kKernel ? 0 : k == EventKind::kMemcpy ? 1 : 2].push_back(ri);
    }
    for (auto& v : by_kind)
      std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
        return t.event(recs[a].ref).start_ns < t.event(recs[b].ref).start_ns;
      });
    auto nodes_of = [&](bool kernel_like_memset, int kind) {
      std::vector<uint32_t> n;
      for (uint32_t i = 0; i < lay.nodes.size(); ++i) {
        const GraphNodeKind k = lay.nodes[i];
        const bool take = kind == 0   ? (k == GraphNodeKind::kKernel ||
                                         (kernel_like_memset && k == GraphNodeKind::kMemset))
                          : kind == 1 ? k == GraphNodeKind::kMemcpy
                                      : (!kernel_like_memset && k == GraphNodeKind::kMemset);
        if (take) n.push_back(i);
      }
      return n;
    };
    if (by_kind[0].empty()) {
      // A replay without kernel records (a sampled preset's unsampled step): its copies and
      // memsets (as memset records) alone.
      const auto cn = nodes_of(false, 1), sn = nodes_of(false, 2);
      if (by_kind[1].size() + by_kind[2].size() == 0 || cn.size() != by_kind[1].size() ||
          (!by_kind[2].empty() && sn.size() != by_kind[2].size()))
        return false;
      for (size_t i = 0; i < cn.size(); ++i) recs[by_kind[1][i]].node = cn[i];
      for (size_t i = 0; i < by_kind[2].size(); ++i) recs[by_kind[2][i]].node = sn[i];
      g.layout = &lay;
      return true;
    }
    for (bool memset_as_kernel : {false, true}) {
      const auto kn = nodes_of(memset_as_kernel, 0);
      const auto sn = nodes_of(memset_as_kernel, 2);
      if (kn.size() != by_kind[0].size() || sn.size() != by_kind[2].size()) continue;
      for (size_t i = 0; i < kn.size(); ++i) recs[by_kind[0][i]].node = kn[i];
      for (size_t i = 0; i < sn.size(); ++i) recs[by_kind[2][i]].node = sn[i];
      if (const auto cn = nodes_of(memset_as_kernel, 1); cn.size() == by_kind[1].size())
        for (size_t i = 0; i < cn.size(); ++i) recs[by_kind[1][i]].node = cn[i];
      g.layout = &lay;
      return true;
    }
    return false;
  };
  std::string first_unmatched;  // what the first replay without a layout looked like
  for (Group& g : groups) {
    bool ok = false, known = false;
    for (uint64_t exec : {1, 0})
      if (auto it = m_layouts.find(exec << 32 | g.graph_id); !ok && it != m_layouts.end()) {
        known = true;
        ok = try_layout(g, it->second);
      }
    unmatched_groups += !ok;
    if (!ok && first_unmatched.empty()) {
      uint32_t kernels = 0;
      for (uint32_t ri : g.recs) kernels += t.event(recs[ri].ref).kind == EventKind::kKernel;
      first_unmatched = "first: graph " + std::to_string(g.graph_id) + ", " +
                        std::to_string(g.recs.size()) + " records (" + std::to_string(kernels) +
                        " kernels), " + (known ? "node counts differ from its layout"
                                               : "no layout captured for this graph");
    }
  }

  // 3. Work without a launch record inherits from its stream predecessor in the same phase.
  {
    std::vector<uint32_t> order(recs.size());
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;  // already lane, then start order
    EventRef last_parent, last_phase;
    uint32_t last_lane = kNoIndex;
    for (uint32_t i : order) {
      Rec& r = recs[i];
      Event& e = t.m_data[r.ref.lane].events[r.ref.index];
      if (r.ref.lane != last_lane) {
        last_lane = r.ref.lane;
        last_parent = last_phase = {};
      }
      if (r.node != kNoIndex) continue;  // placed by its graph layout
      if (e.parent.valid()) {
        last_parent = e.parent;
        last_phase = r.phase;
      } else if (e.graph_id == 0 && e.launch_ns < 0 && last_parent.valid() && r.phase.valid() &&
                 r.phase == last_phase) {
        e.parent = last_parent;
        ++t.m_info.inherited;
      }
    }
  }

  // 4. Device-time twins of every range instance with GPU work; only built when some work needs
  // them (a trace whose work all has host launch links keeps its lanes unchanged).
  bool needed = false;
  for (const Rec& r : recs)
    needed |= r.node != kNoIndex || (r.unlinked && r.phase.valid() && !t.event(r.ref).parent.valid());
  if (!needed) {
    if (unmatched_groups)
      t.m_info.notes.push_back(std::to_string(unmatched_groups) +
                               " CUDA graph replays had no matching layout (" + first_unmatched +
                               ")");
    return;
  }
  if (t.m_layer_name == kNoIndex)
    for (const Group& g : groups)
      if (g.layout)
        for (const GraphRegion& reg : g.layout->regions)
          if (reg.name == "layer") t.m_layer_name = intern("layer");
  std::vector<Twin> twins;
  std::unordered_map<uint64_t, int32_t> twin_of;
  auto twin = [&](uint64_t key, uint32_t name, int64_t arg, const Event& work) -> int32_t {
    auto [it, fresh] = twin_of.try_emplace(key, int32_t(twins.size()));
    if (fresh) twins.push_back({name, arg, work.start_ns, work.end_ns, -1, 0});
    Twin& w = twins[size_t(it->second)];
    w.start = std::min(w.start, work.start_ns);
    w.end = std::max(w.end, work.end_ns);
    return it->second;
  };
  auto host_key = [](EventRef r) { return (uint64_t(r.lane) + 1) << 32 | r.index; };
  std::vector<int32_t> target(recs.size(), -1);
  std::vector<int32_t> chain;
  for (uint32_t i = 0; i < recs.size(); ++i) {
    const Rec& r = recs[i];
    const Event& e = t.event(r.ref);
    chain.clear();
    EventRef host = e.parent;  // innermost host range of the chain
    if (r.node != kNoIndex) {
      const Group& g = groups[size_t(r.group)];
      const auto& regs = g.layout->regions;
      for (size_t k = regs.size(); k-- > 0;)
        if (regs[k].begin <= r.node && r.node < regs[k].end)
          chain.push_back(twin(uint64_t(1) << 63 | uint64_t(r.group) << 24 | k,
                               intern(regs[k].name), regs[k].arg, e));
      host = r.phase;
    } else if (!host.valid()) {
      if (!r.unlinked) continue;
      host = r.phase;
    }
    for (int guard = 0; host.valid() && guard < 1024; ++guard, host = t.event(host).parent) {
      const Event& h = t.event(host);
      chain.push_back(twin(host_key(host), h.name, h.arg, e));
    }
    for (size_t k = 0; k + 1 < chain.size(); ++k) twins[size_t(chain[k])].parent = chain[k + 1];
    if (!chain.empty()) target[i] = chain[0];
  }
  if (twins.empty()) return;

  // Clip siblings that overlap (PDL) and children to their parent, top-down.
  std::vector<std::vector<int32_t>> kids(twins.size() + 1);  // last: the roots
  for (int32_t w = 0; w < int32_t(twins.size()); ++w)
    kids[twins[size_t(w)].parent < 0 ? twins.size() : size_t(twins[size_t(w)].parent)].push_back(w);
  std::vector<int32_t> todo = {int32_t(twins.size())};
  while (!todo.empty()) {
    const int32_t p = todo.back();
    todo.pop_back();
    auto& ks = kids[size_t(p)];
    std::sort(ks.begin(), ks.end(),
              [&](int32_t a, int32_t b) { return twins[size_t(a)].start < twins[size_t(b)].start; });
    for (size_t k = 0; k < ks.size(); ++k) {
      Twin& w = twins[size_t(ks[k])];
      if (k + 1 < ks.size()) w.end = std::min(w.end, twins[size_t(ks[k + 1])].start);
      if (p < int32_t(twins.size())) {
        const Twin& up = twins[size_t(p)];
        w.start = std::max(w.start, up.start);
        w.end = std::min(w.end, up.end);
        w.level = uint16_t(up.level + 1);
      }
      w.end = std::max(w.end, w.start);
      todo.push_back(ks[k]);
    }
  }
  const uint32_t lane_index =
      lane(LaneKind::kNvtx, kGpuPhasesLaneId, 0, kGpuPhasesDomain, "GPU phases (device time)", 0);
  auto& out = t.m_data[lane_index].events;
  const uint32_t base = uint32_t(out.size());
  for (const Twin& w : twins) {
    Event e;
    e.kind = EventKind::kRange;
    e.start_ns = w.start;
    e.end_ns = w.end;
    e.name = w.name;
    e.arg = w.arg;
    e.depth = w.level;
    out.push_back(e);
  }
  std::vector<uint32_t> moved;
  nest_lane(t, lane_index, &moved);

  for (uint32_t i = 0; i < recs.size(); ++i) {
    Event& e = t.m_data[recs[i].ref.lane].events[recs[i].ref.index];
    if (target[i] < 0) continue;
    if (recs[i].node != kNoIndex) {
      e.parent = {lane_index, moved[base + uint32_t(target[i])]};
      ++t.m_info.graph_attributed;
    } else if (!e.parent.valid()) {
      e.parent = {lane_index, moved[base + uint32_t(target[i])]};
      ++t.m_info.phase_only;
    }
  }
  if (unmatched_groups)
    t.m_info.notes.push_back(std::to_string(unmatched_groups) +
                             " CUDA graph replays had no matching layout: their work is placed "
                             "in its phase only (" + first_unmatched + ")");
  if (t.m_info.inconsistent_launches)
    t.m_info.notes.push_back(std::to_string(t.m_info.inconsistent_launches) +
                             " GPU records ran outside the phase their launch record names; "
                             "placed by device time");
}

}  // namespace sinkscope::prof
