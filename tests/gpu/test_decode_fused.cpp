// SPDX-License-Identifier: Apache-2.0
// GPU test of the fused batch-1 decode kernels (kernels/decode_fused.h) and of launch_rms_norm
// (kernels/ops.h), which the unfused path runs before them, against a float64 CPU
// reference, plus a timing section (docs/architecture.md, design principle 12: check mode and
// timing mode in one program). Plain executable: "SKIP: ..." and exit 0 without a GPU; exit 1 on
// any failure.
//
// Every case draws fresh random inputs (seed printed), poisons every output with bf16 NaN
// (0xffff) and checks, per output element, |gpu - ref| <= tol with
//   tol = 2^-8 |ref|           bf16 output rounding (half an ulp, relative)
//       + 3e-5 sum_k |w_k xn_k|  fp32 accumulation in another order than the reference
//       + 2^-7 max_k |w_k xn_k|  one element of the bf16-rounded normed input may round the
//                                other way (the GPU's sum of squares is fp32, the reference's
//                                float64) -- only for the RMSNorm-fused kernels.
// q must be fully written; the K/V pages must hold exactly the appended position (found through
// a reversed page table) and poison everywhere else. Shapes: SmolLM2 (9/3 heads, d 64,
// interleaved RoPE), Qwen2-like (GQA 7, NeoX, biases, block 128), d 128 (GQA 4), partial RoPE
// with odd sizes, a 4096/11008 model (several passes per row), and a tiny one (rows shorter
// than a warp's pass, an odd residual width).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/decode_fused.h"
#include "tests/gpu/attention_problem.h"
#include "gpu_checks.h"

using namespace sinkscope;
using gpu_test::check;
using namespace sinkscope::kernels;
using sinkscope::testing::bf2f;
using sinkscope::testing::f2bf;

