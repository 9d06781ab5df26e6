// SPDX-License-Identifier: Apache-2.0
#include "profiler/timeline.h"

#include <algorithm>
#include <charconv>

namespace sinkscope::prof {

const char* lane_kind_name(LaneKind k) {
  switch (k) {
    case LaneKind::kCpuThread: return "cpu_thread";
    case LaneKind::kNvtx: return "nvtx";
    case LaneKind::kCudaStream: return "cuda_stream";
  }
  return "?";
}

const char* event_kind_name(EventKind k) {
  switch (k) {
    case EventKind::kRange: return "range";
    case EventKind::kKernel: return "kernel";
    case EventKind::kMemcpy: return "memcpy";
    case EventKind::kMemset: return "memset";
    case EventKind::kSync: return "sync";
  }
  return "?";
}

const char* copy_kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::kUnknown: return "unknown";
    case CopyKind::kHtoD: return "HtoD";
    case CopyKind::kDtoH: return "DtoH";
    case CopyKind::kDtoD: return "DtoD";
    case CopyKind::kHtoH: return "HtoH";
    case CopyKind::kPeer: return "PtoP";
  }
  return "?";
}

double Event::achieved_gbps() const {
  const int64_t d = duration_ns();
  return d > 0 && bytes > 0 ? static_cast<double>(bytes) / static_cast<double>(d) : 0.0;
}

double Event::achieved_tflops() const {
  const int64_t d = duration_ns();
  return d > 0 && flops > 0 ? flops / static_cast<double>(d) * 1e-3 : 0.0;
}

// ---- Timeline -------------------------------------------------------------------------------

size_t Timeline::event_count() const {
  size_t n = 0;
  for (const auto& d : m_data) n += d.events.size();
  return n;
}

std::string Timeline::display_name(const Event& e) const {
  std::string s = m_names[e.name];
  if (e.kind == EventKind::kRange && e.arg != kNoArg) {
    s += ' ';
    s += std::to_string(e.arg);
  }
  return s;
}

namespace {
// A zero-length event occupies 1 ns so that window queries can find it.
int64_t effective_end(const Event& e) { return std::max(e.end_ns, e.start_ns + 1); }
}  // namespace

