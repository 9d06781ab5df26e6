// SPDX-License-Identifier: Apache-2.0
// GPU test of the attention kernel family against the float64 CPU reference of the same skip
// rule at the same tile size (attention_reference.h). Plain executable: "SKIP: ..." and exit 0
// without a GPU; exit 1 on any failure.
//
// Each case: fresh random bf16 inputs (seed printed), a shuffled page table with NaN-filled
// unused pages, output poisoned with NaN before every launch. Checks:
//   - no NaN anywhere in the output (every element written, nothing read outside the cache);
//   - ||out - ref|| / ||ref|| <= 1e-2 over the checked rows (bf16 inputs, bf16 P in the PV
//     product and bf16 output: the expected error is ~3e-3);
//   - skip mask == reference mask on every tile whose deciding margin is > 1e-3 (natural-log
//     units, relative to max(1, |m|)); ambiguous tiles are reported, and the reference output
//     then follows the GPU's decision;
//   - per-head counters: visited == causally visible tiles == mask entries, skipped == 1s;
//   - lambda = 0: the sparse kernels (forced) equal the dense kernel bit for bit;
//   - lambda > 0: measure-only mode (skip_softmax_exp = false) equals dense bit for bit with the
//     same mask, and the eager-V sparse prefill equals the lazy-V one bit for bit.
//   - decode with the length (and log2 lambda) read from device memory, under several upper
//     bounds, equals the host-length launch bit for bit: output, counters, and the mask (whose
//     row then spans the bound; tiles past the length stay "not visible").
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/attention_problem.h"
#include "tests/gpu/attention_reference.h"

using namespace sinkscope;
using namespace sinkscope::testing;

namespace {

constexpr double kTolerance = 1e-2;

struct Case {
  ProblemSpec spec;
  double lambda = 0;
  int max_qtiles = 1 << 30;  // query tiles checked per head (spread over the sequence)
  int max_heads = 1 << 30;   // heads checked (spread over the groups)
};

struct Totals {
  int cases = 0, failed = 0, alt_cases = 0;
  double worst_err = 0, worst_alt_err = 0;
  int64_t tiles_compared = 0, ambiguous = 0, skipped_ref = 0;
};

template <class F>
void parallel_for(int n, F&& f) {
  const int nt = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 32u));
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < std::min(nt, n); ++i)
    pool.emplace_back([&] {
      for (int j = next++; j < n; j = next++) f(j);
    });
  for (auto& t : pool) t.join();
}

struct RunOut {
  std::vector<uint16_t> o;
  std::vector<uint8_t> mask;
  std::vector<uint64_t> visited, skipped;
  std::string error;
};

// The skip mask p.skip_mask covers: one row of ceil(kv_len / block_size) tiles per (head, query
// tile); with a device-side length, kv_len is the bound.
size_t mask_bytes_of(const kernels::AttentionParams& p) {
  const size_t heads = p.mask_head < 0 ? size_t(p.n_q_heads) : 1;
  const size_t qt = (size_t(p.n_q_tokens) + 127) / 128;
  return heads * qt * size_t((p.kv_len + p.block_size - 1) / p.block_size);
}

RunOut run(DeviceProblem& dp, kernels::AttentionParams p) {
  RunOut r;
  dp.attach_workspace(p);
  SINKSCOPE_CUDA_CHECK(cudaMemset(dp.o, 0xff, dp.o_elems * 2));  // bf16 0xffff = NaN
  SINKSCOPE_CUDA_CHECK(cudaMemset(dp.visited, 0, p.n_q_heads * 8));
  SINKSCOPE_CUDA_CHECK(cudaMemset(dp.skipped, 0, p.n_q_heads * 8));
  const kernels::AttentionStatus st = kernels::launch_attention(p, nullptr);
  if (!st.ok) {
    r.error = st.message;
    return r;
  }
  SINKSCOPE_CUDA_CHECK(cudaGetLastError());
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  r.o.resize(dp.o_elems);
  r.mask.resize(p.skip_mask ? mask_bytes_of(p) : 0);
  r.visited.resize(p.n_q_heads);
  r.skipped.resize(p.n_q_heads);
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(r.o.data(), dp.o, dp.o_elems * 2, cudaMemcpyDeviceToHost));
  if (p.skip_mask)
    SINKSCOPE_CUDA_CHECK(
        cudaMemcpy(r.mask.data(), p.skip_mask, r.mask.size(), cudaMemcpyDeviceToHost));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(r.visited.data(), dp.visited, p.n_q_heads * 8, cudaMemcpyDeviceToHost));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(r.skipped.data(), dp.skipped, p.n_q_heads * 8, cudaMemcpyDeviceToHost));
  return r;
}

