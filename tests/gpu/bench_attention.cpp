// SPDX-License-Identifier: Apache-2.0
// Benchmark of the attention kernel family (docs/architecture.md, design principle 12: one program
// per kernel family; the check mode is test_attention_gpu). `bench_attention OUT.csv --kvq` times
// only the bf16 / int8 / int4 KV decode table, `--decode` only the decode rows, `--decode-ctas` the
// dense decode with the split plan aimed at 1..4 CTAs per SM (GpuTuning::decode_ctas_per_sm),
// `--decode-split` the split policies (kernels::DecodeSplitPolicy) alternating, dense and sparse,
// 4K..64K. Decode rows come twice: host launches back to back (variant ours_*) and the same
// launches replayed as one CUDA graph (ours_*_graph: device time, as the engine's graph-replayed
// decode steps see it). Prints rows of CSV to stdout (and to argv[1] when given):
//   kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet
// kind: prefill (causal FLOPs 4*L^2*d*Hq/2), decode (K+V bytes read = 2*L*Hkv*d*2),
// prefill_sparse / decode_sparse (+ measured skip fraction, same-input dense time for the ratio),
// decode_kvq (variant bf16 / int8 / int4: KV page format, gbps = cache bytes read incl. scales).
// tests/gpu/torch_sdpa_bench.py times torch SDPA on the same shapes and prints the joint table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "engine/cache/kv_quant.h"
#include "kernels/ops.h"
#include "tests/gpu/attention_problem.h"
#include "tests/gpu/bench_floor.h"

using namespace sinkscope;
using namespace sinkscope::testing;

namespace {

struct Shape {
  const char* name;
  int d, hq, hkv;
};
const Shape kShapes[] = {{"d64_h9_kv3", 64, 9, 3}, {"d128_h32_kv8", 128, 32, 8}};
const int64_t kLens[] = {4096, 8192, 16384, 32768, 65536};

FILE* g_csv = nullptr;
void emit(const char* kind, const char* shape, int64_t L, const char* variant, double us,
          double tflops, double gbps, double skip, double lambda, double quiet) {
  char line[512];
  std::snprintf(line, sizeof line, "%s,%s,%lld,%s,%.3f,%.2f,%.1f,%.4f,%g,%g\n", kind, shape,
                (long long)L, variant, us, tflops, gbps, skip, lambda, quiet);
  std::fputs(line, stdout);
  std::fflush(stdout);
  if (g_csv) std::fputs(line, g_csv), std::fflush(g_csv);
}

// Median over `batches` of the event time around enqueue() on `stream`, divided by `calls`
// (microseconds per call).
template <class F>
double event_median_us(cudaStream_t stream, int batches, int calls, F&& enqueue) {
  cudaEvent_t a, b;
  SINKSCOPE_CUDA_CHECK(cudaEventCreate(&a));
  SINKSCOPE_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int bt = 0; bt < batches; ++bt) {
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(a, stream));
    enqueue();
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(b, stream));
    SINKSCOPE_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    SINKSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms * 1000.f / calls);
  }
  SINKSCOPE_CUDA_CHECK(cudaEventDestroy(a));
  SINKSCOPE_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

// Median over `batches` of the mean time of `per_batch` back-to-back launches (microseconds).
template <class F>
double time_us(F&& launch, int warmup, int batches, int per_batch) {
  for (int i = 0; i < warmup; ++i) launch(i);
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  int call = 0;
  return event_median_us(nullptr, batches, per_batch, [&] {
    for (int i = 0; i < per_batch; ++i) launch(call++);
  });
}

// Device time per launch without the host: `per_graph` launches (launch(i, stream)) captured
// into one CUDA graph, the median over `batches` replays of replay time / per_graph. The engine
// replays its decode steps as graphs, so this is the decode time it sees; the plain time_us above
// also contains the host's launch cost whenever that exceeds the kernel's.
template <class F>
double graph_time_us(F&& launch, int per_graph, int batches) {
  cudaStream_t s;
  SINKSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < per_graph; ++i) launch(i, s);  // warm-up, one-time attribute setup
  SINKSCOPE_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t exec;
  SINKSCOPE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < per_graph; ++i) launch(i, s);
  SINKSCOPE_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  SINKSCOPE_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
  SINKSCOPE_CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm replay
  const double us = event_median_us(s, batches, per_graph,
                                    [&] { SINKSCOPE_CUDA_CHECK(cudaGraphLaunch(exec, s)); });
  SINKSCOPE_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SINKSCOPE_CUDA_CHECK(cudaGraphDestroy(g));
  SINKSCOPE_CUDA_CHECK(cudaStreamDestroy(s));
  return us;
}

// Each of `fns` timed `rounds` times in turn (alternating, so a drift of the card's clocks hits
// every one alike); the median time of each.
std::vector<double> alternating_medians(int rounds, const std::vector<std::function<double()>>& fns) {
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < fns.size(); ++i) t[i].push_back(fns[i]());
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[rounds / 2]);
  }
  return med;
}

// Sets one field of the tuning in force (kernels/tuning.h); 0 / false returns a choice to its
// default.
template <class T>
void tune(T kernels::GpuTuning::*field, T value) {
  kernels::GpuTuning t = kernels::gpu_tuning();
  t.*field = value;
  kernels::set_gpu_tuning(t);
}
void set_split_policy(const kernels::DecodeSplitPolicy& pol) {
  kernels::GpuTuning t = kernels::gpu_tuning();
  t.decode_ctas_per_sm = pol.ctas_per_sm;
  t.decode_max_ctas_per_sm = pol.max_ctas_per_sm;
  t.decode_min_tiles = pol.min_tiles;
  kernels::set_gpu_tuning(t);
}

void check(const kernels::AttentionStatus& s) {
  if (!s.ok) {
    std::fprintf(stderr, "launch_attention: %s\n", s.message.c_str());
    std::exit(1);
  }
}

// block: the page size (= the skip unit and the decode's KV tile), 64 unless a benchmark compares.
ProblemSpec make_spec(const Shape& sh, int64_t L, bool decode, double sink, double quiet, int block = 64) {
  ProblemSpec s;
  s.head_dim = sh.d;
  s.n_q_heads = sh.hq;
  s.n_kv_heads = sh.hkv;
  s.block_size = block;
  s.kv_len = L;
  s.n_q_tokens = decode ? 1 : int(L);
  s.q_start = decode ? L - 1 : 0;
  s.sink_logit = sink;
  s.quiet_fraction = quiet;
  s.loud_scale = 2.0;
  return s;
}

