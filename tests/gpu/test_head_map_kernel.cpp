// SPDX-License-Identifier: Apache-2.0
// The attention map computed on the GPU (kernels/head_map.cu via headMapOnGpu) against the host's
// headMapFromQK (app/gui/models/head_attention.cpp, the reference) on random Q/K: n 300 / 2048 /
// 5000, d 64 / 128 (and 256 once); causal, cache window + sinks, the layer's own window, a score
// soft-cap, a learned sink logit. Gates: every cell within 1e-5 of the largest cell, every
// alpha_k within 1e-5 of the largest alpha (float rounding of the scores and of the summation
// order is ~1e-7 relative). Then n = 32768, d = 128 timed both ways (compared too), and n =
// 131072 on the GPU alone, checked by its row sums (each query's probabilities sum to 1).
// "PASS|FAIL <check>: <numbers>" per check, "RESULT: ..." last, exit 1 on a failure; "SKIP:
// <reason>" and exit 0 without a GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/gui/models/head_attention.h"
#include "engine/backend/backend_factory.h"
#include "engine/cuda/head_map.h"
#include "engine/util/thread_pool.h"
#include "gpu_checks.h"

using namespace sinkscope;
using gpu_test::check;
using gpu_test::run;

namespace {

// Random post-RoPE-like Q/K with a sink: key 0 shares a direction with every query, so some
// rows put most of their mass on it (large logits exercise the max subtraction).
void randomQK(int n, int d, uint32_t seed, std::vector<float>& q, std::vector<float>& k) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> u(size_t(d), 0.0f);
  for (float& x : u) x = g(rng);
  q.resize(size_t(n) * d);
  k.resize(size_t(n) * d);
  for (int i = 0; i < n; ++i)
    for (int t = 0; t < d; ++t) {
      q[size_t(i) * d + t] = g(rng) + 0.5f * u[size_t(t)];
      k[size_t(i) * d + t] = g(rng) + (i == 0 ? 2.0f * u[size_t(t)] : 0.0f);
    }
}

struct Diff {
  double cell = 0, cellMax = 0, alpha = 0, alphaMax = 0;
  bool shape = true;
  double cellRel() const { return cellMax > 0 ? cell / cellMax : cell; }
  double alphaRel() const { return alphaMax > 0 ? alpha / alphaMax : alpha; }
};

Diff diff(const gui::AttentionMap& ref, const gui::AttentionMap& got) {
  Diff d;
  d.shape = ref.rows == got.rows && ref.cols == got.cols && ref.cells.size() == got.cells.size() &&
            ref.alpha.size() == got.alpha.size() && ref.rowStart == got.rowStart;
  if (!d.shape) return d;
  for (size_t i = 0; i < ref.cells.size(); ++i) {
    d.cellMax = std::max(d.cellMax, double(ref.cells[i]));
    const double e = std::fabs(double(ref.cells[i]) - got.cells[i]);
    d.cell = std::max(d.cell, std::isfinite(e) ? e : 1e30);
  }
  for (size_t i = 0; i < ref.alpha.size(); ++i) {
    d.alphaMax = std::max(d.alphaMax, ref.alpha[i]);
    const double e = std::fabs(ref.alpha[i] - got.alpha[i]);
    d.alpha = std::max(d.alpha, std::isfinite(e) ? e : 1e30);
  }
  return d;
}

constexpr double kTol = 1e-5;

std::string str(const Diff& d) {
  char b[200];
  std::snprintf(b, sizeof b, "max |d cell| %.2e (%.2e of max cell %.3g), max |d alpha| %.2e "
                "(%.2e of max %.3g); gate %.0e", d.cell, d.cellRel(), d.cellMax, d.alpha,
                d.alphaRel(), d.alphaMax, kTol);
  return b;
}

bool ok(const Diff& d) { return d.shape && d.cellRel() <= kTol && d.alphaRel() <= kTol; }

struct Rule {
  const char* name;
  gui::HeadMapOptions o;
  float scaleMul = 1.0f;  // logits' spread (the soft-cap case makes them large)
};

