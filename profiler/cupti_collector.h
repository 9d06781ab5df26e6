// SPDX-License-Identifier: Apache-2.0
// In-process CUPTI activity collector: kernels (concurrent), memcpy, memset, synchronisation,
// runtime + driver API calls (for correlation), NVTX ranges (MARKER + MARKER_DATA) and external
// correlation (LaunchCost). One per process (CUPTI's activity API is process-wide).
//
//   auto& c = CuptiCollector::instance();
//   if (!c.available(&why)) ...           // no device, no CUPTI: the CPU spans take over
//   c.start();  run();  c.stop();         // per run; buffers come back to a bounded pool
//   c.add_to(builder);                    // lanes per stream and per NVTX domain/thread
//
// Clock: CUPTI timestamps are shifted onto steady_clock (prof::now_ns) by an offset measured at
// start() around cuptiGetTimestamp(), so GPU records line up with CPU spans. Every CUPTI and
// CUDA call is checked (file and line in the message); failures are returned, never exit().
// In builds without CUDA available() is false ("built without CUDA") and the rest are no-ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "profiler/graph_layout.h"
#include "profiler/status.h"
#include "profiler/timeline.h"

namespace sinkscope::prof {

// Record sets, by name (CuptiOptions::preset, env SINKSCOPE_TRACE for the CLI and GUI). What
// costs on end-to-end decode is CUPTI's per-kernel timestamping of the ~330 replayed graph
// nodes of every decode step, not the API records (3 API calls per replayed step);
// tests/bench/bench_trace_overhead measures every preset in one run.
//   full        every kind, decoded in the callback (verified on an H200: the default)
//   lean        no SYNCHRONIZATION, DRIVER records only for launch entry points, 8 MB buffers
//               decoded at stop()
//   lean-dev    lean + RUNTIME records only for launch entry points + 64 MB device buffers and
//               pre-allocated profiling semaphores (fewer device-buffer flushes mid-run)
//   sampled[:N] lean, kernel records only in the prefill and every N-th decode step
//               (default 32), flushed when the step ends;
//               the other steps keep their NVTX ranges and copies. Kernel statistics then cover
//               the sampled steps only (a timeline note says so)
//   graph-level one record per CUDA graph launch (GRAPH_TRACE) next to kernel records
//   no-kernels  lean-dev without kernel records (diagnostic: the cost of everything else)
// Every preset keeps kernel names, durations and nesting for the kernels it records: work
// without launch records is placed by device time and stream order, replayed graphs through
// their capture layout (profiler/gpu_attribution.cpp).
struct CuptiOptions {
  size_t buffer_bytes = size_t(4) << 20;  // one activity buffer
  size_t max_buffers = 32;                // pool bound: beyond it CUPTI drops (counted) records
  size_t max_records = size_t(4) << 20;   // converted records kept per run (the rest: dropped)
  size_t max_names = 4096;                // distinct kernel / range names per run
  bool nvtx = true;                       // MARKER + MARKER_DATA
  bool memory = true;                     // MEMCPY + MEMSET
  bool sync = true;                       // SYNCHRONIZATION
  bool driver_api = true;                 // DRIVER API records (launches made via the driver
                                          // API, e.g. cuBLAS, then get launch thread/time too)
  bool runtime_api = true;                // every RUNTIME API record; false: launch entry points
  bool defer_decode = false;              // decode buffers at stop(), not in the callback
  // Graph-level records (CUPTI_ACTIVITY_KIND_GRAPH_TRACE): one record per CUDA graph launch
  // instead of one per node; CUPTI may refuse it together with kernel records (start() fails).
  bool graph_level = false;
  bool kernels = true;                    // kernel records at all
  int sample_every = 0;                   // > 1: kernel records in every N-th decode step only
  size_t device_buffer_bytes = 0;         // CUPTI device buffer per context; 0: CUPTI's default
  size_t semaphore_preallocate = 0;       // profiling semaphores allocated up front; 0: default
  std::string preset = "full";            // the name it was made from