// One launch of p with its probe counters zeroed first (p counts into dp's): skipped / visited.
double skip_fraction(DeviceProblem& dp, const kernels::AttentionParams& p, int heads) {
  SINKSCOPE_CUDA_CHECK(cudaMemset(dp.visited, 0, heads * 8));
  SINKSCOPE_CUDA_CHECK(cudaMemset(dp.skipped, 0, heads * 8));
  check(kernels::launch_attention(p, nullptr));
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint64_t> v(heads), s(heads);
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(v.data(), dp.visited, heads * 8, cudaMemcpyDeviceToHost));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(s.data(), dp.skipped, heads * 8, cudaMemcpyDeviceToHost));
  uint64_t tv = 0, ts = 0;
  for (int h = 0; h < heads; ++h) tv += v[h], ts += s[h];
  return tv ? double(ts) / double(tv) : 0.0;
}

void bench_prefill(const Shape& sh, int64_t L, std::mt19937_64& rng) {
  const HostProblem hp = make_problem(make_spec(sh, L, false, 0, 0), rng);
  DeviceProblem dp;
  dp.upload(hp, rng);
  const double flops = 4.0 * double(L) * double(L) * sh.d * sh.hq / 2.0;
  const int reps = L >= 32768 ? 3 : (L >= 16384 ? 5 : 10);
  for (int bc : {64, 128}) {
    if (bc == 128 && L != 16384 && L != 32768) continue;  // block 128: a spot check
    DeviceProblem dq;
    kernels::AttentionParams p;
    if (bc == 64) {
      p = dp.params(hp, 0.0);
    } else {
      HostProblem h2 = hp;
      h2.spec.block_size = 128;
      dq.upload(h2, rng);
      p = dq.params(h2, 0.0);
    }
    p.skip_mask = nullptr;
    // The warp-specialised kernel (attention_prefill_ws.cuh; the default where it applies) in
    // rows of its own; ours_dense_* stay the wgmma kernel (prefer_ws = false).
    if (kernels::attention_uses_warp_specialized(p)) {
      const double usw = time_us([&](int) { check(kernels::launch_attention(p, nullptr)); }, 1, reps, 1);
      emit("prefill", sh.name, L, bc == 64 ? "ours_ws_b64" : "ours_ws_b128", usw,
           flops / usw * 1e-6, 0, 0, 0, 0);
    }
    p.prefer_ws = false;
    const double us = time_us([&](int) { check(kernels::launch_attention(p, nullptr)); }, 1, reps, 1);
    emit("prefill", sh.name, L, bc == 64 ? "ours_dense_b64" : "ours_dense_b128", us,
         flops / us * 1e-6, 0, 0, 0, 0);
    if (bc == 64) {  // the portable mma.sync kernel, for comparison
      p.prefer_wgmma = false;
      const double us2 = time_us([&](int) { check(kernels::launch_attention(p, nullptr)); }, 1, reps, 1);
      emit("prefill", sh.name, L, "ours_mmasync_b64", us2, flops / us2 * 1e-6, 0, 0, 0, 0);
    }
    dq.release();
  }
  dp.release();
}

// block: the page size = the skip unit (64, the default rows "prefill_sparse"; 128: rows of kind
// "prefill_sparse_b128", where a 128-key tile is one unit).
void bench_prefill_sparse(const Shape& sh, int64_t L, std::mt19937_64& rng, int block = 64) {
  const double flops = 4.0 * double(L) * double(L) * sh.d * sh.hq / 2.0;
  const double lambda = 1e-2;
  const char* kind = block == 64 ? "prefill_sparse" : "prefill_sparse_b128";
  for (double quiet : {0.5, 0.7, 0.9}) {
    const HostProblem hp = make_problem(make_spec(sh, L, false, 6.0, quiet, block), rng);
    DeviceProblem dp;
    dp.upload(hp, rng);
    kernels::AttentionParams pd = dp.params(hp, 0.0);
    pd.skip_mask = nullptr;
    const int reps = L >= 32768 ? 3 : 5;
    // Rows, all on this input: ours_dense_same_input = the default dense prefill (the
    // warp-specialised kernel on sm_90); where that is the warp-specialised one, also the wgmma
    // dense kernel (ours_wgmma_dense_same_input) and the warp-specialised sparse kernel
    // (ours_ws_sparse, the default sparse prefill there); ours_sparse_lazyV / eagerV are the
    // wgmma sparse kernels (prefer_ws = false where the warp-specialised one applies).
    const double us_dense = time_us([&](int) { check(kernels::launch_attention(pd, nullptr)); }, 1, reps, 1);
    emit(kind, sh.name, L, "ours_dense_same_input", us_dense, flops / us_dense * 1e-6, 0, 0, 0, quiet);
    const bool ws = kernels::attention_uses_warp_specialized(pd);
    if (ws) {
      pd.prefer_ws = false;
      const double us = time_us([&](int) { check(kernels::launch_attention(pd, nullptr)); }, 1, reps, 1);
      emit(kind, sh.name, L, "ours_wgmma_dense_same_input", us, flops / us * 1e-6, 0, 0, 0, quiet);
    }
    if (quiet == 0.5) {
      // lambda = 0 with the sparse kernel forced (force_sparse_kernel): what its vote and kept
      // path cost when nothing is skipped. The engine runs the dense kernel at lambda = 0 (the
      // kernel selection), so this is the kernel's own overhead, not the engine's; dense and
      // forced sparse alternate `reps` times, medians.
      // (pd may have prefer_ws = false by now: the dense side is the default dense kernel, p0.)
      kernels::AttentionParams p0 = dp.params(hp, 0.0);
      p0.skip_mask = nullptr;
      kernels::AttentionParams pz = p0;
      pz.force_sparse_kernel = true;
      const std::vector<double> med = alternating_medians(
          reps, {[&] { return time_us([&](int) { check(kernels::launch_attention(p0, nullptr)); }, 1, 1, 1); },
                 [&] { return time_us([&](int) { check(kernels::launch_attention(pz, nullptr)); }, 1, 1, 1); }});
      const double d_us = med[0], z_us = med[1];
      emit(kind, sh.name, L, "ours_sparse_forced_lambda0", z_us, flops / z_us * 1e-6, 0, 0,
           0, quiet);
      std::printf("=== lambda0 overhead %s L=%lld block %d: dense %.1f us, sparse kernel forced at lambda = 0 "
                  "%.1f us (%.3fx) ===\n",
                  sh.name, static_cast<long long>(L), block, d_us, z_us, z_us / d_us);
      // The other end of lambda: 0.9 skips a tile when every row's max in it stays more than
      // 0.105 nats below that row's running max (on these random inputs 46-77 %, more with the
      // length), a second point for the time per skipped tile, as a fraction of the default
      // dense kernel's time.
      kernels::AttentionParams pa = dp.params(hp, 0.9);
      pa.skip_mask = nullptr;
      const double skip_all = skip_fraction(dp, pa, sh.hq);
      pa.tiles_visited = pa.tiles_skipped = nullptr;
      const double a_us = time_us([&](int) { check(kernels::launch_attention(pa, nullptr)); }, 1, reps, 1);
      emit(kind, sh.name, L, "ours_sparse_lambda0.9", a_us, flops / a_us * 1e-6, 0, skip_all,
           0.9, quiet);
      std::printf("=== lambda0.9 cost %s L=%lld block %d: lambda = 0.9 skips %.1f %% of tiles in %.1f us = %.3f of "
                  "the dense time ===\n",
                  sh.name, static_cast<long long>(L), block, 100 * skip_all, a_us, a_us / d_us);
    }
    for (int mode : {0, 1, 2}) {  // 0 warp-specialised, 1 wgmma lazy V, 2 wgmma eager V
      kernels::AttentionParams ps = dp.params(hp, lambda);
      // Mode 0 needs the warp-specialised sparse kernel (sm_90, ws_sparse_prefill_head_dim():
      // d = 64 and 128 with 64-row query tiles).
      if (mode == 0 && !kernels::attention_uses_warp_specialized(ps)) continue;
      ps.skip_mask = nullptr;
      ps.skip_value_load = mode != 2;
      ps.prefer_ws = mode == 0;
      const double skip = skip_fraction(dp, ps, sh.hq);
      ps.tiles_visited = ps.tiles_skipped = nullptr;
      const double us = time_us([&](int) { check(kernels::launch_attention(ps, nullptr)); }, 1, reps, 1);
      emit(kind, sh.name, L,
           mode == 0 ? "ours_ws_sparse" : mode == 1 ? "ours_sparse_lazyV" : "ours_sparse_eagerV", us,
           flops / us * 1e-6, 0, skip, lambda, quiet);
      if (mode == 0)
        std::printf("=== sparse prefill %s L=%lld block %d quiet %.1f: %.1f %% skipped, dense %.1f us, "
                    "ws sparse %.1f us (%.3fx) ===\n",
                    sh.name, static_cast<long long>(L), block, quiet, 100 * skip, us_dense, us,
                    us_dense / us);
    }
    dp.release();
  }
}