std::string describe(const Case& c) {
  const ProblemSpec& s = c.spec;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "nq=%d kv_len=%lld q_start=%lld heads=%d/%d d=%d block=%d lambda=%g sink=%g quiet=%g",
                s.n_q_tokens, (long long)s.kv_len, (long long)s.q_start, s.n_q_heads,
                s.n_kv_heads, s.head_dim, s.block_size, c.lambda, s.sink_logit, s.quiet_fraction);
  return buf;
}

bool run_case(const Case& c, std::mt19937_64& rng, Totals& tot) {
  const ProblemSpec& s = c.spec;
  std::vector<std::string> errs;
  auto fail = [&](std::string m) {
    if (errs.size() < 8) errs.push_back(std::move(m));
  };
  const HostProblem hp = make_problem(s, rng);
  DeviceProblem dp;
  dp.upload(hp, rng);
  kernels::AttentionParams p = dp.params(hp, c.lambda);
  const bool decode = s.n_q_tokens == 1;
  const int n_qt = decode ? 1 : (s.n_q_tokens + 127) / 128;
  const int n_kvt = dp.n_kvt;
  const RunOut main = run(dp, p);
  if (!main.error.empty()) fail("launch: " + main.error);
  // Prefill also on the portable mma.sync kernels (the main run takes wgmma on sm_90).
  RunOut alt;
  const bool has_alt = !decode && kernels::attention_uses_wgmma(p);
  if (has_alt) {
    kernels::AttentionParams q = p;
    q.prefer_wgmma = false;
    alt = run(dp, q);
    if (!alt.error.empty()) fail("launch (mma.sync): " + alt.error);
  }

  double err2 = 0, ref2 = 0, alt_err2 = 0;
  int64_t compared = 0, amb = 0, refskip = 0;
  if (main.error.empty()) {
    for (size_t i = 0; i < main.o.size(); ++i)
      if (std::isnan(bf2f(main.o[i]))) {
        fail("NaN / unwritten output at element " + std::to_string(i));
        break;
      }
    // Counters against the mask and against the causal tile count.
    for (int h = 0; h < s.n_q_heads; ++h) {
      uint64_t vis = 0, sk = 0, expect = 0;
      for (int qt = 0; qt < n_qt; ++qt) {
        const int64_t last = std::min<int64_t>(s.q_start + std::min<int64_t>(s.n_q_tokens, (qt + 1) * 128) - 1, s.kv_len - 1);
        expect += last / s.block_size + 1;
        for (int t = 0; t < n_kvt; ++t) {
          const uint8_t m = main.mask[(size_t(h) * n_qt + qt) * n_kvt + t];
          vis += m != kernels::kMaskNotVisible;
          sk += m == 1;
        }
      }
      if (main.visited[h] != vis || vis != expect || main.skipped[h] != sk)
        fail("counters head " + std::to_string(h) + ": visited " + std::to_string(main.visited[h]) +
             " mask " + std::to_string(vis) + " expected " + std::to_string(expect) + ", skipped " +
             std::to_string(main.skipped[h]) + " mask " + std::to_string(sk));
    }
    // Reference on a spread of (head, query tile) pairs.
    struct Job { int h, qt; };
    std::vector<Job> jobs;
    const int hstep = std::max(1, s.n_q_heads / std::min(s.n_q_heads, c.max_heads));
    const int qstep = std::max(1, n_qt / std::min(n_qt, c.max_qtiles));
    for (int h = 0; h < s.n_q_heads; h += hstep)
      for (int qt = n_qt - 1; qt >= 0; qt -= qstep) jobs.push_back({h, qt});
    std::vector<RefTile> refs(jobs.size());
    parallel_for(int(jobs.size()), [&](int j) {
      const int64_t row0 = int64_t(jobs[j].qt) * 128;
      const int rows = decode ? 1 : int(std::min<int64_t>(128, s.n_q_tokens - row0));
      const uint8_t* gm = &main.mask[(size_t(jobs[j].h) * n_qt + jobs[j].qt) * n_kvt];
      refs[j] = reference_query_tile(hp, jobs[j].h, row0, rows, c.lambda, gm);
    });
    for (size_t j = 0; j < jobs.size(); ++j) {
      const RefTile& r = refs[j];
      const uint8_t* gm = &main.mask[(size_t(jobs[j].h) * n_qt + jobs[j].qt) * n_kvt];
      for (int t = 0; t < r.n_visible_tiles; ++t) {
        ++compared;
        refskip += r.skip[t];
        if (r.ambiguous[t]) {
          ++amb;
          continue;
        }
        if (gm[t] != r.skip[t])
          fail("mask head " + std::to_string(jobs[j].h) + " qtile " + std::to_string(jobs[j].qt) +
               " kv tile " + std::to_string(t) + ": gpu " + std::to_string(gm[t]) + " ref " +
               std::to_string(r.skip[t]));
        if (has_alt && alt.error.empty() &&
            alt.mask[(size_t(jobs[j].h) * n_qt + jobs[j].qt) * n_kvt + t] != r.skip[t])
          fail("mma.sync mask differs from the reference at kv tile " + std::to_string(t));
      }
      for (int t = r.n_visible_tiles; t < n_kvt; ++t)
        if (gm[t] != kernels::kMaskNotVisible) fail("mask marks an invisible tile");
      const int64_t row0 = int64_t(jobs[j].qt) * 128;
      const int rows = int(r.out.size() / s.head_dim);
      for (int rr = 0; rr < rows; ++rr)
        for (int i = 0; i < s.head_dim; ++i) {
          const double ref = r.out[size_t(rr) * s.head_dim + i];
          const double got =
              bf2f(main.o[((row0 + rr) * s.n_q_heads + jobs[j].h) * s.head_dim + i]);
          err2 += (got - ref) * (got - ref);
          ref2 += ref * ref;
          if (has_alt && alt.error.empty()) {
            const size_t idx = ((row0 + rr) * s.n_q_heads + jobs[j].h) * s.head_dim + i;
            const double ga = bf2f(alt.o[idx]);
            alt_err2 += (ga - ref) * (ga - ref);
            if (std::isnan(ga)) alt_err2 = INFINITY;
          }
        }
    }
  }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (!(rel <= kTolerance)) fail("relative error " + std::to_string(rel));
  if (has_alt) {
    const double arel = ref2 > 0 ? std::sqrt(alt_err2 / ref2) : std::sqrt(alt_err2);
    if (!(arel <= kTolerance)) fail("mma.sync relative error " + std::to_string(arel));
    for (uint16_t v : alt.o)
      if (std::isnan(bf2f(v))) {
        fail("mma.sync: NaN / unwritten output");
        break;
      }
    tot.alt_cases++;
    tot.worst_alt_err = std::max(tot.worst_alt_err, arel);
  }

  // Variant identities.
  auto expect_same = [&](const RunOut& a, const RunOut& b, const char* what, bool mask_too) {
    if (!a.error.empty() || !b.error.empty()) return fail(std::string(what) + ": launch failed: " + a.error + b.error);
    if (a.o != b.o) fail(std::string(what) + ": outputs differ bitwise");
    if (mask_too && a.mask != b.mask) fail(std::string(what) + ": masks differ");
  };
  if (main.error.empty()) {
    if (c.lambda == 0) {
      kernels::AttentionParams q = p;
      q.force_sparse_kernel = true;
      expect_same(main, run(dp, q), "forced sparse (lazy V) at lambda=0", true);
      if (!decode) {
        q.skip_value_load = false;
        expect_same(main, run(dp, q), "forced sparse (eager V) at lambda=0", true);
      }
    } else {
      const RunOut dense = run(dp, dp.params(hp, 0.0));
      kernels::AttentionParams q = p;
      q.skip_softmax_exp = false;
      const RunOut measure = run(dp, q);
      expect_same(dense, measure, "measure-only vs dense", false);
      if (measure.mask != main.mask) fail("measure-only mask differs from the sparse mask");
      if (!decode) {
        q = p;
        q.skip_value_load = false;
        expect_same(main, run(dp, q), "eager-V vs lazy-V sparse", true);
      }
    }
  }
  dp.release();

  ++tot.cases;
  tot.worst_err = std::max(tot.worst_err, rel);
  tot.tiles_compared += compared;
  tot.ambiguous += amb;
  tot.skipped_ref += refskip;
  if (!errs.empty()) {
    ++tot.failed;
    if (tot.failed > 20) return false;  // enough detail
    std::printf("FAIL %s (%s)\n", describe(c).c_str(),
                kernels::variant_name(kernels::attention_variant(p)));
    for (auto& e : errs) std::printf("     %s\n", e.c_str());
    return false;
  }
  return true;
}

