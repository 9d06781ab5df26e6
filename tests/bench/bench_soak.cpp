// SPDX-License-Identifier: Apache-2.0
// Soak benchmark (a program, not a test): many mixed runs in one process on one backend --
// short and long generations, perplexity, chunked prefills, resets, cancels before the prefill,
// during the prefill (from another thread) and during the decode -- then the resident memory at
// the start and the end (and with --backend cuda the device memory in use, from cudaMemGetInfo).
// Memory that grows with the number of runs is a leak (or a cache that is never bounded); the
// issue's bound is 1 % growth after warm-up.
//
//   bench_soak [--runs N] [--backend cpu|cuda] [--model FILE] [--threads N] [--ctx N] [--seed S]
//              [--warmup N] [--max-growth-pct P]
//
// Without --model a random-weight model (engine/format/gguf_writer.h) is written to a temporary file, so
// the soak is fast and needs no download (head_dim 64 for --backend cuda, which the attention
// kernels need); --model runs the real one. With --max-growth-pct the exit status is 1 when RSS,
// or the device memory in use, grew by more than P percent from the end of the warm-up. It
// builds in every configuration (no GoogleTest, OpenBLAS, yaml-cpp or Qt needed): the GPU image
// builds it through tests/gpu (tests/gpu/run_backend_gpu.sh runs it, SKIP_SOAK=1 skips).
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/format/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/model/session.h"

using namespace sinkscope;
namespace fs = std::filesystem;

namespace {

struct Args {
  int runs = 1000;
  BackendKind backend = BackendKind::kCpu;
  std::string model;
  int threads = 2;
  int ctx = 0;  // 0: 256 for the random model, 1024 for a real one
  uint64_t seed = 1;
  int warmup = 100;  // long enough for every operation to reach its largest buffers
  std::optional<double> max_growth_pct;
};

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "bench_soak: " << error
            << "\nusage: bench_soak [--runs N] [--backend cpu|cuda] [--model FILE] [--threads N] "
               "[--ctx N] [--seed S] [--warmup N] [--max-growth-pct P]\n";
  std::exit(2);
}

double to_number(const std::string& flag, const std::string& s, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= lo && v <= hi))
    usage(flag + ": expected a number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
          "], got '" + s + "'");
  return v;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("help");
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string v = argv[++i];
    if (flag == "--runs") a.runs = int(to_number(flag, v, 1, 1e7));
    else if (flag == "--model") a.model = v;
    else if (flag == "--backend") {
      const auto k = parse_backend_kind(v);
      if (!k || *k == BackendKind::kAuto) usage("--backend: expected cpu or cuda, got '" + v + "'");
      a.backend = *k;
    }
    else if (flag == "--threads") a.threads = int(to_number(flag, v, 1, 256));
    else if (flag == "--ctx") a.ctx = int(to_number(flag, v, 64, 1 << 20));
    else if (flag == "--seed") a.seed = uint64_t(to_number(flag, v, 0, 1e15));
    else if (flag == "--warmup") a.warmup = int(to_number(flag, v, 0, 1e6));
    else if (flag == "--max-growth-pct") a.max_growth_pct = to_number(flag, v, 0, 1e6);
    else usage("unknown option " + flag);
  }
  return a;
}

// Resident set size (VmRSS) and its peak (VmHWM) in KiB, from /proc/self/status.
struct Memory {
  long rss_kib = 0, hwm_kib = 0;
};
// glibc keeps freed heap pages (and per-thread arenas) mapped; malloc_trim(0) gives them back
// first, so the figure is memory the process still holds rather than the allocator's cache.
// Without the trim the steps of a high-water allocator cache (e.g. a 100 MB all-logits vector
// that is freed and later re-allocated at another size) read as growth.
Memory read_memory() {
  (void)malloc_trim(0);
  Memory m;
  std::ifstream in("/proc/self/status");
  std::string key;
  long value;
  std::string unit;
  while (in >> key) {
    if (key == "VmRSS:" && in >> value >> unit) m.rss_kib = value;
    else if (key == "VmHWM:" && in >> value >> unit) m.hwm_kib = value;
    else in.ignore(1 << 16, '\n');
  }
  return m;
}