// The warp-specialised sparse prefill against the dense one on the same input across quiet
// fractions 0 .. 1 (lambda 1e-2; quiet 1: every tile after the first is quiet, so ~all are
// skipped): time as a function of the measured skipped fraction. Dense and sparse alternate five
// times, medians. Rows of kind skip_sweep (variants dense / ws_sparse), one line per fraction.
void bench_skip_sweep(const Shape& sh, int64_t L, std::mt19937_64& rng, int block = 64) {
  const double flops = 4.0 * double(L) * double(L) * sh.d * sh.hq / 2.0;
  for (double quiet : {0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0}) {
    const HostProblem hp = make_problem(make_spec(sh, L, false, 6.0, quiet, block), rng);
    DeviceProblem dp;
    dp.upload(hp, rng);
    kernels::AttentionParams pd = dp.params(hp, 0.0), ps = dp.params(hp, 1e-2);
    pd.skip_mask = ps.skip_mask = nullptr;
    const double skip = skip_fraction(dp, ps, sh.hq);
    ps.tiles_visited = ps.tiles_skipped = nullptr;
    const std::vector<double> med = alternating_medians(
        5, {[&] { return time_us([&](int) { check(kernels::launch_attention(pd, nullptr)); }, 1, 1, 1); },
            [&] { return time_us([&](int) { check(kernels::launch_attention(ps, nullptr)); }, 1, 1, 1); }});
    const double d_us = med[0], s_us = med[1];
    // Block 128 rows carry the block in the variant (the torch table reads the block-64 rows).
    const std::string sfx = block == 64 ? "" : "_b" + std::to_string(block);
    emit("skip_sweep", sh.name, L, ("dense" + sfx).c_str(), d_us, flops / d_us * 1e-6, 0, 0, 0, quiet);
    emit("skip_sweep", sh.name, L, ("ws_sparse" + sfx).c_str(), s_us, flops / s_us * 1e-6, 0, skip,
         1e-2, quiet);
    std::printf("=== skip sweep %s L=%lld block %d quiet %.2f: %.1f %% skipped, dense %.1f us, sparse %.1f us, "
                "sparse/dense %.3f ===\n",
                sh.name, static_cast<long long>(L), block, quiet, 100 * skip, d_us, s_us, s_us / d_us);
    std::fflush(stdout);
    dp.release();
  }
}

// `--consumers`: the d = 64 warp-specialised kernels with two and three consumer warpgroups
// (ws_dense_consumers(p), ws_sparse_consumers(p); sparse at lambda 1e-2 on the sink + 70 % quiet-tile
// input) from 512 to 64K tokens, timed alternately in the same process (best of two rounds each),
// for the choice of the default per length. Rows kind ws_consumers; a table on stdout.
void bench_ws_consumers(std::mt19937_64& rng) {
  const Shape& sh = kShapes[0];
  std::printf("\n=== d = 64 warp-specialised prefill, two vs three consumer warpgroups (us; TFLOP/s-equivalent; "
              "x = two / three) ===\n");
  std::printf("%6s %10s %10s %6s %6s %10s %10s %6s\n", "L", "dense nc2", "dense nc3", "x", "skip%", "sparse nc2",
              "sparse nc3", "x");
  for (int64_t L : {512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}) {
    const HostProblem hp = make_problem(make_spec(sh, L, false, 6.0, 0.7), rng);
    DeviceProblem dp;
    dp.upload(hp, rng);
    const double flops = 4.0 * double(L) * double(L) * sh.d * sh.hq / 2.0;
    const int reps = L >= 32768 ? 3 : (L >= 8192 ? 5 : 20);
    kernels::AttentionParams pd = dp.params(hp, 0.0), ps = dp.params(hp, 1e-2);
    pd.skip_mask = ps.skip_mask = nullptr;
    if (!kernels::attention_uses_warp_specialized(pd) || !kernels::attention_uses_warp_specialized(ps)) {
      std::fprintf(stderr, "consumers: the warp-specialised kernels do not run here\n");
      std::exit(1);
    }
    const double skip = skip_fraction(dp, ps, sh.hq);
    ps.tiles_visited = ps.tiles_skipped = nullptr;
    double us[4] = {1e30, 1e30, 1e30, 1e30};  // dense 2, dense 3, sparse 2, sparse 3
    for (int round = 0; round < 2; ++round)
      for (int k = 0; k < 4; ++k) {
        tune(&kernels::GpuTuning::ws_dense_consumers, k == 1 ? 3 : 2);
        tune(&kernels::GpuTuning::ws_sparse_consumers, k == 3 ? 3 : 2);
        const kernels::AttentionParams& q = k < 2 ? pd : ps;
        us[k] = std::min(us[k], time_us([&](int) { check(kernels::launch_attention(q, nullptr)); }, 1, reps, 1));
      }
    tune(&kernels::GpuTuning::ws_dense_consumers, 0);
    tune(&kernels::GpuTuning::ws_sparse_consumers, 0);
    const char* names[4] = {"dense_nc2", "dense_nc3", "sparse_nc2", "sparse_nc3"};
    for (int k = 0; k < 4; ++k)
      emit("ws_consumers", sh.name, L, names[k], us[k], flops / us[k] * 1e-6, 0, k < 2 ? 0 : skip, k < 2 ? 0 : 1e-2,
           0.7);
    std::printf("%6lld %10.1f %10.1f %6.2f %6.1f %10.1f %10.1f %6.2f   (TFLOP/s %.0f / %.0f, %.0f / %.0f)\n",
                (long long)L, us[0], us[1], us[0] / us[1], 100 * skip, us[2], us[3], us[2] / us[3],
                flops / us[0] * 1e-6, flops / us[1] * 1e-6, flops / us[2] * 1e-6, flops / us[3] * 1e-6);
    dp.release();
  }
  std::printf("=== end consumers ===\n");
  std::fflush(stdout);
}

