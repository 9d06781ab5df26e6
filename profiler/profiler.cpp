// SPDX-License-Identifier: Apache-2.0
#include "profiler/profiler.h"

#include <cstring>

#include "profiler/nvtx.h"
#include "profiler/span_timeline.h"

namespace sinkscope::prof {

namespace {
void on_span_begin(const char* name) {
  if (std::strcmp(name, "decode step") == 0) CuptiCollector::instance().on_decode_step();
  else if (std::strcmp(name, "prefill") == 0) CuptiCollector::instance().on_prefill();
}
}  // namespace

const char* trace_mode_name(TraceMode m) {
  return m == TraceMode::kCupti ? "cupti" : "cpu-spans";
}

Profiler::Profiler(ProfilerOptions options) : m_options(std::move(options)) {
  m_spans.set_capacity(m_options.max_spans);
  if (m_options.gpu) {
    std::string why;
    if (CuptiCollector::instance().available(&why))
      m_mode = TraceMode::kCupti;
    else
      m_fallback = "CUPTI unavailable: " + why;
  }
}

Profiler::~Profiler() {
  if (m_running) (void)stop();
}

std::string Profiler::describe() const {
  if (m_mode == TraceMode::kCupti)
    return "CUPTI activity tracing (" + m_options.cupti.preset + ") + NVTX ranges";
  std::string s = "CPU spans";
  if (!m_fallback.empty()) s += " (" + m_fallback + ")";
  return s;
}

Status Profiler::start() {
  if (m_running) return Status::error("the profiler is already running");
  m_spans.clear();
  m_timeline.reset();
  if (m_mode == TraceMode::kCupti) {
    if (Status s = CuptiCollector::instance().start(m_options.cupti); !s) {
      m_mode = TraceMode::kCpuSpans;
      m_fallback = s.message;
    }
  }
  nvtx::set_mirror(m_mode == TraceMode::kCupti);
  m_spans.set_begin_hook(m_mode == TraceMode::kCupti && m_options.cupti.sample_every > 1
                             ? on_span_begin
                             : nullptr);
  m_spans.set_enabled(true);
  m_running = true;
  return Status::success();
}

Status Profiler::stop() {
  if (!m_running) return Status::error("the profiler is not running");
  m_running = false;
  m_spans.set_enabled(false);
  nvtx::set_mirror(false);
  Status status;
  TimelineBuilder b;
  b.info().source = trace_mode_name(m_mode);
  b.info().device = m_options.device.empty() && m_mode == TraceMode::kCpuSpans ? "cpu"
                                                                                : m_options.device;
  const std::vector<Span> spans = m_spans.take();
  b.info().dropped_spans = m_spans.dropped();
  if (m_mode == TraceMode::kCupti) {
    CuptiCollector& c = CuptiCollector::instance();
    status = c.stop();
    c.add_to(b);
    if (c.stats().ranges == 0) {
      add_spans(b, spans);
      b.info().notes.push_back(
          "no NVTX ranges were captured (NVTX_INJECTION64_PATH unset? see "
          "prof::prepare_nvtx_injection); CPU spans serve as ranges");
    }
  } else {
    add_spans(b, spans);
  }
  if (!status) b.info().notes.push_back("collection error: " + status.message);
  m_timeline = b.build();
  return status;
}

}  // namespace sinkscope::prof
