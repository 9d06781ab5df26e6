// SPDX-License-Identifier: Apache-2.0
// Workbench latency, engine side (issue 7): the time from a control change to the data of every
// view being ready -- one RunExecutor::run (app/gui/models/run_executor.h, the code the GUI's
// engine thread runs) for the new settings: prefill + greedy generation of the variant, the
// attention map of the chosen (layer, head), sink detection, the skip probes, the timeline and
// the comparison with the (cached) dense baseline. Qt-free, so it runs on the GPU image too.
// The GUI-thread part (models -> widgets) is not included.
//
//   bench_view_latency [--model FILE] [--backend auto|cpu|cuda] [--tokens N] [--gen N]
//                      [--reps N] [--threads N]
// Prints one row per control change -- the median time to the first view's data (the first
// partial result, RunExecutor::PartialFn) and to all views' data (median, min, max over --reps
// runs) -- the overall median, the machine, and a per-stage breakdown (the medians of RunResult::stagesMs); checks that every
// view's data is there (exit 1 when some is missing).
//
// Reproduce the issue-7 figure (2-core CPU, SmolLM2-135M-Instruct Q4_1, 549-token prompt, the
// workbench's default 16 generated tokens), from the repository root on an otherwise idle machine:
//   cmake --build build --target bench_view_latency
//   build/tests/bench/bench_view_latency --backend cpu --tokens 512 --gen 16 --reps 5
// Each timed run follows an untimed run at the base settings, so every change is a real change
// against the state the executor's caches hold (as after a slider move in the GUI).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include <sys/resource.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "app/gui/models/run_executor.h"
#include "engine/backend/backend_factory.h"
#include "engine/util/paths.h"
#include "engine/util/thread_pool.h"

using namespace sinkscope;