// One decode problem uploaded to `copies` page pools, so that one timing loop streams > 2x the
// 60 MB L2; params without a skip mask (a mask makes the first decode launch without PDL).
struct DecodeCopies {
  std::vector<DeviceProblem> dps;
  std::vector<kernels::AttentionParams> ps;
  int copies = 0;
  double kv_bytes = 0;
  void attach_workspaces() {
    for (int c = 0; c < copies; ++c) dps[c].attach_workspace(ps[c]);
  }
  void release() {
    for (auto& d : dps) d.release();
  }
};
DecodeCopies upload_decode_copies(const Shape& sh, int64_t L, const HostProblem& hp, double lambda,
                                  std::mt19937_64& rng) {
  DecodeCopies dc;
  dc.kv_bytes = 2.0 * double(L) * sh.hkv * sh.d * 2;
  dc.copies = std::max(1, int(std::ceil(240e6 / dc.kv_bytes)));
  dc.dps = std::vector<DeviceProblem>(dc.copies);
  dc.ps.resize(dc.copies);
  for (int c = 0; c < dc.copies; ++c) {
    dc.dps[c].upload(hp, rng);
    dc.ps[c] = dc.dps[c].params(hp, lambda);
    dc.ps[c].skip_mask = nullptr;
  }
  dc.attach_workspaces();
  return dc;
}

void bench_decode(const Shape& sh, int64_t L, std::mt19937_64& rng, double sink, double quiet,
                  double lambda, const char* kind) {
  const HostProblem hp = make_problem(make_spec(sh, L, true, sink, quiet), rng);
  DecodeCopies dc = upload_decode_copies(sh, L, hp, lambda, rng);
  std::vector<DeviceProblem>& dps = dc.dps;
  std::vector<kernels::AttentionParams>& ps = dc.ps;
  const int copies = dc.copies;
  const double kv_bytes = dc.kv_bytes;
  double skip = 0;
  if (lambda > 0) {
    skip = skip_fraction(dps[0], ps[0], sh.hq);
  }
  for (auto& p : ps) p.tiles_visited = p.tiles_skipped = nullptr;
  const double us = time_us([&](int i) { check(kernels::launch_attention(ps[i % copies], nullptr)); },
                            copies, 7, std::max(20, copies));
  emit(kind, sh.name, L, lambda > 0 ? "ours_sparse" : "ours_dense", us, 0, kv_bytes / us * 1e-3,
       skip, lambda, quiet);
  const double gus = graph_time_us(
      [&](int i, cudaStream_t st) { check(kernels::launch_attention(ps[i % copies], st)); },
      std::max(20, copies), 7);
  emit(kind, sh.name, L, lambda > 0 ? "ours_sparse_graph" : "ours_dense_graph", gus, 0,
       kv_bytes / gus * 1e-3, skip, lambda, quiet);
  // The same replay with PDL off: no launch overlaps its predecessor (the dense / pass-1 kernels
  // load their first cache tiles before griddepcontrol.wait, which then costs nothing to wait
  // for), so this is the latency of one call on its own. And both with the split combine folded
  // into the decode kernel (GpuTuning::decode_fused_combine) instead of the separate combine kernel.
  const bool pdl_was = kernels::pdl_enabled();
  for (int fused : {0, 1})
    for (int pdl : {1, 0}) {
      if (fused == 0 && pdl == 1) continue;  // the row above
      tune(&kernels::GpuTuning::decode_fused_combine, fused == 1);
      kernels::set_pdl_enabled(pdl_was && pdl == 1);
      const double nus = graph_time_us(
          [&](int i, cudaStream_t st) { check(kernels::launch_attention(ps[i % copies], st)); },
          std::max(20, copies), 7);
      tune(&kernels::GpuTuning::decode_fused_combine, false);
      kernels::set_pdl_enabled(pdl_was);
      const std::string v = std::string(lambda > 0 ? "ours_sparse_graph" : "ours_dense_graph") +
                            (fused ? "_fused" : "") + (pdl ? "" : "_nopdl");
      emit(kind, sh.name, L, v.c_str(), nus, 0, kv_bytes / nus * 1e-3, skip, lambda, quiet);
    }
  if (lambda == 0 && std::string(kind) == "decode") {
    // The memory floor: a kernel that only streams the same number of bytes (bench_floor.cu),
    // replayed the same way.
    int n_sms = 0;
    SINKSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, 0));
    const uint64_t nbytes = uint64_t(kv_bytes) & ~uint64_t(15);
    std::vector<void*> bufs(copies);
    unsigned* sink = nullptr;
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned)));
    for (auto& b : bufs) {
      SINKSCOPE_CUDA_CHECK(cudaMalloc(&b, nbytes));
      SINKSCOPE_CUDA_CHECK(cudaMemset(b, 1, nbytes));
    }
    const double fus = graph_time_us(
        [&](int i, cudaStream_t st) {
          SINKSCOPE_CUDA_CHECK(bench::launch_read_floor(bufs[i % copies], nbytes, sink, n_sms, st));
        },
        std::max(20, copies), 7);
    emit(kind, sh.name, L, "read_floor_graph", fus, 0, kv_bytes / fus * 1e-3, 0, 0, 0);
    for (void* b : bufs) SINKSCOPE_CUDA_CHECK(cudaFree(b));
    SINKSCOPE_CUDA_CHECK(cudaFree(sink));
  }
  dc.release();
}

