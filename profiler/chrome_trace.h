// SPDX-License-Identifier: Apache-2.0
// Chrome trace-event JSON export (opens in ui.perfetto.dev and chrome://tracing).
//   {"traceEvents": [metadata "M" events..., "X" complete events...], "displayTimeUnit": "ns",
//    "otherData": {...}}
// Each lane is one (pid, tid): pid 1 holds the CPU-span threads, pid 2 the NVTX lanes, pid
// 100 + d the streams of GPU d; "M" events name the processes and threads and keep lanes in
// timeline order. "X" events carry ts/dur in microseconds (fractional, ns resolution) relative
// to the timeline's first event, sorted by ts (enclosing events first), and args such as the
// layer index, grid/block, bytes and achieved throughput.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "profiler/status.h"
#include "profiler/timeline.h"

namespace sinkscope::prof {

struct ChromeTraceOptions {
  std::string process_prefix = "SinkScope";  // process names: "<prefix> CPU spans", ...
};

std::string chrome_trace_json(const Timeline& t, const ChromeTraceOptions& options = {});

// Writes the trace atomically (temporary file + rename).
Status write_chrome_trace(const Timeline& t, const std::filesystem::path& path,
                          const ChromeTraceOptions& options = {});

// `s` as a JSON string literal with quotes: ", \ and control characters escaped, invalid
// UTF-8 replaced by U+FFFD.
std::string json_quote(std::string_view s);

}  // namespace sinkscope::prof