namespace {

constexpr uint16_t kPoison = 0xffff;  // bf16 NaN

// Device buffer of T (test program: failures exit through SINKSCOPE_CUDA_CHECK).
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) {
    SINKSCOPE_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
  }
  Dev(const std::vector<T>& h) : Dev(h.size()) { up(h); }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  void up(const std::vector<T>& h) {
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> down() const {
    std::vector<T> h(n);
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

struct Case {
  const char* name;
  int d, n_head, n_kv, hd, rope_dim;
  bool neox, bias;
  int ff, block_size, pos;
  bool pos_dev;  // position read from device memory (the graph-captured decode step)
};

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  float uni(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(g); }
  std::vector<float> vec(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (float& x : v) x = uni(lo, hi);
    return v;
  }
  std::vector<uint16_t> bf(size_t n, float a) {
    std::vector<uint16_t> v(n);
    for (uint16_t& x : v) x = f2bf(uni(-a, a));
    return v;
  }
};

// The bf16 normed input the kernels stage: bf16((x * scale) * w), scale in double.
std::vector<float> normed(const std::vector<float>& x, const std::vector<float>& w, float eps) {
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const float scale = float(1.0 / std::sqrt(ss / double(x.size()) + double(eps)));
  std::vector<float> xn(x.size());
  for (size_t i = 0; i < x.size(); ++i) xn[i] = bf2f(f2bf(x[i] * scale * w[i]));
  return xn;
}

// One row's dot product in float64 with its error scales.
struct Dot {
  double v = 0, mag = 0, maxterm = 0;
};
Dot dot_row(const uint16_t* w, const std::vector<float>& x) {
  Dot d;
  for (size_t k = 0; k < x.size(); ++k) {
    const double t = double(bf2f(w[k])) * x[k];
    d.v += t;
    d.mag += std::fabs(t);
    d.maxterm = std::max(d.maxterm, std::fabs(t));
  }
  return d;
}
double acc_tol(const Dot& d, bool normed_input) {
  return 3e-5 * d.mag + (normed_input ? d.maxterm / 128.0 : 0.0) + 1e-7;
}

// Worst |gpu - ref| / tol over a case's outputs; NaN counts as failure.
struct Worst {
  double ratio = 0;
  int64_t bad = 0, nan = 0;
  void add(double got, double ref, double tol) {
    if (!std::isfinite(got)) {
      ++nan;
      return;
    }
    const double r = std::fabs(got - ref) / tol;
    ratio = std::max(ratio, r);
    bad += r > 1.0;
  }
  bool ok() const { return bad == 0 && nan == 0; }
  std::string str() const {
    char b[128];
    std::snprintf(b, sizeof b, "worst err/tol %.3f, %lld over, %lld NaN", ratio, (long long)bad,
                  (long long)nan);
    return b;
  }
};

void test_qkv(const Case& c, Rng& rng) {
  const int Q = c.n_head * c.hd, KV = c.n_kv * c.hd, W = Q + 2 * KV, half = c.rope_dim / 2;
  const float eps = 1e-6f;
  const std::vector<float> x = rng.vec(size_t(c.d), -2.f, 2.f);
  const std::vector<float> g = rng.vec(size_t(c.d), 0.5f, 1.5f);
  const std::vector<uint16_t> w = rng.bf(size_t(W) * c.d, 1.5f / std::sqrt(float(c.d)));
  const std::vector<float> bias = c.bias ? rng.vec(size_t(W), -0.5f, 0.5f) : std::vector<float>();
  const int n_pos = c.pos + 1;
  std::vector<float> cs(size_t(n_pos) * std::max(half, 1), 1.f), sn(cs.size(), 0.f);
  for (int p = 0; p < n_pos; ++p)
    for (int i = 0; i < half; ++i) {
      const double ang = p * std::pow(10000.0, -2.0 * i / c.rope_dim);
      cs[size_t(p) * half + i] = float(std::cos(ang));
      sn[size_t(p) * half + i] = float(std::sin(ang));
    }
  const int n_pages = n_pos / c.block_size + 2;  // one spare page that must stay untouched
  std::vector<int32_t> table(static_cast<size_t>(n_pages));
  for (int i = 0; i < n_pages; ++i) table[size_t(i)] = n_pages - 1 - i;  // reversed
  const size_t page_elems = size_t(c.n_kv) * c.block_size * c.hd;

  Dev<float> dx(x), dg(g), dbias(c.bias ? bias : std::vector<float>(1)), dcs(cs), dsn(sn);
  Dev<uint16_t> dw(w), dq(static_cast<size_t>(Q)), dk(n_pages * page_elems), dv(n_pages * page_elems);
  Dev<int32_t> dtable(table), dpos(std::vector<int32_t>{c.pos});

  FusedQkvParams f;
  f.x = dx.p;
  f.norm_w = dg.p;
  f.eps = eps;
  f.w_qkv = dw.p;
  f.n_embd = c.d;
  QkvRopeParams& r = f.rope;
  r.bias = c.bias ? dbias.p : nullptr;
  r.rope_cos = dcs.p;
  r.rope_sin = dsn.p;
  r.q_out = dq.p;
  r.k_pages = dk.p;
  r.v_pages = dv.p;
  r.page_table = dtable.p;
  r.n_tokens = 1;
  r.pos0 = c.pos_dev ? -12345 : c.pos;  // must not be used when pos0_dev is set
  r.pos0_dev = c.pos_dev ? dpos.p : nullptr;
  r.n_head = c.n_head;
  r.n_head_kv = c.n_kv;
  r.head_dim = c.hd;
  r.rope_dim = c.rope_dim;
  r.neox = c.neox;
  r.block_size = c.block_size;
  // Reference: projections in float64, bias, RoPE with the same tables, per head.
  const std::vector<float> xn = normed(x, g, eps);
  std::vector<double> ref(static_cast<size_t>(W)), tol(static_cast<size_t>(W));
  std::vector<float> proj(static_cast<size_t>(W));  // the projection alone, for the unfused kernel
  for (int row = 0; row < W; ++row) {
    const Dot d = dot_row(&w[size_t(row) * c.d], xn);
    proj[size_t(row)] = float(d.v);
    ref[size_t(row)] = d.v + (c.bias ? bias[size_t(row)] : 0.0);
    tol[size_t(row)] = acc_tol(d, true);
  }
  for (int h = 0; h < c.n_head + c.n_kv; ++h)  // q and k heads are rotated
    for (int i = 0; i < half; ++i) {
      const int a = c.neox ? i : 2 * i, b = c.neox ? i + half : 2 * i + 1;
      const size_t ra = size_t(h) * c.hd + a, rb = size_t(h) * c.hd + b;
      const double co = cs[size_t(c.pos) * half + i], si = sn[size_t(c.pos) * half + i];
      const double x0 = ref[ra], x1 = ref[rb];
      ref[ra] = x0 * co - x1 * si;
      ref[rb] = x0 * si + x1 * co;
      const double t = tol[ra] + tol[rb];
      tol[ra] = tol[rb] = t;
    }
  // Both paths of a decode step: the fused kernel from x, and launch_qkv_rope_append (the
  // unfused path's, one token) from the fp32 projection rows.
  for (const bool fused : {true, false}) {
    const std::string name = std::string(fused ? "qkv_rope/" : "qkv_rope_append/") + c.name;
    SINKSCOPE_CUDA_CHECK(cudaMemset(dq.p, 0xff, dq.n * 2));
    SINKSCOPE_CUDA_CHECK(cudaMemset(dk.p, 0xff, dk.n * 2));
    SINKSCOPE_CUDA_CHECK(cudaMemset(dv.p, 0xff, dv.n * 2));
    Dev<float> dproj(proj);
    QkvRopeParams ru = r;
    ru.qkv = dproj.p;
    const OpStatus st = fused ? launch_fused_norm_qkv_rope(f, nullptr) : launch_qkv_rope_append(ru, nullptr);
    if (!st.ok) {
      check(false, name, st.message);
      continue;
    }
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<uint16_t> q = dq.down(), k = dk.down(), v = dv.down();
    Worst wq, wk, wv;
    for (int e = 0; e < Q; ++e)
      wq.add(bf2f(q[size_t(e)]), ref[size_t(e)], std::fabs(ref[size_t(e)]) / 256 + tol[size_t(e)]);
    const int64_t page = table[size_t(c.pos / c.block_size)];
    const int slot = c.pos % c.block_size;
    int64_t untouched_bad = 0;
    for (int which = 0; which < 2; ++which) {
      const std::vector<uint16_t>& pages = which ? v : k;
      Worst& wo = which ? wv : wk;
      std::vector<char> expected(pages.size(), 0);
      for (int h = 0; h < c.n_kv; ++h)
        for (int dd = 0; dd < c.hd; ++dd) {
          const size_t idx = size_t(((page * c.n_kv + h) * c.block_size + slot) * c.hd + dd);
          expected[idx] = 1;
          const size_t row = size_t(Q + which * KV + h * c.hd + dd);
          wo.add(bf2f(pages[idx]), ref[row], std::fabs(ref[row]) / 256 + tol[row]);
        }
      for (size_t i = 0; i < pages.size(); ++i) untouched_bad += !expected[i] && pages[i] != kPoison;
    }
    check(wq.ok() && wk.ok() && wv.ok() && untouched_bad == 0, name,
          "q " + wq.str() + "; k " + wk.str() + "; v " + wv.str() + "; " +
              std::to_string(untouched_bad) + " cache elements written outside the position");
  }
}

void test_gate_up(const Case& c, Rng& rng) {
  const float eps = 1e-5f;
  const std::vector<float> x = rng.vec(size_t(c.d), -3.f, 3.f);
  const std::vector<float> g = rng.vec(size_t(c.d), 0.2f, 2.0f);
  const std::vector<uint16_t> w = rng.bf(size_t(2) * c.ff * c.d, 3.f / std::sqrt(float(c.d)));
  Dev<float> dx(x), dg(g);
  Dev<uint16_t> dw(w), dact(static_cast<size_t>(c.ff));
  SINKSCOPE_CUDA_CHECK(cudaMemset(dact.p, 0xff, dact.n * 2));
  FusedGateUpParams p;
  p.x = dx.p;
  p.norm_w = dg.p;
  p.eps = eps;
  p.w_gu = dw.p;
  p.act = dact.p;
  p.n_embd = c.d;
  p.n_ff = c.ff;
  const OpStatus st = launch_fused_norm_gate_up_swiglu(p, nullptr);
  if (!st.ok) {
    check(false, std::string("gate_up_swiglu/") + c.name, st.message);
    return;
  }
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> act = dact.down();
  const std::vector<float> xn = normed(x, g, eps);
  Worst wo;
  for (int j = 0; j < c.ff; ++j) {
    const Dot dg_ = dot_row(&w[size_t(j) * c.d], xn);
    const Dot du = dot_row(&w[size_t(c.ff + j) * c.d], xn);
    const double gv = dg_.v, uv = du.v, sg = gv / (1.0 + std::exp(-gv));
    const double ref = sg * uv;
    const double tg = acc_tol(dg_, true), tu = acc_tol(du, true);
    // silu'(g) <= 1.1: the inputs' errors propagate through the product.
    const double t = std::fabs(ref) / 256 + 1.1 * (std::fabs(uv) + tu) * tg + std::fabs(sg) * tu;
    wo.add(bf2f(act[size_t(j)]), ref, t);
  }
  check(wo.ok(), std::string("gate_up_swiglu/") + c.name, wo.str());
}

void test_residual(const char* what, const Case& c, int n_out, int n_in, Rng& rng) {
  const std::vector<float> x0 = rng.vec(size_t(n_out), -4.f, 4.f);
  std::vector<uint16_t> vin = rng.bf(size_t(n_in), 2.f);
  const std::vector<uint16_t> w = rng.bf(size_t(n_out) * n_in, 1.f / std::sqrt(float(n_in)));
  Dev<float> dx(x0);
  Dev<uint16_t> dvin(vin), dw(w);
  const OpStatus st = launch_fused_gemv_residual(dvin.p, dw.p, dx.p, n_out, n_in, nullptr);
  const std::string name = std::string(what) + "/" + c.name;
  if (!st.ok) {
    check(false, name, st.message);
    return;
  }
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> x = dx.down();
  std::vector<float> vf(vin.size());
  for (size_t i = 0; i < vin.size(); ++i) vf[i] = bf2f(vin[i]);
  Worst wo;
  for (int r = 0; r < n_out; ++r) {
    const Dot d = dot_row(&w[size_t(r) * n_in], vf);
    const double ref = double(x0[size_t(r)]) + d.v;
    wo.add(x[size_t(r)], ref, acc_tol(d, false) + 1e-6 * std::fabs(ref));
  }
  check(wo.ok(), name, wo.str() + " (" + std::to_string(n_out) + " x " + std::to_string(n_in) + ")");
}

// launch_rms_norm (kernels/ops.h), which the unfused decode and every prefill run before the
// projections: `rows` rows of width d against the float64 reference, every output element
// written (bf16 NaN poison) and within one bf16 rounding of the reference (the GPU's sum of
// squares is fp32, so an element next to a rounding boundary may round the other way). Widths
// up to 2048 take the one-warp kernel, wider ones the one-CTA-per-row kernel (4096, 8192) and
// widths not a multiple of 4 the scalar fallback.
void test_rms_norm(int d, int rows, Rng& rng) {
  const float eps = 1e-5f;
  const std::vector<float> x = rng.vec(size_t(d) * rows, -3.f, 3.f);
  const std::vector<float> g = rng.vec(size_t(d), 0.2f, 2.0f);
  Dev<float> dx(x), dg(g);
  Dev<uint16_t> dout(size_t(d) * rows);
  SINKSCOPE_CUDA_CHECK(cudaMemset(dout.p, 0xff, dout.n * 2));
  const std::string name = "rms_norm/d" + std::to_string(d) + "_rows" + std::to_string(rows);
  const OpStatus st = launch_rms_norm(dx.p, dg.p, dout.p, rows, d, eps, nullptr);
  if (!st.ok) {
    check(false, name, st.message);
    return;
  }
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> out = dout.down();
  Worst wo;
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> xr(x.begin() + size_t(r) * d, x.begin() + size_t(r + 1) * d);
    const std::vector<float> ref = normed(xr, g, eps);
    for (int i = 0; i < d; ++i)
      wo.add(bf2f(out[size_t(r) * d + i]), ref[size_t(i)], std::fabs(ref[size_t(i)]) / 128.0 + 1e-30);
  }
  check(wo.ok(), name, wo.str());
}