// The decode's split policy (GpuTuning::decode_*): one problem per (shape, L),
// every policy replayed as graphs in turn, `rounds` times alternating (so a drift of the card's
// clocks hits every policy alike); the median per policy. Dense (lambda = 0) and sparse (~70 %
// skipped, lambda = 1e-2): both run the same plan. Rows of kind decode_split, variant
// "c<ctas>_m<max ctas>_t<min tiles>[_sparse]" (the default policy of kernels::
// decode_default_policy is c2_m3_t6 at d = 64, c2_m0_t0 at d = 128); a table on stdout.
void bench_decode_split(const Shape& sh, int64_t L, std::mt19937_64& rng) {
  const kernels::DecodeSplitPolicy pols[] = {{2, 0, 0}, {2, 3, 4}, {2, 3, 6}, {2, 3, 8},
                                             {3, 0, 0}, {1, 0, 0}};
  constexpr int kPols = sizeof(pols) / sizeof(pols[0]), kRounds = 3;
  for (double lambda : {0.0, 1e-2}) {
    const HostProblem hp = make_problem(make_spec(sh, L, true, 6.0, 0.7), rng);
    DecodeCopies dc = upload_decode_copies(sh, L, hp, lambda, rng);
    std::vector<kernels::AttentionParams>& ps = dc.ps;
    const int copies = dc.copies;
    const double kv_bytes = dc.kv_bytes;
    for (auto& p : ps) p.tiles_visited = p.tiles_skipped = nullptr;
    std::vector<std::function<double()>> fns;
    for (int i = 0; i < kPols; ++i)
      fns.push_back([&, i] {
        set_split_policy(pols[i]);
        dc.attach_workspaces();  // the workspace follows the plan
        return graph_time_us(
            [&](int k, cudaStream_t st) { check(kernels::launch_attention(ps[k % copies], st)); },
            std::max(20, copies), 5);
      });
    const std::vector<double> meds = alternating_medians(kRounds, fns);
    tune(&kernels::GpuTuning::decode_ctas_per_sm, 0);
    std::printf("=== decode split policy %s L=%lld %s (graph-replayed us, median of %d rounds) ===\n",
                sh.name, static_cast<long long>(L), lambda > 0 ? "sparse" : "dense", kRounds);
    for (int i = 0; i < kPols; ++i) {
      const double med = meds[i];
      const std::string v = "c" + std::to_string(pols[i].ctas_per_sm) + "_m" +
                            std::to_string(pols[i].max_ctas_per_sm) + "_t" +
                            std::to_string(pols[i].min_tiles) + (lambda > 0 ? "_sparse" : "");
      std::printf("  %-14s %8.2f us  %6.0f GB/s\n", v.c_str(), med, kv_bytes / med * 1e-3);
      emit("decode_split", sh.name, L, v.c_str(), med, 0, kv_bytes / med * 1e-3, 0, lambda, 0.7);
    }
    std::fflush(stdout);
    dc.release();
  }
}

// Where the dense decode's time goes (bench_floor.cu): for one shape and length, our decode with
// the separate combine kernel and with the combine fused into the decode kernel, next to
// floors that move the same K + V bytes with no attention arithmetic: the stream of the
// decode's own split plan and early-load schedule (split_stream), the same stream with each
// split writing its partial and the decode's own combine kernel after it (split_stream_combine:
// the two-kernel structure without the page table, Q and the math), the one-kernel structures
// instead of it (split_stream_ticket8: arrival tickets, the last 8 CTAs of a head merge through
// L2; cluster_stream_c8 / c16: one cluster per KV head merging over distributed shared memory),
// the sparse decode's three kernels at 70 % skipped tiles (sparse70_stream_combine: K of every
// tile, V of the kept ones, the combine), and the plain read floor.
// All replayed as graphs in turn, `rounds` times alternating, medians. Rows of kind
// decode_floor; a table on stdout.
void bench_decode_floors(const Shape& sh, int64_t L, std::mt19937_64& rng) {
  constexpr int kRounds = 3;
  const HostProblem hp = make_problem(make_spec(sh, L, true, 0, 0), rng);
  DecodeCopies dc = upload_decode_copies(sh, L, hp, 0.0, rng);
  for (auto& p : dc.ps) p.tiles_visited = p.tiles_skipped = nullptr;
  const int copies = dc.copies, per_graph = std::max(20, copies);
  int n_sms = 0;
  SINKSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&n_sms, cudaDevAttrMultiProcessorCount, 0));
  // The plan and workspace layout the decode launch itself uses (kernels/attention.cu).
  const kernels::AttentionShape ashape = kernels::shape_of(dc.ps[0]);
  const kernels::DecodeSplitPlan plan = kernels::decode_launch_plan(
      ashape, n_sms, kernels::decode_split_policy(ashape.head_dim, ashape.block_size));
  const kernels::DecodeWorkspaceLayout wl = kernels::decode_workspace_layout(ashape, plan, false);
  const uint64_t tile_bytes = 256ull * sh.d, kv_bytes = uint64_t(plan.n_tiles) * sh.hkv * tile_bytes;
  std::vector<bench::SplitStreamArgs> args(copies);
  unsigned* sink = nullptr;
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned)));
  unsigned* tickets = nullptr;  // split_stream_ticket: per copy and KV head, monotonic
  float* out = nullptr;
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&tickets, sizeof(unsigned) * copies * sh.hkv));
  SINKSCOPE_CUDA_CHECK(cudaMemset(tickets, 0, sizeof(unsigned) * copies * sh.hkv));
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&out, sizeof(float) * sh.hq * sh.d));
  for (auto& a : args) {
    void* kv = nullptr;
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&kv, kv_bytes));
    SINKSCOPE_CUDA_CHECK(cudaMemset(kv, 1, kv_bytes));
    a.kv = kv;
    a.sink = sink;
    a.head_dim = sh.d;
    a.n_kv_heads = sh.hkv;
    a.n_tiles = plan.n_tiles;
    a.tiles_per_split = plan.tiles_per_split;
    a.n_splits = plan.n_splits;
    a.tickets = tickets + sh.hkv * (&a - args.data());
    a.out = out;
  }
  // One timing: `launch(k, stream)` for k = 0 .. per_graph - 1 replayed as a graph.
  auto replayed = [&](auto launch) { return [&, launch] { return graph_time_us(launch, per_graph, 5); }; };
  // The one-kernel structure: the last `tail` arrivals of a KV head merge its partials.
  auto ticket = [&](int tail) {
    return replayed([&, tail](int k, cudaStream_t st) {
      bench::SplitStreamArgs a = args[k % copies];
      a.tail_ctas = tail;
      SINKSCOPE_CUDA_CHECK(bench::launch_split_stream_ticket(a, dc.ps[k % copies], wl, st));
    });
  };
  // One cluster of `ctas` CTAs per KV head, reduced over distributed shared memory.
  auto cluster = [&](int ctas) {
    return replayed([&, ctas](int k, cudaStream_t st) {
      SINKSCOPE_CUDA_CHECK(bench::launch_cluster_stream(args[k % copies], ctas, sh.hq / sh.hkv, st));
    });
  };
  auto ours = [&](int fused) {  // 0: the separate combine kernel, 1: the fused combine
    return [&, fused] {
      tune(&kernels::GpuTuning::decode_fused_combine, fused == 1);
      const double us = replayed([&](int k, cudaStream_t st) {
        check(kernels::launch_attention(dc.ps[k % copies], st));
      })();
      tune(&kernels::GpuTuning::decode_fused_combine, false);
      return us;
    };
  };
  const char* names[] = {"ours_separate_combine", "ours_fused_combine",
                         "split_stream_floor",    "split_stream_combine", "split_stream_ticket8",
                         "cluster_stream_c8",     "cluster_stream_c16",   "sparse70_stream_combine",
                         "read_floor"};
  const std::vector<double> med = alternating_medians(
      kRounds,
      {ours(0), ours(1),
       replayed([&](int k, cudaStream_t st) {
         SINKSCOPE_CUDA_CHECK(bench::launch_split_stream(args[k % copies], st));
       }),
       replayed([&](int k, cudaStream_t st) {
         SINKSCOPE_CUDA_CHECK(
             bench::launch_split_stream_combine(args[k % copies], dc.ps[k % copies], plan, wl, st));
       }),
       ticket(8), cluster(8), cluster(16),
       replayed([&](int k, cudaStream_t st) {
         SINKSCOPE_CUDA_CHECK(bench::launch_sparse_stream_combine(args[k % copies], dc.ps[k % copies],
                                                                  plan, wl, st));
       }),
       replayed([&](int k, cudaStream_t st) {
         SINKSCOPE_CUDA_CHECK(bench::launch_read_floor(args[k % copies].kv, kv_bytes, sink, n_sms, st));
       })});
  std::printf("=== decode floors %s L=%lld (%d splits of %d tiles per KV head; graph-replayed us, "
              "median of %d rounds; GB/s = all K + V bytes / time, also for the sparse row) ===\n",
              sh.name, static_cast<long long>(L), plan.n_splits, plan.tiles_per_split, kRounds);
  for (size_t i = 0; i < med.size(); ++i) {
    std::printf("  %-26s %8.2f us  %6.0f GB/s\n", names[i], med[i], double(kv_bytes) / med[i] * 1e-3);
    emit("decode_floor", sh.name, L, names[i], med[i], 0, double(kv_bytes) / med[i] * 1e-3, 0, 0, 0);
  }
  std::fflush(stdout);
  for (auto& a : args) SINKSCOPE_CUDA_CHECK(cudaFree(const_cast<void*>(a.kv)));
  SINKSCOPE_CUDA_CHECK(cudaFree(sink));
  SINKSCOPE_CUDA_CHECK(cudaFree(tickets));
  SINKSCOPE_CUDA_CHECK(cudaFree(out));
  dc.release();
}