// splitmix64: a small deterministic generator, so a run mix can be replayed from its seed.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int range(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }  // [lo, hi]
};

enum Op { kGenShort, kGenLong, kPerplexity, kChunked, kCancelBefore, kCancelPrefill,
          kCancelDecode, kOpCount };
const char* const kOpNames[kOpCount] = {"generate short", "generate long", "perplexity",
                                        "chunked prefill", "cancel before prefill",
                                        "cancel in prefill", "cancel in decode"};
// Per 100 runs.
const int kOpWeights[kOpCount] = {40, 12, 16, 8, 6, 8, 10};

Op pick(Rng& rng) {
  int r = rng.range(0, 99);
  for (int i = 0; i < kOpCount; ++i) {
    if (r < kOpWeights[i]) return Op(i);
    r -= kOpWeights[i];
  }
  return kGenShort;
}

struct OpStats {
  int runs = 0, cancelled = 0, completed = 0;
  int64_t tokens = 0;
  double seconds = 0;
};

class Soak {
 public:
  Soak(Backend& b, const std::vector<TokenId>& text, uint64_t seed)
      : m_b(b), m_text(text), m_rng{seed} {
    m_b.set_cancel_flag(&m_cancel);
  }
  ~Soak() { m_b.set_cancel_flag(nullptr); }

  void run_one() {
    const Op op = pick(m_rng);
    OpStats& st = m_stats[op];
    ++st.runs;
    m_cancel.store(false);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      st.tokens += dispatch(op);
      ++st.completed;
    } catch (const Cancelled&) {
      ++st.cancelled;
    }
    m_cancel.store(false);
    st.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const OpStats& stats(int op) const { return m_stats[op]; }

 private:
  std::vector<TokenId> slice(int n) {
    n = std::min<int>(n, int(m_text.size()));
    const int start = m_rng.range(0, int(m_text.size()) - n);
    return {m_text.begin() + start, m_text.begin() + start + n};
  }
  GenerateOptions gen_options(int max_tokens) {
    GenerateOptions g;
    g.max_tokens = max_tokens;
    g.stop_at_eog = false;
    g.sampler.temperature = m_rng.range(0, 1) ? 0.8f : 0.0f;
    g.sampler.seed = m_rng.next();
    return g;
  }
  int64_t dispatch(Op op) {
    const int cap = m_b.capacity();
    switch (op) {
      case kGenShort: {
        const auto p = slice(m_rng.range(1, 24));
        return int64_t(generate(m_b, p, gen_options(m_rng.range(1, 8))).tokens.size());
      }
      case kGenLong: {
        const int n = m_rng.range(cap / 2, cap - 40);
        return int64_t(generate(m_b, slice(n), gen_options(m_rng.range(8, 32))).tokens.size());
      }
      case kPerplexity: {
        const int ctx = m_rng.range(0, 1) ? cap / 4 : cap / 2;
        return perplexity(m_b, slice(m_rng.range(ctx / 2, ctx * 3)), ctx).n_predicted;
      }
      case kChunked: {
        // A prefill in uneven chunks, then an explicit reset.
        m_b.reset();
        const auto p = slice(m_rng.range(16, cap / 2));
        std::vector<float> logits;
        size_t done = 0;
        while (done < p.size()) {
          const size_t n = std::min(p.size() - done, size_t(m_rng.range(1, 48)));
          m_b.forward(std::span<const TokenId>(p.data() + done, n), LogitsMode::kLast, logits);
          done += n;
        }
        m_b.reset();
        return int64_t(p.size());
      }
      case kCancelBefore:
        m_cancel.store(true);
        return int64_t(generate(m_b, slice(16), gen_options(4)).tokens.size());
      case kCancelPrefill: {
        // Raised from another thread part-way through a long prefill (it may also land after).
        const auto p = slice(cap - 8);
        const int delay_us = m_rng.range(0, 3000);
        std::thread canceller([this, delay_us] {
          std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
          m_cancel.store(true);
        });
        int64_t n = 0;
        try {
          n = int64_t(generate(m_b, p, gen_options(2)).tokens.size());
        } catch (...) {
          canceller.join();
          throw;
        }
        canceller.join();
        return n;
      }
      case kCancelDecode: {
        const int stop_after = m_rng.range(1, 6);
        int seen = 0;
        return int64_t(generate(m_b, slice(m_rng.range(4, 64)), gen_options(stop_after + 8),
                                [&](TokenId) {
                                  if (++seen == stop_after) m_cancel.store(true);
                                })
                           .tokens.size());
      }
      default:
        return 0;
    }
  }

