// SPDX-License-Identifier: Apache-2.0
// End-to-end CPU benchmark (a program, not a test): prefill throughput over a fixed-length prompt
// and greedy decode throughput after it, median of several repetitions, per thread count.
//
//   bench_cpu_e2e [--model FILE] [--threads N[,N...]] [--prefill N] [--decode N] [--reps N]
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/model.h"
#include "engine/util/paths.h"
#include "engine/model/sampler.h"
#include "engine/util/thread_pool.h"
#include "engine/version.h"

using namespace sinkscope;

namespace {

// Ordinary prose, tokenized and repeated to the requested prefill length, so the ids follow
// real-text statistics rather than uniform noise.
const char* const kText =
    "Every spring the river below the mill rose a little higher than the year before, and every "
    "spring the miller measured it against the same painted stone. He wrote the numbers in a "
    "ledger whose first pages belonged to his grandmother. Visitors asked why he bothered, since "
    "the water always went down again. He answered that a record kept for long enough stops "
    "being a list of numbers and starts being a description of the valley: when the snow melts, "
    "how fast the forest drinks, which summers will be dry. The ledger now fills four shelves.";

struct Args {
  std::string model;
  std::vector<int> threads;
  int prefill = 512;
  int decode = 128;
  int reps = 3;
};

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "bench_cpu_e2e: " << error
            << "\nusage: bench_cpu_e2e [--model FILE] [--threads N[,N...]] [--prefill N] "
               "[--decode N] [--reps N]\n";
  std::exit(2);
}

int to_int(const std::string& flag, const std::string& s, int lo, int hi) {
  size_t used = 0;
  long v = 0;
  try {
    v = std::stol(s, &used);
  } catch (const std::exception&) {
    usage(flag + ": expected an integer, got '" + s + "'");
  }
  if (used != s.size()) usage(flag + ": expected an integer, got '" + s + "'");
  if (v < lo || v > hi)
    usage(flag + ": " + s + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) +
          "]");
  return static_cast<int>(v);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << "usage: bench_cpu_e2e [--model FILE] [--threads N[,N...]] [--prefill N] "
                   "[--decode N] [--reps N]\n";
      std::exit(0);
    }
    if (i + 1 >= argc) usage("missing value for " + flag);
    const std::string v = argv[++i];
    if (flag == "--model") {
      a.model = v;
    } else if (flag == "--threads") {
      std::stringstream ss(v);
      std::string part;
      while (std::getline(ss, part, ',')) a.threads.push_back(to_int(flag, part, 1, 1024));
    } else if (flag == "--prefill") {
      a.prefill = to_int(flag, v, 1, 1 << 20);
    } else if (flag == "--decode") {
      a.decode = to_int(flag, v, 0, 1 << 20);
    } else if (flag == "--reps") {
      a.reps = to_int(flag, v, 1, 1000);
    } else {
      usage("unknown option '" + flag + "'");
    }
  }
  return a;
}

std::string cpu_model() {
  const std::string name = cpu_model_name();
  return name.empty() ? "unknown" : name;
}

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  if (a.threads.empty()) a.threads.push_back(usable_cpus());
  const std::string path = a.model.empty() ? default_model_path().string() : a.model;
  try {
    std::ifstream probe(path);
    if (!probe)
      throw std::runtime_error("model not found: " + path + " (run 'bash scripts/setup.sh')");
    const auto t_load = std::chrono::steady_clock::now();
    auto model = Model::load(path);
    const double load_s = seconds_since(t_load);

    std::vector<TokenId> unit = model->tokenizer().encode(kText);
    if (unit.empty()) throw std::runtime_error("benchmark text tokenized to nothing");
    std::vector<TokenId> prompt;
    while (static_cast<int>(prompt.size()) < a.prefill)
      prompt.insert(prompt.end(), unit.begin(), unit.end());
    prompt.resize(a.prefill);

    std::printf("sinkscope %s (git %s) bench_cpu_e2e\n", SINKSCOPE_VERSION, SINKSCOPE_GIT_SHA);
    std::printf("machine: %s, %d usable CPUs (%u hardware threads)\n", cpu_model().c_str(),
                usable_cpus(), std::thread::hardware_concurrency());
    std::printf("model: %s (%s, %d layers), loaded in %.2f s\n", path.c_str(),
                model->config().architecture.c_str(), model->config().n_layer, load_s);
    std::printf("prefill %d tokens, decode %d greedy tokens, median of %d reps\n\n", a.prefill,
                a.decode, a.reps);
    std::printf("| threads | prefill tok/s | decode tok/s | prefill ms | decode ms/token |\n");
    std::printf("|--------:|--------------:|-------------:|-----------:|----------------:|\n");
    std::fflush(stdout);

    for (int threads : a.threads) {
      BackendOptions opts;
      opts.n_threads = threads;
      opts.max_context = a.prefill + a.decode + 1;
      auto backend = make_cpu_backend(model, opts);
      std::vector<float> logits;
      // Warm-up: touches the weights and the KV pages once so the first rep is not an outlier.
      backend->reset();
      backend->forward(std::span<const TokenId>(prompt.data(), std::min<size_t>(prompt.size(), 16)),
                       LogitsMode::kLast, logits);

      std::vector<double> prefill_s, decode_s;
      for (int rep = 0; rep < a.reps; ++rep) {
        backend->reset();
        auto t0 = std::chrono::steady_clock::now();
        backend->forward(prompt, LogitsMode::kLast, logits);
        prefill_s.push_back(seconds_since(t0));
        TokenId next = argmax(logits);
        t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < a.decode; ++i) {
          backend->forward(std::span<const TokenId>(&next, 1), LogitsMode::kLast, logits);
          next = argmax(logits);
        }
        decode_s.push_back(seconds_since(t0));
      }
      const double p = median(prefill_s), d = median(decode_s);
      const double decode_tps = a.decode > 0 && d > 0 ? a.decode / d : 0.0;
      std::printf("| %7d | %13.1f | %12.2f | %10.1f | %15.2f |\n", threads, a.prefill / p,
                  decode_tps, p * 1e3, a.decode > 0 ? d * 1e3 / a.decode : 0.0);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_cpu_e2e: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