// The dense decode over 64- vs 128-key pages (block_size = the page size = the decode's KV tile):
// the same shape and length with each page size, replayed as graphs in turn, `rounds` times
// alternating, medians. Rows of kind decode_block, variant "b64" / "b128"; a table on stdout.
void bench_decode_block(const Shape& sh, int64_t L, std::mt19937_64& rng) {
  constexpr int kRounds = 3;
  DecodeCopies dc[2];
  for (int b = 0; b < 2; ++b) {
    const HostProblem hp = make_problem(make_spec(sh, L, true, 0, 0, b == 0 ? 64 : 128), rng);
    dc[b] = upload_decode_copies(sh, L, hp, 0.0, rng);
    for (auto& p : dc[b].ps) p.tiles_visited = p.tiles_skipped = nullptr;
  }
  auto replay = [&](DecodeCopies& d) {
    return graph_time_us(
        [&](int k, cudaStream_t st) { check(kernels::launch_attention(d.ps[k % d.copies], st)); },
        std::max(20, d.copies), 5);
  };
  const std::vector<double> med =
      alternating_medians(kRounds, {[&] { return replay(dc[0]); }, [&] { return replay(dc[1]); }});
  for (int b = 0; b < 2; ++b)
    emit("decode_block", sh.name, L, b == 0 ? "b64" : "b128", med[b], 0, dc[b].kv_bytes / med[b] * 1e-3, 0, 0, 0);
  std::printf("=== decode block %s L=%lld: block 64 %.2f us (%.0f GB/s), block 128 %.2f us (%.0f GB/s), "
              "b64/b128 %.3fx ===\n",
              sh.name, static_cast<long long>(L), med[0], dc[0].kv_bytes / med[0] * 1e-3, med[1],
              dc[1].kv_bytes / med[1] * 1e-3, med[0] / med[1]);
  std::fflush(stdout);
  for (auto& d : dc) d.release();
}

// Decode over bf16 vs int8 vs int4 KV pages (AttentionParams::kv_bits, no protected pages): the
// same random problem, K/V quantized on the host with the CPU cache's quantize_kv_row, page
// tables as DeviceProblem's. Bytes counted = what the kernel reads of the cache: bf16 K + V, or
// codes + fp16 scales (2 * L * Hkv * (code bytes + 2 * d / 32)). Rows kind "decode_kvq" in the
// CSV and a table ("=== decode KV formats") on stdout at the end.
struct KvqRow {
  const char* shape;
  int64_t L;
  double us[3], gbps[3];
};
std::vector<KvqRow> g_kvq;