std::vector<Rule> rules() {
  std::vector<Rule> r;
  gui::HeadMapOptions o;
  r.push_back({"causal", o});
  o.sinkCount = 4;
  o.window = 256;
  r.push_back({"window256_S4", o});
  gui::HeadMapOptions own;
  own.ownWindow = 512;
  r.push_back({"own512", own});
  own.sinkCount = 4;
  own.window = 200;
  own.ownWindow = 700;
  r.push_back({"window200_S4_own700", own});
  gui::HeadMapOptions cap;
  cap.softcap = 5.0f;
  r.push_back({"softcap5", cap, 4.0f});
  gui::HeadMapOptions sink;
  sink.sinkLogit = 2.5f;
  r.push_back({"sink_logit2.5", sink});
  return r;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) gpu_test::g_filter = argv[1];
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("SKIP: %s\n", why.c_str());
    return 0;
  }
  std::printf("device: %s\n", cuda_device_name().c_str());
  ThreadPool pool(0);

  // 1. Against the host map: (n, d, cells) x rules. n = 300 at 1024 cells: one token per bin;
  //    2048 at 1024: two; 5000 at 256: bins of 19 or 20 tokens.
  struct Shape {
    int n, d, cells;
  };
  for (const Shape& s : {Shape{300, 64, 1024}, Shape{300, 128, 1024}, Shape{2048, 64, 1024},
                         Shape{2048, 128, 256}, Shape{5000, 64, 256}, Shape{5000, 128, 256},
                         Shape{2048, 256, 256}}) {
    std::vector<float> q, k;
    randomQK(s.n, s.d, uint32_t(s.n * 7 + s.d), q, k);
    for (const Rule& r : rules()) {
      if (s.d == 256 && std::string(r.name) != "window200_S4_own700") continue;
      const std::string name = "map_n" + std::to_string(s.n) + "_d" + std::to_string(s.d) + "_" +
                               r.name;
      run(name, [&] {
        gui::HeadMapOptions o = r.o;
        o.maxCells = s.cells;
        const float scale = r.scaleMul / std::sqrt(float(s.d));
        const gui::AttentionMap ref = gui::headMapFromQK(q.data(), k.data(), s.n, s.d, scale, o, &pool);
        const gui::AttentionMap got = gui::headMapOnGpu(q.data(), k.data(), s.n, s.d, scale, o);
        const Diff d = diff(ref, got);
        check(ok(d), name, str(d));
      });
    }
  }

  // 2. n = 32768, d = 128 (an 8B model's head at 32K tokens), window 4096 + 4 sinks and causal:
  //    both timed (the GPU's first call, with its module load, is left out), and compared.
  run("time_n32768_d128", [&] {
    const int n = 32768, d = 128;
    std::vector<float> q, k;
    randomQK(n, d, 99, q, k);
    const float scale = 1.0f / std::sqrt(float(d));
    gui::HeadMapOptions o;
    o.maxCells = 1024;
    gui::headMapOnGpu(q.data(), k.data(), 512, d, scale, o);  // warm-up
    std::printf("n = 32768, d = 128, 1024 x 1024 cells:\n");
    std::printf("  %-22s %12s %12s %12s %14s\n", "rule", "host ms", "GPU ms", "kernels ms",
                "host threads");
    for (int w : {0, 4096}) {
      o.window = w;
      o.sinkCount = w ? 4 : 0;
      auto t0 = std::chrono::steady_clock::now();
      const gui::AttentionMap ref = gui::headMapFromQK(q.data(), k.data(), n, d, scale, o, &pool);
      const double hostMs = msSince(t0);
      t0 = std::chrono::steady_clock::now();
      const gui::AttentionMap got = gui::headMapOnGpu(q.data(), k.data(), n, d, scale, o);
      const double gpuMs = msSince(t0);
      gpu::HeadMapRule rule;
      rule.sinks = o.sinkCount;
      rule.window = o.window;
      const double kernelMs =
          gpu::head_map_on_gpu(q.data(), k.data(), n, d, scale, rule, ref.rowStart).gpu_ms;
      const std::string tag = w ? "window4096_S4" : "causal";
      std::printf("  %-22s %12.1f %12.1f %12.1f %14d\n", tag.c_str(), hostMs, gpuMs, kernelMs,
                  pool.size());
      const Diff dd = diff(ref, got);
      check(ok(dd), "map_n32768_d128_" + tag, str(dd));
      std::printf("RESULT_TIME n=32768 d=128 %s host_ms=%.1f gpu_ms=%.1f kernels_ms=%.1f\n",
                  tag.c_str(), hostMs, gpuMs, kernelMs);
    }
  });

  // 3. n = 131072, d = 128 on the GPU alone (the host would take minutes): every query's
  //    probabilities sum to 1, so the cells weighted by their sizes and the column sums both
  //    total n; alpha_0 of the sink key is the largest.
  run("n131072_d128", [&] {
    const int n = 131072, d = 128;
    std::vector<float> q, k;
    randomQK(n, d, 7, q, k);
    gui::HeadMapOptions o;
    o.maxCells = 1024;
    const auto t0 = std::chrono::steady_clock::now();
    const gui::AttentionMap m = gui::headMapOnGpu(q.data(), k.data(), n, d, 1.0f / std::sqrt(128.0f), o);
    const double ms = msSince(t0);
    double total = 0;
    for (int r = 0; r < m.rows; ++r)
      for (int c = 0; c < m.cols; ++c)
        total += double(m.cells[size_t(r) * m.cols + c]) *
                 double(m.rowStart[size_t(r) + 1] - m.rowStart[size_t(r)]) *
                 double(m.colStart[size_t(c) + 1] - m.colStart[size_t(c)]);
    const size_t top = size_t(std::max_element(m.alpha.begin(), m.alpha.end()) - m.alpha.begin());
    const double rel = std::fabs(total - n) / n;
    char b[200];
    std::snprintf(b, sizeof b, "sum of probabilities %.6f (n = %d, rel. error %.1e, gate 1e-5), "
                  "top alpha at key %zu, %.1f ms", total, n, rel, top, ms);
    check(rel <= 1e-5 && top == 0, "n131072_d128_row_sums", b);
  });

  // 4. Bad arguments name what is wrong.
  run("bad_arguments", [&] {
    std::vector<float> q(64, 0.0f), k(64, 0.0f);
    std::string msg;
    try {
      gpu::head_map_on_gpu(q.data(), k.data(), 8, 8, 1.0f, {}, {0, 4, 7});
    } catch (const std::invalid_argument& e) {
      msg = e.what();
    }
    check(msg.find("bin edges") != std::string::npos, "bad_edges", msg);
    msg.clear();
    try {
      gpu::HeadMapRule r;
      r.window = -3;
      gpu::head_map_on_gpu(q.data(), k.data(), 8, 8, 1.0f, r, {0, 4, 8});
    } catch (const std::exception& e) {
      msg = e.what();
    }
    check(msg.find("window") != std::string::npos, "bad_window", msg);
  });
  return gpu_test::finish_checks();
}
