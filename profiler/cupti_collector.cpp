// SPDX-License-Identifier: Apache-2.0
// CUPTI activity collector (CUDA builds only). Buffers come from a bounded pool; records are
// copied into compact per-run arrays inside the completion callback, so a buffer is reusable as
// soon as the callback returns. Every CUPTI / CUDA call goes through SS_CUPTI / SS_CUDART.
#if SINKSCOPE_PROFILER_CUPTI
#include "profiler/cupti_collector.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace sinkscope::prof {
namespace {

Status cupti_status(CUptiResult r, const char* expr, const char* file, int line) {
  if (r == CUPTI_SUCCESS) return Status::success();
  const char* text = nullptr;
  if (cuptiGetResultString(r, &text) != CUPTI_SUCCESS || !text) text = "unknown CUPTI error";
  return Status::error(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                       text + " (" + std::to_string(static_cast<int>(r)) + ")");
}

Status cudart_status(cudaError_t r, const char* expr, const char* file, int line) {
  if (r == cudaSuccess) return Status::success();
  return Status::error(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                       cudaGetErrorString(r));
}

// The kernel record kind. CUPTI_ACTIVITY_KIND_KERNEL (serialised kernels) gives replayed graph
// nodes no timestamps, so it is not offered.
constexpr CUpti_ActivityKind kKernelKind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;

// Checked calls (docs/architecture.md, design principle 14): a Status naming the call, file and
// line.
#define SS_CUPTI(call) cupti_status((call), #call, __FILE__, __LINE__)
#define SS_CUDART(call) cudart_status((call), #call, __FILE__, __LINE__)
#define SS_TRY(expr)                   \
  do {                                 \
    if (Status s_ = (expr); !s_) return s_; \
  } while (0)

// Per-run records, in CUPTI time.
struct RawKernel {
  uint64_t start, end;
  uint32_t name, stream, device, context, correlation;
  int32_t grid[3], block[3];
  uint32_t graph_id;
};
struct RawCopy {
  uint64_t start, end, bytes;
  uint32_t stream, device, context, correlation;
  EventKind kind;  // kMemcpy, kMemset or kSync
  CopyKind copy_kind;
  uint32_t sync_type;
  uint32_t graph_id;
};
struct KnownLayout {
  uint32_t graph_id, exec_id;
  GraphLayout layout;
};
constexpr size_t kMaxLayouts = 64;
struct RawApi {
  uint32_t correlation, thread;
  uint64_t start;
};
struct RawMarker {
  uint64_t start, end;
  uint32_t id, name, domain, thread;
};
struct OpenMarker {
  uint64_t start;
  uint32_t name, domain, thread;
};
struct Cost {
  double bytes, flops;
};

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

int64_t measure_offset() {
  uint64_t c = 0;
  const int64_t a = now_ns();
  if (cuptiGetTimestamp(&c) != CUPTI_SUCCESS) return 0;
  const int64_t b = now_ns();
  return a + (b - a) / 2 - static_cast<int64_t>(c);
}

constexpr uint32_t kSyncLane = 0xfffffffeu;  // lane id of a device's synchronisation lane
constexpr CUpti_ExternalCorrelationKind kCostKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

}  // namespace

struct CuptiCollector::State {
  mutable std::mutex mutex;  // everything below; the callbacks run on CUPTI's thread
  bool initialized = false;
  bool available = false;
  std::string why;
  CuptiOptions options;
  std::atomic<bool> running{false};
  std::vector<CUpti_ActivityKind> enabled;
  bool driver_cbids = false;  // launch entry points enabled one by one (lean mode)
  bool runtime_cbids = false;  // the same for the runtime (runtime_api = false)

  // Buffer pool (lives for the process; bounded by options.max_buffers).
  std::vector<uint8_t*> free_buffers;
  // Completed buffers not decoded yet (defer_decode), in completion order: (buffer, valid bytes).
  std::vector<std::pair<uint8_t*, size_t>> pending;
  size_t allocated = 0;
  size_t buffer_bytes = 0;

  // The run.
  std::vector<std::string> names;
  std::unordered_map<std::string, uint32_t> name_ids;      // by the raw (mangled) text
  std::unordered_map<const char*, uint32_t> name_by_ptr;  // CUPTI's pointers repeat
  std::vector<RawKernel> kernels;
  std::vector<RawCopy> copies;
  std::vector<RawApi> api;
  std::vector<RawMarker> markers;
  std::unordered_map<uint32_t, OpenMarker> open_markers;
  std::unordered_map<uint32_t, int64_t> marker_payload;
  std::vector<std::pair<uint32_t, uint64_t>> external;  // correlation -> external id
  std::unordered_map<uint64_t, Cost> costs;             // external id -> cost
  std::unordered_map<uint32_t, uint32_t> context_device;
  CuptiStats stats;
  uint64_t records = 0;
  std::vector<KnownLayout> layouts;  // for the process, oldest first
  bool kernels_on = false;   // the kernel kind is enabled now (sampling switches it)
  uint64_t decode_steps = 0;  // this run