void bench_decode_kvq(const Shape& sh, int64_t L, std::mt19937_64& rng) {
  const HostProblem hp = make_problem(make_spec(sh, L, true, 0, 0), rng);
  const int d = sh.d, hkv = sh.hkv, bc = hp.spec.block_size;
  KvqRow row{sh.name, L, {0, 0, 0}, {0, 0, 0}};
  for (int f = 0; f < 3; ++f) {
    const int bits = f == 0 ? 0 : (f == 1 ? 8 : 4);
    KvQuantFormat fmt;
    fmt.bits = bits ? bits : 8;
    fmt.group = 32;
    const int cb = fmt.code_bytes(d), ns = fmt.scales(d);
    const double bytes = bits ? 2.0 * double(L) * hkv * (cb + 2 * ns) : 2.0 * double(L) * hkv * d * 2;
    // Host codes in logical order [pos][hkv].
    std::vector<uint8_t> kc, vc;
    std::vector<uint16_t> ks, vs;
    if (bits) {
      kc.resize(size_t(L) * hkv * cb);
      vc.resize(kc.size());
      ks.resize(size_t(L) * hkv * ns);
      vs.resize(ks.size());
      std::vector<float> x(static_cast<size_t>(d));
      for (size_t r = 0; r < size_t(L) * hkv; ++r) {
        for (int i = 0; i < d; ++i) x[size_t(i)] = bf2f(hp.k[r * d + size_t(i)]);
        quantize_kv_row(x.data(), d, fmt, &kc[r * cb], &ks[r * ns]);
        for (int i = 0; i < d; ++i) x[size_t(i)] = bf2f(hp.v[r * d + size_t(i)]);
        quantize_kv_row(x.data(), d, fmt, &vc[r * cb], &vs[r * ns]);
      }
    }
    const int copies = std::max(1, int(std::ceil(240e6 / bytes)));
    std::vector<DeviceProblem> dps(static_cast<size_t>(copies));
    std::vector<kernels::AttentionParams> ps(static_cast<size_t>(copies));
    std::vector<void*> extra;
    for (int c = 0; c < copies; ++c) {
      dps[size_t(c)].upload(hp, rng);
      kernels::AttentionParams& p = ps[size_t(c)];
      p = dps[size_t(c)].params(hp, 0.0);
      p.skip_mask = nullptr;
      p.tiles_visited = p.tiles_skipped = nullptr;
      dps[size_t(c)].attach_workspace(p);
      if (!bits) continue;
      const int n_kvt = dps[size_t(c)].n_kvt, pool = n_kvt + 2;
      std::vector<int32_t> table(static_cast<size_t>(n_kvt));
      SINKSCOPE_CUDA_CHECK(cudaMemcpy(table.data(), dps[size_t(c)].pages, table.size() * 4,
                                      cudaMemcpyDeviceToHost));
      std::vector<uint8_t> kcp(size_t(pool) * hkv * bc * cb, 0), vcp(kcp.size(), 0);
      std::vector<uint16_t> ksp(size_t(pool) * hkv * bc * ns, 0), vsp(ksp.size(), 0);
      for (int64_t pos = 0; pos < L; ++pos)
        for (int h = 0; h < hkv; ++h) {
          const size_t r = size_t(pos) * hkv + size_t(h);
          const size_t slot = (size_t(table[size_t(pos / bc)]) * hkv + size_t(h)) * bc + size_t(pos % bc);
          std::memcpy(&kcp[slot * cb], &kc[r * cb], size_t(cb));
          std::memcpy(&vcp[slot * cb], &vc[r * cb], size_t(cb));
          std::memcpy(&ksp[slot * ns], &ks[r * ns], size_t(ns) * 2);
          std::memcpy(&vsp[slot * ns], &vs[r * ns], size_t(ns) * 2);
        }
      auto up = [&](const void* src, size_t n) {
        void* dst = nullptr;
        SINKSCOPE_CUDA_CHECK(cudaMalloc(&dst, n));
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
        extra.push_back(dst);
        return dst;
      };
      p.kv_bits = bits;
      p.k_codes = static_cast<const uint8_t*>(up(kcp.data(), kcp.size()));
      p.v_codes = static_cast<const uint8_t*>(up(vcp.data(), vcp.size()));
      p.k_scales = static_cast<const uint16_t*>(up(ksp.data(), ksp.size() * 2));
      p.v_scales = static_cast<const uint16_t*>(up(vsp.data(), vsp.size() * 2));
    }
    const double us = time_us([&](int i) { check(kernels::launch_attention(ps[size_t(i % copies)], nullptr)); },
                              copies, 7, std::max(20, copies));
    row.us[f] = us;
    row.gbps[f] = bytes / us * 1e-3;
    emit("decode_kvq", sh.name, L, bits == 0 ? "bf16" : (bits == 8 ? "int8" : "int4"), us, 0,
         row.gbps[f], 0, 0, 0);
    for (void* ptr : extra) SINKSCOPE_CUDA_CHECK(cudaFree(ptr));
    for (auto& dp : dps) dp.release();
  }
  g_kvq.push_back(row);
}

