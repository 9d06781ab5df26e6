// SPDX-License-Identifier: Apache-2.0
#include "profiler/timeline_stats.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace sinkscope::prof {
namespace {

struct Acc {
  NameStats s;
  int64_t timed_bytes_ns = 0;  // duration of the events that carried bytes
  int64_t timed_flops_ns = 0;

  void add(const Event& e) {
    const int64_t d = e.duration_ns();
    if (s.count == 0 || d < s.min_ns) s.min_ns = d;
    if (s.count == 0 || d > s.max_ns) s.max_ns = d;
    ++s.count;
    s.total_ns += d;
    if (e.bytes > 0) {
      s.bytes += e.bytes;
      timed_bytes_ns += d;
    }
    if (e.flops > 0) {
      s.flops += e.flops;
      timed_flops_ns += d;
    }
  }
  NameStats finish() {
    if (timed_bytes_ns > 0) s.gbps = static_cast<double>(s.bytes) / timed_bytes_ns;
    if (timed_flops_ns > 0) s.tflops = s.flops / timed_flops_ns * 1e-3;
    return s;
  }
};

template <typename KeyFn>
std::vector<NameStats> aggregate(const Timeline& t, KeyFn key) {
  std::unordered_map<std::string, Acc> by;
  for (uint32_t l = 0; l < t.lanes().size(); ++l) {
    if (t.is_gpu_phases(l)) continue;  // device-time twins of host ranges: not counted twice
    for (const Event& e : t.events(l)) {
      std::string k;
      if (!key(e, k)) continue;
      Acc& a = by[k];
      if (a.s.count == 0) {
        a.s.name = k;
        a.s.kind = e.kind;
      }
      a.add(e);
    }
  }
  std::vector<NameStats> out;
  int64_t total = 0;
  for (auto& [k, a] : by) {
    out.push_back(a.finish());
    out.back().self_ns = out.back().total_ns;
    total += out.back().total_ns;
  }
  for (auto& s : out) s.share = total > 0 ? static_cast<double>(s.total_ns) / total : 0.0;
  std::sort(out.begin(), out.end(), [](const NameStats& a, const NameStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return out;
}

}  // namespace

std::vector<NameStats> kernel_stats(const Timeline& t) {
  return aggregate(t, [&](const Event& e, std::string& k) {
    if (e.kind != EventKind::kKernel) return false;
    k = t.name(e.name);
    return true;
  });
}

std::vector<NameStats> transfer_stats(const Timeline& t) {
  return aggregate(t, [&](const Event& e, std::string& k) {
    if (e.kind == EventKind::kKernel || e.kind == EventKind::kRange) return false;
    k = event_kind_name(e.kind);
    if (e.kind == EventKind::kMemcpy) k += std::string(" ") + copy_kind_name(e.copy_kind);
    if (e.kind == EventKind::kSync) k += " " + t.name(e.name);
    return true;
  });
}

std::vector<NameStats> range_stats(const Timeline& t) {
  std::vector<NameStats> out = aggregate(t, [&](const Event& e, std::string& k) {
    if (e.kind != EventKind::kRange) return false;
    k = t.name(e.name);
    return true;
  });
  // Self time: each range's duration minus that of its child ranges.
  std::unordered_map<std::string, size_t> row;
  for (size_t i = 0; i < out.size(); ++i) row[out[i].name] = i;
  for (uint32_t l = 0; l < t.lanes().size(); ++l)
    for (const Event& e : t.events(l))
      if (e.kind == EventKind::kRange && e.parent.valid() && !t.is_gpu_phases(l)) {
        const Event& p = t.event(e.parent);
        out[row[t.name(p.name)]].self_ns -= e.duration_ns();
      }
  int64_t total_self = 0;
  for (auto& s : out) {
    s.self_ns = std::max<int64_t>(s.self_ns, 0);
    total_self += s.self_ns;
  }
  for (auto& s : out) s.share = total_self > 0 ? static_cast<double>(s.self_ns) / total_self : 0;
  std::sort(out.begin(), out.end(), [](const NameStats& a, const NameStats& b) {
    return a.self_ns != b.self_ns ? a.self_ns > b.self_ns : a.name < b.name;
  });
  return out;
}

std::vector<LayerStats> layer_stats(const Timeline& t) {
  std::map<int64_t, LayerStats> by;
  const uint32_t layer_name = t.find_name("layer");
  for (uint32_t l = 0; l < t.lanes().size(); ++l) {
    const auto ev = t.events(l);
    for (uint32_t i = 0; i < ev.size(); ++i) {
      const Event& e = ev[i];
      if (e.kind == EventKind::kRange) {
        if (e.name != layer_name || e.arg == kNoArg || t.is_gpu_phases(l)) continue;
        LayerStats& s = by[e.arg];
        s.layer = e.arg;
        ++s.ranges;
        s.range_ns += e.duration_ns();
      } else if (e.parent.valid()) {
        const int64_t layer = t.layer_of(e.parent);
        if (layer < 0) continue;
        LayerStats& s = by[layer];
        s.layer = layer;
        ++s.kernels;
        s.kernel_ns += e.duration_ns();
      }
    }
  }
  std::vector<LayerStats> out;
  int64_t kernel_total = 0, range_total = 0;
  for (auto& [k, s] : by) {
    out.push_back(s);
    kernel_total += s.kernel_ns;
    range_total += s.range_ns;
  }
  for (auto& s : out)
    s.share = kernel_total > 0 ? static_cast<double>(s.kernel_ns) / kernel_total
              : range_total > 0 ? static_cast<double>(s.range_ns) / range_total
                                : 0.0;
  return out;
}

}  // namespace sinkscope::prof
