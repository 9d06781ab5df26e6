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
// Prints one row per control change and the median; checks that every view's data is there.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "app/gui/models/run_executor.h"
#include "engine/backend_factory.h"
#include "engine/paths.h"

using namespace sinkscope;

namespace {

const char* const kFiller =
    "The harbour town woke slowly. Fishing boats came in with the tide, gulls argued over the "
    "nets, and the baker on the corner lit his ovens before the church bell rang six. ";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
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
  };
  const Change changes[] = {
      {"lambda prefill 0.01 -> 0.02", [](gui::RunRequest& r) { r.attention.threshold_prefill = 0.02; }},
      {"lambda decode 0.005 -> 0.01", [](gui::RunRequest& r) { r.attention.threshold_decode = 0.01; }},
      {"sparse off", [](gui::RunRequest& r) { r.attention.type = AttentionType::kDense; }},
      {"map layer 10 -> 20, head 3 -> 5", [](gui::RunRequest& r) { r.layer = 20; r.head = 5; }},
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
  std::printf("first run (model warm-up + dense baseline): %.0f ms\n\n", cold_ms);
  std::printf("| %-32s | %10s | %10s | %s |\n", "control change", "median ms", "max ms",
              "views filled");
  std::printf("|%s|%s|%s|%s|\n", std::string(34, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str(), std::string(14, '-').c_str());
  std::vector<double> all;
  bool every_view = true;
  uint64_t id = 2;
  for (const Change& c : changes) {
    std::vector<double> ms;
    bool filled = true;
    for (int r = 0; r < reps; ++r) {
      (void)ex.run(base, id++);  // back to the base settings (not timed)
      gui::RunRequest req = base;
      c.apply(req);
      t0 = std::chrono::steady_clock::now();
      gui::RunResultPtr res = ex.run(req, id++);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      // Every view's data: tokens, attention map, sinks, sparsity probes, timeline, comparison.
      filled = filled && !res->tokens.empty() && !res->map.cells.empty() &&
               (!res->sinkAlpha.empty() || !res->sinkNote.empty()) &&
               !res->probes.prefill.empty() && res->timeline && res->compare.available;
    }
    every_view = every_view && filled;
    all.insert(all.end(), ms.begin(), ms.end());
    std::printf("| %-32s | %10.0f | %10.0f | %-12s |\n", c.name, median(ms),
                *std::max_element(ms.begin(), ms.end()), filled ? "all" : "MISSING");
  }
  std::printf("\ncontrol change -> all view data ready (engine side): median %.0f ms over %zu runs "
              "(%d-token prompt, %s)\n",
              median(all), all.size(), int(first->promptTokens.size()), first->backendName.c_str());
  return every_view ? 0 : 1;
}