std::vector<uint32_t> Timeline::window(uint32_t lane, int64_t t0, int64_t t1) const {
  std::vector<uint32_t> out;
  if (lane >= m_data.size() || t1 <= t0) return out;
  const LaneData& d = m_data[lane];
  for (const auto& level : d.levels) {
    // Within a level events do not overlap, so ends are sorted like starts.
    auto it = std::partition_point(level.begin(), level.end(), [&](uint32_t i) {
      return effective_end(d.events[i]) <= t0;
    });
    for (; it != level.end() && d.events[*it].start_ns < t1; ++it) out.push_back(*it);
  }
  // Indices follow the lane's (start, parents first) order.
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<EventRef> Timeline::window(int64_t t0, int64_t t1) const {
  std::vector<EventRef> out;
  for (uint32_t l = 0; l < m_data.size(); ++l)
    for (uint32_t i : window(l, t0, t1)) out.push_back({l, i});
  return out;
}

int Timeline::max_depth(uint32_t lane) const {
  return lane < m_data.size() ? static_cast<int>(m_data[lane].levels.size()) - 1 : -1;
}

EventRef Timeline::deepest_containing(uint32_t lane, int64_t t) const {
  const LaneData& d = m_data[lane];
  for (size_t lv = d.levels.size(); lv-- > 0;) {
    const auto& level = d.levels[lv];
    // Last event of the level starting at or before t.
    auto it = std::partition_point(level.begin(), level.end(),
                                   [&](uint32_t i) { return d.events[i].start_ns <= t; });
    if (it == level.begin()) continue;
    const Event& e = d.events[*(it - 1)];
    if (e.kind == EventKind::kRange && t <= e.end_ns) return {lane, *(it - 1)};
  }
  return {};
}

EventRef Timeline::enclosing_range(uint32_t os_thread, int64_t t) const {
  if (os_thread == 0) return {};
  for (LaneKind kind : {LaneKind::kNvtx, LaneKind::kCpuThread}) {
    for (uint32_t l = 0; l < m_lanes.size(); ++l) {
      if (m_lanes[l].kind != kind || m_lanes[l].os_thread != os_thread) continue;
      const EventRef r = deepest_containing(l, t);
      if (r.valid()) return r;
    }
  }
  return {};
}

int64_t Timeline::layer_of(EventRef r) const {
  // Parent chains are short (nesting depth); the guard protects against malformed input.
  for (int guard = 0; r.valid() && guard < 1024; ++guard) {
    const Event& e = event(r);
    if (e.kind == EventKind::kRange && e.name == m_layer_name && e.arg != kNoArg) return e.arg;
    r = e.parent;
  }
  return -1;
}

bool Timeline::is_gpu_phases(uint32_t lane) const {
  return lane < m_lanes.size() && m_lanes[lane].kind == LaneKind::kNvtx &&
         m_lanes[lane].os_thread == 0 && m_lanes[lane].domain == kGpuPhasesDomain;
}

uint32_t Timeline::find_name(std::string_view text) const {
  for (uint32_t i = 0; i < m_names.size(); ++i)
    if (m_names[i] == text) return i;
  return kNoIndex;
}

// ---- TimelineBuilder ------------------------------------------------------------------------

TimelineBuilder::TimelineBuilder() : m_t(std::make_unique<Timeline>()) {}

uint32_t TimelineBuilder::lane(LaneKind kind, uint32_t id, uint32_t device,
                               std::string_view domain, std::string_view name,
                               uint32_t os_thread) {
  std::string key = std::to_string(static_cast<int>(kind)) + ":" + std::to_string(id) + ":" +
                    std::to_string(device) + ":";
  key.append(domain);
  auto [it, inserted] = m_lane_ids.try_emplace(std::move(key), 0u);
  if (!inserted) return it->second;
  Lane l;
  l.kind = kind;
  l.id = id;
  l.device = device;
  l.domain = std::string(domain);
  l.os_thread = os_thread;
  if (!name.empty()) {
    l.name = std::string(name);
  } else if (kind == LaneKind::kCpuThread) {
    l.name = "CPU thread " + std::to_string(id);
  } else if (kind == LaneKind::kNvtx) {
    l.name = "NVTX " + (domain.empty() ? std::string("(default)") : std::string(domain)) +
             ", thread " + std::to_string(id);
  } else {
    l.name = "GPU " + std::to_string(device) + " stream " + std::to_string(id);
  }
  it->second = static_cast<uint32_t>(m_t->m_lanes.size());
  m_t->m_lanes.push_back(std::move(l));
  m_t->m_data.emplace_back();
  return it->second;
}

uint32_t TimelineBuilder::intern(std::string_view name) {
  auto [it, inserted] = m_name_ids.try_emplace(std::string(name), 0u);
  if (inserted) {
    it->second = static_cast<uint32_t>(m_t->m_names.size());
    m_t->m_names.emplace_back(name);
  }
  return it->second;
}

namespace {

// "layer 12" -> ("layer", 12); false when the name does not end in " <integer>".
bool split_trailing_int(std::string_view s, std::string_view& head, int64_t& value) {
  const size_t sp = s.rfind(' ');
  if (sp == std::string_view::npos || sp == 0 || sp + 1 >= s.size()) return false;
  const std::string_view digits = s.substr(sp + 1);
  const char* first = digits.data();
  const char* last = first + digits.size();
  const auto [p, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || p != last) return false;
  head = s.substr(0, sp);
  return true;
}

}  // namespace

void TimelineBuilder::add(uint32_t lane, Event e) {
  if (e.end_ns < e.start_ns) e.end_ns = e.start_ns;
  if (e.kind == EventKind::kRange && e.arg == kNoArg) {
    std::string_view head;
    int64_t v = 0;
    if (split_trailing_int(m_t->m_names[e.name], head, v)) {
      e.arg = v;
      e.name = intern(head);
    }
  }
  m_t->m_data[lane].events.push_back(e);
  ++m_count;
}

void TimelineBuilder::add_graph_layout(uint32_t id, bool exec, GraphLayout layout) {
  m_layouts[(uint64_t(exec) << 32) | id] = std::move(layout);
}

void TimelineBuilder::nest_lane(Timeline& t, uint32_t lane_index, std::vector<uint32_t>* order) {
  Timeline::LaneData& d = t.m_data[lane_index];
  auto& ev = d.events;
  // Start order; on equal starts the longer (enclosing) event first, then the producer's depth.
  std::vector<uint32_t> idx(ev.size());
  for (uint32_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t ia, uint32_t ib) {
    const Event& a = ev[ia];
    const Event& b = ev[ib];
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;
    return a.depth < b.depth;
  });
  {
    std::vector<Event> sorted;
    sorted.reserve(ev.size());
    for (uint32_t i : idx) sorted.push_back(ev[i]);
    ev.swap(sorted);
  }
  if (order) {
    order->assign(idx.size(), 0);
    for (uint32_t n = 0; n < idx.size(); ++n) (*order)[idx[n]] = n;
  }
  // Depth = open ranges at start. An event only takes a depth whose previous holder has
  // ended, so each level is non-overlapping (what window() relies on).
  d.levels.clear();
  std::vector<uint32_t> stack;
  for (uint32_t i = 0; i < ev.size(); ++i) {
    Event& e = ev[i];
    while (!stack.empty() && ev[stack.back()].end_ns <= e.start_ns) stack.pop_back();
    e.depth = static_cast<uint16_t>(std::min<size_t>(stack.size(), 0xffff));
    if (e.kind == EventKind::kRange) {
      e.parent = {};
      if (!stack.empty() && ev[stack.back()].kind == EventKind::kRange &&
          ev[stack.back()].end_ns >= e.end_ns)
        e.parent = {lane_index, stack.back()};
    }
    if (d.levels.size() <= e.depth) d.levels.resize(e.depth + 1u);
    d.levels[e.depth].push_back(i);
    stack.push_back(i);
  }
  // "layer" ranges without an index: their order among the "layer" siblings of one parent.
  if (t.m_layer_name != kNoIndex) {
    std::unordered_map<uint64_t, int64_t> next;  // parent -> next ordinal
    for (Event& e : ev) {
      if (e.kind != EventKind::kRange || e.name != t.m_layer_name || e.arg != kNoArg) continue;
      const uint64_t key = (uint64_t(e.parent.lane) << 32) | e.parent.index;
      e.arg = next[key]++;
    }
  }
}

