// SPDX-License-Identifier: Apache-2.0
#include "profiler/chrome_trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "base/atomic_file.h"

namespace sinkscope::prof {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid.
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

void append_number(std::string& out, double v, const char* fmt = "%.3f") {
  char buf[64];
  if (!(v == v) || v > 1e300 || v < -1e300) v = 0;  // JSON has no NaN / infinity
  std::snprintf(buf, sizeof buf, fmt, v);
  out += buf;
}

void append_int(std::string& out, int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRId64, v);
  out += buf;
}

int lane_pid(const Lane& l) {
  switch (l.kind) {
    case LaneKind::kCpuThread: return 1;
    case LaneKind::kNvtx: return 2;
    case LaneKind::kCudaStream: return 100 + static_cast<int>(l.device);
  }
  return 0;
}

class Emitter {
 public:
  explicit Emitter(std::string& out) : m_out(out) {}
  void begin_event() {
    m_out += m_first ? "\n" : ",\n";
    m_first = false;
    m_out += '{';
    m_fields = 0;
  }
  void end_event() { m_out += '}'; }
  void key(const char* k) {
    if (m_fields++) m_out += ',';
    m_out += '"';
    m_out += k;
    m_out += "\":";
  }
  void str(const char* k, std::string_view v) {
    key(k);
    m_out += json_quote(v);
  }
  void num(const char* k, int64_t v) {
    key(k);
    append_int(m_out, v);
  }
  void real(const char* k, double v, const char* fmt = "%.3f") {
    key(k);
    append_number(m_out, v, fmt);
  }
  std::string& raw() { return m_out; }

 private:
  std::string& m_out;
  bool m_first = true;
  int m_fields = 0;
};

void append_triple(std::string& out, const int32_t v[3]) {
  out += '[';
  for (int i = 0; i < 3; ++i) {
    if (i) out += ',';
    append_int(out, v[i]);
  }
  out += ']';
}

// The "args" object of one event.
void append_args(std::string& out, const Timeline& t, EventRef r) {
  const Event& e = t.event(r);
  std::string a;
  auto field = [&](const char* k) {
    a += a.empty() ? "" : ",";
    a += '"';
    a += k;
    a += "\":";
  };
  if (e.kind == EventKind::kRange) {
    field("depth");
    append_int(a, e.depth);
    if (e.arg != kNoArg) {
      field(t.name(e.name) == "layer" ? "layer" : "arg");
      append_int(a, e.arg);
    }
  } else {
    if (e.kind == EventKind::kKernel) {
      field("grid");
      append_triple(a, e.grid);
      field("block");
      append_triple(a, e.block);
    }
    if (e.kind == EventKind::kMemcpy) {
      field("kind");
      a += json_quote(copy_kind_name(e.copy_kind));
    }
    if (e.correlation) {
      field("correlation");
      append_int(a, e.correlation);
    }
    if (e.parent.valid()) {
      field("range");
      a += json_quote(t.display_name(t.event(e.parent)));
      const int64_t layer = t.layer_of(e.parent);
      if (layer >= 0) {
        field("layer");
        append_int(a, layer);
      }
    }
    if (e.bytes) {
      field("bytes");
      append_int(a, static_cast<int64_t>(e.bytes));
      if (e.duration_ns() > 0) {
        field("GB/s");
        append_number(a, e.achieved_gbps(), "%.2f");
      }
    }
    if (e.flops > 0) {
      field("flops");
      append_number(a, e.flops, "%.0f");
      if (e.duration_ns() > 0) {
        field("TFLOP/s");
        append_number(a, e.achieved_tflops(), "%.3f");
      }
    }
  }
  out += "{" + a + "}";
}

}  // namespace

std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      static const char* const kShort[] = {"\\b", "\\t", "\\n", nullptr, "\\f", "\\r"};
      if (c >= 8 && c <= 13 && kShort[c - 8]) {
        out += kShort[c - 8];
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      }
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t n = utf8_sequence(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  out += '"';
  return out;
}