  uint32_t intern(const char* text, bool kernel);
  bool admit() {  // one more record within max_records?
    if (records >= options.max_records) {
      ++stats.dropped_records;
      return false;
    }
    ++records;
    return true;
  }
  void take(const CUpti_Activity* r);
  void decode(uint8_t* buffer, size_t valid) {
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) take(record);
  }
  // Decodes the stashed buffers in completion order and returns them to the pool.
  void drain_pending() {
    for (auto& [buffer, valid] : pending) {
      decode(buffer, valid);
      free_buffers.push_back(buffer);
    }
    pending.clear();
  }
  void clear_run();
};

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

// ---- CUPTI callbacks (C linkage is not required; CUPTIAPI is the calling convention) --------

namespace {
CuptiCollector::State* g_state = nullptr;  // set once in instance(); the callbacks need it

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  auto& s = *g_state;
  *max_records = 0;
  std::lock_guard lock(s.mutex);
  if (!s.free_buffers.empty()) {
    *buffer = s.free_buffers.back();
    s.free_buffers.pop_back();
    *size = s.buffer_bytes;
    return;
  }
  if (s.allocated < s.options.max_buffers) {
    // CUPTI wants 8-byte alignment; buffers are never freed (the pool is bounded).
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, s.buffer_bytes));
    if (*buffer) {
      ++s.allocated;
      s.stats.buffers_allocated = s.allocated;
      *size = s.buffer_bytes;
      return;
    }
  }
  // Pool exhausted: CUPTI drops the records and counts them (cuptiActivityGetNumDroppedRecords).
  *buffer = nullptr;
  *size = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
  auto& s = *g_state;
  std::lock_guard lock(s.mutex);
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
    s.stats.dropped_records += dropped;
  if (buffer && valid > 0 && s.running.load()) {
    // Deferred: keep the buffer while the pool can still hand out at least two more; else decode
    // everything stashed (order kept) and this one now.
    const size_t spare = s.free_buffers.size() + (s.options.max_buffers - std::min(s.allocated, s.options.max_buffers));
    if (s.options.defer_decode && spare >= 2) {
      s.pending.emplace_back(buffer, valid);
      ++s.stats.buffers_completed;
      return;
    }
    s.drain_pending();
    s.decode(buffer, valid);
  }
  if (buffer) {
    ++s.stats.buffers_completed;
    s.free_buffers.push_back(buffer);
  }
}

// The kinds of one run, in enabling order.
std::vector<CUpti_ActivityKind> kinds_for(const CuptiOptions& o) {
  std::vector<CUpti_ActivityKind> k;
  if (o.runtime_api) k.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
  if (o.driver_api) k.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  k.push_back(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  if (o.graph_level) k.push_back(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
  if (o.kernels)
    k.push_back(kKernelKind);
  if (o.memory) {
    k.push_back(CUPTI_ACTIVITY_KIND_MEMCPY);
    k.push_back(CUPTI_ACTIVITY_KIND_MEMSET);
  }
  if (o.sync) k.push_back(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  if (o.nvtx) {
    k.push_back(CUPTI_ACTIVITY_KIND_MARKER);
    k.push_back(CUPTI_ACTIVITY_KIND_MARKER_DATA);
  }
  return k;
}

// Lean mode (driver_api = false): DRIVER API records only for the launch entry points, so
// kernels launched straight through the driver (cuBLAS) still get their launch thread and time
// (kernels are linked to the NVTX range around their launch), without a record for every other
// driver call.
constexpr CUpti_CallbackId kDriverLaunchCbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,          CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,           CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};

// runtime_api = false: RUNTIME records only for launches and async copies (kernels launched
// from the host get their thread and launch time; graph launches link to their step).
constexpr CUpti_CallbackId kRuntimeLaunchCbids[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000};

std::atomic<uint64_t> g_next_cost_id{1};

}  // namespace

// ---- CuptiCollector --------------------------------------------------------------------------

CuptiCollector& CuptiCollector::instance() {
  // Never destroyed: CUPTI may call back during process exit.
  static CuptiCollector* c = [] {
    auto* p = new CuptiCollector();
    g_state = p->m_state.get();
    return p;
  }();
  return *c;
}

CuptiCollector::CuptiCollector() : m_state(std::make_unique<State>()) {}
CuptiCollector::~CuptiCollector() = default;

bool CuptiCollector::available(std::string* why) {
  State& s = *m_state;
  {
    std::lock_guard lock(s.mutex);
    if (s.initialized) {
      if (why) *why = s.why;
      return s.available;
    }
  }
  // Outside the lock: these calls may trigger buffer callbacks.
  std::string reason;
  int devices = 0;
  if (Status st = SS_CUDART(cudaGetDeviceCount(&devices)); !st) {
    reason = "no usable CUDA device: " + st.message;
  } else if (devices == 0) {
    reason = "no CUDA device found";
  } else if (Status st1 = SS_CUPTI(cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)); !st1) {
    reason = "CUPTI unavailable: " + st1.message;
  } else if (Status st2 = SS_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
             !st2) {
    reason = "CUPTI unavailable: " + st2.message;
  }
  std::lock_guard lock(s.mutex);
  s.initialized = true;
  s.available = reason.empty();
  s.why = reason;
  if (why) *why = reason;
  return s.available;
}

