// SPDX-License-Identifier: Apache-2.0
// CPU spans -> timeline: one CPU-thread lane per recording thread, one range per span (the
// span's arg, e.g. the layer index, is kept). This is what the CPU backend shows.
#pragma once

#include <memory>
#include <vector>

#include "profiler/spans.h"
#include "profiler/timeline.h"

namespace sinkscope::prof {

void add_spans(TimelineBuilder& b, const std::vector<Span>& spans);

// A whole timeline from spans; info.source = "cpu-spans", info.dropped_spans = dropped.
std::shared_ptr<const Timeline> timeline_from_spans(const std::vector<Span>& spans,
                                                    uint64_t dropped = 0);

}  // namespace sinkscope::prof
