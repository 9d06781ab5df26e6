// SPDX-License-Identifier: Apache-2.0
// CUPTI activity records: copied into the run's compact arrays as buffers complete (State::take),
// then turned into timeline events, lanes and notes (CuptiCollector::add_to).
#if SINKSCOPE_PROFILER_CUPTI
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "profiler/cupti_state.h"

namespace sinkscope::prof {
namespace {

CopyKind copy_kind_of(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return CopyKind::kHtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return CopyKind::kDtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return CopyKind::kDtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return CopyKind::kHtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return CopyKind::kPeer;
    default: return CopyKind::kUnknown;
  }
}

const char* sync_name(uint32_t t) {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "event synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "stream wait event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "stream synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "context synchronize";
    default: return "synchronize";
  }
}

std::string demangle(const char* name) {
  if (!name) return "<unnamed kernel>";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

}  // namespace

uint32_t CuptiCollector::State::intern(const char* text, bool kernel) {
  if (!text) text = kernel ? "<unnamed kernel>" : "<unnamed>";
  // Kernel name pointers are stable while their module is loaded; marker name storage may be
  // reused for other text, so markers are always looked up by text.
  if (kernel)
    if (auto it = name_by_ptr.find(text); it != name_by_ptr.end()) return it->second;
  uint32_t id;
  if (auto it = name_ids.find(text); it != name_ids.end()) {
    id = it->second;
  } else if (names.size() >= options.max_names) {
    ++stats.dropped_names;
    id = 0;  // "<other>"
  } else {
    id = static_cast<uint32_t>(names.size());
    names.push_back(kernel ? demangle(text) : std::string(text));
    name_ids.emplace(text, id);
  }
  // Bounded like the names: pointers past the cap are looked up by text each time.
  if (kernel && name_by_ptr.size() < 4 * options.max_names) name_by_ptr.emplace(text, id);
  return id;
}

void CuptiCollector::State::clear_run() {
  for (auto& pb : pending) free_buffers.push_back(pb.first);  // a stale run's: not decoded
  pending.clear();
  names.assign(1, "<other>");
  name_ids.clear();
  name_by_ptr.clear();
  kernels.clear();
  copies.clear();
  api.clear();
  markers.clear();
  open_markers.clear();
  marker_payload.clear();
  external.clear();
  costs.clear();
  context_device.clear();
  const uint64_t allocated_now = allocated;
  stats = CuptiStats{};
  stats.buffers_allocated = allocated_now;
  records = 0;
}

