// SPDX-License-Identifier: Apache-2.0
// Tracing overhead on end-to-end decode: tokens/s with tracing off vs on (CPU spans on the CPU
// backend; CPU spans + NVTX + CUPTI on the CUDA backend), median of interleaved repetitions.
//   bench_trace_overhead [--backend auto|cpu|cuda] [--tokens N] [--reps R] [--threads T]
// Model: $SINKSCOPE_MODEL or the default path. Target (issue 6): overhead <= 5 %.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend_factory.h"
#include "engine/model.h"
#include "engine/paths.h"
#include "engine/session.h"
#include "profiler/nvtx.h"
#include "profiler/profiler.h"

using namespace sinkscope;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  (void)prof::prepare_nvtx_injection();  // before any NVTX call
  std::string backend_name = "auto";
  int tokens = 64, reps = 5, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--backend")) backend_name = argv[i + 1];
    else if (!std::strcmp(argv[i], "--tokens")) tokens = std::max(2, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  const auto kind = parse_backend_kind(backend_name);
  if (!kind) {
    std::fprintf(stderr, "--backend: auto, cpu or cuda\n");
    return 2;
  }
  const auto path = default_model_path();
  if (!std::filesystem::exists(path)) {
    std::printf("SKIP: model not found at %s (set SINKSCOPE_MODEL)\n", path.string().c_str());
    return 0;
  }
  auto model = Model::load(path);
  BackendOptions bo;
  bo.n_threads = threads;
  bo.max_context = 1024;
  std::string note;
  auto backend = make_backend(model, bo, *kind, &note);
  const bool gpu = backend->name() != "cpu";
  const auto prompt = model->tokenizer().encode(
      "Attention sinks are the first tokens of a sequence that absorb a large share of the "
      "attention mass; keeping them lets a sliding-window cache stay accurate.");
  GenerateOptions g;
  g.max_tokens = tokens;
  g.stop_at_eog = false;

  // Modes: the default collector options (every kind, decoding in the callback), "lean" (no
  // DRIVER API / SYNCHRONIZATION records, decoding deferred to stop()) and, on GPUs,
  // graph-level records (one per CUDA graph launch; CUPTI may refuse it next to kernel records,
  // then the row says so).
  struct Mode {
    const char* label;
    std::unique_ptr<prof::Profiler> profiler;
    std::vector<double> tps;
    size_t events = 0;
    bool ok = true;
    std::string note;
  };
  std::vector<Mode> modes;
  auto add_mode = [&](const char* label, const prof::CuptiOptions& co) {
    prof::ProfilerOptions po;
    po.gpu = gpu;
    po.device = backend->name();
    po.cupti = co;
    modes.push_back({label, std::make_unique<prof::Profiler>(po), {}, 0, true, {}});
  };
  add_mode("default", prof::CuptiOptions{});
  if (gpu) {
    add_mode("lean", prof::CuptiOptions::lean());
    prof::CuptiOptions graph;
    graph.graph_level = true;
    add_mode("graph-level", graph);
  }
  std::printf("backend %s (%s); tracing on = %s; %d tokens x %d reps\n", backend->name().c_str(),
              note.c_str(), modes[0].profiler->describe().c_str(), tokens, reps);

  (void)generate(*backend, prompt, g);  // warm-up
  std::vector<double> off;
  for (int r = 0; r < reps; ++r) {
    backend->set_span_recorder(nullptr);
    off.push_back(generate(*backend, prompt, g).decode_tokens_per_s());
    for (Mode& m : modes) {
      if (!m.ok) continue;
      prof::Profiler& profiler = *m.profiler;
      backend->set_span_recorder(profiler.spans());
      if (!profiler.start()) return 1;
      if (gpu && profiler.mode() != prof::TraceMode::kCupti) {  // CUPTI refused these options
        m.ok = false;
        m.note = profiler.fallback_reason();
        (void)profiler.stop();
        continue;
      }
      const double tps = generate(*backend, prompt, g).decode_tokens_per_s();
      const prof::Status st = profiler.stop();
      if (!st) std::printf("warning (%s): %s\n", m.label, st.message.c_str());
      m.tps.push_back(tps);
      m.events = profiler.timeline()->event_count();
    }
  }
  backend->set_span_recorder(nullptr);
  const double m_off = median(off);
  std::printf("| %-10s | %-28s | %14s | %10s | %10s |\n", "backend", "tracing", "decode tok/s",
              "overhead", "events");
  std::printf("| %-10s | %-28s | %14.1f | %10s | %10s |\n", backend->name().substr(0, 10).c_str(),
              "off", m_off, "-", "-");
  double default_overhead = 0.0;
  for (const Mode& m : modes) {
    const std::string label =
        std::string(prof::trace_mode_name(m.profiler->mode())) + " " + m.label;
    if (!m.ok) {
      std::printf("| %-10s | %-28s | %14s | %10s | %10s |  (%s)\n",
                  backend->name().substr(0, 10).c_str(), label.c_str(), "refused", "-", "-",
                  m.note.c_str());
      continue;
    }
    const double m_on = median(m.tps);
    const double overhead = m_off > 0 ? (m_off - m_on) / m_off * 100.0 : 0.0;
    if (&m == &modes[0]) default_overhead = overhead;
    std::printf("| %-10s | %-28s | %14.1f | %8.2f %% | %10zu |\n",
                backend->name().substr(0, 10).c_str(), label.c_str(), m_on, overhead, m.events);
  }
  std::printf("tracing overhead: %.2f %% (default mode; target <= 5 %%)\n", default_overhead);
  return 0;
}