std::string chrome_trace_json(const Timeline& t, const ChromeTraceOptions& options) {
  std::string out = "{\"traceEvents\":[";
  Emitter em(out);
  const auto& lanes = t.lanes();

  // Metadata: process and thread names, lane order.
  auto meta = [&](const char* what, int pid, int64_t tid, const std::string& args) {
    em.begin_event();
    em.str("name", what);
    em.str("ph", "M");
    em.num("pid", pid);
    em.num("tid", tid);
    em.key("args");
    out += args;
    em.end_event();
  };
  std::vector<int> named_pids;
  for (uint32_t l = 0; l < lanes.size(); ++l) {
    const Lane& lane = lanes[l];
    const int pid = lane_pid(lane);
    if (std::find(named_pids.begin(), named_pids.end(), pid) == named_pids.end()) {
      named_pids.push_back(pid);
      std::string pname = options.process_prefix;
      if (lane.kind == LaneKind::kCpuThread) pname += " CPU spans";
      if (lane.kind == LaneKind::kNvtx) pname += " NVTX";
      if (lane.kind == LaneKind::kCudaStream) {
        pname += " GPU " + std::to_string(lane.device);
        if (!t.info().device.empty() && t.info().device != "cpu")
          pname += " (" + t.info().device + ")";
      }
      meta("process_name", pid, 0, "{\"name\":" + json_quote(pname) + "}");
      meta("process_sort_index", pid, 0, "{\"sort_index\":" + std::to_string(pid) + "}");
    }
    meta("thread_name", pid, l + 1, "{\"name\":" + json_quote(lane.name) + "}");
    meta("thread_sort_index", pid, l + 1, "{\"sort_index\":" + std::to_string(l) + "}");
  }

  // Complete events, globally by start; enclosing events first on ties.
  std::vector<EventRef> order;
  order.reserve(t.event_count());
  for (uint32_t l = 0; l < lanes.size(); ++l)
    for (uint32_t i = 0; i < t.events(l).size(); ++i) order.push_back({l, i});
  std::sort(order.begin(), order.end(), [&](EventRef a, EventRef b) {
    const Event& x = t.event(a);
    const Event& y = t.event(b);
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    if (x.end_ns != y.end_ns) return x.end_ns > y.end_ns;
    if (a.lane != b.lane) return a.lane < b.lane;
    return a.index < b.index;
  });
  const int64_t t0 = t.begin_ns();
  for (EventRef r : order) {
    const Event& e = t.event(r);
    em.begin_event();
    em.str("name", t.display_name(e));
    em.str("cat", event_kind_name(e.kind));
    em.str("ph", "X");
    em.real("ts", static_cast<double>(e.start_ns - t0) * 1e-3);
    em.real("dur", static_cast<double>(e.duration_ns()) * 1e-3);
    em.num("pid", lane_pid(lanes[r.lane]));
    em.num("tid", r.lane + 1);
    em.key("args");
    append_args(out, t, r);
    em.end_event();
  }
  out += "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{";
  const TimelineInfo& info = t.info();
  out += "\"source\":" + json_quote(info.source);
  out += ",\"device\":" + json_quote(info.device);
  out += ",\"dropped_spans\":";
  append_int(out, static_cast<int64_t>(info.dropped_spans));
  out += ",\"dropped_records\":";
  append_int(out, static_cast<int64_t>(info.dropped_records));
  out += ",\"notes\":[";
  for (size_t i = 0; i < info.notes.size(); ++i) {
    if (i) out += ',';
    out += json_quote(info.notes[i]);
  }
  out += "]}}\n";
  return out;
}

Status write_chrome_trace(const Timeline& t, const std::filesystem::path& path,
                          const ChromeTraceOptions& options) {
  try {
    write_file_atomic(path, chrome_trace_json(t, options));
  } catch (const std::exception& e) {
    return Status::error(std::string("cannot write the trace: ") + e.what());
  }
  return Status::success();
}

}  // namespace sinkscope::prof
