// SPDX-License-Identifier: Apache-2.0
// CUPTI activity collector (CUDA builds only). Buffers come from a bounded pool; records are
// copied into compact per-run arrays inside the completion callback, so a buffer is reusable as
// soon as the callback returns. Every CUPTI / CUDA call goes through SS_CUPTI / SS_CUDART.
#if SINKSCOPE_PROFILER_CUPTI
#include "profiler/cupti_collector.h"

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "profiler/cupti_state.h"

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

// Checked calls (docs/architecture.md, design principle 14): a Status naming the call, file and
// line.
#define SS_CUPTI(call) cupti_status((call), #call, __FILE__, __LINE__)
#define SS_CUDART(call) cudart_status((call), #call, __FILE__, __LINE__)
#define SS_TRY(expr)                   \
  do {                                 \
    if (Status s_ = (expr); !s_) return s_; \
  } while (0)

int64_t measure_offset() {
  uint64_t c = 0;
  const int64_t a = now_ns();
  if (cuptiGetTimestamp(&c) != CUPTI_SUCCESS) return 0;
  const int64_t b = now_ns();
  return a + (b - a) / 2 - static_cast<int64_t>(c);
}

}  // namespace

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
