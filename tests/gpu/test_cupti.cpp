// SPDX-License-Identifier: Apache-2.0
// The CUPTI collector on a real GPU (plain executable; "SKIP: <reason>" and exit 0 without one).
//  1. two kernels + a memcpy in each of the NVTX ranges "layer 0", "layer 1": the kernels come
//     back with names, durations and grids, linked to the right layer; the memcpy with its bytes;
//     LaunchCost annotates bytes/FLOPs; the Chrome trace parses.
//  2. 1,000 start/stop cycles: resident memory and the buffer pool do not grow.
//  3. a real SmolLM2 generation on the CUDA backend (model: $SINKSCOPE_MODEL or the default
//     path; SKIP of this part when absent), per collector preset (default "full,lean"), eager
//     and with replayed CUDA graphs: every kernel lies inside its "prefill"/"decode step", all
//     but embedding / final norm / LM head inside a "layer N" covering every layer (graph
//     replays through their capture layout, profiler/gpu_attribution.cpp), and a replayed step
//     gives each layer the same kernels as an eager step.
//   test_cupti [--cycles N] [--trace FILE] [--presets full,lean,sampled]
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/util/json_io.h"
#include "engine/model/model.h"
#include "engine/util/paths.h"
#include "engine/model/session.h"
#include "profiler/chrome_trace.h"
#include "profiler/nvtx.h"
#include "profiler/profiler.h"
#include "profiler/timeline_stats.h"

cudaError_t ss_launch_scale(float* x, int n, float a, cudaStream_t s);
cudaError_t ss_launch_add(float* y, const float* x, int n, cudaStream_t s);

using namespace sinkscope;
using namespace sinkscope::prof;

namespace {

int g_failures = 0;

#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) {                                \
      ++g_failures;                               \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                   \
      std::printf("\n");                          \
    }                                             \
  } while (0)

#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    const cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                            \
      std::printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

long rss_kib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

struct Buffers {
  int n = 1 << 20;
  float* x = nullptr;
  float* y = nullptr;
  std::vector<float> host;
  cudaStream_t stream = nullptr;
  Buffers() : host(size_t(1) << 20, 1.0f) {
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&x), sizeof(float) * n));
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&y), sizeof(float) * n));
    CUDA_OK(cudaStreamCreate(&stream));
  }
  ~Buffers() {
    cudaFree(x);
    cudaFree(y);
    cudaStreamDestroy(stream);
  }
};

// One "run": per layer, a memcpy and two kernels inside Phase("layer", l).
void workload(SpanRecorder* spans, Buffers& b, int layers, bool annotate) {
  Phase run(spans, "run");
  for (int l = 0; l < layers; ++l) {
    Phase layer(spans, "layer", l);
    CUDA_OK(cudaMemcpyAsync(b.x, b.host.data(), sizeof(float) * b.n, cudaMemcpyHostToDevice,
                            b.stream));
    {
      LaunchCost cost(annotate ? 2.0 * sizeof(float) * b.n : 0, annotate ? double(b.n) : 0);
      CUDA_OK(ss_launch_scale(b.x, b.n, 2.0f, b.stream));
    }
    CUDA_OK(ss_launch_add(b.y, b.x, b.n, b.stream));
  }
  CUDA_OK(cudaStreamSynchronize(b.stream));
}

