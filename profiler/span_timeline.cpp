// SPDX-License-Identifier: Apache-2.0
#include "profiler/span_timeline.h"

namespace sinkscope::prof {

void add_spans(TimelineBuilder& b, const std::vector<Span>& spans) {
  for (const Span& s : spans) {
    const uint32_t lane = b.lane(LaneKind::kCpuThread, s.thread, 0, {}, {}, s.os_thread);
    Event e;
    e.kind = EventKind::kRange;
    e.start_ns = s.start_ns;
    e.end_ns = s.end_ns;
    e.name = b.intern(s.name);
    e.depth = s.depth;
    e.arg = s.arg;
    b.add(lane, e);
  }
}

std::shared_ptr<const Timeline> timeline_from_spans(const std::vector<Span>& spans,
                                                    uint64_t dropped) {
  TimelineBuilder b;
  b.info().source = "cpu-spans";
  b.info().device = "cpu";
  b.info().dropped_spans = dropped;
  add_spans(b, spans);
  return b.build();
}

}  // namespace sinkscope::prof
