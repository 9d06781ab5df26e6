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
//   - lambda = 0: the sparse kernels (forced) equal the dense kernel bit for bit (sm_90 prefill:
//     warp-specialised sparse vs warp-specialised dense, and the wgmma kernels with
//     prefer_ws = false);
//   - lambda > 0: skip_softmax_exp = false (skipped tiles' exp() kept in the row sums, P V and V
//     skipped) has the same mask and counters and matches the float64 reference with keep_exp
//     (<= 1e-2); the eager-V sparse prefill equals the lazy-V one bit for bit, in both modes
//     (attention_prefill_kernel; prefer_ws = false on sm_90);
//   - sm_90 prefill, dense and sparse: the warp-specialised kernel is the main run, the wgmma
//     kernel (prefer_ws = false) the alternative: <= 1e-2, its mask equal to the reference off
//     the ambiguous tiles, the same visible tiles, its skipped counter equal to its mask;
//   - skip_softmax_exp true and false against the engine's own CPU attention
//     (engine/backend/cpu_attention.cpp, float32, the CPU backend's code) on the same bf16 inputs.
//   - quantized KV (int8 / int4 pages, protected bf16 pages, run_quant_case): bit-exact against
//     the bf16 kernels on the dequantised values, <= 1e-2 against the float64 reference;
//   - decode with the length (and log2 lambda) read from device memory, under several upper
//     bounds, with the separate and the fused combine, equals the host-length launch (separate
//     combine) bit for bit: output, counters, and the mask (whose row then spans the bound;
//     tiles past the length stay "not visible");
//   - decode after a PDL predecessor (pdl_writer.cu) that writes the newest cache row while the
//     decode's pre-wait part runs: bit for bit the decode after a plain upload of that row
//     (run_pdl_predecessor_cases).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/backend/cpu_attention.h"
#include "engine/cache/kv_quant.h"
#include "engine/util/thread_pool.h"
#include "kernels/ops.h"
#include "tests/gpu/attention_problem.h"
#include "tests/gpu/attention_reference.h"
#include "tests/gpu/pdl_writer.h"

using namespace sinkscope;
using namespace sinkscope::testing;

namespace {

// A problem of nq queries from position q0 over kv keys; sink > 0 / quiet > 0: sink + quiet
// tiles (real skipping), loud tiles scaled by 2.
ProblemSpec spec(int nq, int64_t kv, int64_t q0, int hq, int hkv, int d, int bc, double sink,
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
}


constexpr double kTolerance = 1e-2;
// Rows of one prefill query tile (the kernels' and the CPU's skip-vote and mask granularity).
constexpr int kQt = kernels::kPrefillQueryTile;

struct Case {
  ProblemSpec spec;
  double lambda = 0;
  int max_qtiles = 1 << 30;  // query tiles checked per head (spread over the sequence)
  int max_heads = 1 << 30;   // heads checked (spread over the groups)
};

struct Totals {
  int cases = 0, failed = 0, alt_cases = 0, keep_cases = 0, ws_cases = 0;
  double worst_err = 0, worst_alt_err = 0, worst_keep_err = 0, worst_wg_err = 0;
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
  const size_t qt = (size_t(p.n_q_tokens) + kQt - 1) / kQt;
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
  const int n_qt = decode ? 1 : (s.n_q_tokens + kQt - 1) / kQt;
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
  // Prefill on sm_90, dense and sparse, runs the warp-specialised kernel
  // (attention_prefill_ws.cuh) as the main run; the wgmma kernel it replaces (prefer_ws = false)
  // is checked against the same reference (sparse: its mask off the ambiguous tiles), and it is
  // the base of the bitwise identities among the wgmma kernels below.
  const bool uses_ws = !decode && kernels::attention_uses_warp_specialized(p);
  const bool sparse_run = c.lambda > 0;  // (force_sparse_kernel is off in the main run)
  const char* main_kernel = decode ? "decode" : uses_ws ? "warp-specialized" : has_alt ? "wgmma" : "mma.sync";
  RunOut wg;
  if (uses_ws) {
    kernels::AttentionParams q = p;
    q.prefer_ws = false;
    wg = run(dp, q);
    if (!wg.error.empty()) fail("launch (wgmma, prefer_ws=false): " + wg.error);
  }