void test_synthetic(const std::string& trace_path) {
  Buffers b;
  ProfilerOptions o;
  o.gpu = true;
  Profiler p(o);
  CHECK(p.mode() == TraceMode::kCupti, "%s", p.describe().c_str());
  CHECK(p.start().ok, "start");
  workload(p.spans(), b, 2, true);
  const Status st = p.stop();
  CHECK(st.ok, "stop: %s", st.message.c_str());
  const auto t = p.timeline();
  CHECK(t && t->info().source == "cupti", "source %s", t ? t->info().source.c_str() : "-");
  if (!t) return;
  for (const auto& n : t->info().notes) std::printf("  note: %s\n", n.c_str());

  bool nvtx_lane = false;
  for (const Lane& l : t->lanes()) nvtx_lane |= l.kind == LaneKind::kNvtx;
  CHECK(nvtx_lane, "no NVTX lane: NVTX ranges were not captured (injection: %s)",
        std::getenv("NVTX_INJECTION64_PATH") ? std::getenv("NVTX_INJECTION64_PATH") : "unset");

  std::map<std::string, std::vector<int64_t>> layers_of;  // kernel name -> layers
  int memcpys = 0, annotated = 0;
  for (uint32_t l = 0; l < t->lanes().size(); ++l) {
    for (uint32_t i = 0; i < t->events(l).size(); ++i) {
      const Event& e = t->events(l)[i];
      if (e.kind == EventKind::kKernel) {
        const std::string& name = t->name(e.name);
        CHECK(e.duration_ns() > 0, "kernel %s has no duration", name.c_str());
        CHECK(e.grid[0] == (b.n + 255) / 256 && e.block[0] == 256, "grid/block of %s",
              name.c_str());
        CHECK(e.correlation != 0 && e.launch_ns > 0, "kernel %s not correlated", name.c_str());
        CHECK(e.start_ns >= e.launch_ns, "kernel %s starts before its launch (clock offset)",
              name.c_str());
        layers_of[name].push_back(t->layer_of({l, i}));
        if (e.bytes > 0 && e.flops > 0) ++annotated;
      }
      if (e.kind == EventKind::kMemcpy) {
        ++memcpys;
        CHECK(e.bytes == sizeof(float) * size_t(b.n), "memcpy bytes %llu",
              static_cast<unsigned long long>(e.bytes));
        CHECK(t->layer_of({l, i}) >= 0, "memcpy outside a layer range");
      }
    }
  }
  for (const char* k : {"ss_test_scale", "ss_test_add"}) {
    bool found = false;
    for (const auto& [name, layers] : layers_of) {
      if (name.find(k) == std::string::npos) continue;
      found = true;
      CHECK(layers == (std::vector<int64_t>{0, 1}), "%s layers: got %zu entries, first %lld",
            name.c_str(), layers.size(), layers.empty() ? -9LL : (long long)layers[0]);
    }
    CHECK(found, "kernel %s not recorded", k);
  }
  CHECK(memcpys == 2, "memcpys %d", memcpys);
  CHECK(annotated == 2, "LaunchCost-annotated kernels %d", annotated);

  const std::string text = chrome_trace_json(*t);
  try {
    (void)Json::parse(text);
  } catch (const std::exception& e) {
    CHECK(false, "trace JSON: %s", e.what());
  }
  if (!trace_path.empty()) (void)write_chrome_trace(*t, trace_path);
  const CuptiStats s = CuptiCollector::instance().stats();
  std::printf("synthetic: %zu events, %zu lanes; kernels %llu copies %llu api %llu ranges %llu "
              "dropped %llu; clock offset %lld ns, drift %lld ns\n",
              t->event_count(), t->lanes().size(), (unsigned long long)s.kernels,
              (unsigned long long)s.copies, (unsigned long long)s.api_calls,
              (unsigned long long)s.ranges, (unsigned long long)s.dropped_records,
              (long long)s.clock_offset_ns, (long long)s.clock_drift_ns);
}

void test_cycles(int cycles) {
  Buffers b;
  ProfilerOptions o;
  o.gpu = true;
  Profiler p(o);
  long rss_warm = 0;
  uint64_t buffers_warm = 0;
  size_t events = 0;
  for (int c = 0; c < cycles; ++c) {
    if (!p.start().ok) {
      CHECK(false, "start failed at cycle %d", c);
      return;
    }
    workload(p.spans(), b, 2, false);
    const Status st = p.stop();
    if (!st.ok) {
      CHECK(false, "stop at cycle %d: %s", c, st.message.c_str());
      return;
    }
    events = p.timeline()->event_count();
    if (c == 20) {
      rss_warm = rss_kib();
      buffers_warm = CuptiCollector::instance().stats().buffers_allocated;
    }
    if (c % 250 == 0 || c == cycles - 1) {
      const CuptiStats s = CuptiCollector::instance().stats();
      std::printf("  cycle %4d: rss %ld KiB, buffers %llu (free %llu), events %zu\n", c, rss_kib(),
                  (unsigned long long)s.buffers_allocated, (unsigned long long)s.buffers_free,
                  events);
    }
  }
  const long rss_end = rss_kib();
  const CuptiStats s = CuptiCollector::instance().stats();
  std::printf("cycles: %d start/stop; rss %ld -> %ld KiB; buffers %llu -> %llu\n", cycles,
              rss_warm, rss_end, (unsigned long long)buffers_warm,
              (unsigned long long)s.buffers_allocated);
  CHECK(s.buffers_allocated == buffers_warm, "buffer pool grew");
  CHECK(rss_end - rss_warm < 16 * 1024, "resident memory grew by %ld KiB", rss_end - rss_warm);
  CHECK(events >= 8, "last cycle recorded %zu events", events);
}