// Decode of one problem with the host length L vs the same problem with L (and log2 lambda) in
// device memory and kv_len = each bound >= L: bitwise equal output, equal counters, equal mask
// on the L tiles and "not visible" past them. Returns the number of failed launches.
int run_device_len_case(const ProblemSpec& s, double lambda, const std::vector<int64_t>& bounds,
                        std::mt19937_64& rng, int& launches) {
  const HostProblem hp = make_problem(s, rng);
  DeviceProblem dp;
  dp.upload(hp, rng);
  const kernels::AttentionParams p = dp.params(hp, lambda);
  const RunOut ref = run(dp, p);
  int32_t* len_dev = nullptr;
  float* l2_dev = nullptr;
  uint8_t* mask_dev = nullptr;
  const int32_t len = int32_t(s.kv_len);
  const float l2 = p.log2_lambda;
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&len_dev, 4));
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&l2_dev, 4));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(len_dev, &len, 4, cudaMemcpyHostToDevice));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(l2_dev, &l2, 4, cudaMemcpyHostToDevice));
  const int bc = s.block_size;
  const int64_t tiles = (s.kv_len + bc - 1) / bc;
  int failed = 0;
  for (int64_t bound : bounds) {
    ++launches;
    std::vector<std::string> errs;
    kernels::AttentionParams q = p;
    q.kv_len = bound;
    q.q_start = 0;  // ignored with a device-side length
    q.kv_len_dev = len_dev;
    q.log2_lambda_dev = l2_dev;
    // The host value only selects dense vs sparse: a different finite value must not be used.
    if (lambda > 0) q.log2_lambda = -0.5f;
    const int64_t btiles = (bound + bc - 1) / bc;
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&mask_dev, size_t(s.n_q_heads) * btiles));
    q.skip_mask = mask_dev;
    const RunOut got = run(dp, q);
    SINKSCOPE_CUDA_CHECK(cudaFree(mask_dev));
    mask_dev = nullptr;
    if (!ref.error.empty() || !got.error.empty()) {
      errs.push_back("launch failed: " + ref.error + got.error);
    } else {
      if (got.o != ref.o) errs.push_back("output differs bitwise from the host-length launch");
      if (got.visited != ref.visited || got.skipped != ref.skipped)
        errs.push_back("counters differ from the host-length launch");
      bool mask_ok = true;
      for (int h = 0; h < s.n_q_heads; ++h)
        for (int64_t t = 0; t < btiles; ++t) {
          const uint8_t g = got.mask[size_t(h) * btiles + t];
          const uint8_t want =
              t < tiles ? ref.mask[size_t(h) * tiles + t] : kernels::kMaskNotVisible;
          mask_ok = mask_ok && g == want;
        }
      if (!mask_ok) errs.push_back("mask differs from the host-length launch");
    }
    if (!errs.empty()) {
      ++failed;
      std::printf("FAIL decode device length: L=%lld bound=%lld heads=%d/%d d=%d block=%d lambda=%g\n",
                  (long long)s.kv_len, (long long)bound, s.n_q_heads, s.n_kv_heads, s.head_dim,
                  bc, lambda);
      for (auto& e : errs) std::printf("     %s\n", e.c_str());
    }
  }
  SINKSCOPE_CUDA_CHECK(cudaFree(len_dev));
  SINKSCOPE_CUDA_CHECK(cudaFree(l2_dev));
  dp.release();
  return failed;
}