// Timing: 30 layers of SmolLM2-sized weights (212 MB, beyond the 50 MB L2), each kernel kind
// captured 30 times (one launch per layer, PDL-chained) into a graph and replayed. Reports
// microseconds per launch and the weight-streaming rate. Informational (no gate).
void bench_smollm2() {
  const int D = 576, H = 9, HKV = 3, HD = 64, F = 1536, L = 30, Q = H * HD, W = Q + 2 * HKV * HD;
  Rng rng(7);
  std::vector<std::unique_ptr<Dev<uint16_t>>> wqkv, wo, wgu, wdown;
  for (int l = 0; l < L; ++l) {
    wqkv.push_back(std::make_unique<Dev<uint16_t>>(rng.bf(size_t(W) * D, 0.05f)));
    wo.push_back(std::make_unique<Dev<uint16_t>>(rng.bf(size_t(D) * Q, 0.05f)));
    wgu.push_back(std::make_unique<Dev<uint16_t>>(rng.bf(size_t(2) * F * D, 0.05f)));
    wdown.push_back(std::make_unique<Dev<uint16_t>>(rng.bf(size_t(D) * F, 0.05f)));
  }
  Dev<float> x(rng.vec(D, -1.f, 1.f)), g(rng.vec(D, 0.9f, 1.1f));
  Dev<float> cs(std::vector<float>(size_t(64) * 32, 1.f)), sn(std::vector<float>(size_t(64) * 32, 0.f));
  Dev<uint16_t> q(static_cast<size_t>(Q)), att(rng.bf(size_t(Q), 1.f)), act(rng.bf(size_t(F), 1.f));
  Dev<uint16_t> kp(size_t(HKV) * 64 * HD), vp(size_t(HKV) * 64 * HD);
  Dev<int32_t> table(std::vector<int32_t>{0});
  cudaStream_t s;
  SINKSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  auto launch = [&](int kind, int l) {
    OpStatus st;
    if (kind == 0) {
      FusedQkvParams f;
      f.x = x.p;
      f.norm_w = g.p;
      f.w_qkv = wqkv[size_t(l)]->p;
      f.n_embd = D;
      f.rope = QkvRopeParams{};
      f.rope.rope_cos = cs.p;
      f.rope.rope_sin = sn.p;
      f.rope.q_out = q.p;
      f.rope.k_pages = kp.p;
      f.rope.v_pages = vp.p;
      f.rope.page_table = table.p;
      f.rope.n_tokens = 1;
      f.rope.pos0 = 5;
      f.rope.n_head = H;
      f.rope.n_head_kv = HKV;
      f.rope.head_dim = HD;
      f.rope.rope_dim = HD;
      f.rope.block_size = 64;
      st = launch_fused_norm_qkv_rope(f, s);
    } else if (kind == 1) {
      st = launch_fused_gemv_residual(att.p, wo[size_t(l)]->p, x.p, D, Q, s);
    } else if (kind == 2) {
      FusedGateUpParams p;
      p.x = x.p;
      p.norm_w = g.p;
      p.w_gu = wgu[size_t(l)]->p;
      p.act = act.p;
      p.n_embd = D;
      p.n_ff = F;
      st = launch_fused_norm_gate_up_swiglu(p, s);
    } else {
      st = launch_fused_gemv_residual(act.p, wdown[size_t(l)]->p, x.p, D, F, s);
    }
    if (!st.ok) {
      std::printf("FAIL bench launch: %s\n", st.message.c_str());
      std::exit(1);
    }
  };
  const char* names[5] = {"norm+qkv+rope+append", "o-proj+residual", "norm+gate|up+swiglu",
                          "down-proj+residual", "layer (all four)"};
  const double bytes[4] = {double(W) * D * 2, double(D) * Q * 2, double(2) * F * D * 2,
                           double(D) * F * 2};
  std::printf("timing (SmolLM2 shapes, 30 layers of weights, graph of 30 launches x 20 replays, "
              "PDL %s):\n", pdl_enabled() ? "on" : "off");
  for (int kind = 0; kind < 5; ++kind) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    SINKSCOPE_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < L; ++l) {
      if (kind < 4) {
        launch(kind, l);
      } else {
        for (int k = 0; k < 4; ++k) launch(k, l);
      }
    }
    SINKSCOPE_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    SINKSCOPE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    SINKSCOPE_CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm-up
    SINKSCOPE_CUDA_CHECK(cudaStreamSynchronize(s));
    cudaEvent_t e0, e1;
    SINKSCOPE_CUDA_CHECK(cudaEventCreate(&e0));
    SINKSCOPE_CUDA_CHECK(cudaEventCreate(&e1));
    const int reps = 20;
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(e0, s));
    for (int r = 0; r < reps; ++r) SINKSCOPE_CUDA_CHECK(cudaGraphLaunch(exec, s));
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(e1, s));
    SINKSCOPE_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    SINKSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double us = 1e3 * ms / (reps * L);
    const double b = kind < 4 ? bytes[kind] : bytes[0] + bytes[1] + bytes[2] + bytes[3];
    std::printf("  %-22s %7.2f us/launch  %6.0f GB/s  (%.2f MB of weights)\n", names[kind], us,
                b / (us * 1e3), b / 1e6);
    SINKSCOPE_CUDA_CHECK(cudaEventDestroy(e0));
    SINKSCOPE_CUDA_CHECK(cudaEventDestroy(e1));
    SINKSCOPE_CUDA_CHECK(cudaGraphExecDestroy(exec));
    SINKSCOPE_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  SINKSCOPE_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace

