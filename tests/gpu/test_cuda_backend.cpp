// SPDX-License-Identifier: Apache-2.0
// The CUDA backend against the CPU reference on the real model (SmolLM2 by default). Plain
// executable (the GPU image has no GoogleTest): prints "PASS|FAIL <check>: <numbers>" per check
// and "RESULT: ..." last; exit 1 when any check failed. Without a GPU or without the model it
// prints "SKIP: <reason>" and exits 0.
//   model: $SINKSCOPE_MODEL, else sinkscope::default_model_path()
// Argument: run only the sections whose name contains it.
// Gates: teacher-forced logits, mean KL(cpu || gpu) <= 1e-3 nats and top-1 agreement >= 99 %,
// for one prefill pass and for prefill + single-token decode steps.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/cuda/cuda_backend.h"
#include "kernels/attention.h"
#include "engine/cuda/fault_injection.h"
#include "engine/model/model.h"
#include "gpu_agreement.h"
#include "sample_text.h"
#include "engine/util/paths.h"
#include "gpu_checks.h"
#include "gpu_model.h"

using namespace sinkscope;
using gpu_test::check;
using gpu_test::run;

namespace {



std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

using gpu_test::Agreement;
using gpu_test::compare;
using gpu_test::prefill_then_decode;

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Prefill ids[0, n_prefill) (last logits), then one forward per token of ids[n_prefill, +steps):
// the logits rows of the prefill's last token and of every step, concatenated.
// A weight type the device decodes in its blocks (kernels/qblock.h): --gpu-weights native
// keeps such projections quantized.
bool device_decoded(GgmlType t) {
  for (GgmlType d : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K,
                     GgmlType::kQ5_K, GgmlType::kQ6_K})
    if (t == d) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) gpu_test::g_filter = argv[1];  // only the sections whose name contains it
  int exit_code = 0;
  const std::shared_ptr<const Model> model = gpu_test::load_gpu_model(&exit_code);
  if (!model) return exit_code;
  const ModelConfig& c = model->config();
  const int V = c.n_vocab;
  std::vector<TokenId> text = model->tokenizer().encode(gpu_test::kText);
  std::vector<TokenId> ids = text;
  while (ids.size() < 400) ids.insert(ids.end(), text.begin(), text.end());
  ids.resize(400);
  std::printf(
      "device: %s\nmodel: %s (%s, %d layers, %d/%d heads, head_dim %d, vocab %d)\n"
      "text: %zu tokens (%zu from the fixed text), teacher-forced\n",
      cuda_device_name().c_str(), default_model_path().string().c_str(), c.architecture.c_str(), c.n_layer,
      c.n_head, c.n_head_kv, c.head_dim, V, ids.size(), text.size());
  std::fflush(stdout);

  BackendOptions cpu_opt;
  auto cpu = make_cpu_backend(model, cpu_opt);

  // 1. One prefill pass over 400 positions, every position's logits.
  std::vector<float> cpu_all;
  run("prefill_teacher_forced", [&] {
    auto gpu = make_cuda_backend(model, {});
    std::printf("cuda backend: %s, %.1f MiB of device memory\n", gpu->name().c_str(),
                double(gpu->device_bytes()) / (1 << 20));
    std::vector<float> g;
    cpu->forward(ids, LogitsMode::kAll, cpu_all);
    gpu->forward(ids, LogitsMode::kAll, g);
    const Agreement a = compare(cpu_all, g, V);
    check(a.finite && a.mean_kl <= 1e-3 && a.top1 >= 0.99, "prefill_teacher_forced",
          a.str() + " (gates: mean KL <= 1e-3, top-1 >= 99 %)");
    // The row statistics computed on the device with those logits (Backend::last_row_stats).
    RowStats rs;
    const bool got = gpu->last_row_stats(&rs);
    const gpu_test::RowStatsDiff d = gpu_test::row_stats_diff(g, V, rs.lse, rs.top1);
    check(got && d.rows == int(ids.size()) && d.max_lse_diff <= 1e-9 && d.top1_mismatch == 0,
          "prefill_row_stats", (got ? d.str() : std::string("none returned")) +
                                   " (gates: every row, |dlse| <= 1e-9, no argmax mismatch)");
    std::vector<float> one;
    gpu->forward(std::span(ids.data(), 1), LogitsMode::kLast, one);
    check(!gpu->last_row_stats(&rs), "row_stats_replaced",
          "a kLast forward leaves no row statistics");
  });

  // 1a. rewind(): back to the prompt's end after decode steps, the decode again gives the same
  //     logits bit for bit and the probes the snapshot's; a window refuses.
  run("rewind", [&] {
    BackendOptions o;
    o.attention.type = AttentionType::kDynamicSparse;
    o.attention.threshold_prefill = o.attention.threshold_decode = 0.01;
    auto gpu = make_cuda_backend(model, o);
    std::vector<float> l;
    gpu->forward(std::span(ids.data(), 300), LogitsMode::kLast, l);
    const AttentionProbes snap = gpu->probes();
    auto decode = [&] {
      std::vector<float> out;
      for (int t = 0; t < 40; ++t) {
        gpu->forward(std::span(ids.data() + 300 + t, 1), LogitsMode::kLast, l);
        out.insert(out.end(), l.begin(), l.end());
      }
      return out;
    };
    const std::vector<float> first = decode();
    const TileCounts d1 = gpu->probes().total(true);
    const bool ok = gpu->rewind(300, snap);
    const bool probes_back = gpu->probes().total(true).visited == snap.total(true).visited &&
                             gpu->probes().total(false).skipped == snap.total(false).skipped &&
                             gpu->n_past() == 300;
    const std::vector<float> again = decode();
    const TileCounts d2 = gpu->probes().total(true);
    BackendOptions w = o;
    w.cache.strategy = CacheStrategy::kSlidingWindow;
    w.cache.window_size = 128;
    auto win = make_cuda_backend(model, w);
    win->forward(std::span(ids.data(), 200), LogitsMode::kLast, l);
    const bool win_refused = !win->rewind(100, win->probes());
    check(ok && probes_back && bitwise_equal(first, again) && d1.visited == d2.visited &&
              d1.skipped == d2.skipped && win_refused,
          "rewind",
          std::string("rewound to 300 after 40 decode steps: ") + (ok ? "yes" : "NO") +
              ", probes as the snapshot: " + (probes_back ? "yes" : "NO") +
              ", the 40 steps again bitwise equal: " + (bitwise_equal(first, again) ? "yes" : "NO") +
              fmt(", decode tiles visited %.0f / %.0f, skipped %.0f / %.0f", double(d1.visited),
                  double(d2.visited), double(d1.skipped), double(d2.skipped)) +
              ", a window refuses: " + (win_refused ? "yes" : "NO"));
  });

  // 1b. LogitsMode::kLastRowStats: the statistics reduced on the device without the logits
  //     leaving it, against the same backend's kAll logits reduced on the host (full cache and
  //     a sliding window), and kl_rows from two runs' hidden states against the KL of their
  //     kAll logits computed here in double.
  run("row_stats_mode", [&] {
    auto row_kl_host = [&](const std::vector<float>& p, const std::vector<float>& q, size_t r) {
      const float* a = p.data() + r * V;
      const float* b = q.data() + r * V;
      double ma = -1e300, mb = -1e300, sa = 0, sb = 0, kl = 0;
      for (int t = 0; t < V; ++t) ma = std::max(ma, double(a[t])), mb = std::max(mb, double(b[t]));
      for (int t = 0; t < V; ++t) sa += std::exp(a[t] - ma), sb += std::exp(b[t] - mb);
      const double la = ma + std::log(sa), lb = mb + std::log(sb);
      for (int t = 0; t < V; ++t) kl += std::exp(a[t] - la) * ((a[t] - la) - (b[t] - lb));
      return std::max(kl, 0.0);
    };
    BackendOptions win;
    win.cache.strategy = CacheStrategy::kSlidingWindow;
    win.cache.window_size = 128;
    win.cache.sink_keep_count = 4;
    BackendOptions quant;  // int8 KV: logits that differ from the dense run's
    quant.cache.quantization.enabled = true;
    quant.cache.quantization.protect_sink_positions = false;
    std::vector<RowStats> kept;
    std::vector<std::vector<float>> kept_all;
    int i_case = 0;
    for (const BackendOptions& o : {BackendOptions{}, win, quant}) {
      const char* name = i_case == 0 ? "full cache" : i_case == 1 ? "window 128 + 4 sinks" : "int8 KV";
      ++i_case;
      auto gpu = make_cuda_backend(model, o);
      std::vector<float> all, last;
      gpu->forward(ids, LogitsMode::kAll, all);
      gpu->reset();
      gpu->forward(ids, LogitsMode::kLastRowStats, last);
      RowStats st;
      const bool got = gpu->last_row_stats(&st);
      const gpu_test::RowStatsDiff d = gpu_test::row_stats_diff(all, V, st.lse, st.top1);
      int next_bad = 0;
      for (size_t i = 0; got && i + 1 < ids.size() && i < st.next_logit.size(); ++i)
        next_bad += st.next_logit[i] != all[i * V + size_t(ids[i + 1])];
      const bool last_same =
          last.size() == size_t(V) && std::equal(last.begin(), last.end(), all.end() - V);
      const bool shape_ok = got && st.next_logit.size() == ids.size() - 1 && st.hidden &&
                            st.hidden->n == int(ids.size());
      check(shape_ok && d.rows == int(ids.size()) && d.max_lse_diff <= 1e-9 &&
                d.top1_mismatch == 0 && next_bad == 0 && last_same,
            std::string("row_stats_mode ") + name,
            (got ? d.str() : std::string("none returned")) +
                fmt(", next-token logits differing %.0f, last row equal: ", next_bad) +
                (last_same ? "yes" : "NO") +
                " (gates: every row, |dlse| <= 1e-9, no argmax or next-logit mismatch)");
      kept.push_back(std::move(st));
      kept_all.push_back(std::move(all));
    }
    auto gpu = make_cuda_backend(model, {});
    // A decode step asked for row statistics: one row, equal to the step's logits.
    std::vector<float> pre, step;
    gpu->forward(std::span(ids.data(), 100), LogitsMode::kLast, pre);
    gpu->forward(std::span(ids.data() + 100, 1), LogitsMode::kLastRowStats, step);
    RowStats one;
    const bool one_got = gpu->last_row_stats(&one);
    const gpu_test::RowStatsDiff d1 = gpu_test::row_stats_diff(step, V, one.lse, one.top1);
    check(one_got && d1.rows == 1 && d1.max_lse_diff <= 1e-9 && d1.top1_mismatch == 0 &&
              one.next_logit.empty() && one.hidden && one.hidden->n == 1,
          "row_stats_mode decode step", one_got ? d1.str() : std::string("none returned"));
    const std::vector<double> kl = gpu->kl_rows(*kept[0].hidden, *kept[2].hidden);
    const std::vector<double> self = gpu->kl_rows(*kept[0].hidden, *kept[0].hidden);
    double worst = 0, total = 0;
    bool zero = self.size() == ids.size();
    for (size_t r = 0; r < ids.size() && kl.size() == ids.size(); ++r) {
      const double want = row_kl_host(kept_all[0], kept_all[2], r);
      total += want;
      worst = std::max(worst, std::abs(kl[r] - want));
      zero = zero && self[r] == 0.0;
    }
    check(kl.size() == ids.size() && total > 1e-6 && worst <= 1e-6 && zero, "kl_rows",
          fmt("KL(dense || int8 KV) over %.0f rows: mean %.3g, max |d| vs the logits' KL %.3g; ",
              double(ids.size()), total / double(ids.size()), worst) +
              (zero ? "KL of a run with itself 0 on every row" : "KL with itself NOT 0") +
              " (gates: |d| <= 1e-6 nats, exactly 0 against itself)");
  });

  // 2. Prefill 64, then 320 single-token decode steps (graphs on: the default): the issue's
  //    gate is over >= 256 teacher-forced positions, where one near-tie is < 0.4 %.
  run("decode_teacher_forced", [&] {
    auto gpu = make_cuda_backend(model, {});
    cpu->reset();
    const std::vector<float> lc = prefill_then_decode(*cpu, ids, 64, 320);
    const std::vector<float> lg = prefill_then_decode(*gpu, ids, 64, 320);
    const Agreement a = compare(lc, lg, V);
    check(a.finite && a.mean_kl <= 1e-3 && a.top1 >= 0.99, "decode_teacher_forced",
          a.str() + " (gates: mean KL <= 1e-3, top-1 >= 99 %)");
    // One graph per power-of-two length bound, reused for every position below it: 320 steps
    // over lengths 65..384 fit one bound (512), so the gate (captures <= steps / 8) is loose.
    const CudaGraphStats s = gpu->graph_stats();
    check(s.disabled_reason.empty() && s.graph_steps == 320 && s.eager_steps == 0 &&
              s.captures >= 1 && s.captures <= 320 / 8,
          "decode_uses_cuda_graphs",
          fmt("%.0f graph steps, %.0f eager, %.0f captures, %.0f instantiations",
              double(s.graph_steps), double(s.eager_steps), double(s.captures),
              double(s.instantiations)) +
              fmt(", %.0f graphs held", double(s.graphs_cached)) +
              (s.disabled_reason.empty() ? "" : "; graphs disabled: " + s.disabled_reason));
  });

  // 2b. Fused batch-1 decode kernels (the default; kernels/decode_fused.h) against the unfused
  //     path (cuBLAS GEMMs + element-wise kernels, SINKSCOPE_FUSED_DECODE=0): both round the
  //     same activations to bf16 and accumulate in fp32, only the summation order differs, so
  //     the logits agree far inside the CPU-vs-GPU gates. Graphs replay in both. (The checks
  //     below run the default, i.e. fused, decode: graph_equals_eager then also says that the
  //     fused kernels are deterministic, and sparse_* that they chain with the sparse kernels.)
  run("fused_decode_equals_unfused", [&] {
    const char* env = std::getenv("SINKSCOPE_FUSED_DECODE");
    const bool env_off = env && std::string(env) == "0";
    // The fused kernels read bf16 rows: both backends with bf16 weights.
    BackendOptions b16;
    b16.gpu_weights = GpuWeights::kBf16;
    auto f = make_cuda_backend(model, b16);
    CudaBackendOptions co;
    co.tuning.fused_decode = false;
    auto u = make_cuda_backend(model, b16, co);
    std::string why;
    const bool on = f->fused_decode(&why);
    const bool off = !u->fused_decode();
    const std::vector<float> lf = prefill_then_decode(*f, ids, 64, 128);
    const std::vector<float> lu = prefill_then_decode(*u, ids, 64, 128);
    const Agreement a = compare(lu, lf, V);
    const CudaGraphStats sf = f->graph_stats(), su = u->graph_stats();
    // Both paths are bf16 approximations of the float32 CPU reference (decode_teacher_forced
    // holds the fused one to KL <= 1e-3 against it); fused and unfused differ about as much as
    // each differs from the CPU (mean KL ~1e-4). Gated like the CPU comparison; max |dlogit| is printed, not gated (one bf16 rounding flip of an activation
    // moves single logits by a few tenths without changing the distribution).
    check((on || env_off) && off && a.finite && a.mean_kl <= 1e-3 && a.top1 >= 0.99 &&
              sf.graph_steps == 128 && sf.eager_steps == 0 &&
              su.graph_steps == 128 && sf.disabled_reason.empty(),
          "fused_decode_equals_unfused",
          std::string("fused decode: ") + (on ? "on" : "OFF (" + why + ")") + "; " + a.str() +
              fmt(" (gates: mean KL <= 1e-3, top-1 >= 99 %%); graph steps "
                  "fused %.0f, unfused %.0f",
                  double(sf.graph_steps), double(su.graph_steps)) +
              (sf.disabled_reason.empty() ? "" : "; graphs disabled: " + sf.disabled_reason));
  });

  // 2c. bf16 weights asked for explicitly (BackendOptions::gpu_weights; the default, which the
  //     sections above ran) against the CPU with the gates of sections 1 and 2, and weights kept
  //     in their file format (kNative) must take less device memory when the file's projections
  //     are of a type the device decodes (kernels/qblock.h). The native path's agreement with
  //     the CPU is test_cuda_qweights'.
  run("bf16_weights_teacher_forced", [&] {
    BackendOptions b16;
    b16.gpu_weights = GpuWeights::kBf16;
    auto gb = make_cuda_backend(model, b16);
    std::vector<float> g;
    gb->forward(ids, LogitsMode::kAll, g);
    if (cpu_all.empty()) {
      cpu->reset();
      cpu->forward(ids, LogitsMode::kAll, cpu_all);
    }
    const Agreement a = compare(cpu_all, g, V);
    check(a.finite && a.mean_kl <= 1e-3 && a.top1 >= 0.99, "bf16_weights_prefill_teacher_forced",
          a.str() + " (gates: mean KL <= 1e-3, top-1 >= 99 %)");
    gb->reset();
    cpu->reset();
    const std::vector<float> lc = prefill_then_decode(*cpu, ids, 64, 320);
    const std::vector<float> lg = prefill_then_decode(*gb, ids, 64, 320);
    const Agreement d = compare(lc, lg, V);
    check(d.finite && d.mean_kl <= 1e-3 && d.top1 >= 0.99, "bf16_weights_decode_teacher_forced",
          d.str() + " (gates: mean KL <= 1e-3, top-1 >= 99 %)");
    BackendOptions nat;
    nat.gpu_weights = GpuWeights::kNative;
    auto gn = make_cuda_backend(model, nat);
    std::string why;
    const bool fused = gn->fused_decode(&why);
    bool quant_types = false;  // a projection of a type with a device decode
    for (const LayerWeights& L : model->weights().layers)
      for (const QuantMatrix* q : {&L.wq, &L.wo, &L.w_gate, &L.w_down})
        quant_types = quant_types || device_decoded(q->type);
    check(!quant_types || (gn->device_bytes() < gb->device_bytes() && !fused),
          "native_weights_smaller",
          fmt("device memory: native %.1f MiB, bf16 %.1f MiB", double(gn->device_bytes()) / (1 << 20),
              double(gb->device_bytes()) / (1 << 20)) +
              (quant_types ? "" : " (no projection of a device-decoded type: not gated)") +
              "; native decode path: " + (fused ? "fused" : "unfused (" + why + ")"));
  });

  // 2d. GpuWeights::kAuto (the default): bf16 on a device with room for it, with the reason;
  //     while another backend of the model holds its weights in the file format, a new auto
  //     backend takes those instead of uploading bf16 beside them.
  run("auto_weights", [&] {
    std::string why;
    {
      auto a = make_cuda_backend(model, {});
      const GpuWeights w = a->gpu_weights(&why);
      check(w == GpuWeights::kBf16 && why.find("fit") != std::string::npos,
            "auto_weights_bf16_when_it_fits",
            std::string(gpu_weights_name(w)) + ": " + why);
    }
    bool quant_types = false;
    for (const LayerWeights& L : model->weights().layers)
      quant_types = quant_types || device_decoded(L.wq.type);
    BackendOptions nat;
    nat.gpu_weights = GpuWeights::kNative;
    auto n = make_cuda_backend(model, nat);
    auto b = make_cuda_backend(model, {});
    const GpuWeights w = b->gpu_weights(&why);
    check(!quant_types || w == GpuWeights::kNative, "auto_weights_follow_uploaded",
          std::string(gpu_weights_name(w)) + ": " + why +
              (quant_types ? "" : " (no projection of a device-decoded type: not gated)"));
  });

  // 3. Sparse kernels at lambda = 0 equal the dense kernels of their family bit for bit (prefill
  // and decode): the warp-specialised prefill (the default on sm_90, dense and sparse) with
  // itself, and the wgmma family (tuning.prefill_ws = false) with itself. The two families
  // (128-key tiles vs block_size tiles, other summation order) are compared within the
  // CPU-vs-GPU gates.
  run("sparse_lambda0_equals_dense", [&] {
    CudaBackendOptions fco;
    fco.tuning.prefill_ws = false;
    auto dense = make_cuda_backend(model, {});
    auto fam = make_cuda_backend(model, {}, fco);  // the wgmma family's dense prefill
    BackendOptions so;
    so.attention.type = AttentionType::kDynamicSparse;
    so.attention.threshold_prefill = so.attention.threshold_decode = 0.0;  // lambda 0
    // Which prefill kernels the default backend really runs (SINKSCOPE_PREFILL_WS=0, a device
    // other than sm_90 or a build without sm_90a code leave the warp-specialised ones out; the
    // warp-specialised sparse kernel is selected at head_dim 128 only).
    kernels::AttentionParams ap;
    ap.n_q_tokens = int(ids.size());
    ap.n_q_heads = c.n_head;
    ap.n_kv_heads = c.n_head_kv;
    ap.head_dim = c.head_dim;
    ap.block_size = 64;
    ap.kv_len = int64_t(ids.size());
    const bool ws_on = kernels::attention_uses_warp_specialized(ap);
    ap.force_sparse_kernel = true;
    const bool sparse_ws = kernels::attention_uses_warp_specialized(ap);
    bool fam_pre = false;
    {
      std::vector<float> a, b, f;
      fam->forward(ids, LogitsMode::kAll, a);
      dense->forward(ids, LogitsMode::kAll, b);
      const Agreement w = compare(a, b, V);
      check(w.finite && w.mean_kl <= 1e-3 && w.top1 >= 0.99, "ws_prefill_vs_family_dense",
            std::string(ws_on ? "" : "warp-specialised prefill OFF here (same kernel twice): ") +
                w.str() + " (gates: mean KL <= 1e-3, top-1 >= 99 %)");
      dense->reset();
      fam->reset();
      CudaBackendOptions fso = fco;
      fso.force_sparse_kernel = true;
      auto fam_sparse = make_cuda_backend(model, so, fso);
      fam_sparse->forward(ids, LogitsMode::kAll, f);
      fam_pre = bitwise_equal(a, f);
    }
    // The default sparse backend against the dense backend of its kernel family.
    Backend& ref = sparse_ws ? *dense : *fam;
    CudaBackendOptions co;
    co.force_sparse_kernel = true;
    auto sparse = make_cuda_backend(model, so, co);
    std::vector<float> a, b;
    ref.forward(ids, LogitsMode::kAll, a);
    sparse->forward(ids, LogitsMode::kAll, b);
    const bool pre = bitwise_equal(a, b);
    ref.reset();
    sparse->reset();
    a = prefill_then_decode(ref, ids, 256, 24);
    b = prefill_then_decode(*sparse, ids, 256, 24);
    const bool dec = bitwise_equal(a, b);
    const Agreement d = compare(a, b, V);
    check(pre && dec && fam_pre, "sparse_lambda0_equals_dense",
          std::string("prefill bitwise ") + (pre ? "yes" : "NO") + " (default kernels, " +
              (sparse_ws ? "warp-specialised" : "wgmma") + " family), " + (fam_pre ? "yes" : "NO") +
              " (wgmma family), decode bitwise " + (dec ? "yes" : "NO") +
              fmt(" (decode max |d| %.3g)", d.max_abs));
  });

  // 4. Probes: causally visible tile counts equal the CPU's exactly (same tile rule); skip
  //    counts are printed (bf16 vs fp32 scores may flip tiles near the threshold).
  run("probes_match_cpu", [&] {
    BackendOptions so;
    so.attention.type = AttentionType::kDynamicSparse;
    so.attention.threshold_prefill = 1e-3;
    so.attention.threshold_decode = 1e-3;
    so.sparse_decode = SparseDecodeKernels::kAlways;  // the CPU's decisions, not the fastest
    auto gpu = make_cuda_backend(model, so);
    auto cpu_s = make_cpu_backend(model, so);
    const std::vector<float> lc = prefill_then_decode(*cpu_s, ids, 300, 16);
    const std::vector<float> lg = prefill_then_decode(*gpu, ids, 300, 16);
    bool equal = true;
    for (bool dec : {false, true}) {
      const auto& pc = dec ? cpu_s->probes().decode : cpu_s->probes().prefill;
      const auto& pg = dec ? gpu->probes().decode : gpu->probes().prefill;
      equal = equal && pc.size() == pg.size();
      for (size_t i = 0; equal && i < pc.size(); ++i) equal = pc[i].visited == pg[i].visited;
    }
    const TileCounts cp = cpu_s->probes().total(false), gp = gpu->probes().total(false);
    const TileCounts cd = cpu_s->probes().total(true), gd = gpu->probes().total(true);
    check(equal && gp.visited > 0 && gd.visited > 0, "probes_match_cpu",
          fmt("visited prefill cpu %.0f gpu %.0f, decode cpu %.0f gpu %.0f", double(cp.visited),
              double(gp.visited), double(cd.visited), double(gd.visited)) +
              fmt("; sparsity prefill cpu %.4f gpu %.4f, decode cpu %.4f gpu %.4f", cp.sparsity(),
                  gp.sparsity(), cd.sparsity(), gd.sparsity()) +
              "; sparse logits vs cpu: " + compare(lc, lg, V).str());
  });

  // 4b. The sparse-asked decode's kernel choice (BackendOptions::sparse_decode): at a 300-token
  //     context the sparse decode attention is predicted slower (kernels/decode_choice.h), so
  //     after one measuring step the dense kernels run, with one more measuring step after
  //     kSparseDecodeProbeEvery dense ones; kAlways runs every step sparse and reports no choice.
  run("decode_kernel_choice", [&] {
    BackendOptions so;
    so.attention.type = AttentionType::kDynamicSparse;
    so.attention.threshold_prefill = 1e-2;
    so.attention.threshold_decode = 1e-2;
    auto chooser = make_cuda_backend(model, so);
    const std::vector<float> la = prefill_then_decode(*chooser, ids, 300, 40);
    const DecodePathStats d = chooser->decode_path_stats();
    so.sparse_decode = SparseDecodeKernels::kAlways;
    auto always = make_cuda_backend(model, so);
    const std::vector<float> ls = prefill_then_decode(*always, ids, 300, 40);
    const DecodePathStats ds = always->decode_path_stats();
    const Agreement a = compare(ls, la, V);
    chooser->reset();
    const DecodePathStats after = chooser->decode_path_stats();
    check(d.chooses && d.sparse_steps == 2 && d.probe_steps == 2 && d.dense_steps == 38 &&
              !d.last_sparse && d.skipped_estimate >= 0 && d.skipped_estimate <= 1 &&
              d.predicted_ratio > 1 && !ds.chooses && a.finite && a.top1 >= 0.95 &&
              after.chooses && after.sparse_steps + after.dense_steps == 0,
          "decode_kernel_choice",
          fmt("auto: %.0f sparse (%.0f measuring), %.0f dense, ", double(d.sparse_steps),
              double(d.probe_steps), double(d.dense_steps)) +
              fmt("skipped estimate %.3f, predicted sparse/dense %.2f; vs always-sparse: ",
                  d.skipped_estimate, d.predicted_ratio) +
              a.str());
  });

  // 5. Overflow: a forward past the capacity throws, appends nothing, and the backend goes on.
  run("overflow", [&] {
    BackendOptions o;
    o.max_context = 64;
    auto gpu = make_cuda_backend(model, o);
    auto ref = make_cuda_backend(model, o);
    std::vector<float> l, r;
    gpu->forward(std::span(ids.data(), 60), LogitsMode::kLast, l);  // 60 of 64
    bool threw = false;
    std::string msg;
    try {
      gpu->forward(std::span(ids.data() + 60, 10), LogitsMode::kLast, l);
    } catch (const BackendError& e) {
      threw = true;
      msg = e.what();
    }
    const int after = gpu->n_past();
    gpu->forward(std::span(ids.data() + 60, 4), LogitsMode::kLast, l);
    bool bad_token = false;
    try {
      const TokenId t[1] = {V};
      ref->reset();
      ref->forward(t, LogitsMode::kLast, r);
    } catch (const BackendError&) {
      bad_token = true;
    }
    std::vector<float> r64;
    ref->reset();
    ref->forward(std::span(ids.data(), 64), LogitsMode::kLast, r64);
    const Agreement a = compare(r64, l, V);
    check(threw && after == 60 && gpu->n_past() == 64 && gpu->capacity() == 64 && bad_token &&
              a.top1 == 1.0 && a.max_abs < 0.05,
          "overflow",
          "error: \"" + msg + "\"" + fmt("; n_past after %.0f; continuation vs one pass: ", after) +
              a.str() + (bad_token ? "" : "; out-of-vocabulary id NOT rejected"));
  });

  // 6. reset() empties cache and probes; the same run then gives the same logits bit for bit.
  run("reset", [&] {
    BackendOptions so;
    so.attention.type = AttentionType::kDynamicSparse;
    so.attention.threshold_prefill = 1e-3;
    auto gpu = make_cuda_backend(model, so);
    std::vector<float> a, b;
    gpu->forward(std::span(ids.data(), 150), LogitsMode::kAll, a);
    const int64_t visited = gpu->probes().total(false).visited;
    gpu->reset();
    const bool empty = gpu->n_past() == 0 && gpu->probes().total(false).visited == 0;
    gpu->forward(std::span(ids.data(), 150), LogitsMode::kAll, b);
    check(empty && visited > 0 && bitwise_equal(a, b) &&
              gpu->probes().total(false).visited == visited,
          "reset",
          std::string("cache+probes emptied: ") + (empty ? "yes" : "NO") +
              ", rerun bitwise equal: " + (bitwise_equal(a, b) ? "yes" : "NO"));
  });

  // 7. Cancel: prefill and decode raise Cancelled, keep n_past, and the backend continues.
  run("cancel", [&] {
    std::atomic<bool> flag{true};
    auto gpu = make_cuda_backend(model, {});
    auto ref = make_cuda_backend(model, {});
    gpu->set_cancel_flag(&flag);
    bool c1 = false, c2 = false;
    std::vector<float> l, r;
    try {
      gpu->forward(std::span(ids.data(), 100), LogitsMode::kLast, l);
    } catch (const Cancelled&) {
      c1 = true;
    }
    const int n1 = gpu->n_past();
    flag = false;
    gpu->forward(std::span(ids.data(), 100), LogitsMode::kLast, l);
    for (int t = 0; t < 3; ++t)
      gpu->forward(std::span(ids.data() + 100 + t, 1), LogitsMode::kLast, l);
    flag = true;
    try {
      gpu->forward(std::span(ids.data() + 103, 1), LogitsMode::kLast, l);
    } catch (const Cancelled&) {
      c2 = true;
    }
    const int n2 = gpu->n_past();
    flag = false;
    gpu->forward(std::span(ids.data() + 103, 1), LogitsMode::kLast, l);
    ref->forward(std::span(ids.data(), 100), LogitsMode::kLast, r);
    for (int t = 0; t < 4; ++t)
      ref->forward(std::span(ids.data() + 100 + t, 1), LogitsMode::kLast, r);
    const Agreement a = compare(r, l, V);
    check(c1 && c2 && n1 == 0 && n2 == 103 && gpu->n_past() == 104 && a.max_abs <= 1e-3, "cancel",
          std::string("prefill cancelled: ") + (c1 ? "yes" : "NO") +
              ", decode cancelled: " + (c2 ? "yes" : "NO") +
              fmt(", n_past kept %.0f/%.0f; after resuming vs uncancelled: max |d| %.3g", n1, n2,
                  a.max_abs));
  });

  // 8. Graph replay equals eager launches.
  run("graph_equals_eager", [&] {
    auto g = make_cuda_backend(model, {});
    CudaBackendOptions co;
    co.tuning.cuda_graphs = false;
    auto e = make_cuda_backend(model, {}, co);
    const std::vector<float> lg = prefill_then_decode(*g, ids, 100, 40);
    const std::vector<float> le = prefill_then_decode(*e, ids, 100, 40);
    const Agreement a = compare(le, lg, V);
    const CudaGraphStats sg = g->graph_stats(), se = e->graph_stats();
    // Both run the same enqueue (graph = its capture), so equality is bit for bit.
    check(bitwise_equal(lg, le) && sg.graph_steps == 40 && se.graph_steps == 0 &&
              se.eager_steps == 40 && sg.captures == 1,
          "graph_equals_eager",
          std::string("bitwise ") + (bitwise_equal(lg, le) ? "yes" : "no") +
              fmt(", max |d| %.3g, graph steps %.0f (eager backend: %.0f)", a.max_abs,
                  double(sg.graph_steps), double(se.graph_steps)) +
              (sg.disabled_reason.empty() ? "" : "; graphs disabled: " + sg.disabled_reason));
  });

  // 8b. Graph reuse across positions, bounds, reset() and settings: prefill 500 then 40 steps
  //     (lengths 501..540 cross the 512 bound: 2 captures); reset + the same run captures nothing
  //     new and gives the same logits bit for bit; a settings change captures afresh.
  run("graph_reuse", [&] {
    auto g = make_cuda_backend(model, {});
    const std::vector<float> a = prefill_then_decode(*g, ids, 360, 40);  // 361..400: one bound
    const int64_t c1 = g->graph_stats().captures;
    g->reset();
    std::vector<TokenId> long_ids = ids;
    while (long_ids.size() < 560) long_ids.insert(long_ids.end(), ids.begin(), ids.end());
    const std::vector<float> b = prefill_then_decode(*g, long_ids, 500, 40);  // crosses 512
    const int64_t c2 = g->graph_stats().captures;
    g->reset();
    const std::vector<float> b2 = prefill_then_decode(*g, long_ids, 500, 40);
    const int64_t c3 = g->graph_stats().captures;
    AttentionSettings st = g->attention();
    st.skip_softmax_exp = !st.skip_softmax_exp;  // any change: new settings generation
    g->set_attention(st);
    g->reset();
    const std::vector<float> b3 = prefill_then_decode(*g, ids, 360, 8);
    const CudaGraphStats s = g->graph_stats();
    check(c1 == 1 && c2 == 2 && c3 == 2 && s.captures == 3 && bitwise_equal(b, b2) &&
              bitwise_equal(std::vector<float>(a.begin(), a.begin() + 9 * V),
                            std::vector<float>(b3.begin(), b3.end())) &&
              s.eager_steps == 0 && s.disabled_reason.empty(),
          "graph_reuse",
          fmt("captures: %.0f after 40 steps, %.0f after crossing 512, %.0f after reset+rerun, "
              "%.0f after a settings change",
              double(c1), double(c2), double(c3), double(s.captures)) +
              ", rerun bitwise " + (bitwise_equal(b, b2) ? "yes" : "NO") +
              (s.disabled_reason.empty() ? "" : "; graphs disabled: " + s.disabled_reason));
  });

  // 8c. Sparse decode through graphs (lambda read from device memory, fixed and length-scaled)
  //     equals eager steps bit for bit, probes included, without a capture per step.
  run("sparse_graph_equals_eager", [&] {
    bool all = true;
    std::string detail;
    for (ThresholdMode mode : {ThresholdMode::kFixed, ThresholdMode::kLengthScaled}) {
      BackendOptions so;
      so.attention.type = AttentionType::kDynamicSparse;
      so.attention.threshold_mode = mode;
      so.attention.threshold_prefill = mode == ThresholdMode::kFixed ? 1e-3 : 0.3;
      so.attention.threshold_decode = mode == ThresholdMode::kFixed ? 1e-2 : 4.0;  // c / L_kv
      so.sparse_decode = SparseDecodeKernels::kAlways;  // the sparse decode graphs themselves
      auto g = make_cuda_backend(model, so);
      CudaBackendOptions co;
      co.tuning.cuda_graphs = false;
      auto e = make_cuda_backend(model, so, co);
      const std::vector<float> lg = prefill_then_decode(*g, ids, 300, 64);
      const std::vector<float> le = prefill_then_decode(*e, ids, 300, 64);
      const TileCounts pg = g->probes().total(true), pe = e->probes().total(true);
      bool probes_equal = true;
      for (size_t i = 0; i < g->probes().decode.size(); ++i)
        probes_equal = probes_equal &&
                       g->probes().decode[i].visited == e->probes().decode[i].visited &&
                       g->probes().decode[i].skipped == e->probes().decode[i].skipped;
      const CudaGraphStats s = g->graph_stats();
      const bool ok = bitwise_equal(lg, le) && probes_equal && pg.visited > 0 &&
                      pg.visited == pe.visited &&
                      s.graph_steps == 64 && s.captures <= 2 && s.disabled_reason.empty();
      all = all && ok;
      detail += std::string(mode == ThresholdMode::kFixed ? "fixed" : "length_scaled") +
                ": bitwise " + (bitwise_equal(lg, le) ? "yes" : "NO") + ", probes " +
                (probes_equal ? "equal" : "DIFFER") +
                fmt(" (decode sparsity %.4f), %.0f captures / %.0f graph steps; ", pg.sparsity(),
                    double(s.captures), double(s.graph_steps));
    }
    check(all, "sparse_graph_equals_eager", detail);
  });

  // 9. Changing block_size mid-sequence re-pages the cache; decode goes on correctly.
  run("block_size_change", [&] {
    auto gpu = make_cuda_backend(model, {});
    cpu->reset();
    std::vector<float> lc, lg, l;
    cpu->forward(std::span(ids.data(), 150), LogitsMode::kLast, l);
    gpu->forward(std::span(ids.data(), 150), LogitsMode::kLast, l);
    AttentionSettings s = gpu->attention();
    s.block_size = 128;
    gpu->set_attention(s);
    for (int t = 150; t < 180; ++t) {
      cpu->forward(std::span(ids.data() + t, 1), LogitsMode::kLast, l);
      lc.insert(lc.end(), l.begin(), l.end());
      gpu->forward(std::span(ids.data() + t, 1), LogitsMode::kLast, l);
      lg.insert(lg.end(), l.begin(), l.end());
    }
    const Agreement a = compare(lc, lg, V);
    check(a.finite && a.mean_kl <= 1e-3 && a.top1 >= 0.95, "block_size_change",
          "64 -> 128 after 150 tokens, 30 decode steps vs cpu: " + a.str());
  });

  // 10. Not enough device memory: a clear error naming the bytes.
  run("oom_message", [&] {
    BackendOptions o;
    o.max_context = 1 << 30;
    std::string msg;
    try {
      (void)make_cuda_backend(model, o);
    } catch (const BackendError& e) {
      msg = e.what();
    }
    check(msg.find("needs") != std::string::npos && msg.find("free") != std::string::npos,
          "oom_message", "\"" + msg + "\"");
  });

  // 11. Injected allocation failures (engine/cuda/fault_injection.h): one while constructing a
  //     backend (everything it had allocated is freed), one during a run (re-paging the cache for
  //     a new block size); each names what failed, and the engine then gives the same logits.
  run("fault_alloc", [&] {
    auto gpu = make_cuda_backend(model, {});
    std::vector<float> ref, l;
    gpu->forward(std::span(ids.data(), 150), LogitsMode::kAll, ref);
    uint64_t free0 = 0, free1 = 0;
    gpu::memory_info(&free0, nullptr);
    std::string msg_ctor, msg_run;
    gpu::inject_fault(gpu::Fault::kAlloc, 3);  // the 4th allocation of the construction
    try {
      (void)make_cuda_backend(model, {});
    } catch (const BackendError& e) {
      msg_ctor = e.what();
    }
    gpu::clear_faults();
    gpu::memory_info(&free1, nullptr);
    const double leak_mib = (double(free0) - double(free1)) / (1 << 20);
    AttentionSettings s = gpu->attention();
    const int bs = s.block_size;
    s.block_size = bs == 64 ? 128 : 64;
    gpu->reset();
    gpu->forward(std::span(ids.data(), 150), LogitsMode::kLast, l);
    gpu::inject_fault(gpu::Fault::kAlloc, 0);  // the re-paging buffer
    try {
      gpu->set_attention(s);
    } catch (const BackendError& e) {
      msg_run = e.what();
    }
    gpu::clear_faults();
    const bool kept = gpu->attention().block_size == bs;
    gpu->reset();
    gpu->forward(std::span(ids.data(), 150), LogitsMode::kAll, l);
    const bool same = bitwise_equal(ref, l);
    auto named = [](const std::string& m) {
      return m.find("cudaMalloc") != std::string::npos && m.find(" for ") != std::string::npos &&
             m.find("injected") != std::string::npos;
    };
    check(named(msg_ctor) && named(msg_run) && msg_run.find("re-paging") != std::string::npos &&
              kept && same && leak_mib < 16.0,
          "fault_alloc",
          "construction: \"" + msg_ctor + "\"" + fmt("; device memory not returned: %.1f MiB", leak_mib) +
              "; run: \"" + msg_run + "\"; block size kept: " + (kept ? "yes" : "NO") +
              ", reset + rerun bitwise equal: " + (same ? "yes" : "NO"));
  });

  // 12. Injected kernel-launch failures, in a prefill (layer ~8) and in an eager decode step:
  //     BackendError naming the launcher; n_past keeps what completed; reset + the same run
  //     gives the same logits bit for bit. (Eager steps: a graph's kernels are only launched
  //     while capturing, and a failed capture falls back to eager steps by design.)
  run("fault_launch", [&] {
    CudaBackendOptions co;
    co.tuning.cuda_graphs = false;
    auto gpu = make_cuda_backend(model, {}, co);
    const std::vector<float> ref = prefill_then_decode(*gpu, ids, 150, 8);
    std::string msg_pre, msg_dec;
    std::vector<float> l;
    gpu->reset();
    gpu::inject_fault(gpu::Fault::kLaunch, 40);
    try {
      gpu->forward(std::span(ids.data(), 150), LogitsMode::kLast, l);
    } catch (const BackendError& e) {
      msg_pre = e.what();
    }
    gpu::clear_faults();
    const int n_pre = gpu->n_past();
    gpu->reset();
    const std::vector<float> a = prefill_then_decode(*gpu, ids, 150, 8);
    gpu->reset();
    gpu->forward(std::span(ids.data(), 150), LogitsMode::kLast, l);
    for (int t = 0; t < 3; ++t) gpu->forward(std::span(ids.data() + 150 + t, 1), LogitsMode::kLast, l);
    gpu::inject_fault(gpu::Fault::kLaunch, 5);
    try {
      gpu->forward(std::span(ids.data() + 153, 1), LogitsMode::kLast, l);
    } catch (const BackendError& e) {
      msg_dec = e.what();
    }
    gpu::clear_faults();
    const int n_dec = gpu->n_past();
    gpu->reset();
    const std::vector<float> b = prefill_then_decode(*gpu, ids, 150, 8);
    auto named = [](const std::string& m) {
      return m.find("launch_") != std::string::npos && m.find("injected") != std::string::npos;
    };
    check(named(msg_pre) && named(msg_dec) && n_pre == 0 && n_dec == 153 &&
              bitwise_equal(ref, a) && bitwise_equal(ref, b) &&
              gpu::faults_fired(gpu::Fault::kLaunch) >= 2,
          "fault_launch",
          "prefill: \"" + msg_pre + "\"; decode: \"" + msg_dec + "\"" +
              fmt("; n_past after: %.0f / %.0f (want 0 / 153)", n_pre, n_dec) +
              "; reset + rerun bitwise equal: " + (bitwise_equal(ref, a) ? "yes" : "NO") + " / " +
              (bitwise_equal(ref, b) ? "yes" : "NO"));
  });

  // 13. Cancel raised from another thread while a prefill is running (a long prompt in passes
  //     of 128 with every row's logits, so the host polls between layers until the end) and
  //     while a loop of decode steps runs (graphs on): Cancelled, n_past keeps what completed,
  //     and going on gives the uncancelled logits.
  run("cancel_mid_run", [&] {
    std::vector<TokenId> long_ids = ids;
    while (long_ids.size() < 2048) long_ids.insert(long_ids.end(), ids.begin(), ids.end());
    long_ids.resize(2048);
    CudaBackendOptions co;
    co.max_batch = 128;
    auto gpu = make_cuda_backend(model, {}, co);
    std::atomic<bool> flag{false};
    gpu->set_cancel_flag(&flag);
    std::vector<float> ref, l;
    gpu->forward(long_ids, LogitsMode::kAll, ref);  // warm-up and reference
    gpu->reset();
    auto t0 = std::chrono::steady_clock::now();
    gpu->forward(long_ids, LogitsMode::kAll, l);
    const double full_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // Raise the flag part-way; retry earlier if the prefill finished first.
    bool pre_cancelled = false;
    double at_ms = 0, took_ms = 0;
    for (double f : {0.5, 0.3, 0.15, 0.05}) {
      gpu->reset();
      flag = false;
      at_ms = f * full_ms;
      std::thread raiser([&] {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(at_ms));
        flag = true;
      });
      t0 = std::chrono::steady_clock::now();
      try {
        gpu->forward(long_ids, LogitsMode::kAll, l);
      } catch (const Cancelled&) {
        pre_cancelled = true;
      }
      took_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      raiser.join();
      if (pre_cancelled) break;
    }
    const int n_pre = gpu->n_past();
    flag = false;
    gpu->reset();
    gpu->forward(long_ids, LogitsMode::kAll, l);
    const bool pre_same = bitwise_equal(ref, l);

    // Decode: 200 steps uncancelled (reference), then the same with the flag raised half-way.
    const int n_prompt = 300, steps = 200;
    gpu->reset();
    const std::vector<float> dref = prefill_then_decode(*gpu, long_ids, n_prompt, steps);
    gpu->reset();
    t0 = std::chrono::steady_clock::now();
    (void)prefill_then_decode(*gpu, long_ids, n_prompt, steps);
    const double dec_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    gpu->reset();
    std::vector<float> got;
    gpu->forward(std::span(long_ids.data(), size_t(n_prompt)), LogitsMode::kLast, l);
    got.insert(got.end(), l.begin(), l.end());
    flag = false;
    std::thread raiser([&] {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(0.5 * dec_ms));
      flag = true;
    });
    int stopped_at = -1;
    for (int t = 0; t < steps; ++t) {
      try {
        gpu->forward(std::span(long_ids.data() + n_prompt + t, 1), LogitsMode::kLast, l);
      } catch (const Cancelled&) {
        stopped_at = t;
        break;
      }
      got.insert(got.end(), l.begin(), l.end());
    }
    raiser.join();
    const int n_dec = gpu->n_past();
    flag = false;
    for (int t = stopped_at < 0 ? steps : stopped_at; t < steps; ++t) {  // go on
      gpu->forward(std::span(long_ids.data() + n_prompt + t, 1), LogitsMode::kLast, l);
      got.insert(got.end(), l.begin(), l.end());
    }
    const Agreement a = compare(dref, got, V);
    const bool dec_ok = stopped_at > 0 && n_dec == n_prompt + stopped_at && a.finite &&
                        a.max_abs <= 1e-3;
    check(pre_cancelled && n_pre == 0 && pre_same && dec_ok, "cancel_mid_run",
          fmt("prefill of 2048 (%.1f ms): cancel raised at %.1f ms, returned after %.1f ms, ",
              full_ms, at_ms, took_ms) +
              (pre_cancelled ? "Cancelled" : "NOT cancelled") + fmt(", n_past %.0f", n_pre) +
              ", rerun bitwise equal: " + (pre_same ? "yes" : "NO") +
              fmt("; decode: cancelled at step %.0f of %.0f, n_past %.0f, continuation vs "
                  "uncancelled max |d| %.3g",
                  stopped_at, steps, n_dec, a.max_abs));
  });

  return gpu_test::finish_checks();
}