  double err2 = 0, ref2 = 0, alt_err2 = 0, wg_err2 = 0;
  int64_t compared = 0, amb = 0, refskip = 0;
  if (main.error.empty()) {
    for (size_t i = 0; i < main.o.size(); ++i)
      if (std::isnan(bf2f(main.o[i]))) {
        fail(std::string(main_kernel) + ": NaN / unwritten output at element " + std::to_string(i));
        break;
      }
    // Counters against the mask and against the causal tile count.
    for (int h = 0; h < s.n_q_heads; ++h) {
      uint64_t vis = 0, sk = 0, expect = 0;
      for (int qt = 0; qt < n_qt; ++qt) {
        const int64_t last = std::min<int64_t>(s.q_start + std::min<int64_t>(s.n_q_tokens, (qt + 1) * kQt) - 1, s.kv_len - 1);
        expect += last / s.block_size + 1;
        for (int t = 0; t < n_kvt; ++t) {
          const uint8_t m = main.mask[(size_t(h) * n_qt + qt) * n_kvt + t];
          vis += m != kernels::kMaskNotVisible;
          sk += m == 1;
        }
      }
      if (main.visited[h] != vis || vis != expect || main.skipped[h] != sk)
        fail(std::string(main_kernel) + ": counters head " + std::to_string(h) + ": visited " + std::to_string(main.visited[h]) +
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
      const int64_t row0 = int64_t(jobs[j].qt) * kQt;
      const int rows = decode ? 1 : int(std::min<int64_t>(kQt, s.n_q_tokens - row0));
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
        if (uses_ws && wg.error.empty() &&
            wg.mask[(size_t(jobs[j].h) * n_qt + jobs[j].qt) * n_kvt + t] != r.skip[t])
          fail("wgmma (prefer_ws=false) mask differs from the reference at kv tile " +
               std::to_string(t));
      }
      for (int t = r.n_visible_tiles; t < n_kvt; ++t)
        if (gm[t] != kernels::kMaskNotVisible) fail("mask marks an invisible tile");
      const int64_t row0 = int64_t(jobs[j].qt) * kQt;
      const int rows = int(r.out.size() / s.head_dim);
      for (int rr = 0; rr < rows; ++rr)
        for (int i = 0; i < s.head_dim; ++i) {
          const double ref = r.out[size_t(rr) * s.head_dim + i];
          const double got =
              bf2f(main.o[((row0 + rr) * s.n_q_heads + jobs[j].h) * s.head_dim + i]);
          err2 += (got - ref) * (got - ref);
          ref2 += ref * ref;
          if (uses_ws && wg.error.empty()) {
            const double gw =
                bf2f(wg.o[((row0 + rr) * s.n_q_heads + jobs[j].h) * s.head_dim + i]);
            wg_err2 += std::isnan(gw) ? INFINITY : (gw - ref) * (gw - ref);
          }
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
  if (!(rel <= kTolerance))
    fail(std::string(main_kernel) + ": relative error " + std::to_string(rel));
  // An alternative kernel's run: its error over the same rows, and every output element written.
  auto check_alt = [&](const RunOut& r, double e2, const std::string& name) {
    const double arel = ref2 > 0 ? std::sqrt(e2 / ref2) : std::sqrt(e2);
    if (!(arel <= kTolerance)) fail(name + ": relative error " + std::to_string(arel));
    for (uint16_t v : r.o)
      if (std::isnan(bf2f(v))) {
        fail(name + ": NaN / unwritten output");
        break;
      }
    return arel;
  };
  if (uses_ws && wg.error.empty()) {
    const double wrel = check_alt(wg, wg_err2, "wgmma (prefer_ws=false)");
    // Same probes: dense, the same mask entries and counts. Sparse: the same visible tiles;
    // decisions may differ on ambiguous tiles only (checked against the reference above), so
    // the wgmma kernel's skip counter is checked against its own mask.
    if (!sparse_run && wg.mask != main.mask) fail("warp-specialized vs wgmma: skip masks differ");
    if (wg.visited != main.visited) fail("warp-specialized vs wgmma: visited counters differ");
    if (!sparse_run && wg.skipped != main.skipped) fail("warp-specialized vs wgmma: skipped counters differ");
    for (int h = 0; h < s.n_q_heads && sparse_run; ++h) {
      uint64_t sk = 0;
      for (size_t i = size_t(h) * n_qt * n_kvt; i < size_t(h + 1) * n_qt * n_kvt; ++i) {
        sk += wg.mask[i] == 1;
        if ((wg.mask[i] == kernels::kMaskNotVisible) != (main.mask[i] == kernels::kMaskNotVisible))
          fail("warp-specialized vs wgmma: visible tiles differ");
      }
      if (wg.skipped[h] != sk) fail("wgmma (prefer_ws=false): skipped counter differs from its mask");
    }
    tot.ws_cases++;
    tot.worst_wg_err = std::max(tot.worst_wg_err, wrel);
  }
  if (has_alt) {
    const double arel = check_alt(alt, alt_err2, "mma.sync");
    tot.alt_cases++;
    tot.worst_alt_err = std::max(tot.worst_alt_err, arel);
  }

  // mask_head >= 0 (one head's mask, as the backend records it): the same mask row block as the
  // all-heads run, the same output and counters; for the main prefill kernel (the
  // warp-specialised one on sm_90, dense or sparse, d = 64 and 128) and the wgmma kernel it
  // replaces.
  if (!decode && main.error.empty()) {
    const int hm = s.n_q_heads - 1;
    auto check_one_head = [&](kernels::AttentionParams q, const RunOut& all, const std::string& name) {
      q.mask_head = hm;
      const RunOut one = run(dp, q);
      if (!one.error.empty()) return fail(name + " mask_head " + std::to_string(hm) + ": launch: " + one.error);
      const size_t block = size_t(n_qt) * size_t(n_kvt);
      if (one.mask.size() != block ||
          !std::equal(one.mask.begin(), one.mask.end(), all.mask.begin() + size_t(hm) * block))
        fail(name + " mask_head " + std::to_string(hm) + ": mask differs from the all-heads mask");
      if (one.o != all.o) fail(name + " mask_head " + std::to_string(hm) + ": output differs");
      if (one.visited != all.visited || one.skipped != all.skipped)
        fail(name + " mask_head " + std::to_string(hm) + ": counters differ");
    };
    check_one_head(p, main, main_kernel);
    if (uses_ws && wg.error.empty()) {
      kernels::AttentionParams q = p;
      q.prefer_ws = false;
      check_one_head(q, wg, "wgmma (prefer_ws=false)");
    }
  }

  // Variant identities.
  auto expect_same = [&](const RunOut& a, const RunOut& b, const char* what, bool mask_too) {
    if (!a.error.empty() || !b.error.empty()) return fail(std::string(what) + ": launch failed: " + a.error + b.error);
    if (a.o != b.o) fail(std::string(what) + ": outputs differ bitwise");
    if (mask_too && a.mask != b.mask) fail(std::string(what) + ": masks differ");
  };
  // ... and the same probe counters.
  auto expect_same_counted = [&](const RunOut& a, const RunOut& b, const std::string& what) {
    expect_same(a, b, what.c_str(), true);
    if (b.error.empty() && (b.visited != a.visited || b.skipped != a.skipped)) fail(what + ": counters differ");
  };
  if (main.error.empty()) {
    if (decode) {
      // The split combine folded into the decode kernel (its last split CTA per KV head merges)
      // against the separate combine kernel: the same sums in the same order, the same bits;
      // dense and sparse (pass 2 folds it in the same way).
      // Both forced, so that the tuning in force (SINKSCOPE_FUSED_COMBINE) cannot make this a
      // comparison of the fused combine with itself.
      const RunOut rs = [&] {
        kernels::ScopedGpuTuning t([](kernels::GpuTuning& g) { g.decode_fused_combine = false; });
        return run(dp, p);
      }();
      const RunOut rf = [&] {
        kernels::ScopedGpuTuning t([](kernels::GpuTuning& g) { g.decode_fused_combine = true; });
        return run(dp, p);
      }();
      expect_same_counted(rs, rf, "decode with the fused combine");
    }
    if (c.lambda == 0) {
      // The sparse kernels at lambda = 0 equal the dense kernel of their family bit for bit:
      // warp-specialised sparse vs dense (the main run; one sparse kernel for both V modes;
      // selected where ws_sparse_prefill_head_dim() says so: d = 64 and 128), and the wgmma
      // sparse kernels vs the wgmma dense one (prefer_ws = false).
      kernels::AttentionParams q = p;
      q.force_sparse_kernel = true;
      const bool sparse_ws = !decode && kernels::attention_uses_warp_specialized(q);
      const RunOut& family = uses_ws && !sparse_ws ? wg : main;
      expect_same(family, run(dp, q), "forced sparse (lazy V) at lambda=0", true);
      if (!decode) {
        q.skip_value_load = false;
        expect_same(family, run(dp, q), "forced sparse (eager V) at lambda=0", true);
      }
      if (sparse_ws && s.head_dim == 64) {
        // The other consumer count (ws_sparse_consumers(p)): the same values.
        const int other = kernels::ws_sparse_consumers(q) == 3 ? 2 : 3;
        kernels::ScopedGpuTuning t([&](kernels::GpuTuning& g) { g.ws_sparse_consumers = other; });
        expect_same_counted(family, run(dp, q),
                            "forced sparse, WS with " + std::to_string(other) + " consumers, at lambda=0");
      }
      if (uses_ws && !decode && s.head_dim == 64) {
        // The dense warp-specialised kernel with the other consumer count (2 <-> 3,
        // ws_dense_consumers(p)): the same float operations per row, so the same bits.
        const int other = kernels::ws_dense_consumers(p) == 3 ? 2 : 3;
        const RunOut rv = [&] {
          kernels::ScopedGpuTuning t([&](kernels::GpuTuning& g) { g.ws_dense_consumers = other; });
          return run(dp, p);
        }();
        expect_same_counted(main, rv, "dense WS with " + std::to_string(other) + " consumer warpgroups");
      }
      if (uses_ws && sparse_ws) {
        q = p;
        q.prefer_ws = false;
        q.force_sparse_kernel = true;
        expect_same(wg, run(dp, q), "wgmma forced sparse (lazy V) at lambda=0", true);
        q.skip_value_load = false;
        expect_same(wg, run(dp, q), "wgmma forced sparse (eager V) at lambda=0", true);
      }
    } else {
      // skip_softmax_exp = false (attention_params.h): same decisions and counters, skipped
      // tiles' exp() kept in the row sums; against the float64 reference with keep_exp, on the
      // same (head, query tile) spread, the reference following the GPU on ambiguous tiles.
      kernels::AttentionParams q = p;
      q.skip_softmax_exp = false;
      const RunOut keep = run(dp, q);
      if (!keep.error.empty()) {
        fail("keep-exp launch: " + keep.error);
      } else {
        if (keep.mask != main.mask) fail("keep-exp mask differs from the sparse mask");
        if (keep.visited != main.visited || keep.skipped != main.skipped)
          fail("keep-exp counters differ from the sparse counters");
        for (uint16_t v : keep.o)
          if (std::isnan(bf2f(v))) {
            fail("keep-exp: NaN / unwritten output");
            break;
          }
        double ke2 = 0, kr2 = 0;
        const int hstep = std::max(1, s.n_q_heads / std::min(s.n_q_heads, c.max_heads));
        const int qstep = std::max(1, n_qt / std::min(n_qt, c.max_qtiles));
        for (int h = 0; h < s.n_q_heads; h += hstep)
          for (int qt = n_qt - 1; qt >= 0; qt -= qstep) {
            const int64_t row0 = int64_t(qt) * kQt;
            const int rows = decode ? 1 : int(std::min<int64_t>(kQt, s.n_q_tokens - row0));
            const uint8_t* gm = &keep.mask[(size_t(h) * n_qt + qt) * n_kvt];
            const RefTile r = reference_query_tile(hp, h, row0, rows, c.lambda, gm, 1e-3, true);
            for (int rr = 0; rr < rows; ++rr)
              for (int i = 0; i < s.head_dim; ++i) {
                const double ref = r.out[size_t(rr) * s.head_dim + i];
                const double got = bf2f(keep.o[((row0 + rr) * s.n_q_heads + h) * s.head_dim + i]);
                ke2 += (got - ref) * (got - ref);
                kr2 += ref * ref;
              }
          }
        const double krel = kr2 > 0 ? std::sqrt(ke2 / kr2) : std::sqrt(ke2);
        if (!(krel <= kTolerance)) fail("keep-exp relative error " + std::to_string(krel));
        tot.worst_keep_err = std::max(tot.worst_keep_err, krel);
        ++tot.keep_cases;
      }
      if (!decode && uses_ws && keep.error.empty() && s.head_dim == 64) {
        // The sparse warp-specialised kernel with the other consumer count
        // (ws_sparse_consumers(p)) against the main run and keep-exp: same masks and counters,
        // and the same outputs bit for bit (the same wgmma and float operations per warpgroup;
        // with three consumers a CTA is three query tiles instead of two, so the lengths here
        // also give CTAs whose second or third tile has no rows; the three-consumer kernel
        // regroups the P V wgmma and waits (kWsVarNoEmptyGroup): at block_size 64 it takes each
        // of its four P V paths, both units, either one, none).
        const int other = kernels::ws_sparse_consumers(p) == 3 ? 2 : 3;
        for (const bool keep_exp : {false, true}) {
          kernels::AttentionParams k = p;
          k.skip_softmax_exp = keep_exp ? false : p.skip_softmax_exp;
          const RunOut rv = [&] {
            kernels::ScopedGpuTuning t([&](kernels::GpuTuning& g) { g.ws_sparse_consumers = other; });
            return run(dp, k);
          }();
          const RunOut& ref = keep_exp ? keep : main;
          expect_same_counted(ref, rv, "WS sparse with " + std::to_string(other) + " consumers" +
                                           (keep_exp ? " (keep-exp)" : "") + " vs the default");
        }
      }
      if (!decode) {
        // The V modes are two kernels of attention_prefill_kernel (the warp-specialised one has
        // one): compared there, with prefer_ws = false where the main run was warp-specialised.
        q = p;
        q.prefer_ws = false;
        const RunOut& lazy = uses_ws ? wg : main;
        RunOut lazy_keep;
        if (uses_ws) {
          kernels::AttentionParams k = q;
          k.skip_softmax_exp = false;
          lazy_keep = run(dp, k);
        }
        q.skip_value_load = false;
        expect_same(lazy, run(dp, q), "eager-V vs lazy-V sparse", true);
        q.skip_softmax_exp = false;
        expect_same(uses_ws ? lazy_keep : keep, run(dp, q), "eager-V vs lazy-V keep-exp", true);
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
    std::printf("FAIL %s (%s, %s)\n", describe(c).c_str(),
                kernels::variant_name(kernels::attention_variant(p)), main_kernel);
    for (auto& e : errs) std::printf("     %s\n", e.c_str());
    return false;
  }
  return true;
}

// GpuTuning::decode_fused_combine for the launches that follow: 1 on, 0 off, -1 back to the
// tuning's default (off).
void set_fused_combine(int on) {
  kernels::GpuTuning t = kernels::gpu_tuning();
  t.decode_fused_combine = on == 1;
  kernels::set_gpu_tuning(t);
}

// Decode of one problem with the host length L vs the same problem with L (and log2 lambda) in
// device memory and kv_len = each bound >= L: bitwise equal output, equal counters, equal mask
// on the L tiles and "not visible" past them. The reference is the host-length launch with the
// separate combine kernel; each bound runs with the separate and with the fused combine (whose
// merge then sits in a grid of the bound's splits, of which only the actual ones arrive), both
// forced, so that SINKSCOPE_FUSED_COMBINE cannot make the two runs one. Returns the number of
// failed launches.
int run_device_len_case(const ProblemSpec& s, double lambda, const std::vector<int64_t>& bounds,
                        std::mt19937_64& rng, int& launches) {
  const HostProblem hp = make_problem(s, rng);
  DeviceProblem dp;
  dp.upload(hp, rng);
  const kernels::AttentionParams p = dp.params(hp, lambda);
  set_fused_combine(0);
  const RunOut ref = run(dp, p);
  set_fused_combine(-1);
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
  std::vector<std::pair<int64_t, int>> runs;  // (bound, fused combine)
  for (int64_t bound : bounds)
    for (const int fused : {0, 1}) runs.push_back({bound, fused});
  for (const auto& [bound, fused] : runs) {
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
    set_fused_combine(fused);
    const RunOut got = run(dp, q);
    set_fused_combine(-1);
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
      std::printf("FAIL decode device length%s: L=%lld bound=%lld heads=%d/%d d=%d block=%d "
                  "lambda=%g\n",
                  fused ? " (fused combine)" : "", (long long)s.kv_len, (long long)bound,
                  s.n_q_heads, s.n_kv_heads, s.head_dim, bc, lambda);
      for (auto& e : errs) std::printf("     %s\n", e.c_str());
    }
  }
  SINKSCOPE_CUDA_CHECK(cudaFree(len_dev));
  SINKSCOPE_CUDA_CHECK(cudaFree(l2_dev));
  dp.release();
  return failed;
}

// ---- decode after a PDL predecessor ----
// The dense and pass-1 sparse decode kernels over a positional bf16 cache read the page table
// and issue the cache copies of the first STAGES - 1 tiles of their split BEFORE
// griddepcontrol.wait, all but the tile holding the newest row (position L - 1), which the
// kernel in front of them may still be writing (in the engine the norm + QKV + RoPE + append
// kernel; AttentionParams::page_table). The other decode cases run with nothing in front of
// them (and with a skip mask, i.e. without PDL). Here the predecessor is pdl_writer.cu: it
// triggers its dependents at its start, waits until the host has enqueued the decode behind it,
// spins kPdlWriterSpin cycles (the decode's CTAs meanwhile run their pre-wait part) and then
// writes row L - 1 of every KV head, which holds NaN until then: an early read of that row, or
// of any row it writes, shows as NaN or as a difference from the decode after a plain
// cudaMemcpy of the same row.
constexpr long long kPdlWriterSpin = 20000;  // ~10 us at the H200's clock

// The stream and buffers of the section.
struct PdlRig {
  cudaStream_t stream = nullptr;       // non-blocking: the writer and the decode alone on it
  int* go = nullptr;                   // host-mapped flag (host address) ...
  int* go_dev = nullptr;               // ... and its device address (PdlRowWrite::go)
  uint16_t *k_row = nullptr, *v_row = nullptr;  // the writer's row, [n_kv_heads][d] (device)
  uint16_t* nan_row = nullptr;         // the control's row: NaN
};

// Copies position pos of every KV head (K and V rows, [n_kv_heads][d] on the host) into dp's
// pool: one strided copy per tensor (a slot's KV heads lie block_size * d elements apart).
void put_row(const DeviceProblem& dp, const ProblemSpec& s, const std::vector<int32_t>& table,
             int64_t pos, const uint16_t* k, const uint16_t* v) {
  const size_t d = size_t(s.head_dim), bc = size_t(s.block_size);
  const size_t off = (size_t(table[size_t(pos / s.block_size)]) * s.n_kv_heads * bc +
                      size_t(pos % s.block_size)) * d;
  SINKSCOPE_CUDA_CHECK(cudaMemcpy2D(dp.k + off, bc * d * 2, k, d * 2, d * 2, s.n_kv_heads,
                                    cudaMemcpyHostToDevice));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy2D(dp.v + off, bc * d * 2, v, d * 2, d * 2, s.n_kv_heads,
                                    cudaMemcpyHostToDevice));
}

// One decode on rig.stream, as run() does it but with the writer in front when `writer` is set
// (else the cache already holds the row: the plain run). p must have no skip mask. `not_pdl` is
// set when the decode's PDL attribute was rejected (launch_pdl then turns PDL off).
RunOut run_after(DeviceProblem& dp, kernels::AttentionParams p, PdlRig& rig,
                 const PdlRowWrite* writer, bool& not_pdl) {
  RunOut r;
  dp.attach_workspace(p);
  SINKSCOPE_CUDA_CHECK(cudaMemset(dp.o, 0xff, dp.o_elems * 2));  // bf16 0xffff = NaN
  SINKSCOPE_CUDA_CHECK(cudaMemset(dp.visited, 0, p.n_q_heads * 8));
  SINKSCOPE_CUDA_CHECK(cudaMemset(dp.skipped, 0, p.n_q_heads * 8));
  *static_cast<volatile int*>(rig.go) = 0;
  // The host copies and memsets (legacy stream) are complete before anything starts on
  // rig.stream, so the writer is the one kernel in front of the decode there.
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  if (writer) SINKSCOPE_CUDA_CHECK(launch_pdl_row_writer(*writer, rig.stream));
  const kernels::AttentionStatus st = kernels::launch_attention(p, rig.stream);
  if (writer) {
    not_pdl = not_pdl || !kernels::pdl_enabled();
    // The decode is enqueued (whatever the status: the writer must finish): the writer's spin
    // starts now, so the decode's pre-wait part runs while the row is still NaN.
    *static_cast<volatile int*>(rig.go) = 1;
  }
  SINKSCOPE_CUDA_CHECK(cudaStreamSynchronize(rig.stream));
  if (!st.ok) {
    r.error = st.message;
    return r;
  }
  SINKSCOPE_CUDA_CHECK(cudaGetLastError());
  r.o.resize(dp.o_elems);
  r.visited.resize(p.n_q_heads);
  r.skipped.resize(p.n_q_heads);
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(r.o.data(), dp.o, dp.o_elems * 2, cudaMemcpyDeviceToHost));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(r.visited.data(), dp.visited, p.n_q_heads * 8, cudaMemcpyDeviceToHost));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(r.skipped.data(), dp.skipped, p.n_q_heads * 8, cudaMemcpyDeviceToHost));
  return r;
}

bool has_nan(const std::vector<uint16_t>& o) {
  for (uint16_t v : o)
    if (std::isnan(bf2f(v))) return true;
  return false;
}

// The smallest tile count n >= 2 whose decode plan (the host formula, which the device-length
// launch re-evaluates) has `tps` tiles per split and puts the newest tile n - 1 at index
// `offset` of its split; 0 if there is none.
int tiles_with(int target, int target_hi, int min_tiles, int tps, int offset) {
  const int most = std::max(target, target_hi);
  for (int n = 2; n <= kernels::kDecodeMaxTilesPerSplit * most; ++n) {
    const kernels::DecodeSplitPlan pl =
        kernels::decode_split_plan_tiles(n, target, target_hi, min_tiles);
    if (pl.tiles_per_split == tps && (n - 1) % tps == offset) return n;
  }
  return 0;
}

// Per (head dim, block size), dense (lambda = 0) and sparse (1e-2, sink + quiet tiles), every
// length below, runs
//   ref     plain upload, host length, separate combine
//   pdl     writer -> decode, host length                 == ref
//   dev     plain upload, device length (bound > L)       == ref
//   pdl_dev writer -> decode, device length               == dev
//   and both device-length runs again with the fused combine, == ref and == each other,
// each bit for bit (output and probe counters), none with a NaN. The lengths are picked from the
// split plan of this GPU (8 KV heads: 33 splits per head on 132 SMs) for these positions of the
// newest tile, which is always the last tile of its split (a ring issues up to STAGES - 1 =
// 1..3 tiles early, kernels/attention_decode.cuh):
//   splits of 1 tile: every split but the newest tile's issues its one tile early;
//   splits of 2 tiles, the newest the second: every split one tile early (fewer than the ring of
//     3 at d = 64, block 64), the newest after the wait;
//   splits of 4 tiles (the other splits: full rings early), the newest tile 0 of its split
//     (which then issues nothing early), 1 or 2 (that many early, the newest after the wait:
//     from the ring's prologue or its main loop, as STAGES says) or 3 (a whole ring of 1..3
//     early first);
// and in each, L - 1 on a tile boundary (the newest tile holds only that row) and 36 rows in.
// PDL: launch_attention launches the first decode kernel with the PDL attribute unless a skip
// mask memset goes in front (launch_bc's pdl_first), so these runs have no skip mask;
// set_pdl_enabled(true) overrides SINKSCOPE_PDL=0 for the section; a rejected attribute (the
// fallback to a plain launch turns pdl_enabled() off) is a failure. Whether the decode really
// ran before the writer finished is shown by a control per dense host-length case: the writer
// writes NaN into row 1 instead (tile 0, which split 0 loads early): the output then equals ref
// when the early copy came first ("overlapped"), else it is NaN. The controls break the
// predecessor rule on purpose, so they are counted, not failed, unless the output is neither.
int run_pdl_predecessor_cases(std::mt19937_64& rng) {
  auto t0 = std::chrono::steady_clock::now();
  int dev = 0, sms = 0;
  SINKSCOPE_CUDA_CHECK(cudaGetDevice(&dev));
  SINKSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int hkv = 8, group = 2;
  // The split plan depends on the head dim and block size (kernels::decode_split_policy): the
  // lengths are picked per (d, block) for splits of 1, 2 and 4 tiles (the newest tile at 0..3 of
  // its split) and, where the policy lets long sequences take more CTAs, for a length that does.
  auto lengths_for = [&](int d, int bc, int& target, int& target_hi, int& min_tiles) {
    const kernels::DecodeSplitPolicy pol = kernels::decode_split_policy(d, bc);
    target = kernels::decode_target_splits(hkv, sms, pol.ctas_per_sm);
    target_hi = pol.max_ctas_per_sm > pol.ctas_per_sm
                    ? kernels::decode_target_splits(hkv, sms, pol.max_ctas_per_sm)
                    : 0;
    min_tiles = pol.min_tiles;
    struct Shape { int tps, offset; };
    std::vector<Shape> shapes = {{1, 0}, {2, 1}, {4, 0}, {4, 1}, {4, 2}, {4, 3}};
    std::vector<int> tiles;
    for (const Shape& sh : shapes) {
      const int n = tiles_with(target, target_hi, min_tiles, sh.tps, sh.offset);
      if (n > 0) tiles.push_back(n);
      else
        std::printf("NOTE decode after a PDL predecessor: d=%d block=%d: no length with %d-tile "
                    "splits and the newest tile at %d (%d splits wanted per KV head)\n", d, bc,
                    sh.tps, sh.offset, target);
    }
    if (target_hi > 0 && min_tiles > 0) {
      // A grown plan (more than `target` splits, each >= min_tiles tiles): the shortest such
      // length, and one whose newest tile sits mid-split.
      int first = 0;
      for (int n = target * min_tiles; n <= target_hi * min_tiles + min_tiles && !first; ++n)
        if (kernels::decode_split_plan_tiles(n, target, target_hi, min_tiles).n_splits > target)
          first = n;
      if (first > 0) {
        tiles.push_back(first);
        tiles.push_back(first + min_tiles / 2);
      } else {
        std::printf("FAIL decode after a PDL predecessor: d=%d block=%d: no length gives more than "
                    "%d splits (policy up to %d, >= %d tiles each)\n", d, bc, target, target_hi,
                    min_tiles);
        tiles.clear();  // counted below as a failed case
      }
    }
    return tiles;
  };

  PdlRig rig;
  SINKSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&rig.stream, cudaStreamNonBlocking));
  SINKSCOPE_CUDA_CHECK(cudaHostAlloc(&rig.go, sizeof(int), cudaHostAllocMapped));
  SINKSCOPE_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&rig.go_dev), rig.go, 0));
  const size_t row_bytes = size_t(hkv) * 128 * 2;  // the largest head dim
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&rig.k_row, row_bytes));
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&rig.v_row, row_bytes));
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&rig.nan_row, row_bytes));
  SINKSCOPE_CUDA_CHECK(cudaMemset(rig.nan_row, 0xff, row_bytes));  // bf16 0xffff = NaN
  int32_t* len_dev = nullptr;
  float* l2_dev = nullptr;
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&len_dev, 4));
  SINKSCOPE_CUDA_CHECK(cudaMalloc(&l2_dev, 4));
  const bool pdl_was = kernels::pdl_enabled();
  kernels::set_pdl_enabled(true);

  int failed = 0, cases = 0, launches = 0, controls = 0, overlapped = 0;
  bool not_pdl = false;
  for (int d : {64, 128})
    for (int bc : {64, 128}) {
      int target = 0, target_hi = 0, min_tiles = 0;
      const std::vector<int> tiles = lengths_for(d, bc, target, target_hi, min_tiles);
      if (tiles.empty()) {  // printed by lengths_for
        ++failed;
        continue;
      }
      std::vector<int64_t> lens;
      for (int n : tiles)
        for (int in_tile : {0, 36}) lens.push_back(int64_t(n - 1) * bc + in_tile + 1);
      const int64_t extra = 2 * bc + 5;  // device length: the bound is L + extra
      const int64_t lmax = *std::max_element(lens.begin(), lens.end()) + extra;
      // The page table covers every bound.
      const ProblemSpec s = spec(1, lmax, lmax - 1, hkv * group, hkv, d, bc, 6.0, 0.5);
      const HostProblem hp = make_problem(s, rng);
      DeviceProblem dp;
      dp.upload(hp, rng);
      std::vector<int32_t> table(size_t(dp.n_kvt));
      SINKSCOPE_CUDA_CHECK(cudaMemcpy(table.data(), dp.pages, table.size() * 4, cudaMemcpyDeviceToHost));
      const std::vector<uint16_t> nan_host(size_t(hkv) * d, kBf16NaN);
      const size_t row = size_t(hkv) * d;  // elements of one position's K (or V) row
      for (int64_t L : lens) {
        const uint16_t* krow = &hp.k[size_t(L - 1) * row];
        const uint16_t* vrow = &hp.v[size_t(L - 1) * row];
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(rig.k_row, krow, row * 2, cudaMemcpyHostToDevice));
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(rig.v_row, vrow, row * 2, cudaMemcpyHostToDevice));
        const int32_t len = int32_t(L);
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(len_dev, &len, 4, cudaMemcpyHostToDevice));
        PdlRowWrite w;
        w.k_pages = dp.k;
        w.v_pages = dp.v;
        w.page_table = dp.pages;
        w.k_row = rig.k_row;
        w.v_row = rig.v_row;
        w.pos = L - 1;
        w.n_kv_heads = hkv;
        w.head_dim = d;
        w.block_size = bc;
        w.go = rig.go_dev;
        w.spin_cycles = kPdlWriterSpin;
        for (double lam : {0.0, 1e-2}) {
          ++cases;
          std::vector<std::string> errs;
          auto fail = [&](std::string m) {
            if (errs.size() < 8) errs.push_back(std::move(m));
          };
          kernels::AttentionParams p = dp.params(hp, lam);
          p.kv_len = L;
          p.q_start = L - 1;
          p.skip_mask = nullptr;  // PDL: no memset in front of the decode (see above)
          kernels::AttentionParams q = p;
          q.kv_len = L + extra;
          q.q_start = 0;  // ignored with a device-side length
          q.kv_len_dev = len_dev;
          if (lam > 0) {
            SINKSCOPE_CUDA_CHECK(cudaMemcpy(l2_dev, &p.log2_lambda, 4, cudaMemcpyHostToDevice));
            q.log2_lambda_dev = l2_dev;
          }
          // Each plain run comes before its writer run, so that every kernel the decode
          // launches is loaded by then: with lazy module loading, a first launch may wait for
          // the device to go idle, here for the writer, which waits for the host's flag (set
          // after the launch): the writer's ~1 s timeout would end that, without the overlap.
          auto plain = [&](const kernels::AttentionParams& pp, int fused) {
            put_row(dp, s, table, L - 1, krow, vrow);
            set_fused_combine(fused);
            RunOut r = run_after(dp, pp, rig, nullptr, not_pdl);
            set_fused_combine(-1);
            ++launches;
            return r;
          };
          auto after_writer = [&](const kernels::AttentionParams& pp, int fused) {
            put_row(dp, s, table, L - 1, nan_host.data(), nan_host.data());  // the poison
            set_fused_combine(fused);
            RunOut r = run_after(dp, pp, rig, &w, not_pdl);
            set_fused_combine(-1);
            ++launches;
            return r;
          };
          auto expect_equal = [&](const RunOut& got, const RunOut& want, const std::string& what) {
            if (!got.error.empty()) return fail(what + ": launch: " + got.error);
            if (has_nan(got.o)) return fail(what + ": NaN / unwritten output");
            if (!want.error.empty()) return;
            if (got.o != want.o) {
              size_t nd = 0;
              for (size_t i = 0; i < got.o.size(); ++i) nd += got.o[i] != want.o[i];
              fail(what + ": output differs bitwise in " + std::to_string(nd) + " of " +
                   std::to_string(got.o.size()) + " elements");
            }
            if (got.visited != want.visited || got.skipped != want.skipped) fail(what + ": counters differ");
          };
          const RunOut ref = plain(p, 0);
          if (!ref.error.empty()) fail("plain upload, host length: launch: " + ref.error);
          else if (has_nan(ref.o)) fail("plain upload, host length: NaN / unwritten output");
          expect_equal(after_writer(p, 0), ref, "writer -> decode, host length, vs plain upload");
          const RunOut dev_ref = plain(q, 0);
          expect_equal(dev_ref, ref, "plain upload, device length, vs host length");
          expect_equal(after_writer(q, 0), dev_ref, "writer -> decode, device length, vs plain upload");
          const RunOut dev_fused = plain(q, 1);
          expect_equal(dev_fused, ref, "plain upload, device length, fused combine, vs host length "
                                       "with the separate combine");
          expect_equal(after_writer(q, 1), dev_fused,
                       "writer -> decode, device length, fused combine, vs plain upload");
          if (lam == 0 && ref.error.empty()) {
            // The control (see above): row L - 1 in place, NaN written late into row 1.
            put_row(dp, s, table, L - 1, krow, vrow);
            PdlRowWrite c = w;
            c.pos = 1;
            c.k_row = rig.nan_row;
            c.v_row = rig.nan_row;
            set_fused_combine(0);
            const RunOut ctl = run_after(dp, p, rig, &c, not_pdl);
            set_fused_combine(-1);
            ++launches;
            put_row(dp, s, table, 1, &hp.k[row], &hp.v[row]);
            ++controls;
            if (!ctl.error.empty()) fail("control: launch: " + ctl.error);
            else if (ctl.o == ref.o) ++overlapped;
            else if (!has_nan(ctl.o))  // the combine keeps a NaN row sum NaN (no zeros)
              fail("control: output neither equals the plain run nor has a NaN");
          }
          if (!errs.empty()) {
            ++failed;
            const int n = int((L - 1) / bc + 1);
            const kernels::DecodeSplitPlan pl = kernels::decode_split_plan_tiles(n, target, target_hi, min_tiles);
            std::printf("FAIL decode after a PDL predecessor: L=%lld (%d splits of %d tiles, newest "
                        "tile %d of its split, L-1 %s) heads=%d/%d d=%d block=%d lambda=%g\n",
                        (long long)L, pl.n_splits, pl.tiles_per_split, (n - 1) % pl.tiles_per_split,
                        (L - 1) % bc ? "inside its tile" : "on a tile boundary", s.n_q_heads, hkv,
                        d, bc, lam);
            for (auto& e : errs) std::printf("     %s\n", e.c_str());
          }
        }
      }
      dp.release();
    }
  if (not_pdl) {
    ++failed;
    std::printf("FAIL decode after a PDL predecessor: the decode's PDL attribute was rejected "
                "(plain launches: the early loads never met a running predecessor)\n");
  }
  kernels::set_pdl_enabled(pdl_was);
  SINKSCOPE_CUDA_CHECK(cudaFree(len_dev));
  SINKSCOPE_CUDA_CHECK(cudaFree(l2_dev));
  SINKSCOPE_CUDA_CHECK(cudaFree(rig.k_row));
  SINKSCOPE_CUDA_CHECK(cudaFree(rig.v_row));
  SINKSCOPE_CUDA_CHECK(cudaFree(rig.nan_row));
  SINKSCOPE_CUDA_CHECK(cudaFreeHost(rig.go));
  SINKSCOPE_CUDA_CHECK(cudaStreamDestroy(rig.stream));
  std::printf("%-28s cases %4d  launches %d  failed %d  controls overlapped %d of %d  %.1fs\n",
              "decode after PDL predecessor", cases, launches, failed, overlapped, controls,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (controls > 0 && overlapped == 0)
    std::printf("NOTE decode after a PDL predecessor: no control saw the decode's early loads "
                "before the writer's late row (SINKSCOPE_DECODE_EARLY_LOADS=0, or the decode did "
                "not start while the writer ran): the cases above then checked no overlap\n");
  std::fflush(stdout);
  return failed;
}