void report(const char* name, const Totals& t, double secs) {
  std::printf("%-28s cases %4d  failed %d  worst rel err %.2e  tiles %lld (ref skipped %.1f%%, "
              "ambiguous %lld)  %.1fs\n",
              name, t.cases, t.failed, t.worst_err, (long long)t.tiles_compared,
              t.tiles_compared ? 100.0 * t.skipped_ref / t.tiles_compared : 0.0,
              (long long)t.ambiguous, secs);
  if (t.alt_cases)
    std::printf("%-28s   also on mma.sync: %d cases, worst rel err %.2e\n", "", t.alt_cases,
                t.worst_alt_err);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (!have_gpu("test_attention_gpu")) return 0;
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const uint64_t seed = std::random_device{}();
  std::printf("test_attention_gpu: seed %llu%s\n", (unsigned long long)seed, quick ? " (quick)" : "");
  std::mt19937_64 rng(seed);
  const int gqa[] = {1, 3, 4, 8};
  const double lambdas[] = {0.0, 1e-3, 1e-2, 0.1};
  int failed = 0;

  auto spec = [](int nq, int64_t kv, int64_t q0, int hq, int hkv, int d, int bc, double sink,
                 double quiet) {
    ProblemSpec s;
    s.n_q_tokens = nq;
    s.kv_len = kv;
    s.q_start = q0;
    s.n_q_heads = hq;
    s.n_kv_heads = hkv;
    s.head_dim = d;
    s.block_size = bc;
    s.sink_logit = sink;
    s.quiet_fraction = quiet;
    s.loud_scale = 2.0;
    return s;
  };
  // Alternate input styles: plain random, and sink + quiet tiles (real skipping).
  int style = 0;
  auto sink_of = [&] { return (style % 2) ? 6.0 : 0.0; };
  auto quiet_of = [&] { return (style++ % 2) ? 0.5 : 0.0; };

  // ---- prefill, every tile checked ----
  {
    Totals t;
    auto t0 = std::chrono::steady_clock::now();
    const int64_t lens[] = {1, 17, 64, 129, 1000};
    for (int64_t L : lens)
      for (int d : {64, 128})
        for (int g : gqa)
          for (int bc : {64, 128})
            for (double lam : lambdas) {
              if (quick && (bc == 128 || g == 3)) continue;
              Case c;
              c.spec = spec(int(L), L, 0, g * (g == 1 ? 2 : 1), g == 1 ? 2 : 1, d, bc, sink_of(), quiet_of());
              c.lambda = lam;
              failed += !run_case(c, rng, t);
            }
    // Chunked prefill: the queries are the last tokens of a longer cache.
    for (double lam : lambdas) {
      Case c;
      c.spec = spec(100, 1000, 900, 4, 1, 64, 64, 6.0, 0.5);
      c.lambda = lam;
      failed += !run_case(c, rng, t);
      c.spec = spec(300, 4096, 3796, 8, 1, 128, 128, 6.0, 0.5);
      failed += !run_case(c, rng, t);
    }
    report("prefill L<=1000 (+chunked)", t,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // ---- prefill, long: sampled query tiles ----
  {
    Totals t;
    auto t0 = std::chrono::steady_clock::now();
    for (int d : {64, 128})
      for (int g : gqa)
        for (int bc : {64, 128})
          for (double lam : {0.0, 1e-2}) {
            if (quick && bc == 128) continue;
            Case c;
            c.spec = spec(4096, 4096, 0, g, 1, d, bc, sink_of(), quiet_of());
            c.lambda = lam;
            c.max_qtiles = 3;
            failed += !run_case(c, rng, t);
          }
    struct Big { int64_t L; int d, g, bc; double lam; };
    const Big bigs[] = {{16384, 64, 3, 64, 1e-2},  {16384, 128, 8, 128, 1e-3},
                        {16384, 128, 4, 64, 0.1},  {16384, 64, 1, 128, 0.0},
                        {65536, 64, 3, 64, 1e-2},  {65536, 128, 8, 128, 1e-3}};
    for (const Big& b : bigs) {
      if (quick && b.L > 16384) continue;
      Case c;
      c.spec = spec(int(b.L), b.L, 0, b.g, 1, b.d, b.bc, 6.0, 0.7);
      c.lambda = b.lam;
      c.max_qtiles = 2;
      c.max_heads = 2;
      failed += !run_case(c, rng, t);
    }
    report("prefill L=4K..64K (sampled)", t,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // ---- decode ----
  {
    Totals t;
    auto t0 = std::chrono::steady_clock::now();
    const int64_t lens[] = {1, 2, 63, 64, 65, 1000, 4096, 16384, 65536};
    for (int64_t L : lens)
      for (int d : {64, 128})
        for (int g : gqa)
          for (int bc : {64, 128})
            for (double lam : lambdas) {
              if (quick && (bc == 128 || L > 16384)) continue;
              if (L >= 16384 && (g == 3 || g == 4 || lam == 1e-3 || lam == 0.1)) continue;
              Case c;
              const int hkv = L >= 16384 ? 1 : 2;
              c.spec = spec(1, L, L - 1, g * hkv, hkv, d, bc, sink_of(), quiet_of());
              c.lambda = lam;
              failed += !run_case(c, rng, t);
            }
    // A query that does not sit at the end of the cache.
    for (double lam : lambdas) {
      Case c;
      c.spec = spec(1, 5000, 4321, 8, 2, 128, 64, 6.0, 0.5);
      c.lambda = lam;
      failed += !run_case(c, rng, t);
    }
    report("decode L=1..64K", t,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // ---- decode with the length in device memory (one CUDA graph for many positions) ----
  {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int64_t> lens = {1, 2, 63, 64, 65, 129, 1000, 4096, 5633, 11265};
    std::uniform_real_distribution<double> logu(0.0, std::log(65536.0));
    for (int i = 0; i < (quick ? 4 : 10); ++i) lens.push_back(int64_t(std::exp(logu(rng))) + 1);
    int launches = 0, dev_failed = 0, n_cases = 0;
    for (int64_t L : lens) {
      if (L > 65536) L = 65536;
      if (quick && L > 16384) continue;
      const int d = (rng() & 1) ? 64 : 128, bc = (rng() & 1) ? 64 : 128;
      const int g = gqa[rng() % 4];
      const int hkv = L >= 16384 ? 1 : 3;
      const double lam = (n_cases % 3 == 0) ? 0.0 : (n_cases % 3 == 1 ? 1e-2 : 1e-3);
      // Bounds: exactly L, the next power of two, L + a few tiles, and 64K.
      int64_t p2 = 1;
      while (p2 < L) p2 *= 2;
      std::vector<int64_t> bounds = {L, std::max<int64_t>(p2, 512), L + 1 + int64_t(rng() % 700)};
      if (!quick && L <= 65536) bounds.push_back(65536);
      ProblemSpec ps = spec(1, L, L - 1, g * hkv, hkv, d, bc, sink_of(), quiet_of());
      dev_failed += run_device_len_case(ps, lam, bounds, rng, launches);
      ++n_cases;
    }
    std::printf("%-28s cases %4d  launches %d  failed %d  %.1fs\n", "decode device length", n_cases,
                launches, dev_failed,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    failed += dev_failed;
  }
  std::printf("%s: %d failed case(s)\n", failed ? "FAIL" : "PASS", failed);
  return failed ? 1 : 0;
}
