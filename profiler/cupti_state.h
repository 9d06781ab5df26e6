// SPDX-License-Identifier: Apache-2.0
// The CUPTI collector's state, shared by its two halves: cupti_collector.cpp (CUPTI set-up, the
// buffer callbacks, start / stop) and cupti_records.cpp (records copied out of CUPTI's buffers,
// and turned into timeline events). Internal to profiler/; CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>
#include <cupti.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiler/cupti_collector.h"

namespace sinkscope::prof {


// The kernel record kind. CUPTI_ACTIVITY_KIND_KERNEL (serialised kernels) gives replayed graph
// nodes no timestamps, so it is not offered.
constexpr CUpti_ActivityKind kKernelKind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
constexpr uint32_t kSyncLane = 0xfffffffeu;  // lane id of a device's synchronisation lane
constexpr CUpti_ExternalCorrelationKind kCostKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

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

}  // namespace sinkscope::prof