  Backend& m_b;
  const std::vector<TokenId>& m_text;
  Rng m_rng;
  std::atomic<bool> m_cancel{false};
  OpStats m_stats[kOpCount];
};

double mib(long kib) { return double(kib) / 1024.0; }

// Device memory in use (total - free, device-wide) in bytes; -1 when it cannot be read.
int64_t gpu_used_bytes() {
  uint64_t free_b = 0, total_b = 0;
  if (!cuda_memory_info(&free_b, &total_b)) return -1;
  return int64_t(total_b - free_b);
}
double mib_bytes(int64_t b) { return double(b) / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  const Memory at_start = read_memory();
  fs::path temp_model;
  std::string model_path = a.model;
  if (model_path.empty()) {
    TestModelShape shape;  // 2 layers, width 64, 4 / 2 heads
    shape.n_vocab = 259 + kRandomLlamaEnglishMerges + 200;
    shape.n_ctx = 1024;
    if (a.backend == BackendKind::kCuda) {  // the CUDA attention kernels need head_dim 64 or 128
      shape.n_embd = 256;
      shape.n_ff = 512;
    }
    temp_model = fs::temp_directory_path() / ("bench_soak_" + std::to_string(::getpid()) + ".gguf");
    make_random_llama(shape, a.seed).write(temp_model);
    model_path = temp_model.string();
  }
  int status = 0;
  try {
    auto model = Model::load(model_path);
    BackendOptions o;
    o.n_threads = a.threads;
    o.max_context = a.ctx ? a.ctx : (temp_model.empty() ? 1024 : 256);
    const bool gpu = a.backend == BackendKind::kCuda;
    const int64_t gpu_before = gpu ? gpu_used_bytes() : -1;  // before the backend's buffers
    auto backend = make_backend(model, o, a.backend);
    // Real-text statistics for the prompts, repeated to twice the context.
    const std::string prose =
        "The river below the mill rose a little higher each spring, and the miller measured it "
        "against the same painted stone, writing the numbers in a ledger his grandmother began. ";
    std::vector<TokenId> text;
    const std::vector<TokenId> once = model->tokenizer().encode(prose, false, false);
    while (text.size() < size_t(2 * backend->capacity())) text.insert(text.end(), once.begin(), once.end());

    std::printf("bench_soak: %s, %d layers, backend %s, %d threads, context %d, %d runs (seed %llu)\n",
                fs::path(model_path).filename().c_str(), model->config().n_layer,
                backend->name().c_str(), a.threads, backend->capacity(), a.runs,
                static_cast<unsigned long long>(a.seed));
    if (gpu) std::printf("device: %s\n", cuda_device_name().c_str());
    const Memory loaded = read_memory();
    const int64_t gpu_loaded = gpu ? gpu_used_bytes() : -1;
    int64_t gpu_warm = gpu_loaded;
    Soak soak(*backend, text, a.seed);
    const auto t0 = std::chrono::steady_clock::now();
    Memory warm = loaded;
    std::printf("\n%8s %10s %10s %9s%s\n", "runs", "RSS MiB", "peak MiB", "seconds",
                gpu ? "  GPU used MiB" : "");
    const int report_every = std::max(1, a.runs / 10);
    for (int i = 1; i <= a.runs; ++i) {
      soak.run_one();
      if (i == std::min(a.warmup, a.runs)) {
        warm = read_memory();
        if (gpu) gpu_warm = gpu_used_bytes();
      }
      if (i % report_every == 0 || i == a.runs) {
        const Memory m = read_memory();
        std::printf("%8d %10.1f %10.1f %9.1f", i, mib(m.rss_kib), mib(m.hwm_kib),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (gpu) std::printf(" %14.1f", mib_bytes(gpu_used_bytes()));
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    const Memory end = read_memory();
    const int64_t gpu_end = gpu ? gpu_used_bytes() : -1;

    std::printf("\n%-22s %6s %9s %9s %9s %10s\n", "operation", "runs", "completed", "cancelled",
                "tokens", "mean ms");
    for (int op = 0; op < kOpCount; ++op) {
      const OpStats& s = soak.stats(op);
      std::printf("%-22s %6d %9d %9d %9lld %10.2f\n", kOpNames[op], s.runs, s.completed,
                  s.cancelled, static_cast<long long>(s.tokens),
                  s.runs ? 1000.0 * s.seconds / s.runs : 0.0);
    }
    const double growth = 100.0 * double(end.rss_kib - warm.rss_kib) / double(warm.rss_kib);
    const double growth_loaded =
        100.0 * double(end.rss_kib - loaded.rss_kib) / double(loaded.rss_kib);
    std::printf("\n%-34s %10s\n", "memory (after malloc_trim)", "RSS MiB");
    std::printf("%-34s %10.1f\n", "process start", mib(at_start.rss_kib));
    std::printf("%-34s %10.1f\n", "model loaded, backend made", mib(loaded.rss_kib));
    std::printf("%-34s %10.1f\n", ("after warm-up (" + std::to_string(a.warmup) + " runs)").c_str(),
                mib(warm.rss_kib));
    std::printf("%-34s %10.1f\n", ("end (" + std::to_string(a.runs) + " runs)").c_str(),
                mib(end.rss_kib));
    std::printf("%-34s %10.1f\n", "peak (VmHWM)", mib(end.hwm_kib));
    std::printf("growth: %+.2f %% since warm-up, %+.2f %% since load\n", growth, growth_loaded);
    double gpu_growth = 0;
    if (gpu) {
      // Device-wide (cudaMemGetInfo): another process on the same GPU would show up here too.
      std::printf("\n%-34s %10s\n", "GPU memory in use (device-wide)", "MiB");
      std::printf("%-34s %10.1f\n", "before the backend", mib_bytes(gpu_before));
      std::printf("%-34s %10.1f\n", "backend made", mib_bytes(gpu_loaded));
      std::printf("%-34s %10.1f\n", ("after warm-up (" + std::to_string(a.warmup) + " runs)").c_str(),
                  mib_bytes(gpu_warm));
      std::printf("%-34s %10.1f\n", ("end (" + std::to_string(a.runs) + " runs)").c_str(),
                  mib_bytes(gpu_end));
      if (gpu_warm <= 0 || gpu_end < 0) throw std::runtime_error("GPU memory could not be read");
      gpu_growth = 100.0 * double(gpu_end - gpu_warm) / double(gpu_warm);
      std::printf("GPU growth: %+.2f %% since warm-up, %+.2f %% since the backend was made\n",
                  gpu_growth, 100.0 * double(gpu_end - gpu_loaded) / double(gpu_loaded));
    }
    if (a.max_growth_pct) {
      const bool ok = growth <= *a.max_growth_pct;
      std::printf("bound %.2f %% (RSS): %s\n", *a.max_growth_pct, ok ? "PASS" : "FAIL");
      if (!ok) status = 1;
      if (gpu) {
        const bool gok = gpu_growth <= *a.max_growth_pct;
        std::printf("bound %.2f %% (GPU): %s\n", *a.max_growth_pct, gok ? "PASS" : "FAIL");
        if (!gok) status = 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_soak: error: %s\n", e.what());
    status = 1;
  }
  if (!temp_model.empty()) {
    std::error_code ec;
    fs::remove(temp_model, ec);
  }
  return status;
}
