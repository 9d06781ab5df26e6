// SPDX-License-Identifier: Apache-2.0
// CUPTI record-set presets by name (all builds: the CLI and GUI parse SINKSCOPE_TRACE anyway).
#include <cstdlib>
#include <string>

#include "profiler/cupti_collector.h"

namespace sinkscope::prof {

const char* CuptiOptions::preset_names() {
  return "full|lean|lean-dev|sampled[:N]|graph-level|no-kernels";
}

bool CuptiOptions::from_name(const std::string& name, CuptiOptions* out) {
  CuptiOptions o;
  auto lean_dev = [] {
    CuptiOptions d = lean();
    d.runtime_api = false;
    d.device_buffer_bytes = size_t(64) << 20;
    d.semaphore_preallocate = 65536;
    return d;
  };
  if (name == "full") {
    o = full();
  } else if (name == "lean") {
    o = lean();
  } else if (name == "lean-dev") {
    o = lean_dev();
  } else if (name == "graph-level") {
    o.graph_level = true;
  } else if (name == "no-kernels") {
    o = lean_dev();
    o.kernels = false;
  } else if (name == "sampled" || name.rfind("sampled:", 0) == 0) {
    // lean: CUPTI's default device buffers (each sampled step ends with a flush, cupti_collector
    // .cpp on_decode_step, which cost ~0.6 ms with lean-dev's 64 MB device buffers on the H200)
    // and every RUNTIME record (with launch records only, eager kernels lost their host links).
    o = lean();
    o.sample_every = 32;  // keeps the overhead under 5 % (docs/performance.md, "Tracing overhead")
    if (name != "sampled") {  // "sampled:N"; "sampled:" alone is refused below (n = 0)
      char* end = nullptr;
      const long n = std::strtol(name.c_str() + 8, &end, 10);
      if (!end || *end != '\0' || n < 1 || n > 1000000) return false;
      o.sample_every = static_cast<int>(n);
    }
  } else {
    return false;
  }
  o.preset = name;
  if (out) *out = o;
  return true;
}

CuptiOptions CuptiOptions::from_env(std::string* note) {
  CuptiOptions o;
  const char* v = std::getenv("SINKSCOPE_TRACE");
  if (!v || !*v) return o;
  if (!from_name(v, &o) && note)
    *note = std::string("SINKSCOPE_TRACE=") + v + " is not a preset (" + preset_names() +
            "); using full";
  return o;
}

}  // namespace sinkscope::prof