// Per kernel: its phase ("prefill" / "decode step") and layer through its parent chain
// (host launch ranges or the GPU-phases lane), in stream order.
struct Attributed {
  uint64_t kernels = 0, in_phase = 0, in_layer = 0;
  std::set<int64_t> layers;
  // Decode steps: the kernel names of each layer, per step (for graph vs eager).
  std::vector<std::map<int64_t, std::vector<std::string>>> steps;
};

Attributed attribute(const Timeline& t) {
  Attributed a;
  const uint32_t prefill = t.find_name("prefill"), decode = t.find_name("decode step");
  std::map<std::pair<uint32_t, uint32_t>, size_t> step_of;  // phase range -> steps index
  for (uint32_t l = 0; l < t.lanes().size(); ++l)
    for (uint32_t i = 0; i < t.events(l).size(); ++i) {
      const Event& e = t.events(l)[i];
      if (e.kind != EventKind::kKernel) continue;
      ++a.kernels;
      EventRef phase;
      for (EventRef r = e.parent; r.valid() && !phase.valid(); r = t.event(r).parent)
        if (t.event(r).name == prefill || t.event(r).name == decode) phase = r;
      a.in_phase += phase.valid();
      const int64_t layer = t.layer_of({l, i});
      if (layer >= 0) {
        ++a.in_layer;
        a.layers.insert(layer);
      }
      if (phase.valid() && t.event(phase).name == decode && layer >= 0) {
        auto [it, fresh] = step_of.try_emplace({phase.lane, phase.index}, a.steps.size());
        if (fresh) a.steps.emplace_back();
        a.steps[it->second][layer].push_back(t.name(e.name));
      }
    }
  return a;
}

void print_top(const Timeline& t) {
  const auto stats = kernel_stats(t);
  for (size_t i = 0; i < stats.size() && i < 12; ++i)
    std::printf("  %-70.70s %5llu %9.3f ms %5.1f%%\n", stats[i].name.c_str(),
                (unsigned long long)stats[i].count, stats[i].total_ns * 1e-6,
                stats[i].share * 100);
}

// A real SmolLM2 generation, traced with `preset`, with CUDA graphs on or off. Every kernel
// must lie in its prefill / decode step and, except embedding, final norm and LM head, in a
// layer; graph replays must give each layer the same kernels as an eager step.
Attributed traced_model_run(const std::shared_ptr<const Model>& model, bool graphs,
                            const std::string& preset, const char* label) {
  BackendOptions bo;
  bo.max_context = 512;
  CudaBackendOptions co;
  co.tuning.cuda_graphs = graphs;
  auto backend = make_cuda_backend(model, bo, co);
  ProfilerOptions o;
  o.gpu = true;
  o.device = backend->name();
  CHECK(CuptiOptions::from_name(preset, &o.cupti), "preset %s", preset.c_str());
  Profiler p(o);  // before the warm-up: graphs captured from here on register their layouts
  backend->set_span_recorder(p.spans());
  const auto prompt = model->tokenizer().encode("The capital of France is Paris, and the capital");
  GenerateOptions g;
  g.max_tokens = 6;
  g.stop_at_eog = false;
  (void)generate(*backend, prompt, g);  // warm-up (module loading, cuBLAS handles, captures)
  CHECK(p.start().ok, "start");
  {
    Phase run(p.spans(), "run");
    (void)generate(*backend, prompt, g);
  }
  const Status st = p.stop();
  CHECK(st.ok, "stop: %s", st.message.c_str());
  backend->set_span_recorder(nullptr);
  const auto t = p.timeline();
  const int n_layer = model->config().n_layer;
  Attributed a = attribute(*t);
  const TimelineInfo& info = t->info();
  const CudaGraphStats gs = backend->graph_stats();
  std::printf("model (%s, preset %s): %llu kernels, %llu inside prefill/decode step, %llu inside "
              "layer ranges (%zu distinct layers of %d); graph steps %lld, eager steps %lld; "
              "placed by graph layout %llu, inherited %llu, phase only %llu, launch links "
              "dropped %llu; layouts known %llu\n",
              label, preset.c_str(), (unsigned long long)a.kernels,
              (unsigned long long)a.in_phase, (unsigned long long)a.in_layer, a.layers.size(),
              n_layer, (long long)gs.graph_steps, (long long)gs.eager_steps,
              (unsigned long long)info.graph_attributed, (unsigned long long)info.inherited,
              (unsigned long long)info.phase_only, (unsigned long long)info.inconsistent_launches,
              (unsigned long long)CuptiCollector::instance().stats().graph_layouts);
  for (const auto& n : info.notes) std::printf("  note: %s\n", n.c_str());
  CHECK(a.kernels > 0, "%s: no kernels recorded", label);
  CHECK(a.in_phase == a.kernels, "%s: %llu kernels outside prefill/decode step", label,
        (unsigned long long)(a.kernels - a.in_phase));
  CHECK(static_cast<int>(a.layers.size()) == n_layer, "%s: kernels cover %zu layers of %d", label,
        a.layers.size(), n_layer);
  // Outside layers only: embedding gather + final norm + LM head per forward (a few kernels).
  const uint64_t forwards = 1 + uint64_t(g.max_tokens - 1);
  CHECK(a.kernels - a.in_layer <= 4 * forwards, "%s: %llu kernels outside layer ranges", label,
        (unsigned long long)(a.kernels - a.in_layer));
  if (graphs) CHECK(gs.graph_steps > 0, "%s: no decode step ran as a graph", label);
  for (size_t s = 0; s < a.steps.size(); ++s) {
    CHECK(static_cast<int>(a.steps[s].size()) == n_layer, "%s: decode step %zu covers %zu layers",
          label, s, a.steps[s].size());
    for (const auto& [layer, names] : a.steps[s])
      CHECK(names == a.steps[0].begin()->second, "%s: decode step %zu layer %lld has %zu kernels "
            "unlike layer 0 of step 0 (%zu)", label, s, (long long)layer, names.size(),
            a.steps[0].begin()->second.size());
  }
  print_top(*t);
  (void)write_chrome_trace(*t, std::string("test_cupti_model_") + label + ".json");
  return a;
}