// skip_softmax_exp true and false: the GPU kernels against the engine's CPU attention (the CPU
// backend's code, float32) on the same bf16 inputs, q_tile = kPrefillQueryTile (64), the kernels'
// query tile. Output
// relative error <= kTolerance; masks equal except on tiles whose CPU statistic lies within
// 1e-3 nats of ln(lambda) (both accumulate q.k in fp32 in different orders; the GPU compares in
// the exp2 domain). Returns the number of failed runs.
int run_cpu_engine_cases(std::mt19937_64& rng, bool quick) {
  struct E { int nq; int64_t kv; int hq, hkv, d, bc; double lam; };
  const E cases[] = {{1000, 1000, 6, 2, 64, 64, 1e-2},  {2048, 2048, 8, 2, 128, 128, 5e-2},
                     {300, 4096, 9, 3, 64, 64, 1e-2},   {1, 4096, 9, 3, 64, 64, 1e-2},
                     {1, 16384, 8, 1, 128, 128, 1e-2},  {1, 5000, 8, 2, 64, 64, 0.1}};
  ThreadPool pool(std::max(1, int(std::min(16u, std::thread::hardware_concurrency()))));
  int failed = 0, runs = 0;
  double worst[2] = {0, 0};
  int64_t tiles = 0, amb = 0, skipped = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (const E& e : cases) {
    if (quick && e.kv > 4096) continue;
    const ProblemSpec s = spec(e.nq, e.kv, e.kv - e.nq, e.hq, e.hkv, e.d, e.bc, 6.0, 0.5);
    const HostProblem hp = make_problem(s, rng);
    DeviceProblem dp;
    dp.upload(hp, rng);
    std::vector<float> qf(hp.q.size()), kf(hp.k.size()), vf(hp.v.size());
    for (size_t i = 0; i < qf.size(); ++i) qf[i] = bf2f(hp.q[i]);
    for (size_t i = 0; i < kf.size(); ++i) kf[i] = bf2f(hp.k[i]), vf[i] = bf2f(hp.v[i]);
    const float ll = log_threshold(e.lam);
    for (bool skip_exp : {true, false}) {
      ++runs;
      std::vector<std::string> errs;
      kernels::AttentionParams p = dp.params(hp, e.lam);
      p.skip_softmax_exp = skip_exp;
      const RunOut g = run(dp, p);
      CpuAttentionArgs a;
      std::vector<float> out(qf.size());
      std::vector<TileCounts> counts(size_t(e.hq));
      std::vector<uint8_t> all;
      std::vector<float> stat;
      int cols = 0;
      a.q = qf.data();
      a.k = kf.data();
      a.v = vf.data();
      a.out = out.data();
      a.n_q = e.nq;
      a.q_pos0 = int(s.q_start);
      a.n_kv = int(e.kv);
      a.n_head = e.hq;
      a.n_head_kv = e.hkv;
      a.d = e.d;
      a.scale = p.scale;
      a.block_size = e.bc;
      a.q_tile = kernels::kPrefillQueryTile;
      a.log_lambda = ll;
      a.skip_softmax_exp = skip_exp;
      a.counts = counts.data();
      a.mask_all = &all;
      a.tile_stat = &stat;
      a.mask_cols = &cols;
      cpu_attention(a, &pool);
      if (!g.error.empty()) {
        errs.push_back("launch: " + g.error);
      } else {
        double e2 = 0, r2 = 0;
        for (size_t i = 0; i < out.size(); ++i) {
          const double gv = bf2f(g.o[i]);
          e2 += (gv - out[i]) * (gv - out[i]);
          r2 += double(out[i]) * out[i];
        }
        const double rel = std::sqrt(e2 / std::max(r2, 1e-30));
        worst[skip_exp ? 0 : 1] = std::max(worst[skip_exp ? 0 : 1], rel);
        if (!(rel <= kTolerance)) errs.push_back("relative error vs CPU " + std::to_string(rel));
        if (all.size() != g.mask.size() || cols != dp.n_kvt) {
          errs.push_back("mask shapes differ");
        } else {
          static constexpr uint8_t kGpuToCpu[3] = {1, 2, 0};  // GPU 0/1/2 -> CPU 1/2/0
          for (size_t i = 0; i < all.size(); ++i) {
            const uint8_t gc = kGpuToCpu[std::min<int>(g.mask[i], 2)];
            tiles += all[i] != 0;
            skipped += all[i] == 2;
            if (gc == all[i]) continue;
            if (all[i] != 0 && gc != 0 && std::fabs(stat[i] - ll) <= 1e-3) {
              ++amb;
              continue;
            }
            if (errs.size() < 6)
              errs.push_back("mask cell " + std::to_string(i) + ": cpu " + std::to_string(all[i]) +
                             " gpu " + std::to_string(gc) + " stat - ln(lambda) " +
                             std::to_string(stat[i] - ll));
          }
        }
      }
      if (!errs.empty()) {
        ++failed;
        std::printf("FAIL engine CPU vs GPU: nq=%d kv=%lld heads=%d/%d d=%d block=%d lambda=%g "
                    "skip_softmax_exp=%d\n",
                    e.nq, (long long)e.kv, e.hq, e.hkv, e.d, e.bc, e.lam, int(skip_exp));
        for (auto& m : errs) std::printf("     %s\n", m.c_str());
      }
    }
    dp.release();
  }
  std::printf("%-28s runs %4d  failed %d  worst rel err %.2e (skip_softmax_exp=true) %.2e "
              "(false)  tiles %lld (cpu skipped %.1f%%, within 1e-3 of ln lambda %lld)  %.1fs\n",
              "engine CPU attention vs GPU", runs, failed, worst[0], worst[1], (long long)tiles,
              tiles ? 100.0 * skipped / tiles : 0.0, (long long)amb,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::fflush(stdout);
  return failed;
}

// ---- quantized KV (int8 / int4 pages: AttentionParams::kv_bits, engine/cache/kv_layout.h) ----
// K and V quantized on the host with the CPU cache's own quantize_kv_row; protected positions
// (4 sinks + a few scattered ones) keep their bf16 values in bf16 pages (page-table entry
// -1 - j, engine/cache/kv_page_plan.h), the other rows of such a page hold bf16(c * s). Unused code
// slots hold garbage codes with finite scales, unused bf16 rows NaN, the output is NaN-poisoned.
// Checks per case:
//   - no NaN in the output (fully written, nothing invisible read);
//   - bit-for-bit equal to the bf16 kernel on the DEQUANTISED problem (bf16(c * s) rows, the
//     protected rows unchanged; prefill: the mma.sync kernel with V loaded with K, the variant
//     quantized prefill runs): the fused dequantisation feeds the tensor cores exactly those
//     values, so any error in codes, scales, nibble order, swizzle or protection shows here;
//   - ||out - ref|| / ||ref|| <= 1e-2 against the float64 reference on the dequantised values
//     (the CPU's dequantize_kv_row, then bf16 like every kernel input), masks and counters as in
//     run_case (ambiguous tiles follow the GPU);
//   - a control (int4): the same launch against the reference of the UNQUANTISED inputs must
//     differ by more than it does from the dequantised reference.
struct QCase {
  ProblemSpec spec;
  int bits = 8;
  bool protect = false;
  double lambda = 0;
};

int run_quant_case(const QCase& qc, std::mt19937_64& rng, double& worst_err, int64_t& n_tiles) {
  const ProblemSpec& s = qc.spec;
  const int d = s.head_dim, bc = s.block_size, hkv = s.n_kv_heads;
  std::vector<std::string> errs;
  auto fail = [&](std::string m) {
    if (errs.size() < 8) errs.push_back(std::move(m));
  };
  const HostProblem hp = make_problem(s, rng);
  KvQuantFormat fmt;
  fmt.bits = qc.bits;
  fmt.group = 32;
  const int cb = fmt.code_bytes(d), ns = fmt.scales(d);
  // Protected positions: sinks 0..3, the middle and the last position.
  std::vector<uint8_t> prot(size_t(s.kv_len), 0);
  if (qc.protect) {
    for (int64_t i = 0; i < std::min<int64_t>(4, s.kv_len); ++i) prot[size_t(i)] = 1;
    prot[size_t(s.kv_len / 2)] = 1;
    prot[size_t(s.kv_len - 1)] = 1;
  }
  // Host quantization (the CPU's code) and the dequantised problem.
  HostProblem hq = hp;
  std::vector<uint8_t> kc(size_t(s.kv_len) * hkv * cb), vc(kc.size());
  std::vector<uint16_t> ks(size_t(s.kv_len) * hkv * ns), vs(ks.size());
  parallel_for(int((s.kv_len + 1023) / 1024), [&](int chunk) {
    std::vector<float> x(static_cast<size_t>(d)), y(static_cast<size_t>(d));
    for (int64_t pos = int64_t(chunk) * 1024; pos < std::min<int64_t>(s.kv_len, (chunk + 1) * 1024); ++pos)
      for (int h = 0; h < hkv; ++h) {
        const size_t row = size_t(pos) * hkv + size_t(h);
        for (int which = 0; which < 2; ++which) {
          const std::vector<uint16_t>& src = which ? hp.v : hp.k;
          std::vector<uint16_t>& dst = which ? hq.v : hq.k;
          uint8_t* c = (which ? vc.data() : kc.data()) + row * cb;
          uint16_t* sc = (which ? vs.data() : ks.data()) + row * ns;
          for (int i = 0; i < d; ++i) x[size_t(i)] = bf2f(src[row * d + size_t(i)]);
          quantize_kv_row(x.data(), d, fmt, c, sc);
          dequantize_kv_row(c, sc, d, fmt, y.data());
          if (!prot[size_t(pos)])
            for (int i = 0; i < d; ++i) dst[row * d + size_t(i)] = f2bf(y[size_t(i)]);
        }
      }
  });
  // Device: q / o / probes / the bf16 pages of the dequantised problem (for the bit-exact check)
  // from DeviceProblem; the quantized pools with their own shuffled table.
  DeviceProblem dp;
  dp.upload(hq, rng);
  const int n_kvt = dp.n_kvt, pool = n_kvt + 2;
  std::vector<int32_t> perm(static_cast<size_t>(pool));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(static_cast<size_t>(n_kvt));
  int n_prot_pages = 0;
  for (int t = 0; t < n_kvt; ++t) {
    bool any = false;
    for (int64_t pos = int64_t(t) * bc; pos < std::min<int64_t>(s.kv_len, int64_t(t + 1) * bc); ++pos)
      any = any || prot[size_t(pos)];
    table[size_t(t)] = any ? -1 - n_prot_pages++ : perm[size_t(t)];
  }
  std::vector<uint8_t> kcp(size_t(pool) * hkv * bc * cb, 0x5a), vcp(kcp.size(), 0xa7);
  std::vector<uint16_t> ksp(size_t(pool) * hkv * bc * ns, 0x3c00), vsp(ksp.size(), 0x4000);
  std::vector<uint16_t> pkp(size_t(std::max(n_prot_pages, 1)) * hkv * bc * d, kBf16NaN), pvp(pkp.size(), kBf16NaN);
  for (int64_t pos = 0; pos < s.kv_len; ++pos)
    for (int h = 0; h < hkv; ++h) {
      const int32_t e = table[size_t(pos / bc)];
      const size_t row = size_t(pos) * hkv + size_t(h);
      const size_t slot = (size_t(e < 0 ? -1 - e : e) * hkv + size_t(h)) * bc + size_t(pos % bc);
      if (e < 0) {  // protected page: bf16 rows (original or bf16(c * s)) = hq's rows
        std::memcpy(&pkp[slot * d], &hq.k[row * d], size_t(d) * 2);
        std::memcpy(&pvp[slot * d], &hq.v[row * d], size_t(d) * 2);
      } else {
        std::memcpy(&kcp[slot * cb], &kc[row * cb], size_t(cb));
        std::memcpy(&vcp[slot * cb], &vc[row * cb], size_t(cb));
        std::memcpy(&ksp[slot * ns], &ks[row * ns], size_t(ns) * 2);
        std::memcpy(&vsp[slot * ns], &vs[row * ns], size_t(ns) * 2);
      }
    }
  uint8_t *dkc = nullptr, *dvc = nullptr;
  uint16_t *dks = nullptr, *dvs = nullptr, *dpk = nullptr, *dpv = nullptr;
  int32_t* dtab = nullptr;
  auto up = [](auto*& dst, const auto& v) {
    SINKSCOPE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dst), v.size() * sizeof(v[0])));
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(dst, v.data(), v.size() * sizeof(v[0]), cudaMemcpyHostToDevice));
  };
  up(dkc, kcp);
  up(dvc, vcp);
  up(dks, ksp);
  up(dvs, vsp);
  up(dpk, pkp);
  up(dpv, pvp);
  up(dtab, table);

  const bool decode = s.n_q_tokens == 1;
  kernels::AttentionParams pb = dp.params(hq, qc.lambda);  // bf16 pages of the dequantised KV
  pb.prefer_wgmma = false;
  pb.skip_value_load = false;  // the prefill variant quantized KV runs (V with K)
  kernels::AttentionParams pq = pb;
  pq.kv_bits = qc.bits;
  pq.k_codes = dkc;
  pq.v_codes = dvc;
  pq.k_scales = dks;
  pq.v_scales = dvs;
  pq.k_pages = dpk;
  pq.v_pages = dpv;
  pq.page_table = dtab;
  const RunOut rb = run(dp, pb);
  const RunOut rq = run(dp, pq);
  if (!rb.error.empty() || !rq.error.empty()) fail("launch: " + rb.error + " | " + rq.error);
  double err = 0, ctrl = 0;
  if (errs.empty()) {
    for (size_t i = 0; i < rq.o.size(); ++i)
      if (std::isnan(bf2f(rq.o[i]))) {
        fail("NaN / unwritten output at element " + std::to_string(i));
        break;
      }
    if (rq.o != rb.o) {
      size_t nd = 0;
      for (size_t i = 0; i < rq.o.size(); ++i) nd += rq.o[i] != rb.o[i];
      fail("output differs from the bf16 kernel on the dequantised KV in " + std::to_string(nd) +
           " of " + std::to_string(rq.o.size()) + " elements");
    }
    if (rq.mask != rb.mask || rq.visited != rb.visited || rq.skipped != rb.skipped)
      fail("skip mask / counters differ from the bf16 kernel on the dequantised KV");
    // Float64 references (dequantised and, as the control, original values) on sampled tiles.
    const int n_qt = decode ? 1 : (s.n_q_tokens + kQt - 1) / kQt;
    struct Job { int h, qt; };
    std::vector<Job> jobs;
    for (int h = 0; h < s.n_q_heads; h += std::max(1, s.n_q_heads / 3))
      for (int qt = n_qt - 1; qt >= 0; qt -= std::max(1, n_qt / 3)) jobs.push_back({h, qt});
    std::vector<RefTile> refs(jobs.size()), orig(jobs.size());
    parallel_for(int(jobs.size()), [&](int j) {
      const int64_t row0 = int64_t(jobs[size_t(j)].qt) * kQt;
      const int rows = decode ? 1 : int(std::min<int64_t>(kQt, s.n_q_tokens - row0));
      const uint8_t* gm = &rq.mask[(size_t(jobs[size_t(j)].h) * n_qt + jobs[size_t(j)].qt) * n_kvt];
      refs[size_t(j)] = reference_query_tile(hq, jobs[size_t(j)].h, row0, rows, qc.lambda, gm);
      orig[size_t(j)] = reference_query_tile(hp, jobs[size_t(j)].h, row0, rows, qc.lambda, gm);
    });
    double e2 = 0, c2 = 0, r2 = 0;
    for (size_t j = 0; j < jobs.size(); ++j) {
      const RefTile& r = refs[j];
      const uint8_t* gm = &rq.mask[(size_t(jobs[j].h) * n_qt + jobs[j].qt) * n_kvt];
      for (int t = 0; t < r.n_visible_tiles; ++t) {
        ++n_tiles;
        if (!r.ambiguous[size_t(t)] && gm[t] != r.skip[size_t(t)])
          fail("mask head " + std::to_string(jobs[j].h) + " kv tile " + std::to_string(t) +
               ": gpu " + std::to_string(gm[t]) + " ref " + std::to_string(r.skip[size_t(t)]));
      }
      const int64_t row0 = int64_t(jobs[j].qt) * kQt;
      const int rows = decode ? 1 : int(std::min<int64_t>(kQt, s.n_q_tokens - row0));
      for (int rr = 0; rr < rows; ++rr)
        for (int i = 0; i < d; ++i) {
          const double g = bf2f(rq.o[(size_t(row0 + rr) * s.n_q_heads + size_t(jobs[j].h)) * d + size_t(i)]);
          const double want = r.out[size_t(rr) * d + size_t(i)];
          e2 += (g - want) * (g - want);
          c2 += (g - orig[j].out[size_t(rr) * d + size_t(i)]) * (g - orig[j].out[size_t(rr) * d + size_t(i)]);
          r2 += want * want;
        }
    }
    err = std::sqrt(e2 / std::max(r2, 1e-30));
    ctrl = std::sqrt(c2 / std::max(r2, 1e-30));
    if (!(err <= kTolerance)) fail("rel err " + std::to_string(err) + " > " + std::to_string(kTolerance));
    // int4's quantization error (~amax / 14 per element) must show against the original
    // values: the dequantised reference is the closer one (int8's error is near the bf16
    // noise, so it is not gated).
    if (qc.bits == 4 && s.kv_len >= 64 && !(ctrl > err))
      fail("control: error vs the unquantised reference " + std::to_string(ctrl) +
           " is not above the error vs the dequantised one " + std::to_string(err));
  }
  worst_err = std::max(worst_err, err);
  for (void* ptr : {(void*)dkc, (void*)dvc, (void*)dks, (void*)dvs, (void*)dpk, (void*)dpv, (void*)dtab})
    SINKSCOPE_CUDA_CHECK(cudaFree(ptr));
  dp.release();
  if (!errs.empty()) {
    std::printf("FAIL quantized int%d%s: nq=%d kv_len=%lld q_start=%lld heads=%d/%d d=%d block=%d "
                "lambda=%g (%d protected pages)\n",
                qc.bits, qc.protect ? " protected" : "", s.n_q_tokens, (long long)s.kv_len,
                (long long)s.q_start, s.n_q_heads, s.n_kv_heads, d, bc, qc.lambda, n_prot_pages);
    for (auto& e : errs) std::printf("     %s\n", e.c_str());
    return 1;
  }
  return 0;
}