bool CuptiCollector::running() const { return m_state->running.load(); }

Status CuptiCollector::start(const CuptiOptions& options) {
  std::string why;
  if (!available(&why)) return Status::error("CUPTI tracing unavailable: " + why);
  State& s = *m_state;
  {
    std::lock_guard lock(s.mutex);
    if (s.running.load()) return Status::error("CUPTI collection is already running");
    // The buffer size is fixed once the first buffer exists (the pool holds one size).
    const size_t want_bytes = std::max<size_t>(options.buffer_bytes, 64 * 1024) & ~size_t(7);
    if (s.allocated == 0) s.buffer_bytes = want_bytes;
    s.options = options;
    s.options.max_buffers = std::max<size_t>(options.max_buffers, 2);
    s.options.max_names = std::max<size_t>(options.max_names, 16);
    s.clear_run();
    s.stats.clock_offset_ns = measure_offset();
    s.running.store(true);
  }
  // Device-side buffers and semaphores: CUPTI reads these when it sets up a context's tracing;
  // a refusal only costs speed, so it is not an error.
  if (options.device_buffer_bytes > 0) {
    size_t v = options.device_buffer_bytes, sz = sizeof v;
    (void)cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v);
  }
  if (options.semaphore_preallocate > 0) {
    size_t v = options.semaphore_preallocate, sz = sizeof v;
    (void)cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PROFILING_SEMAPHORE_PRE_ALLOCATE_VALUE,
                                    &sz, &v);
  }
  {
    std::lock_guard lock(s.mutex);
    s.kernels_on = options.kernels;
    s.decode_steps = 0;
  }
  std::vector<CUpti_ActivityKind> enabled;
  for (CUpti_ActivityKind k : kinds_for(options)) {
    Status st = SS_CUPTI(cuptiActivityEnable(k));
    if (!st) {
      for (CUpti_ActivityKind e : enabled) (void)cuptiActivityDisable(e);
      s.running.store(false);
      return st;
    }
    enabled.push_back(k);
  }
  if (!options.driver_api) {
    for (CUpti_CallbackId cbid : kDriverLaunchCbids) {
      Status st = SS_CUPTI(cuptiActivityEnableDriverApi(cbid, 1));
      if (!st) {
        for (CUpti_CallbackId c : kDriverLaunchCbids) (void)cuptiActivityEnableDriverApi(c, 0);
        for (CUpti_ActivityKind e : enabled) (void)cuptiActivityDisable(e);
        s.running.store(false);
        return st;
      }
    }
  }
  if (!options.runtime_api) {
    for (CUpti_CallbackId cbid : kRuntimeLaunchCbids) {
      Status st = SS_CUPTI(cuptiActivityEnableRuntimeApi(cbid, 1));
      if (!st) {
        for (CUpti_CallbackId c : kRuntimeLaunchCbids) (void)cuptiActivityEnableRuntimeApi(c, 0);
        if (!options.driver_api)
          for (CUpti_CallbackId c : kDriverLaunchCbids) (void)cuptiActivityEnableDriverApi(c, 0);
        for (CUpti_ActivityKind e : enabled) (void)cuptiActivityDisable(e);
        s.running.store(false);
        return st;
      }
    }
  }
  std::lock_guard lock(s.mutex);
  s.enabled = std::move(enabled);
  s.driver_cbids = !options.driver_api;
  s.runtime_cbids = !options.runtime_api;
  return Status::success();
}

