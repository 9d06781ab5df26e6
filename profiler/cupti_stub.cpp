// SPDX-License-Identifier: Apache-2.0
// The collector in builds without CUDA: never available, everything a no-op.
#if !SINKSCOPE_PROFILER_CUPTI
#include "profiler/cupti_collector.h"

namespace sinkscope::prof {

struct CuptiCollector::State {};

CuptiCollector& CuptiCollector::instance() {
  static CuptiCollector c;
  return c;
}
CuptiCollector::CuptiCollector() = default;
CuptiCollector::~CuptiCollector() = default;

bool CuptiCollector::available(std::string* why) {
  if (why) *why = "built without CUDA";
  return false;
}
Status CuptiCollector::start(const CuptiOptions&) {
  return Status::error("CUPTI tracing unavailable: built without CUDA");
}
Status CuptiCollector::stop() { return Status::success(); }
bool CuptiCollector::running() const { return false; }
void CuptiCollector::add_to(TimelineBuilder&) const {}
CuptiStats CuptiCollector::stats() const { return {}; }
void CuptiCollector::on_decode_step() {}
void CuptiCollector::on_prefill() {}
bool CuptiCollector::ready() const { return false; }
void CuptiCollector::add_graph_layout(uint32_t, uint32_t, GraphLayout) {}

LaunchCost::LaunchCost(double, double) {}
LaunchCost::~LaunchCost() = default;

}  // namespace sinkscope::prof
#endif