namespace {

const char* const kFiller =
    "The harbour town woke slowly. Fishing boats came in with the tide, gulls argued over the "
    "nets, and the baker on the corner lit his ovens before the church bell rang six. ";

// CPU seconds of this process so far (all threads): with other jobs on the machine, wall time
// inflates but this stays close to the work done.
double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

static int bench(int argc, char** argv) {
  std::string model_path = default_model_path().string(), backend = "auto";
  int tokens = 512, gen = 16, reps = 3, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--model") model_path = v;
    else if (f == "--backend") backend = v;
    else if (f == "--tokens") tokens = std::max(16, std::atoi(v.c_str()));
    else if (f == "--gen") gen = std::max(1, std::atoi(v.c_str()));
    else if (f == "--reps") reps = std::max(1, std::atoi(v.c_str()));
    else if (f == "--threads") threads = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "bench_view_latency: unknown option %s\n", f.c_str());
      return 2;
    }
  }
  const auto kind = parse_backend_kind(backend);
  if (!kind) {
    std::fprintf(stderr, "--backend: auto, cpu or cuda\n");
    return 2;
  }
  if (!std::filesystem::exists(model_path)) {
    std::printf("SKIP: model not found at %s (set SINKSCOPE_MODEL)\n", model_path.c_str());
    return 0;
  }
  gui::RunExecutor ex(*kind, threads);
  ex.loadModel(model_path);
  // The prompt and the generated tokens must fit the model's context; the filler below may
  // overshoot by a sentence and the chat template adds a few tokens, hence the margin.
  const int fit = ex.model()->config().n_ctx_train - gen - 64;
  if (tokens > fit) {
    std::printf("note: --tokens %d lowered to %d to fit the model's context of %d with %d generated\n",
                tokens, fit, ex.model()->config().n_ctx_train, gen);
    tokens = fit;
  }
  // A prompt of about `tokens` tokens (the chat template adds a few).
  std::string prompt;
  while (int(ex.model()->tokenizer().encode(prompt).size()) < tokens - 12) prompt += kFiller;

  gui::RunRequest base;
  base.prompt = prompt;
  base.maxTokens = gen;
  base.layer = 10;
  base.head = 3;
  base.attention.type = AttentionType::kDynamicSparse;
  base.attention.threshold_prefill = 0.01;
  base.attention.threshold_decode = 0.005;

  struct Change {
    const char* name;
    void (*apply)(gui::RunRequest&);
    bool dropViewCaches = false;
    bool warm = false;  // the workbench's idle-time warming ran before the change
  };
  const Change changes[] = {
      {"lambda prefill 0.01 -> 0.02", [](gui::RunRequest& r) { r.attention.threshold_prefill = 0.02; }},
      {"lambda decode 0.005 -> 0.01", [](gui::RunRequest& r) { r.attention.threshold_decode = 0.01; }},
      {"sparse off", [](gui::RunRequest& r) { r.attention.type = AttentionType::kDense; }},
      {"map layer 10 -> 20, head 3 -> 5", [](gui::RunRequest& r) { r.layer = 20; r.head = 5; },
       true},
      {"map layer 10 -> 20, warmed", [](gui::RunRequest& r) { r.layer = 20; r.head = 5; }, true,
       true},
      {"window 256 + 4 sinks", [](gui::RunRequest& r) {
         r.cache.strategy = CacheStrategy::kSlidingWindow;
         r.cache.window_size = 256;
         r.cache.sink_keep_count = 4;
       }},
  };

  auto t0 = std::chrono::steady_clock::now();
  gui::RunResultPtr first = ex.run(base, 1);
  const double cold_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("backend %s%s%s; prompt %zu tokens, %d generated, map layer %d head %d\n",
              first->backendName.c_str(), ex.backendNote().empty() ? "" : " -- ",
              ex.backendNote().c_str(), first->promptTokens.size(), gen, base.layer, base.head);
  double load[3] = {0, 0, 0};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(f);
  }
  std::printf("machine: %s, %u hardware threads, engine threads %s, load average %.2f before "
              "the timed runs\n",
              cpu_model_name().empty() ? "unknown CPU" : cpu_model_name().c_str(),
              std::thread::hardware_concurrency(),
              threads > 0 ? std::to_string(threads).c_str() : "auto (all)", load[0]);
  std::printf("first run (model warm-up + dense baseline): %.0f ms\n", cold_ms);
  std::printf("attention map: %s\n", first->mapSource.c_str());
  for (const auto& [name, ms] : first->stagesMs) std::printf("    %-36s %8.1f ms\n", name.c_str(), ms);
  std::printf("\n| %-32s | %9s | %9s | %9s | %9s | %9s | %s |\n", "control change",
              "first ms", "median ms", "min ms", "max ms", "CPU s", "views filled");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(34, '-').c_str(),
              std::string(11, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(14, '-').c_str());
  // Per-stage medians: stage name -> one column per change (stages in first-seen order).
  std::vector<std::string> stageOrder;
  std::map<std::string, std::vector<std::vector<double>>> stageMs;
  const size_t nChanges = std::size(changes);
  size_t ci = 0;
  std::vector<double> all;
  bool every_view = true;
  uint64_t id = 2;
  for (const Change& c : changes) {
    std::vector<double> ms, cpu, firstView;
    bool filled = true;
    for (int r = 0; r < reps; ++r) {
      // A first visit of the new layer: without this, the map's captured Q/K (and the
      // map itself) from the previous repetition would make every repetition after the first
      // a revisit (milliseconds). The dense baseline stays cached, as in the GUI.
      if (c.dropViewCaches) ex.dropViewCaches();
      (void)ex.run(base, id++);  // back to the base settings (not timed)
      if (c.warm) {  // what the GUI's engine thread does while the user looks (not timed)
        const std::atomic<bool> never{false};
        (void)ex.warmViewCaches(&never);
      }
      gui::RunRequest req = base;
      c.apply(req);
      const double c0 = cpuSeconds();
      t0 = std::chrono::steady_clock::now();
      gui::RunResultPtr res;
      // The first view: the first partial result (the prefill's first layers, for the Sparsity
      // view), else the final result.
      double firstMs = -1;
      auto onPartial = [&](const gui::RunResultPtr&) {
        if (firstMs < 0)
          firstMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
      };
      try {
        res = ex.run(req, id++, {}, onPartial);
      } catch (const std::exception& e) {  // the GUI shows such an error; the table says so
        std::printf("| %-32s | error: %s\n", c.name, e.what());
        filled = false;
        break;
      }
      cpu.push_back(cpuSeconds() - c0);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      firstView.push_back(firstMs < 0 ? ms.back() : firstMs);
      for (const auto& [name, sm] : res->stagesMs) {
        auto& cols = stageMs[name];
        if (cols.empty()) {
          cols.resize(nChanges);
          stageOrder.push_back(name);
        }
        cols[ci].push_back(sm);
      }
      // Every view's data: tokens, attention map, sinks, sparsity probes, timeline, comparison.
      filled = filled && !res->tokens.empty() && !res->map.cells.empty() &&
               (!res->sinkAlpha.empty() || !res->sinkNote.empty()) &&
               !res->probes.prefill.empty() && res->timeline && res->compare.available;
    }
    every_view = every_view && filled;
    if (ms.empty()) {
      ++ci;
      continue;
    }
    all.insert(all.end(), ms.begin(), ms.end());
    std::printf("| %-32s | %9.0f | %9.0f | %9.0f | %9.0f | %9.2f | %-12s |\n", c.name,
                median(firstView), median(ms),
                *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()),
                median(cpu), filled ? "all" : "MISSING");
    ++ci;
  }
  std::printf("\nper-stage breakdown, median ms per control change (columns in the order above; "
              "'-': stage not run):\n");
  std::printf("| %-36s |", "stage");
  for (size_t i = 0; i < nChanges; ++i) std::printf(" %7s%zu |", "change ", i + 1);
  std::printf("\n");
  for (const std::string& name : stageOrder) {
    std::printf("| %-36s |", name.c_str());
    for (size_t i = 0; i < nChanges; ++i) {
      const auto& v = stageMs[name][i];
      if (v.empty()) std::printf(" %8s |", "-");
      else std::printf(" %8.1f |", median(v));
    }
    std::printf("\n");
  }
  std::printf("\ncontrol change -> all view data ready (engine side): median %.0f ms over %zu runs "
              "(%d-token prompt, %s)\n",
              median(all), all.size(), int(first->promptTokens.size()), first->backendName.c_str());
  return every_view ? 0 : 1;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    return bench(argc, argv);
  } catch (const std::exception& e) {  // a model that does not load, a prompt that does not fit
    std::fprintf(stderr, "bench_view_latency: error: %s\n", e.what());
    return 1;
  }
}