void CuptiCollector::State::take(const CUpti_Activity* r) {
  switch (r->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
      if (k->start == 0 || k->end < k->start) {  // no timing: nothing to place on a timeline
        ++stats.untimed_kernels;
        return;
      }
      if (!admit()) return;
      kernels.push_back({k->start, k->end, intern(k->name, true), k->streamId, k->deviceId,
                         k->contextId, k->correlationId,
                         {k->gridX, k->gridY, k->gridZ},
                         {k->blockX, k->blockY, k->blockZ}, k->graphId});
      context_device[k->contextId] = k->deviceId;
      ++stats.kernels;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
      if (!admit()) return;
      copies.push_back({m->start, m->end, m->bytes, m->streamId, m->deviceId, m->contextId,
                        m->correlationId, EventKind::kMemcpy, copy_kind_of(m->copyKind), 0,
                        m->graphId});
      context_device[m->contextId] = m->deviceId;
      ++stats.copies;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
      if (!admit()) return;
      copies.push_back({m->start, m->end, m->bytes, m->streamId, m->deviceId, m->contextId,
                        m->correlationId, EventKind::kMemset, CopyKind::kUnknown, 0, m->graphId});
      ++stats.copies;
      return;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(r);
      if (!admit()) return;
      copies.push_back({s->start, s->end, 0, s->streamId, 0, s->contextId, s->correlationId,
                        EventKind::kSync, CopyKind::kUnknown, static_cast<uint32_t>(s->type), 0});
      ++stats.syncs;
      return;
    }
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
      const auto* g = reinterpret_cast<const CUpti_ActivityGraphTrace2*>(r);
      if (!admit()) return;
      // Not a node of the graph: graph_id stays 0 so that layouts only see node records.
      kernels.push_back({g->start, g->end, intern("CUDA graph", false), g->streamId, g->deviceId,
                         g->contextId, g->correlationId, {0, 0, 0}, {0, 0, 0}, 0});
      context_device[g->contextId] = g->deviceId;
      ++stats.kernels;
      return;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(r);
      if (!admit()) return;
      api.push_back({a->correlationId, a->threadId, a->start});
      ++stats.api_calls;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(r);
      const uint32_t thread =
          m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? m->objectId.pt.threadId : 0;
      if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        if (open_markers.size() >= options.max_records) {
          ++stats.dropped_records;
          return;
        }
        open_markers[m->id] = {m->timestamp, intern(m->name, false), intern(m->domain ? m->domain : "", false),
                               thread};
      } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        auto it = open_markers.find(m->id);
        if (it == open_markers.end()) return;  // its start was dropped
        const OpenMarker o = it->second;
        open_markers.erase(it);
        if (!admit()) return;
        markers.push_back({o.start, m->timestamp, m->id, o.name, o.domain, o.thread});
        ++stats.ranges;
      } else if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
        if (!admit()) return;
        markers.push_back({m->timestamp, m->timestamp, m->id, intern(m->name, false),
                           intern(m->domain ? m->domain : "", false), thread});
        ++stats.ranges;
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER_DATA: {
      const auto* d = reinterpret_cast<const CUpti_ActivityMarkerData2*>(r);
      if (d->payloadKind == CUPTI_METRIC_VALUE_KIND_INT64 &&
          marker_payload.size() < options.max_records)
        marker_payload[d->id] = d->payload.metricValueInt64;
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(r);
      if (x->externalKind == kCostKind && external.size() < options.max_records)
        external.emplace_back(x->correlationId, x->externalId);
      return;
    }
    default:
      return;
  }
}

