// SPDX-License-Identifier: Apache-2.0
// `sinkscope-cli trace`: one generation under the profiler -> Chrome trace + summary tables.
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "engine/backend/backend_factory.h"
#include "engine/model/session.h"
#include "profiler/chrome_trace.h"
#include "profiler/nvtx.h"
#include "profiler/profiler.h"
#include "profiler/timeline_stats.h"

namespace sinkscope::cli {

namespace {

std::string clip(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, n - 3) + "...";
}

std::string line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string line(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

void print_name_table(std::ostream& out, const char* title, const std::vector<prof::NameStats>& rows,
                      bool self_time, size_t max_rows) {
  if (rows.empty()) return;
  out << title << "\n";
  out << line("  %-56s %7s %11s %11s %10s %10s %7s\n", "name", "count",
              self_time ? "self ms" : "total ms", self_time ? "incl ms" : "mean us", "min us",
              "max us", "share");
  for (size_t i = 0; i < rows.size() && i < max_rows; ++i) {
    const prof::NameStats& r = rows[i];
    const double primary = (self_time ? r.self_ns : r.total_ns) * 1e-6;
    const double secondary = self_time ? r.total_ns * 1e-6 : r.mean_ns() * 1e-3;
    out << line("  %-56s %7llu %11.3f %11.3f %10.2f %10.2f %6.1f%%", clip(r.name, 56).c_str(),
                static_cast<unsigned long long>(r.count), primary, secondary, r.min_ns * 1e-3,
                r.max_ns * 1e-3, r.share * 100.0);
    if (r.gbps > 0) out << line("  %.1f GB/s", r.gbps);
    if (r.tflops > 0) out << line("  %.2f TFLOP/s", r.tflops);
    out << "\n";
  }
  if (rows.size() > max_rows) out << "  ... " << rows.size() - max_rows << " more\n";
}

void print_summary(std::ostream& out, const prof::Timeline& t) {
  const auto kernels = prof::kernel_stats(t);
  print_name_table(out, "GPU kernels (device time):", kernels, false, 40);
  const auto transfers = prof::transfer_stats(t);
  print_name_table(out, "GPU copies and synchronisation:", transfers, false, 20);
  print_name_table(out, "Ranges (ops; self time = minus nested ranges):", prof::range_stats(t),
                   true, 40);
  const auto layers = prof::layer_stats(t);
  if (!layers.empty()) {
    const bool gpu = !kernels.empty();
    out << "Per layer" << (gpu ? " (GPU kernel time inside \"layer N\" ranges):" : " (span time):")
        << "\n";
    out << line("  %5s %7s %11s", "layer", "ranges", "range ms");
    if (gpu) out << line(" %8s %11s", "kernels", "kernel ms");
    out << line(" %7s\n", "share");
    for (const auto& l : layers) {
      out << line("  %5lld %7llu %11.3f", static_cast<long long>(l.layer),
                  static_cast<unsigned long long>(l.ranges), l.range_ns * 1e-6);
      if (gpu)
        out << line(" %8llu %11.3f", static_cast<unsigned long long>(l.kernels), l.kernel_ns * 1e-6);
      out << line(" %6.1f%%\n", l.share * 100.0);
    }
  }
  out.flush();
}

}  // namespace

int run_trace(const TraceArgs& a, std::ostream& out, std::ostream& err) {
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  // Before anything can make an NVTX call: lets CUPTI capture NVTX ranges (CUDA builds).
  std::string injection;
  const prof::Status inj = prof::prepare_nvtx_injection(&injection);

  const std::string text = prompt_text(a.prompt, a.prompt_file);
  // Fail before the run, not after it, when the trace cannot be written there.
  if (const auto dir = std::filesystem::path(a.out).parent_path();
      !dir.empty() && !std::filesystem::is_directory(dir))
    throw UsageError("--out: folder " + dir.string() + " does not exist");
  const auto model_path = resolve_model_path(a.model);
  auto model = load_model(model_path, &err);
  BackendOptions bopts = make_backend_options(model->config(), a.threads, a.ctx);
  std::string note;
  auto backend = open_backend(model, bopts, a.backend, &note);
  if (!note.empty()) err << "sinkscope-cli: " << note << "\n";

  const Tokenizer& tok = model->tokenizer();
  const std::vector<TokenId> prompt = tok.encode(text);
  if (prompt.empty()) throw UsageError("the prompt is empty after tokenization");
  const int capacity = backend->capacity();
  if (static_cast<int64_t>(prompt.size()) + a.max_tokens > capacity)
    throw UsageError("prompt (" + std::to_string(prompt.size()) + " tokens) + --max-tokens " +
                     std::to_string(a.max_tokens) + " exceed the context (" +
                     std::to_string(capacity) + " tokens); raise --ctx or shorten them");

  prof::ProfilerOptions popts;
  popts.gpu = backend->name() != "cpu";
  popts.device = backend->name();
  prof::Profiler profiler(popts);
  // Never the prompt itself: its size and a fingerprint tell runs apart.
  err << "sinkscope-cli: prompt " << text.size() << " bytes, " << prompt.size()
      << " tokens, fingerprint " << fingerprint(text) << "; backend " << backend->name()
      << "; tracing: " << profiler.describe() << "\n";
  if (profiler.mode() == prof::TraceMode::kCupti && !inj)
    err << "sinkscope-cli: note: " << inj.message << "\n";
  err.flush();

  GenerateOptions g;
  g.max_tokens = a.max_tokens;
  backend->set_span_recorder(profiler.spans());
  GenerateResult r;
  if (prof::Status s = profiler.start(); !s) throw std::runtime_error("trace: " + s.message);
  {
    prof::ScopedSpan run(profiler.spans(), "run");
    r = generate(*backend, prompt, g);
  }
  const prof::Status stopped = profiler.stop();
  backend->set_span_recorder(nullptr);
  if (!stopped) err << "sinkscope-cli: warning: " << stopped.message << "\n";
  const auto timeline = profiler.timeline();
  if (!timeline) throw std::runtime_error("trace: no timeline was produced");

  if (prof::Status w = prof::write_chrome_trace(*timeline, a.out); !w)
    throw std::runtime_error("trace: " + w.message);
  const prof::TimelineInfo& info = timeline->info();
  err << "sinkscope-cli: " << r.tokens.size() << " tokens (prefill "
      << format_duration(r.prefill_ms / 1000.0) << ", decode "
      << format_duration(r.decode_ms / 1000.0) << "); " << timeline->event_count()
      << " events on " << timeline->lanes().size() << " lanes ("
      << prof::trace_mode_name(profiler.mode()) << ")";
  if (info.dropped_spans || info.dropped_records)
    err << "; dropped " << info.dropped_spans << " spans, " << info.dropped_records << " records";
  err << " -> " << a.out << "\n";
  for (const auto& n : info.notes) err << "sinkscope-cli: note: " << n << "\n";
  err.flush();
  if (a.summary) print_summary(out, *timeline);
  return 0;
}

}  // namespace sinkscope::cli
