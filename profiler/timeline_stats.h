// SPDX-License-Identifier: Apache-2.0
// Aggregates over a Timeline: per kernel name, per range name (inclusive and self time) and per
// layer (through the enclosing "layer" ranges and their index). Plain tables for the CLI
// summary and the GUI's item models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/timeline.h"

namespace sinkscope::prof {

struct NameStats {
  std::string name;
  EventKind kind = EventKind::kKernel;
  uint64_t count = 0;
  int64_t total_ns = 0;  // ranges: inclusive
  int64_t self_ns = 0;   // ranges: total minus child ranges; others: = total_ns
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  double share = 0;  // kernels: of all kernel time; ranges: of all self time (sums to 1)
  uint64_t bytes = 0;
  double flops = 0;
  double mean_ns() const { return count ? static_cast<double>(total_ns) / count : 0.0; }
  // Achieved throughput over the events that carried the quantity (0 when none did).
  double gbps = 0;
  double tflops = 0;
};

// One row per kernel name (kind kKernel), sorted by total time, descending.
std::vector<NameStats> kernel_stats(const Timeline& t);
// One row per GPU event kind other than kernels ("memcpy HtoD", "memset", "sync" ...).
std::vector<NameStats> transfer_stats(const Timeline& t);
// One row per range name over every range lane; sorted by self time, descending.
std::vector<NameStats> range_stats(const Timeline& t);

struct LayerStats {
  int64_t layer = 0;
  uint64_t ranges = 0;     // "layer" ranges with this index (one per forward pass)
  int64_t range_ns = 0;    // their total (host-side) duration
  uint64_t kernels = 0;    // GPU work launched inside them
  int64_t kernel_ns = 0;   // its total device time
  double share = 0;        // of all layers' kernel time when there is any, else of range time
};

// One row per layer index, ascending.
std::vector<LayerStats> layer_stats(const Timeline& t);

}  // namespace sinkscope::prof
