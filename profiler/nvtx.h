// SPDX-License-Identifier: Apache-2.0
// NVTX helpers (NVTX3, header-only; every call is a no-op in builds without CUDA).
//
// Phase = the one RAII object backends use: prof::Phase p(m_spans, "layer", il) records a CPU
// span on the recorder (when it is enabled) and, while mirroring is on, pushes the NVTX range
// "layer 3" in the "SinkScope" domain (payload: the int arg). It is ScopedSpan itself, so the
// spans the backends already open become NVTX ranges without edits.
//
// NVTX capture by CUPTI: NVTX looks for an injection library on its first call, through the
// environment variable NVTX_INJECTION64_PATH. prepare_nvtx_injection() points it at the libcupti
// this program is linked with (unless the variable is already set, e.g. by Nsight Systems);
// call it first thing in main() (CLI, GUI, tests), before any thread starts and before any NVTX
// call. Without it the collector still gets kernels, but no NVTX ranges (it then uses the CPU
// spans as ranges instead).
#pragma once

#include <cstdint>
#include <string>

#include "profiler/spans.h"
#include "profiler/status.h"

namespace sinkscope::prof {

using Phase = ScopedSpan;

namespace nvtx {

bool compiled();  // built with NVTX (CUDA builds)
// Mirrors every ScopedSpan / Phase into an NVTX range while on (off by default: the CPU
// backend pays nothing for it).
void set_mirror(bool on);
bool mirror();

// The domain ranges go to ("SinkScope").
inline constexpr const char* kDomain = "SinkScope";

void push(const char* name, int64_t arg = kNoArg);  // "name" or "name arg"
void pop();

// A standalone NVTX range (no CPU span), regardless of the mirror switch.
class Range {
 public:
  explicit Range(const char* name, int64_t arg = kNoArg) { push(name, arg); }
  ~Range() { pop(); }
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
};

}  // namespace nvtx

// Sets NVTX_INJECTION64_PATH to the path of the loaded libcupti when it is unset. ok with the
// path in *path (or the value already set); an error when the build has no CUPTI or the library
// cannot be located. Never exits.
Status prepare_nvtx_injection(std::string* path = nullptr);

}  // namespace sinkscope::prof