Status CuptiCollector::stop() {
  State& s = *m_state;
  if (!s.running.load()) return Status::success();
  // Work still queued on the device would otherwise be missing (or arrive in the next run).
  Status first = SS_CUDART(cudaDeviceSynchronize());
  auto keep = [&](Status st) {
    if (first && !st) first = std::move(st);
  };
  keep(SS_CUPTI(cuptiActivityFlushAll(0)));
  std::vector<CUpti_ActivityKind> enabled;
  {
    std::lock_guard lock(s.mutex);
    enabled.swap(s.enabled);
  }
  bool cbids = false, rt_cbids = false, kernels_on = true;
  {
    std::lock_guard lock(s.mutex);
    std::swap(cbids, s.driver_cbids);
    std::swap(rt_cbids, s.runtime_cbids);
    kernels_on = s.kernels_on;
  }
  for (CUpti_ActivityKind k : enabled)
    if (k != kKernelKind || kernels_on) keep(SS_CUPTI(cuptiActivityDisable(k)));
  if (cbids)
    for (CUpti_CallbackId c : kDriverLaunchCbids) keep(SS_CUPTI(cuptiActivityEnableDriverApi(c, 0)));
  if (rt_cbids)
    for (CUpti_CallbackId c : kRuntimeLaunchCbids) keep(SS_CUPTI(cuptiActivityEnableRuntimeApi(c, 0)));
  // Forced: also the buffers holding records of kinds just disabled.
  keep(SS_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)));
  std::lock_guard lock(s.mutex);
  s.drain_pending();  // deferred buffers of this run, in completion order
  s.running.store(false);
  s.stats.unmatched_markers = s.open_markers.size();
  s.open_markers.clear();
  s.stats.clock_drift_ns = measure_offset() - s.stats.clock_offset_ns;
  s.stats.buffers_allocated = s.allocated;
  s.stats.buffers_free = s.free_buffers.size();
  return first;
}

namespace {
// Kernel records on or off for the sampled presets (no-op when already so). Before switching
// off, the sampled step's records are flushed: the engine synchronised before this span began,
// so they are complete. Left until stop(), a replayed graph's kernel records came with the
// timestamps of later, untraced replays of the same graph (measured on an H200, CUDA 13.0: one
// replay's 183 kernels spread over the next 8 steps).
void switch_kernel_records(CuptiCollector::State& s, bool want) {
  {
    std::lock_guard lock(s.mutex);
    if (want == s.kernels_on) return;
    s.kernels_on = want;
  }
  // Outside the lock: enabling or disabling may complete buffers (callbacks take the lock).
  if (!want) (void)cuptiActivityFlushAll(0);
  (void)(want ? cuptiActivityEnable(kKernelKind) : cuptiActivityDisable(kKernelKind));
}
}  // namespace

void CuptiCollector::on_decode_step() {
  State& s = *m_state;
  if (!s.running.load() || s.options.sample_every <= 1 || !s.options.kernels) return;
  bool want;
  {
    std::lock_guard lock(s.mutex);
    want = s.decode_steps++ % uint64_t(s.options.sample_every) == 0;
    if (want) ++s.stats.sampled_steps;
    else ++s.stats.skipped_steps;
  }
  switch_kernel_records(s, want);
}

void CuptiCollector::on_prefill() {
  State& s = *m_state;
  if (!s.running.load() || s.options.sample_every <= 1 || !s.options.kernels) return;
  switch_kernel_records(s, true);
}

bool CuptiCollector::ready() const {
  std::lock_guard lock(m_state->mutex);
  return m_state->initialized && m_state->available;
}

void CuptiCollector::add_graph_layout(uint32_t graph_id, uint32_t exec_id, GraphLayout layout) {
  std::lock_guard lock(m_state->mutex);
  auto& v = m_state->layouts;
  if (v.size() >= kMaxLayouts) v.erase(v.begin());
  v.push_back({graph_id, exec_id, std::move(layout)});
}

CuptiStats CuptiCollector::stats() const {
  std::lock_guard lock(m_state->mutex);
  CuptiStats st = m_state->stats;
  st.graph_layouts = m_state->layouts.size();
  st.buffers_allocated = m_state->allocated;
  st.buffers_free = m_state->free_buffers.size();
  return st;
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

// ---- LaunchCost ------------------------------------------------------------------------------

LaunchCost::LaunchCost(double bytes, double flops) {
  CuptiCollector& c = CuptiCollector::instance();
  if (!c.running()) return;
  const uint64_t id = g_next_cost_id.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard lock(g_state->mutex);
    if (g_state->costs.size() >= g_state->options.max_records) return;
    g_state->costs[id] = {bytes, flops};
  }
  m_pushed = cuptiActivityPushExternalCorrelationId(kCostKind, id) == CUPTI_SUCCESS;
}

LaunchCost::~LaunchCost() {
  if (!m_pushed) return;
  uint64_t last = 0;
  (void)cuptiActivityPopExternalCorrelationId(kCostKind, &last);
}

}  // namespace sinkscope::prof
#endif  // SINKSCOPE_PROFILER_CUPTI