int run_quant_cases(std::mt19937_64& rng, bool quick) {
  auto t0 = std::chrono::steady_clock::now();
  struct Q { int nq; int64_t kv; int hq, hkv, d, bc; };
  std::vector<Q> shapes = {
      // decode
      {1, 1, 4, 1, 64, 64},        {1, 65, 9, 3, 64, 64},      {1, 1000, 8, 2, 128, 64},
      {1, 4096, 32, 8, 128, 128},  {1, 5000, 8, 8, 64, 128},   {1, 16384, 9, 3, 64, 64},
      {1, 16384, 32, 8, 128, 128}, {1, 32768, 8, 1, 128, 64},
      // prefill, and chunked prefill (queries at the end of a longer cache)
      {129, 129, 8, 2, 64, 64},    {1000, 1000, 9, 3, 64, 128}, {600, 600, 8, 8, 128, 64},
      {300, 4096, 8, 1, 128, 128}, {100, 1000, 4, 1, 64, 64},   {256, 16384, 9, 3, 64, 64}};
  int failed = 0, n = 0;
  double worst = 0;
  int64_t tiles = 0;
  int style = 0;
  for (const Q& q : shapes)
    for (int bits : {8, 4})
      for (bool protect : {false, true})
        for (double lam : {0.0, 1e-2}) {
          if (quick && (q.kv > 4096 || lam > 0)) continue;
          QCase c;
          c.spec.n_q_tokens = q.nq;
          c.spec.kv_len = q.kv;
          c.spec.q_start = q.kv - q.nq;
          c.spec.n_q_heads = q.hq;
          c.spec.n_kv_heads = q.hkv;
          c.spec.head_dim = q.d;
          c.spec.block_size = q.bc;
          c.spec.loud_scale = 2.0;
          c.spec.sink_logit = (style % 2) ? 6.0 : 0.0;
          c.spec.quiet_fraction = (style++ % 2) ? 0.5 : 0.0;
          c.bits = bits;
          c.protect = protect;
          c.lambda = lam;
          failed += run_quant_case(c, rng, worst, tiles);
          ++n;
        }
  std::printf("%-28s cases %4d  failed %d  worst rel err %.2e  tiles %lld  %.1fs\n",
              "quantized KV int8/int4", n, failed, worst, (long long)tiles,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::fflush(stdout);
  return failed;
}

void report(const char* name, const Totals& t, double secs) {
  std::printf("%-28s cases %4d  failed %d  worst rel err %.2e  tiles %lld (ref skipped %.1f%%, "
              "ambiguous %lld)  %.1fs\n",
              name, t.cases, t.failed, t.worst_err, (long long)t.tiles_compared,
              t.tiles_compared ? 100.0 * t.skipped_ref / t.tiles_compared : 0.0,
              (long long)t.ambiguous, secs);
  if (t.ws_cases)
    std::printf("%-28s   warp-specialized main run (dense and sparse), also on wgmma: %d cases, "
                "worst rel err %.2e\n",
                "", t.ws_cases, t.worst_wg_err);
  if (t.alt_cases)
    std::printf("%-28s   also on mma.sync: %d cases, worst rel err %.2e\n", "", t.alt_cases,
                t.worst_alt_err);
  if (t.keep_cases)
    std::printf("%-28s   skip_softmax_exp=false: %d cases, worst rel err %.2e\n", "",
                t.keep_cases, t.worst_keep_err);
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
    // Chunks for the warp-specialised kernel's 128-key tiles: q_start off the 64 / 128 grid
    // (a diagonal tile that is two 64-row pages, one consumer warpgroup seeing none of the last
    // tile), keys past the last query, a last query tile of < 64 rows; dense, then sparse with
    // sink + quiet tiles (votes per 64-key half, a last tile whose second half is not visited).
    for (double lam : {0.0, 1e-2, 0.1}) {
      const double sink = lam > 0 ? 6.0 : 0.0, quiet = lam > 0 ? 0.5 : 0.0;
      Case c;
      c.lambda = lam;
      c.spec = spec(200, 5000, 1234, 8, 2, 128, 64, sink, quiet);
      failed += !run_case(c, rng, t);
      c.spec = spec(70, 3001, 2001, 9, 3, 64, 128, sink, quiet);
      failed += !run_case(c, rng, t);
      c.spec = spec(333, 397, 40, 4, 4, 64, 64, 6.0, 0.5);
      failed += !run_case(c, rng, t);
      c.spec = spec(190, 190, 0, 8, 8, 128, 128, sink, quiet);
      failed += !run_case(c, rng, t);
    }
    // 64-row query tiles: q_start = 32 mod 64, so every 128-row CTA has a lower query tile that
    // sees a 64-key tile (or 64-key unit of a 128-key tile) its upper neighbour does not (not
    // visited, not counted for the upper tile), and halves that vote differently on the sink +
    // quiet input; both head dims (the warp-specialised sparse kernel at d = 64 and 128).
    for (int d : {64, 128})
      for (int bc : {64, 128})
        for (double lam : {0.0, 1e-2}) {
          Case c;
          c.lambda = lam;
          c.spec = spec(288, 1088, 800, 4, 2, d, bc, 6.0, 0.5);
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
  failed += run_pdl_predecessor_cases(rng);
  failed += run_cpu_engine_cases(rng, quick);
  failed += run_quant_cases(rng, quick);
  std::printf("%s: %d failed case(s)\n", failed ? "FAIL" : "PASS", failed);
  return failed ? 1 : 0;
}