int main(int argc, char** argv) {
  if (!sinkscope::testing::have_gpu("test_decode_fused")) return 0;
  const OpStatus dev = ops_device_check();
  if (!dev.ok) {
    std::printf("FAIL device check: %s\n", dev.message.c_str());
    return 1;
  }
  const bool bench = !(argc > 1 && std::strcmp(argv[1], "--check") == 0);
  const uint64_t seed =
      uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) & 0xffffffffu;
  std::printf("seed %llu (tolerances: see the file's header)\n", (unsigned long long)seed);
  Rng rng(seed);
  const Case cases[] = {
      // name              D     H   KV  hd   rope neox  bias  F      bs   pos  pos_dev
      {"smollm2",          576,  9,  3,  64,  64,  false, false, 1536,  64,  130, true},
      {"qwen2_gqa7_bias",  896,  14, 2,  64,  64,  true,  true,  4864,  128, 300, false},
      {"d128_gqa4",        2048, 16, 4,  128, 128, false, false, 5632,  64,  63,  true},
      {"partial_rope_odd", 520,  4,  4,  64,  32,  false, true,  1000,  64,  0,   false},
      {"big_4096",         4096, 32, 8,  128, 128, true,  false, 11008, 128, 1000, true},
      {"tiny",             16,   2,  1,  8,   4,   true,  true,  24,    64,  65,  true},
  };
  for (const Case& c : cases) {
    test_qkv(c, rng);
    test_gate_up(c, rng);
    test_residual("o_residual", c, c.d, c.n_head * c.hd, rng);
    test_residual("down_residual", c, c.d, c.ff, rng);
  }
  test_residual("odd_rows_residual", cases[5], 17, 16, rng);
  for (const int d : {576, 2048, 3584, 4096, 5120, 8192, 1030})
    for (const int rows : {1, 3}) test_rms_norm(d, rows, rng);
  // Shapes the kernels refuse come back as errors, not launches.
  {
    const OpStatus st = launch_fused_gemv_residual(nullptr, nullptr, nullptr, 8, 12, nullptr);
    FusedQkvParams f;
    const OpStatus sq = launch_fused_norm_qkv_rope(f, nullptr);
    check(!st.ok && !sq.ok, "refuses_bad_arguments", st.message + " | " + sq.message);
  }
  if (bench && gpu_test::g_failed == 0) bench_smollm2();
  return gpu_test::finish_checks();
}