void test_model(const std::string& preset) {
  const std::filesystem::path path = default_model_path();
  if (!std::filesystem::exists(path)) {
    std::printf("SKIP (model part): model not found at %s (set SINKSCOPE_MODEL)\n",
                path.string().c_str());
    return;
  }
  auto model = Model::load(path);
  const Attributed eager = traced_model_run(model, false, preset, "eager");
  const Attributed graph = traced_model_run(model, true, preset, "graph");
  // The layout of a replay must give the same kernels per layer as the eager steps' ranges.
  if (!eager.steps.empty() && !graph.steps.empty())
    CHECK(eager.steps[0] == graph.steps[0],
          "graph replay and eager step disagree on the kernels of some layer (layer 0: %zu vs "
          "%zu kernels)",
          eager.steps[0].empty() ? size_t(0) : eager.steps[0].begin()->second.size(),
          graph.steps[0].empty() ? size_t(0) : graph.steps[0].begin()->second.size());
}

}  // namespace

int main(int argc, char** argv) {
  // First: NVTX must see the injection variable before its first call.
  std::string inj;
  const Status s = prepare_nvtx_injection(&inj);
  std::printf("NVTX injection: %s\n", s.ok ? inj.c_str() : s.message.c_str());
  int cycles = 1000;
  std::string trace;
  std::vector<std::string> presets = {"full", "lean"};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cycles") && i + 1 < argc) cycles = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--trace") && i + 1 < argc) trace = argv[++i];
    if (!std::strcmp(argv[i], "--presets") && i + 1 < argc) {
      presets.clear();
      for (std::string list = argv[++i]; !list.empty();) {
        const size_t comma = list.find(',');
        presets.push_back(list.substr(0, comma));
        list = comma == std::string::npos ? "" : list.substr(comma + 1);
      }
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device\n");
    return 0;
  }
  std::string why;
  if (!CuptiCollector::instance().available(&why)) {
    std::printf("FAIL: a device is present but CUPTI is unavailable: %s\n", why.c_str());
    return 1;
  }
  test_synthetic(trace);
  test_cycles(cycles);
  for (const std::string& preset : presets) {
    try {
      test_model(preset);
    } catch (const std::exception& e) {
      CHECK(false, "model part (%s): %s", preset.c_str(), e.what());
    }
  }
  std::printf(g_failures ? "FAILED: %d checks\n" : "PASS\n", g_failures);
  return g_failures ? 1 : 0;
}
