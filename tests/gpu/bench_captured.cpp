// SPDX-License-Identifier: Apache-2.0
// Our dense vs dynamic-sparse prefill attention kernels on Q/K/V captured from SmolLM2
// (tests/gpu/capture_qkv.cpp, format tests/gpu/qkv_file.h): for each capture file, the dense
// kernel (lambda = 0) and the sparse kernel (lazy V, the backend's default) at several lambda,
// block 64 (the backend's default page) and optionally 128. Prints a table (measured skip
// fraction, time, TFLOP/s, speed-up over our dense on the same tensors, output difference from
// dense) and CSV rows (bench_attention's columns, kind prefill_captured; shape
// "smollm2_layer<l>"; quiet = -1) to --csv. torch_sdpa_captured.py times torch SDPA on the
// same files and joins this CSV.
//   bench_captured [--lambdas 0.001,0.005,0.01,0.02,0.05,0.1] [--blocks 64,128] [--csv FILE]
//                  [--reps N] FILE...
// "SKIP: <reason>" and exit 0 without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/gpu/attention_problem.h"
#include "tests/gpu/qkv_file.h"
#include "tests/gpu/gpu_checks.h"

using namespace sinkscope;
using sinkscope::gpu_test::parse_list;
using namespace sinkscope::testing;

namespace {

template <class F>
double time_us(F&& launch, int warmup, int batches) {
  cudaEvent_t a, b;
  SINKSCOPE_CUDA_CHECK(cudaEventCreate(&a));
  SINKSCOPE_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) launch();
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ts;
  for (int bt = 0; bt < batches; ++bt) {
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(a));
    launch();
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(b));
    SINKSCOPE_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    SINKSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms * 1000.f);
  }
  SINKSCOPE_CUDA_CHECK(cudaEventDestroy(a));
  SINKSCOPE_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

void ok_or_die(const kernels::AttentionStatus& s) {
  if (!s.ok) {
    std::fprintf(stderr, "launch_attention: %s\n", s.message.c_str());
    std::exit(1);
  }
}


}  // namespace