void CuptiCollector::add_to(TimelineBuilder& b) const {
  const State& s = *m_state;
  std::lock_guard lock(s.mutex);
  const int64_t off = s.stats.clock_offset_ns;
  auto ts = [off](uint64_t t) { return static_cast<int64_t>(t) + off; };

  // Launch lookup: correlation id -> (thread, API start).
  std::vector<RawApi> api = s.api;
  std::sort(api.begin(), api.end(),
            [](const RawApi& a, const RawApi& c) { return a.correlation < c.correlation; });
  auto launch = [&](uint32_t corr, Event& e) {
    auto it = std::lower_bound(api.begin(), api.end(), corr,
                               [](const RawApi& a, uint32_t c) { return a.correlation < c; });
    if (it == api.end() || it->correlation != corr) return;
    e.launch_thread = it->thread;
    e.launch_ns = ts(it->start);
  };
  // Costs: correlation -> external id -> cost, split over the kernels sharing the external id.
  std::unordered_map<uint32_t, uint64_t> ext_of(s.external.begin(), s.external.end());
  std::unordered_map<uint64_t, uint32_t> kernels_per_ext;
  if (!s.costs.empty())
    for (const RawKernel& k : s.kernels)
      if (auto it = ext_of.find(k.correlation); it != ext_of.end()) ++kernels_per_ext[it->second];

  std::vector<uint32_t> name_ids(s.names.size());
  for (size_t i = 0; i < s.names.size(); ++i) name_ids[i] = b.intern(s.names[i]);

  for (const RawKernel& k : s.kernels) {
    Event e;
    e.kind = EventKind::kKernel;
    e.start_ns = ts(k.start);
    e.end_ns = ts(k.end);
    e.name = name_ids[k.name];
    e.correlation = k.correlation;
    e.graph_id = k.graph_id;
    std::copy(k.grid, k.grid + 3, e.grid);
    std::copy(k.block, k.block + 3, e.block);
    launch(k.correlation, e);
    if (auto it = ext_of.find(k.correlation); it != ext_of.end()) {
      if (auto c = s.costs.find(it->second); c != s.costs.end()) {
        const double n = std::max<uint32_t>(kernels_per_ext[it->second], 1);
        e.bytes = static_cast<uint64_t>(c->second.bytes / n);
        e.flops = c->second.flops / n;
      }
    }
    b.add(b.lane(LaneKind::kCudaStream, k.stream, k.device), e);
  }
  const uint32_t memset_name = b.intern("memset");
  for (const RawCopy& c : s.copies) {
    Event e;
    e.kind = c.kind;
    e.start_ns = ts(c.start);
    e.end_ns = ts(c.end);
    e.correlation = c.correlation;
    e.bytes = c.bytes;
    e.copy_kind = c.copy_kind;
    e.graph_id = c.graph_id;
    launch(c.correlation, e);
    uint32_t device = c.device;
    if (c.kind == EventKind::kSync) {
      if (auto it = s.context_device.find(c.context); it != s.context_device.end())
        device = it->second;
      e.name = b.intern(sync_name(c.sync_type));
      // Host waits span device work; their own lane keeps stream lanes properly nested.
      b.add(b.lane(LaneKind::kCudaStream, kSyncLane, device, {},
                   "GPU " + std::to_string(device) + " synchronisation"),
            e);
      continue;
    }
    if (c.kind == EventKind::kMemcpy)
      e.name = b.intern(std::string("memcpy ") + copy_kind_name(c.copy_kind));
    else
      e.name = memset_name;
    b.add(b.lane(LaneKind::kCudaStream, c.stream, device), e);
  }
  for (const RawMarker& m : s.markers) {
    Event e;
    e.kind = EventKind::kRange;
    e.start_ns = ts(m.start);
    e.end_ns = ts(m.end);
    e.name = name_ids[m.name];
    if (auto it = s.marker_payload.find(m.id); it != s.marker_payload.end()) {
      // The payload is the arg unless the name already ends with it ("layer 3").
      const std::string& text = s.names[m.name];
      std::string suffix = " ";
      suffix += std::to_string(it->second);
      if (text.size() < suffix.size() ||
          text.compare(text.size() - suffix.size(), suffix.size(), suffix) != 0)
        e.arg = it->second;
    }
    const std::string& domain = s.names[m.domain];
    b.add(b.lane(LaneKind::kNvtx, m.thread, 0, domain, {}, m.thread), e);
  }
  // Layouts of the graphs this run replayed (CUPTI's graph ids never repeat in a process).
  {
    std::vector<uint32_t> seen;
    for (const RawKernel& k : s.kernels)
      if (k.graph_id && (seen.empty() || seen.back() != k.graph_id)) seen.push_back(k.graph_id);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    auto used = [&](uint32_t id) { return id && std::binary_search(seen.begin(), seen.end(), id); };
    for (const KnownLayout& l : s.layouts) {
      if (used(l.exec_id)) b.add_graph_layout(l.exec_id, true, l.layout);
      if (used(l.graph_id)) b.add_graph_layout(l.graph_id, false, l.layout);
    }
  }
  TimelineInfo& info = b.info();
  info.dropped_records += s.stats.dropped_records;
  if (s.stats.skipped_steps)
    info.notes.push_back("kernel records in " + std::to_string(s.stats.sampled_steps) + " of " +
                         std::to_string(s.stats.sampled_steps + s.stats.skipped_steps) +
                         " decode steps (preset " + s.options.preset + ")");
  if (s.stats.dropped_names)
    info.notes.push_back(std::to_string(s.stats.dropped_names) +
                         " records past the name limit are shown as <other>");
  if (s.stats.unmatched_markers)
    info.notes.push_back(std::to_string(s.stats.unmatched_markers) +
                         " NVTX ranges were still open at stop() and are not shown");
  if (s.stats.untimed_kernels)
    info.notes.push_back(std::to_string(s.stats.untimed_kernels) +
                         " kernel records came without timestamps and are not shown");
}

}  // namespace sinkscope::prof
#endif  // SINKSCOPE_PROFILER_CUPTI