std::shared_ptr<const Timeline> TimelineBuilder::build() {
  Timeline& t = *m_t;
  t.m_layer_name = kNoIndex;
  if (auto it = m_name_ids.find("layer"); it != m_name_ids.end()) t.m_layer_name = it->second;
  for (uint32_t l = 0; l < t.m_data.size(); ++l) nest_lane(t, l, nullptr);
  // Link GPU work to the range enclosing its launch.
  for (auto& d : t.m_data)
    for (Event& e : d.events)
      if (e.kind != EventKind::kRange && e.launch_ns >= 0)
        e.parent = t.enclosing_range(e.launch_thread, e.launch_ns);
  attribute_gpu_work(t);  // may add the GPU-phases lane (and the name "layer")

  bool any = false;
  for (const auto& d : t.m_data)
    for (const Event& e : d.events) {
      if (!any) {
        t.m_begin = e.start_ns;
        t.m_end = e.end_ns;
        any = true;
      }
      t.m_begin = std::min(t.m_begin, e.start_ns);
      t.m_end = std::max(t.m_end, e.end_ns);
    }

  std::shared_ptr<const Timeline> out(m_t.release());
  m_t = std::make_unique<Timeline>();
  m_name_ids.clear();
  m_lane_ids.clear();
  m_layouts.clear();
  m_count = 0;
  return out;
}

}  // namespace sinkscope::prof