int main(int argc, char** argv) {
  std::vector<double> lambdas = {0.001, 0.005, 0.01, 0.02, 0.05, 0.1};
  std::vector<double> blocks = {64};
  std::string csv_path;
  int reps = 20;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--lambdas" || a == "--blocks" || a == "--csv" || a == "--reps") && i + 1 < argc) {
      const std::string v = argv[++i];
      if (a == "--lambdas") lambdas = parse_list(v);
      else if (a == "--blocks") blocks = parse_list(v);
      else if (a == "--csv") csv_path = v;
      else reps = std::max(3, std::stoi(v));
    } else {
      files.push_back(a);
    }
  }
  if (!have_gpu("bench_captured")) return 0;
  if (files.empty()) {
    std::printf("SKIP: bench_captured: no capture files given (run capture_qkv first)\n");
    return 0;
  }
  FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (csv) std::fprintf(csv, "kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
  std::mt19937_64 rng(4321);
  std::printf("%-34s %5s %6s %8s %7s %9s %8s %8s %9s\n", "capture", "block", "L", "lambda",
              "skip%", "time us", "TFLOP/s", "x dense", "rel diff");
  for (const std::string& path : files) {
    gpu_test::QkvFile f;
    std::string err;
    if (!gpu_test::read_qkv_file(path, f, &err)) {
      std::printf("FAIL %s\n", err.c_str());
      return 1;
    }
    const std::string shape = "smollm2_layer" + std::to_string(f.layer);
    const std::string name = path.substr(path.find_last_of('/') + 1);
    // Causal FLOPs of the prefill queries (bench_attention's convention for q_start = 0).
    const double flops = 4.0 * double(f.n_q) * (double(f.q_start) + double(f.n_q) / 2.0) *
                         f.head_dim * f.n_head;
    for (double bd : blocks) {
      const int bc = int(bd);
      HostProblem hp;
      hp.spec.n_q_tokens = f.n_q;
      hp.spec.n_q_heads = f.n_head;
      hp.spec.n_kv_heads = f.n_head_kv;
      hp.spec.head_dim = f.head_dim;
      hp.spec.block_size = bc;
      hp.spec.kv_len = f.n_kv;
      hp.spec.q_start = f.q_start;
      hp.q = f.q;
      hp.k = f.k;
      hp.v = f.v;
      DeviceProblem dp;
      dp.upload(hp, rng);
      auto emit = [&](const char* variant, double us, double skip, double lam) {
        if (csv)
          std::fprintf(csv, "prefill_captured,%s,%d,%s_b%d,%.3f,%.2f,0,%.4f,%g,-1\n", shape.c_str(),
                       f.n_q, variant, bc, us, flops / us * 1e-6, skip, lam);
      };
      kernels::AttentionParams pd = dp.params(hp, 0.0);
      pd.scale = f.scale;
      pd.skip_mask = nullptr;
      pd.tiles_visited = pd.tiles_skipped = nullptr;
      const double us_dense = time_us([&] { ok_or_die(kernels::launch_attention(pd, nullptr)); }, 2, reps);
      SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<uint16_t> o_dense(dp.o_elems), o(dp.o_elems);
      SINKSCOPE_CUDA_CHECK(cudaMemcpy(o_dense.data(), dp.o, dp.o_elems * 2, cudaMemcpyDeviceToHost));
      std::printf("%-34s %5d %6d %8s %7s %9.1f %8.1f %8s %9s\n", name.c_str(), bc, f.n_q, "dense",
                  "-", us_dense, flops / us_dense * 1e-6, "1.00", "-");
      emit("ours_dense", us_dense, 0, 0);
      for (double lam : lambdas) {
        kernels::AttentionParams ps = dp.params(hp, lam);
        ps.scale = f.scale;
        ps.skip_mask = nullptr;
        SINKSCOPE_CUDA_CHECK(cudaMemset(dp.visited, 0, f.n_head * 8));
        SINKSCOPE_CUDA_CHECK(cudaMemset(dp.skipped, 0, f.n_head * 8));
        ok_or_die(kernels::launch_attention(ps, nullptr));
        SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<uint64_t> vis(f.n_head), sk(f.n_head);
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(vis.data(), dp.visited, f.n_head * 8, cudaMemcpyDeviceToHost));
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(sk.data(), dp.skipped, f.n_head * 8, cudaMemcpyDeviceToHost));
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(o.data(), dp.o, dp.o_elems * 2, cudaMemcpyDeviceToHost));
        uint64_t tv = 0, ts = 0;
        for (int h = 0; h < f.n_head; ++h) tv += vis[h], ts += sk[h];
        const double skip = tv ? double(ts) / double(tv) : 0.0;
        double e2 = 0, r2 = 0;
        for (size_t i = 0; i < o.size(); ++i) {
          const double a = bf2f(o[i]), b = bf2f(o_dense[i]);
          e2 += (a - b) * (a - b);
          r2 += b * b;
        }
        ps.tiles_visited = ps.tiles_skipped = nullptr;
        const double us = time_us([&] { ok_or_die(kernels::launch_attention(ps, nullptr)); }, 2, reps);
        std::printf("%-34s %5d %6d %8g %7.1f %9.1f %8.1f %8.2f %9.2e\n", name.c_str(), bc, f.n_q,
                    lam, 100.0 * skip, us, flops / us * 1e-6, us_dense / us,
                    std::sqrt(e2 / std::max(r2, 1e-30)));
        emit("ours_sparse_lazyV", us, skip, lam);
      }
      dp.release();
      std::fflush(stdout);
    }
  }
  if (csv) std::fclose(csv);
  std::printf("(x dense = our dense time / our sparse time on the same tensors; rel diff = "
              "||sparse - dense|| / ||dense|| of the outputs)\n");
  return 0;
}
