// SPDX-License-Identifier: Apache-2.0
// The profiler facade: picks CUPTI when the run is on a GPU and CUPTI works, the CPU span
// recorder otherwise, and hands back one Timeline per run.
//
//   prof::Profiler p({.gpu = backend->name() != "cpu"});
//   backend->set_span_recorder(p.spans());
//   p.start();  generate(...);  p.stop();
//   auto t = p.timeline();   // std::shared_ptr<const Timeline>
//
// CUPTI mode: GPU records + NVTX ranges (ScopedSpan/Phase mirror into NVTX while it runs). When
// no NVTX range was captured (NVTX injection not prepared), the CPU spans of the same run serve
// as the ranges, so kernels are still linked to "layer N".
#pragma once

#include <memory>
#include <string>

#include "profiler/cupti_collector.h"
#include "profiler/spans.h"
#include "profiler/status.h"
#include "profiler/timeline.h"

namespace sinkscope::prof {

enum class TraceMode { kCpuSpans, kCupti };
const char* trace_mode_name(TraceMode m);  // "cpu-spans" | "cupti"

struct ProfilerOptions {
  bool gpu = false;  // the traced run uses the GPU: try CUPTI
  size_t max_spans = SpanRecorder::kDefaultCapacity;
  CuptiOptions cupti = CuptiOptions::from_env();  // $SINKSCOPE_TRACE names the preset
  std::string device;  // device name for the timeline's info ("cpu" when empty and CPU mode)
};

class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  TraceMode mode() const { return m_mode; }
  // Why CUPTI is not used although gpu was asked for ("" otherwise).
  const std::string& fallback_reason() const { return m_fallback; }
  std::string describe() const;  // one line for logs

  SpanRecorder* spans() { return &m_spans; }

  // A new run: clears the spans, enables recording (and NVTX mirroring + CUPTI in CUPTI mode).
  // A CUPTI failure here falls back to CPU spans (fallback_reason() says why); not an error.
  Status start();
  // Ends the run and builds its timeline. Errors (e.g. a failed flush) are returned, and the
  // timeline holds whatever was collected.
  Status stop();
  bool running() const { return m_running; }

  std::shared_ptr<const Timeline> timeline() const { return m_timeline; }

 private:
  ProfilerOptions m_options;
  TraceMode m_mode = TraceMode::kCpuSpans;
  std::string m_fallback;
  SpanRecorder m_spans;
  bool m_running = false;
  std::shared_ptr<const Timeline> m_timeline;
};

}  // namespace sinkscope::prof