void print_kvq_table() {
  if (g_kvq.empty()) return;
  std::printf("=== decode KV formats (dense decode, one query, block 64; GB/s = cache bytes read: "
              "bf16 K+V, or codes + fp16 scales) ===\n");
  std::printf("| shape | L | bf16 us | int8 us | int4 us | bf16 GB/s | int8 GB/s | int4 GB/s | "
              "int8 speed-up | int4 speed-up |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
  for (const KvqRow& r : g_kvq)
    std::printf("| %s | %lldK | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f | %.2fx | %.2fx |\n",
                r.shape, (long long)(r.L / 1024), r.us[0], r.us[1], r.us[2], r.gbps[0], r.gbps[1],
                r.gbps[2], r.us[0] / r.us[1], r.us[0] / r.us[2]);
  std::printf("=== end decode KV formats ===\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (!have_gpu("bench_attention")) return 0;
  if (argc > 1) g_csv = std::fopen(argv[1], "w");
  const bool quick = argc > 2 && std::string(argv[2]) == "--quick";
  std::mt19937_64 rng(1234);
  cudaDeviceProp prop{};
  SINKSCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  if (argc > 5 && std::string(argv[2]) == "--profile-prefill-sparse") {
    // `--profile-prefill-sparse D L QUIET [lazy]`: one dense and one sparse (lambda 1e-2) launch
    // of the default prefill kernels on one sink + quiet-tile problem, for ncu; with `lazy` the
    // sparse launch runs the wgmma lazy-V kernel (prefer_ws_sparse = false) instead of the
    // warp-specialised sparse one.
    const bool lazy = argc > 6 && std::string(argv[6]) == "lazy";
    const Shape& sh = std::atoi(argv[3]) == 64 ? kShapes[0] : kShapes[1];
    const int64_t L = std::atoll(argv[4]);
    const HostProblem hp = make_problem(make_spec(sh, L, false, 6.0, std::atof(argv[5])), rng);
    DeviceProblem dp;
    dp.upload(hp, rng);
    for (double lambda : {0.0, 1e-2}) {
      kernels::AttentionParams p = dp.params(hp, lambda);
      p.skip_mask = nullptr;
      p.prefer_ws_sparse = !lazy;
      check(kernels::launch_attention(p, nullptr));
    }
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    dp.release();
    return 0;
  }
  if (argc > 5 && std::string(argv[2]) == "--profile-decode") {
    // `--profile-decode D L LAMBDA`: three launches of one decode problem (shape by head dim;
    // LAMBDA > 0: sink + 70 % quiet tiles, sparse), for ncu.
    const Shape& sh = std::atoi(argv[3]) == 64 ? kShapes[0] : kShapes[1];
    const int64_t L = std::atoll(argv[4]);
    const double lambda = std::atof(argv[5]);
    const HostProblem hp = make_problem(make_spec(sh, L, true, lambda > 0 ? 6.0 : 0, lambda > 0 ? 0.7 : 0), rng);
    DeviceProblem dp;
    dp.upload(hp, rng);
    kernels::AttentionParams p = dp.params(hp, lambda);
    p.skip_mask = nullptr;
    dp.attach_workspace(p);
    for (int i = 0; i < 3; ++i) check(kernels::launch_attention(p, nullptr));
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    dp.release();
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--consumers") {  // two vs three consumers at d = 64
    std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
    bench_ws_consumers(rng);
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--prefill") {  // the dense prefill rows alone
    std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
    for (const Shape& sh : kShapes)
      for (int64_t L : kLens) bench_prefill(sh, L, rng);
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--decode") {  // the decode rows alone
    std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
    for (const Shape& sh : kShapes)
      for (int64_t L : kLens) bench_decode(sh, L, rng, 0, 0, 0, "decode");
    for (const Shape& sh : kShapes)
      for (int64_t L : {16384, 65536})
        for (double quiet : {0.7}) {
          bench_decode(sh, L, rng, 6.0, quiet, 0, "decode_sparse");
          bench_decode(sh, L, rng, 6.0, quiet, 1e-2, "decode_sparse");
        }
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--decode-ctas") {
    // The decode's split plan aimed at 1..4 CTAs per SM (GpuTuning::decode_ctas_per_sm; 2 is the
    // default), dense, both shapes, 16K..64K: rows of kind decode_ctas<N>.
    std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
    for (const Shape& sh : kShapes)
      for (int64_t L : {16384, 32768, 65536})
        for (int c = 1; c <= 4; ++c) {
          tune(&kernels::GpuTuning::decode_ctas_per_sm, c);  // exactly c per SM
          bench_decode(sh, L, rng, 0, 0, 0, ("decode_ctas" + std::to_string(c)).c_str());
          tune(&kernels::GpuTuning::decode_ctas_per_sm, 0);
        }
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--prefill-sparse") {
    // `--prefill-sparse [BLOCK]`: the sparse prefill rows alone (8K..64K), block 64 (default) or 128.
    const int block = argc > 3 ? std::atoi(argv[3]) : 64;
    if (block != 64 && block != 128) {
      std::fprintf(stderr, "--prefill-sparse: block must be 64 or 128, not %s\n", argv[3]);
      return 2;
    }
    std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
    for (const Shape& sh : kShapes)
      for (int64_t L : kLens)
        if (L >= 8192) bench_prefill_sparse(sh, L, rng, block);
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--skip-sweep") {
    // `--skip-sweep D L [BLOCK]`: bench_skip_sweep alone.
    const int d = argc > 3 ? std::atoi(argv[3]) : 0, block = argc > 5 ? std::atoi(argv[5]) : 64;
    if (argc < 5 || (d != 64 && d != 128) || std::atoll(argv[4]) < 1 || (block != 64 && block != 128)) {
      std::fprintf(stderr, "usage: bench_attention OUT --skip-sweep D L [BLOCK] (D 64 or 128, L >= 1, "
                           "BLOCK 64 or 128)\n");
      return 2;
    }
    std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
    bench_skip_sweep(d == 64 ? kShapes[0] : kShapes[1], std::atoll(argv[4]), rng, block);
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--decode-block") {  // 64- vs 128-key pages, 4K..64K
    std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
    for (const Shape& sh : kShapes)
      for (int64_t L : kLens) bench_decode_block(sh, L, rng);
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--decode-floors") {  // the decode against its floors
    std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
    for (const Shape& sh : kShapes)
      for (int64_t L : kLens) bench_decode_floors(sh, L, rng);
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--decode-split") {  // the split policies, 4K..64K
    std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
    for (const Shape& sh : kShapes)
      for (int64_t L : kLens) bench_decode_split(sh, L, rng);
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "--profile") {  // a few launches for ncu
    bench_decode(kShapes[1], 65536, rng, 0, 0, 0, "decode");
    bench_prefill(kShapes[1], 16384, rng);
    return 0;
  }
  std::printf("kind,shape,L,variant,time_us,tflops,gbps,skip_frac,lambda,quiet\n");
  if (argc > 2 && std::string(argv[2]) == "--kvq") {  // the KV-format table alone
    for (const Shape* sh : {&kShapes[1], &kShapes[0]})
      for (int64_t L : {16384, 32768, 65536}) bench_decode_kvq(*sh, L, rng);
    print_kvq_table();
    if (g_csv) std::fclose(g_csv);
    return 0;
  }
  for (const Shape& sh : kShapes)
    for (int64_t L : kLens) {
      if (quick && L > 16384) continue;
      bench_prefill(sh, L, rng);
    }
  for (const Shape& sh : kShapes)
    for (int64_t L : kLens) bench_decode(sh, L, rng, 0, 0, 0, "decode");
  // Issue 4 asks for the sparse prefill speed-up over 8K..64K.
  for (const Shape& sh : kShapes)
    for (int64_t L : {8192, 16384, 32768, 65536}) {
      if (quick && L > 16384) continue;
      bench_prefill_sparse(sh, L, rng);
    }
  // ... as a function of the measured skip fraction: quiet 0 .. 1 at one length per shape
  // (d = 64 at 32K, d = 128 at 16K; the torch script adds cuDNN's dense time at that length).
  if (!quick) {
    bench_skip_sweep(kShapes[0], 32768, rng);
    bench_skip_sweep(kShapes[1], 16384, rng);
  }
  for (const Shape& sh : kShapes)
    for (int64_t L : {16384, 65536})
      for (double quiet : {0.5, 0.7, 0.9}) {
        bench_decode(sh, L, rng, 6.0, quiet, 0, "decode_sparse");
        bench_decode(sh, L, rng, 6.0, quiet, 1e-2, "decode_sparse");
      }
  // bf16 vs int8 vs int4 KV pages: (d=128, 32 q / 8 kv) and (d=64, 9 q / 3 kv) at 16K..64K.
  for (const Shape* sh : {&kShapes[1], &kShapes[0]})
    for (int64_t L : {16384, 32768, 65536}) {
      if (quick && L > 16384) continue;
      bench_decode_kvq(*sh, L, rng);
    }
  print_kvq_table();
  if (g_csv) std::fclose(g_csv);
  return 0;
}