  static CuptiOptions full() { return CuptiOptions{}; }
  static CuptiOptions lean() {
    CuptiOptions o;
    o.buffer_bytes = size_t(8) << 20;
    o.sync = false;
    o.driver_api = false;
    o.defer_decode = true;
    o.preset = "lean";
    return o;
  }
  // A preset by name ("full", "lean", "lean-dev", "sampled", "sampled:16",
  // "graph-level", "no-kernels"); false (and *out untouched) for an unknown name.
  static bool from_name(const std::string& name, CuptiOptions* out);
  // The preset named by $SINKSCOPE_TRACE, else full(); *note (optional) reports an unknown name.
  static CuptiOptions from_env(std::string* note = nullptr);
  static const char* preset_names();  // "full|lean|..." for help texts
};

struct CuptiStats {
  uint64_t buffers_allocated = 0;  // buffers owned by the pool (live for the process)
  uint64_t buffers_free = 0;       // of which idle now
  uint64_t buffers_completed = 0;  // buffers handed back by CUPTI this run
  uint64_t kernels = 0, copies = 0, syncs = 0, api_calls = 0, ranges = 0;  // this run
  uint64_t dropped_records = 0;    // CUPTI-dropped + pool exhausted + over max_records
  uint64_t dropped_names = 0;      // names beyond max_names (shown as "<other>")
  uint64_t unmatched_markers = 0;  // NVTX starts without an end at stop()
  uint64_t untimed_kernels = 0;    // kernel records without timestamps (start 0 or end < start):
                                   // left out. CUPTI_ACTIVITY_KIND_KERNEL reports replayed graph
                                   // nodes so on an H200 (CUDA 13.0), hence no "serial" preset
  int64_t clock_offset_ns = 0;     // steady_ns = cupti_ns + offset
  int64_t clock_drift_ns = 0;      // offset at stop() minus offset at start()
  uint64_t sampled_steps = 0, skipped_steps = 0;  // sample_every: decode steps with / without
                                                   // kernel records
  uint64_t graph_layouts = 0;      // capture layouts known to the process
};

class CuptiCollector {
 public:
  static CuptiCollector& instance();

  // Whether tracing can work here: a CUDA device and CUPTI activity callbacks. Cached after the
  // first call; *why says why not.
  bool available(std::string* why = nullptr);

  Status start(const CuptiOptions& options = {});
  // Waits for the device (cudaDeviceSynchronize), flushes every buffer, disables the activity
  // kinds. Records of the run stay until the next start().
  Status stop();
  bool running() const;

  // The run's records as lanes and events: streams ("GPU d stream s"), a sync lane per device,
  // NVTX lanes per (domain, thread). GPU work carries its launch thread and time for linking.
  void add_to(TimelineBuilder& b) const;
  CuptiStats stats() const;

  // Called at each "decode step" start while running (Profiler installs it on its span
  // recorder): with sample_every > 1, switches kernel records on for the sampled steps only.
  void on_decode_step();
  // A prefill begins (sample_every > 1): kernel records on, also after an unsampled decode step
  // (a second request or turn in the same trace).
  void on_prefill();
  // Whether available() has already been asked and said yes (no side effects: never initialises
  // CUPTI). Graph layouts are registered only then.
  bool ready() const;
  // The layout of a captured graph (profiler/graph_capture.h), under CUPTI's ids of the graph
  // and of its executable; kept for the process (bounded, oldest dropped first).
  void add_graph_layout(uint32_t graph_id, uint32_t exec_id, GraphLayout layout);

  struct State;

 private:
  CuptiCollector();
  ~CuptiCollector();
  std::unique_ptr<State> m_state;
};

// Annotates the kernels launched inside its scope with the bytes they move and the FLOPs they
// compute (split evenly when the scope launches several), giving achieved GB/s and TFLOP/s.
// Uses CUPTI external correlation; a no-op while no collection runs.
class LaunchCost {
 public:
  LaunchCost(double bytes, double flops);
  ~LaunchCost();
  LaunchCost(const LaunchCost&) = delete;
  LaunchCost& operator=(const LaunchCost&) = delete;

 private:
  bool m_pushed = false;
};

}  // namespace sinkscope::prof
