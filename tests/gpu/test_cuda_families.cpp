// SPDX-License-Identifier: Apache-2.0
// Model families on the CUDA backend (issue 27) against the CPU backend and transformers.
//
// 1. The transformers oracles (tests/data/oracles/manifest.json): the CPU backend on each file
//    must match the stored transformers logits (max |dlogit| <= 1e-3, the CPU unit test's gate);
//    the CUDA backend must either run the file and match them too (mean KL <= 1e-3 nats, top-1
//    >= 99 %) or refuse it with the reason listed in kRefusals below. Today every oracle file is
//    refused: the qwen3, gemma, phi3 and gpt-oss oracles have head_dim 32 / 16 (the attention
//    kernels take 64 or 128).
// 2. Each supported family's oracle file widened to head_dim 64 and 128 (family_models.h: same
//    architecture, metadata and tokenizer, random weights): qwen3 F32 and Q8_0, gemma3 Q8_0 (its
//    local layers' window set to 100: five local layers to one global, two RoPE bases, post-norms,
//    GeGLU, scaled embeddings, Q/K norm), gemma2 F32 (window 100, alternating, attention soft-cap
//    5 and final soft-cap 10 from the oracle), gpt-oss MXFP4 (window 100 on alternating local
//    layers, learned sinks, 4 experts of which 2 per token, Q/K/V/O biases, YaRN), CUDA
//    against the CPU backend on the same file, teacher-forced over one token-id sequence with
//    repeated spans:
//      prefill of 256 tokens (all positions; gpt-oss: its experts grouped into one GEMM per
//      expert, and again as GEMVs with SINKSCOPE_MOE_GROUPED=0), prefill 64 + 64 decode steps
//      (CUDA graphs), each with bf16 weights and (Q8_0 files, gpt-oss's MXFP4 experts) the
//      weights in their file format (GpuWeights::kNative), both
//      dense; with the dynamic-sparse rule (lambda 0.01); with a sliding-window cache (W 64, S 4,
//      original and cache position modes) streamed 3 windows past W;
//    gates: mean KL(cpu || gpu) <= 1e-3 nats and top-1 >= 98 % (windowed: 2e-3, 97 %), every
//    logit finite, all decode steps through graphs; sensitivity checks on the CPU: the same file
//    with the Q/K norm gains times 1.5 (gemma2: the attention soft-cap 50 instead of 5), and
//    (gemma, gpt-oss) with the local window 4096 instead of 100, (gpt-oss) with the learned sink
//    logits 4 lower, moves the logits by more than 10x the KL gate (so the gates see a wrong
//    norm, window or sink). gpt-oss also checks the learned-sink probe: per (layer, head) sink
//    mass of the CUDA backend within 1e-2 relative (+1e-3 absolute) of the CPU's, same query
//    count, after the prefill and after the decode steps.
// 3. Whole-model windows (every layer local, window 100): Mistral's llama GGUF (tests/data/hf),
//    the same file as qwen2 and the phi3 oracle, widened to head_dim 64 and 128, through every
//    mode of 2, plus the cache window (W 64, S 4) and the dynamic-sparse rule at once; the
//    window's sensitivity as above (4096 instead of 100).
// 4. phi3 (fused QKV and gate|up, partial rotary 0.75, LongRoPE with original context 512 of
//    2048): CUDA vs CPU with the short factors (a 512-position backend, 256 + 64 tokens) and the
//    long ones (2048 positions, 700 + 64 tokens), and short vs long on the CPU as a sensitivity
//    check.
// Plain executable: "SKIP: <reason>" and exit 0 without a GPU. An argument runs only the sections
// whose name contains it (e.g. `test_cuda_families qwen3_tied_f32_hd64`); `--cpu-only` runs the
// CPU side alone (oracle files vs transformers, the widened files' sensitivity check) on a machine
// without a GPU.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "engine/util/json_io.h"
#include "family_models.h"
#include "gpu_agreement.h"
#include "gpu_checks.h"

using namespace sinkscope;
using gpu_test::Agreement;
using gpu_test::check;
using gpu_test::compare;
using gpu_test::confident_top1;
using gpu_test::run;
namespace fs = std::filesystem;

namespace {

bool g_cpu_only = false;
// The sharp file's Q/K norm gains (times those of the plain file, around 1): attention scores of a
// few units, so that lambda 0.01 skips tiles.
constexpr float kSharpGain = 2.0f;
constexpr float kGemma2QMul = 5.0f;

// $SINKSCOPE_ORACLE_DIR, else the source tree's tests/data/oracles, else the working
// directory's (a prebuilt program run from a copy of the repository root).
fs::path oracle_dir() {
  if (const char* e = std::getenv("SINKSCOPE_ORACLE_DIR"); e && *e) return e;
  const fs::path src = fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / "oracles";
  if (fs::exists(src / "manifest.json")) return src;
  return fs::current_path() / "tests" / "data" / "oracles";
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// What make_cuda_backend says for an oracle file it does not run: a substring of its message.
struct Refusal {
  const char* family;
  const char* reason;
};
const Refusal kRefusals[] = {
    {"qwen3", "head_dim"},   // the oracles' 32-dim heads; widened below
    {"gemma2", "head_dim"},  // 16-dim heads; widened below
    {"gemma3", "head_dim"},  // 16-dim heads; widened below
    {"gpt-oss", "head_dim"},  // 16-dim heads; widened below
    {"phi3", "head_dim"},  // 16-dim heads; widened below
};

// 1. One oracle case: CPU vs transformers, then CUDA vs transformers or its refusal.
void check_oracle(const Json& c) {
  const std::string name = c.at("name").get<std::string>();
  const std::string family = c.at("family").get<std::string>();
  const auto model = Model::load(oracle_dir() / c.at("gguf").get<std::string>());
  const int V = model->config().n_vocab;
  const std::string bin = read_bytes(oracle_dir() / c.at("logits_file").get<std::string>());
  std::vector<std::vector<TokenId>> prompts;
  std::vector<std::vector<float>> refs;
  size_t off = 0;
  for (const auto& pr : c.at("prompts")) {
    std::vector<TokenId> ids;
    for (const auto& x : pr) ids.push_back(TokenId(x.get<int64_t>()));
    const size_t n = ids.size() * size_t(V);
    if ((off + n) * 4 > bin.size()) throw std::runtime_error(name + ": logits file is truncated");
    refs.emplace_back(n);
    std::memcpy(refs.back().data(), bin.data() + off * 4, n * 4);
    off += n;
    prompts.push_back(std::move(ids));
  }
  // LongRoPE (phi3): transformers runs the long factors for a sequence past the original
  // context, the backends for a context past it (test_phi3.cpp): each prompt gets a backend
  // holding max(its length, the original context) positions.
  const ModelConfig& mc = model->config();
  const auto options_for = [&](size_t n) {
    BackendOptions o;
    o.decode_products = QgemvMode::kFloatActivations;
    if (mc.long_rope) o.max_context = std::max(int(n), mc.rope_orig_ctx);
    return o;
  };
  double worst = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<float> l;
    auto cpu = make_cpu_backend(model, options_for(prompts[i].size()));
    cpu->forward(prompts[i], LogitsMode::kAll, l);
    worst = std::max(worst, compare(refs[i], l, V).max_abs);
  }
  check(worst <= 1e-3, name + "_cpu_vs_transformers",
        "max |dlogit| " + std::to_string(worst) + " (gate 1e-3: the reference below is right)");
  if (g_cpu_only) return;
  std::unique_ptr<CudaBackend> gpu;
  std::string refused;
  try {
    gpu = make_cuda_backend(model, {});
  } catch (const BackendError& e) {
    refused = e.what();
  }
  if (!gpu) {
    const char* want = nullptr;
    for (const Refusal& r : kRefusals)
      if (family == r.family) want = r.reason;
    check(want && refused.find(want) != std::string::npos, name + "_cuda_refused",
          "refused: \"" + refused + "\" (expected a message naming: " +
              (want ? want : "(none: this family should run)") + ")");
    return;
  }
  std::vector<float> all_ref, all_gpu;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<float> l;
    if (mc.long_rope) gpu = make_cuda_backend(model, options_for(prompts[i].size()));
    gpu->reset();
    gpu->forward(prompts[i], LogitsMode::kAll, l);
    all_ref.insert(all_ref.end(), refs[i].begin(), refs[i].end());
    all_gpu.insert(all_gpu.end(), l.begin(), l.end());
  }
  const Agreement a = compare(all_ref, all_gpu, V);
  check(a.finite && a.mean_kl <= 1e-3 && a.top1 >= 0.99, name + "_cuda_vs_transformers",
        a.str() + " (gates: mean KL <= 1e-3, top-1 >= 99 %)");
}

// Share of the rows whose KL(ref || test) exceeds `thr` (log-softmax in double); *mean_below:
// the mean KL of the other rows.
double share_kl_above(const std::vector<float>& ref, const std::vector<float>& test, int V,
                      double thr, double* mean_below = nullptr) {
  const size_t n = ref.size() / size_t(V);
  if (n == 0 || test.size() != ref.size()) return 1.0;
  size_t above = 0;
  double sum_below = 0;
  for (size_t r = 0; r < n; ++r) {
    const float* p = &ref[r * V];
    const float* q = &test[r * V];
    const double mp = *std::max_element(p, p + V), mq = *std::max_element(q, q + V);
    double sp = 0, sq = 0;
    for (int i = 0; i < V; ++i) sp += std::exp(p[i] - mp), sq += std::exp(q[i] - mq);
    const double lp = mp + std::log(sp), lq = mq + std::log(sq);
    double kl = 0;
    for (int i = 0; i < V; ++i) kl += std::exp(p[i] - lp) * ((p[i] - lp) - (q[i] - lq));
    above += kl > thr;
    if (!(kl > thr)) sum_below += kl;
  }
  if (mean_below) *mean_below = above < n ? sum_below / double(n - above) : 0.0;
  return double(above) / double(n);
}

// Mixture-of-experts models (gpt-oss) route each token to its top-k experts: a router logit
// within rounding of the k-th largest flips the choice, a discrete jump in that row's logits
// (the CPU alone with the attention matrices rounded to bf16 reaches a max KL of ~0.1 on the
// widened gpt-oss file, 3.5e-5 with the routing held fixed). For them the max-KL gate applies to
// all but kMoeFlipShare of the rows, the rest must stay below kMoeMaxKl, the mean-KL gate applies
// to the rows within the max-KL gate (three flipped rows in 256 alone reach a mean of 1.2e-3),
// and the confident rows' argmax must agree on kMoeTop1 of them (one flip in ~130 confident
// rows is 0.8 %). With dynamic-sparse attention a tile at the λ boundary may be kept on one side
// and skipped on the other (the tile gate allows it); where that also flips the routing, the row
// jumps further: one row of the head-64 file reaches KL 0.66 on the H200 (3 of 384 rows above
// the max-KL gate, the confident rows' argmax 99.6 % equal), hence the cap of 1 nat.
constexpr double kMoeFlipShare = 0.03;
constexpr double kMoeMaxKl = 1.0;
constexpr double kMoeTop1 = 0.97;

// The gates of a CUDA vs CPU comparison: mean and max KL, and the confident rows' argmax.
void gate(const std::vector<float>& ref, const std::vector<float>& test, int V,
          const std::string& name, double mean_kl, double max_kl, bool moe = false) {
  const Agreement a = compare(ref, test, V);
  int rows = 0;
  const double t1 = confident_top1(ref, test, V, 0.3, &rows);
  char buf[200];
  double mean_within = a.mean_kl;
  const double flips = moe ? share_kl_above(ref, test, V, max_kl, &mean_within) : 0.0;
  std::snprintf(buf, sizeof buf, "; top-1 %.2f %% of the %d rows with a top-2 gap >= 0.3%s", 100 * t1,
                rows,
                moe ? ("; rows above the max-KL gate " + std::to_string(100 * flips) +
                       " %, mean KL of the others " + std::to_string(mean_within)).c_str()
                    : "");
  char gates[200];
  if (moe)
    std::snprintf(gates, sizeof gates,
                  " (gates: max KL <= %.0e on all but %.0f %% of the rows, whose mean KL <= "
                  "%.0e, all <= %.1f; that top-1 >= %.0f %%)",
                  max_kl, 100 * kMoeFlipShare, mean_kl, kMoeMaxKl, 100 * kMoeTop1);
  else
    std::snprintf(gates, sizeof gates, " (gates: mean KL <= %.0e, max KL <= %.0e, that top-1 >= 99 %%)",
                  mean_kl, max_kl);
  const bool max_ok = moe ? flips <= kMoeFlipShare && a.max_kl <= kMoeMaxKl : a.max_kl <= max_kl;
  check(a.finite && mean_within <= mean_kl && max_ok && t1 >= (moe ? kMoeTop1 : 0.99), name,
        a.str() + buf + gates);
}

// Token ids < n_vocab: random spans, each seen twice, so attention has something to find.
std::vector<TokenId> test_ids(int n, int n_vocab, uint64_t seed) {
  gpu_test::WidenRng rng(seed);
  std::vector<TokenId> ids;
  while (int(ids.size()) < n) {
    std::vector<TokenId> span(size_t(8 + int(rng.uniform() * 24)));
    for (TokenId& t : span) t = TokenId(int(rng.uniform() * std::min(n_vocab, 256)));
    ids.insert(ids.end(), span.begin(), span.end());
    ids.insert(ids.end(), span.begin(), span.end());
  }
  ids.resize(size_t(n));
  return ids;
}

// Logits of a prefill of n_prefill tokens (all positions when `all`, else the last) followed by
// `steps` single-token forwards.
std::vector<float> stream(Backend& be, const std::vector<TokenId>& ids, int n_prefill, int steps,
                          bool all) {
  std::vector<float> out, l;
  be.reset();
  be.forward(std::span(ids.data(), size_t(n_prefill)), all ? LogitsMode::kAll : LogitsMode::kLast,
             out);
  for (int t = 0; t < steps; ++t) {
    be.forward(std::span(ids.data() + n_prefill + t, 1), LogitsMode::kLast, l);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

CacheSettings window_cache(int64_t w, int64_t s, PositionMode mode) {
  CacheSettings c;
  c.strategy = CacheStrategy::kSlidingWindow;
  c.window_size = w;
  c.sink_keep_count = s;
  c.position_mode = mode;
  return c;
}

// 2. One widened family file: CUDA vs CPU in every mode above. `sharp`: the same shape with
// larger Q/K gains (peaked attention), for the dynamic-sparse rule.
void check_widened(const fs::path& file, const fs::path& sharp, const std::string& tag,
                   bool quantized) {
  const auto model = Model::load(file);
  const ModelConfig& mc = model->config();
  const int V = mc.n_vocab;
  const std::vector<TokenId> ids = test_ids(400, V, 7);
  BackendOptions cpu_o;
  cpu_o.decode_products = QgemvMode::kFloatActivations;
  const bool moe = mc.n_expert > 0;

  for (GpuWeights gw : {GpuWeights::kBf16, GpuWeights::kNative}) {
    if (gw == GpuWeights::kNative && !quantized) continue;
    const std::string t = tag + (gw == GpuWeights::kNative ? "_native" : "_bf16");
    BackendOptions go;
    go.gpu_weights = gw;
    auto cpu = make_cpu_backend(model, cpu_o);
    auto gpu = make_cuda_backend(model, go);
    std::string why;
    const bool fused = gpu->fused_decode(&why);
    check(!fused || !mc.qk_norm, t + "_decode_path",
          fused ? std::string("fused") : "unfused: " + why);
    // Learned sinks (gpt-oss): the probe's per-(layer, head) mass, CUDA against the CPU.
    auto sink_probe = [&](const std::string& what) {
      if (!mc.attn_sinks) return;
      const AttentionProbes &pc = cpu->probes(), &pg = gpu->probes();
      bool ok = pc.sink_mass.size() == size_t(mc.n_layer) * mc.n_head &&
                pg.sink_mass.size() == pc.sink_mass.size() && pc.sink_queries == pg.sink_queries;
      double worst = 0, total = 0;
      for (size_t i = 0; ok && i < pc.sink_mass.size(); ++i) {
        const double d = std::fabs(pg.sink_mass[i] - pc.sink_mass[i]);
        worst = std::max(worst, d / std::max(pc.sink_mass[i], 1e-12));
        total += pc.sink_mass[i];
        ok = d <= 1e-2 * pc.sink_mass[i] + 1e-3;
      }
      check(ok && total > 0, t + "_sink_mass_" + what,
            "CPU mean sink mass " +
                std::to_string(total / std::max<double>(1.0, double(pc.sink_mass.size()) *
                                                                double(std::max<int64_t>(pc.sink_queries, 1)))) +
                " over " + std::to_string(pc.sink_queries) + " queries (gpu " +
                std::to_string(pg.sink_queries) + "); worst relative difference " +
                std::to_string(worst) + " (gate: 1e-2 relative + 1e-3 per (layer, head))");
    };
    {
      const std::vector<float> lc = stream(*cpu, ids, 256, 0, true);
      const std::vector<float> lg = stream(*gpu, ids, 256, 0, true);
      gate(lc, lg, V, t + "_prefill", 2e-3, 2e-2, moe);
      sink_probe("prefill");
    }
    if (moe) {  // the GEMV experts on every pass (SINKSCOPE_MOE_GROUPED=0), against the CPU too
      setenv("SINKSCOPE_MOE_GROUPED", "0", 1);
      auto gemv = make_cuda_backend(model, go);
      unsetenv("SINKSCOPE_MOE_GROUPED");
      gate(stream(*cpu, ids, 256, 0, true), stream(*gemv, ids, 256, 0, true), V,
           t + "_prefill_gemv_experts", 2e-3, 2e-2, moe);
    }
    const CudaGraphStats g0 = gpu->graph_stats();
    {
      const std::vector<float> lc = stream(*cpu, ids, 64, 64, false);
      const std::vector<float> lg = stream(*gpu, ids, 64, 64, false);
      gate(lc, lg, V, t + "_decode", 2e-3, 2e-2, moe);
      sink_probe("decode");
    }
    const CudaGraphStats g1 = gpu->graph_stats();
    check(g1.disabled_reason.empty() && g1.graph_steps - g0.graph_steps == 64, t + "_graphs",
          std::to_string(g1.graph_steps - g0.graph_steps) + " of 64 decode steps through graphs" +
              (g1.disabled_reason.empty() ? "" : ": " + g1.disabled_reason));
  }

  for (PositionMode mode : {PositionMode::kOriginal, PositionMode::kCache}) {  // window + sinks
    const std::string t =
        tag + (mode == PositionMode::kCache ? "_window64_S4_cache" : "_window64_S4_original");
    BackendOptions o = cpu_o;
    o.cache = window_cache(64, 4, mode);
    auto cpu = make_cpu_backend(model, o);
    auto gpu = make_cuda_backend(model, o);
    gate(stream(*cpu, ids, 160, 96, true), stream(*gpu, ids, 160, 96, true), V, t, 3e-3, 3e-2, moe);
  }

  {  // the dynamic-sparse rule on the sharp file (its bf16 rounding alone costs ~2e-3 mean KL)
    const auto sm = Model::load(sharp);
    BackendOptions o = cpu_o;
    o.attention.type = AttentionType::kDynamicSparse;
    o.attention.threshold_prefill = 0.01;
    o.attention.threshold_decode = 0.01;
    o.sparse_decode = SparseDecodeKernels::kAlways;  // the CPU's decisions, not the fastest kernels
    auto cpu = make_cpu_backend(sm, o);
    auto gpu = make_cuda_backend(sm, o);
    gate(stream(*cpu, ids, 320, 64, true), stream(*gpu, ids, 320, 64, true), V, tag + "_sparse",
         6e-3, 6e-2, moe);
    for (bool dec : {false, true}) {
      const TileCounts tc = cpu->probes().total(dec), tg = gpu->probes().total(dec);
      const double fc = double(tc.skipped) / double(std::max<int64_t>(tc.visited, 1));
      const double fg = double(tg.skipped) / double(std::max<int64_t>(tg.visited, 1));
      // Decode must skip some tiles where the sharp file's Q/K gains peak the attention (the
      // families with Q/K norms; gemma2's gains have no such knob).
      const bool need_skips = dec && mc.qk_norm;
      check(tg.visited == tc.visited && std::abs(fg - fc) <= 0.02 + 0.1 * fc &&
                (!need_skips || tc.skipped > 0),
            tag + "_sparse_" + (dec ? "decode" : "prefill") + "_tiles",
            "skipped cpu " + std::to_string(tc.skipped) + " of " + std::to_string(tc.visited) +
                ", gpu " + std::to_string(tg.skipped) + " of " + std::to_string(tg.visited) +
                " (gates: same tiles visited, skipped share within 0.02 + 10 % of the CPU's" +
                (need_skips ? ", some skipped)" : ")"));
    }
  }
}

// 3. A model's own window on every layer (Mistral, qwen2, phi3) composed with the cache's
// window + sinks and the dynamic-sparse rule at once, CUDA vs CPU (logits gated as the sparse
// case; the tile counts printed: tests/gpu/test_attention_families checks them per head).
void check_window_sparse(const fs::path& sharp, const std::string& tag) {
  const auto sm = Model::load(sharp);
  const int V = sm->config().n_vocab;
  const std::vector<TokenId> ids = test_ids(400, V, 7);
  for (PositionMode mode : {PositionMode::kOriginal, PositionMode::kCache}) {
    BackendOptions o;
    o.decode_products = QgemvMode::kFloatActivations;
    o.cache = window_cache(64, 4, mode);
    o.attention.type = AttentionType::kDynamicSparse;
    o.attention.threshold_prefill = o.attention.threshold_decode = 0.01;
    o.sparse_decode = SparseDecodeKernels::kAlways;
    auto cpu = make_cpu_backend(sm, o);
    auto gpu = make_cuda_backend(sm, o);
    const std::string t =
        tag + (mode == PositionMode::kCache ? "_window64_S4_sparse_cache" : "_window64_S4_sparse");
    gate(stream(*cpu, ids, 160, 96, true), stream(*gpu, ids, 160, 96, true), V, t, 6e-3, 6e-2);
    for (bool dec : {false, true}) {
      const TileCounts tc = cpu->probes().total(dec), tg = gpu->probes().total(dec);
      std::printf("INFO %s %s tiles: cpu skipped %lld of %lld, gpu %lld of %lld\n", t.c_str(),
                  dec ? "decode" : "prefill", (long long)tc.skipped, (long long)tc.visited,
                  (long long)tg.skipped, (long long)tg.visited);
    }
  }
}

// 4. phi3's LongRoPE: the CPU picks the factor set from the backend's context (short up to the
// original context, 512 here, long past it) and the CUDA backend must rotate with the same one.
// Short: a 512-position backend, prefill 256 + 64 decode steps; long: the file's 2048, a prefill
// of 700 (past 512) + 64 steps. Sensitivity (hd 64): short vs long factors on the CPU must move
// the logits past 10x the gate, so the gates would see a wrong set.
void check_longrope(const fs::path& file, const std::string& tag, bool sensitivity) {
  const auto model = Model::load(file);
  check(model->config().long_rope && model->config().rope_orig_ctx == 512 &&
            model->config().rope_dim < model->config().head_dim,
        tag + "_longrope_file",
        "long_rope " + std::to_string(model->config().long_rope) + ", original context " +
            std::to_string(model->config().rope_orig_ctx) + ", rope_dim " +
            std::to_string(model->config().rope_dim) + " of head_dim " +
            std::to_string(model->config().head_dim) + " (want LongRoPE, 512, partial rotary)");
  const int V = model->config().n_vocab;
  const std::vector<TokenId> ids = test_ids(800, V, 11);
  BackendOptions so;
  so.decode_products = QgemvMode::kFloatActivations;
  so.max_context = 512;
  BackendOptions lo = so;
  lo.max_context = 0;  // the file's 2048
  auto cpu_s = make_cpu_backend(model, so), cpu_l = make_cpu_backend(model, lo);
  const std::vector<float> cpu_short = stream(*cpu_s, ids, 256, 64, true);
  if (sensitivity) {  // the same tokens, the other factor set
    const Agreement a = compare(cpu_short, stream(*cpu_l, ids, 256, 64, true), V);
    check(a.mean_kl > 10 * 2e-3, tag + "_longrope_sensitivity",
          "short vs long factors on the CPU: " + a.str() + " (gate: mean KL > 10x the 2e-3 gate)");
  }
  if (g_cpu_only) return;
  gate(cpu_short, stream(*make_cuda_backend(model, so), ids, 256, 64, true), V,
       tag + "_longrope_short_ctx512", 2e-3, 2e-2);
  gate(stream(*cpu_l, ids, 700, 64, true), stream(*make_cuda_backend(model, lo), ids, 700, 64, true),
       V, tag + "_longrope_long_ctx2048", 2e-3, 2e-2);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--cpu-only")
      g_cpu_only = true;
    else
      gpu_test::g_filter = argv[i];
  }
  std::string why;
  if (!g_cpu_only && !cuda_available(&why)) {
    std::printf("SKIP: %s\n", why.c_str());
    return 0;
  }
  std::printf("device: %s\n", g_cpu_only ? "none (--cpu-only)" : cuda_device_name().c_str());
  if (!fs::exists(oracle_dir() / "manifest.json")) {
    check(false, "oracles", "no manifest.json in " + oracle_dir().string() +
                                " (run from the repository root or set SINKSCOPE_ORACLE_DIR)");
    return gpu_test::finish_checks();
  }
  const Json manifest = Json::parse(read_bytes(oracle_dir() / "manifest.json"));
  for (const auto& c : manifest.at("cases"))
    run(c.at("name").get<std::string>(), [&] { check_oracle(c); });

  const fs::path dir = fs::temp_directory_path() / ("sinkscope_families_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // The families the CUDA backend runs, from their oracle files.
  for (const char* base :
       {"qwen3_tied_f32", "qwen3_untied_q8_0", "gemma3_tied_q8_0", "gemma2_tied_f32",
        "gpt_oss_mxfp4"})
    for (int hd : {64, 128}) {
      const std::string tag = std::string(base) + "_hd" + std::to_string(hd);
      run(tag, [&] {
        const fs::path src = oracle_dir() / (std::string(base) + ".gguf");
        gpu_test::WidenShape s;
        s.head_dim = hd;
        // Gemma's local layers: a window of 100 (the oracles' 6 / 8 are shorter than a tile), so
        // windows end mid-tile and later tiles drop out of the local layers whole.
        // gpt-oss alternates local (128 in the real model) and global layers: 100 here too.
        const bool gpt_oss = std::string(base).rfind("gpt_oss", 0) == 0;
        if (std::string(base).rfind("gemma", 0) == 0 || gpt_oss) s.sliding_window = 100;
        // Gemma 2 has no Q/K norms: larger queries, so that scores reach its soft-cap of 5.
        if (std::string(base).rfind("gemma2", 0) == 0) s.q_weight_mul = kGemma2QMul;
        const fs::path file = dir / (tag + ".gguf");
        gpu_test::widen_oracle(src, file, s, 1000 + hd);
        gpu_test::WidenShape sharp_s = s;
        sharp_s.qk_gain_mul = kSharpGain;
        if (gpt_oss) sharp_s.q_weight_mul = 3.0f;  // no Q/K norms: larger queries peak it
        const fs::path sharp = dir / (tag + "_sharp.gguf");
        gpu_test::widen_oracle(src, sharp, sharp_s, 1000 + hd);
        if (!g_cpu_only)
          check_widened(file, sharp, tag,
                        std::string(base).find("q8_0") != std::string::npos || gpt_oss);
        if (hd != 64) return;
        // Sensitivity: the Q/K norm gains x1.5 (gemma2, without Q/K norms: the attention
        // soft-cap 50 instead of the file's) must move the logits far past the gates.
        BackendOptions o;
        o.decode_products = QgemvMode::kFloatActivations;
        auto m0 = Model::load(file);
        const bool capped = m0->config().attn_softcap > 0;
        gpu_test::WidenShape alt_s = s;
        alt_s.qk_gain_mul = 1.5f;
        if (capped) alt_s.attn_softcap = 50.0f;
        if (gpt_oss) alt_s.sink_shift = -4.0f;  // no Q/K norms: the learned sinks instead
        const fs::path alt = dir / (tag + "_alt.gguf");
        gpu_test::widen_oracle(src, alt, alt_s, 1000 + hd);
        auto m1 = Model::load(alt);
        const int V = m0->config().n_vocab;
        const std::vector<TokenId> ids = test_ids(400, V, 7);
        auto c0 = make_cpu_backend(m0, o), c1 = make_cpu_backend(m1, o);
        const std::vector<float> l0 = stream(*c0, ids, 256, 0, true);
        const Agreement a = compare(l0, stream(*c1, ids, 256, 0, true), V);
        check(a.mean_kl > 10 * 2e-3,
              tag + (capped ? "_softcap_sensitivity"
                            : gpt_oss ? "_learned_sink_sensitivity" : "_qk_norm_sensitivity"),
              std::string(capped    ? "attention soft-cap 50 instead of " +
                                       std::to_string(m0->config().attn_softcap)
                          : gpt_oss ? "learned sink logits 4 lower"
                                    : "Q/K gains x1.5") +
                  " on the CPU: " + a.str() + " (gate: mean KL > 10x the 2e-3 gate)");
        if (s.sliding_window > 0) {  // the local layers' window must matter too
          gpu_test::WidenShape wide = s;
          wide.sliding_window = 4096;
          const fs::path nw = dir / (tag + "_nowindow.gguf");
          gpu_test::widen_oracle(src, nw, wide, 1000 + hd);
          auto c3 = make_cpu_backend(Model::load(nw), o);
          const Agreement w = compare(l0, stream(*c3, ids, 256, 0, true), V);
          check(w.mean_kl > 10 * 2e-3, tag + "_window_sensitivity",
                "local window 4096 instead of 100 on the CPU: " + w.str() +
                    " (gate: mean KL > 10x the 2e-3 gate)");
        }
        // For scale (no gate): what rounding the matrices to bf16 alone does on the CPU, and how
        // many tiles the CPU skips on the sharp file.
        s.bf16 = true;
        const fs::path b16 = dir / (tag + "_bf16.gguf");
        gpu_test::widen_oracle(src, b16, s, 1000 + hd);
        auto c2 = make_cpu_backend(Model::load(b16), o);
        const std::vector<float> l2 = stream(*c2, ids, 256, 0, true);
        int rows = 0;
        const double t1 = confident_top1(l0, l2, V, 0.3, &rows);
        std::printf("INFO %s: matrices rounded to bf16, CPU vs CPU: %s; top-1 %.2f %% of the %d "
                    "rows with a top-2 gap >= 0.3; %.2f %% of the rows above KL 2e-2\n", tag.c_str(),
                    compare(l0, l2, V).str().c_str(), 100 * t1, rows,
                    100 * share_kl_above(l0, l2, V, 2e-2));
        BackendOptions so = o;
        so.attention.type = AttentionType::kDynamicSparse;
        so.attention.threshold_prefill = so.attention.threshold_decode = 0.01;
        so.sparse_decode = SparseDecodeKernels::kAlways;  // decode tiles compared with the CPU's
        auto cs = make_cpu_backend(Model::load(sharp), so);
        (void)stream(*cs, ids, 320, 64, true);
        const TileCounts tp = cs->probes().total(false), td = cs->probes().total(true);
        std::printf("INFO %s: sharp file, CPU at lambda 0.01 skips %lld of %lld tiles (prefill), "
                    "%lld of %lld (decode)\n", tag.c_str(), (long long)tp.skipped,
                    (long long)tp.visited, (long long)td.skipped, (long long)td.visited);
      });
    }
  // Whole-model windows (every layer local): Mistral's llama GGUF from tests/data/hf, the same
  // file as qwen2 (Q/K/V biases, NeoX RoPE), phi3 (fused QKV and gate|up, partial rotary,
  // LongRoPE with original context 512 of 2048); each widened with a window of 100.
  struct OwnWindowCase {
    const char* tag;
    const char* src;  // relative to tests/data
    const char* arch;
  };
  const OwnWindowCase own_cases[] = {
      {"mistral_window_f16", "hf/mistral_f16_window.gguf", ""},
      {"qwen2_window_f16", "hf/mistral_f16_window.gguf", "qwen2"},
      {"phi3_longrope_q8_0", "oracles/phi3_longrope_q8_0.gguf", ""},
  };
  for (const OwnWindowCase& oc : own_cases)
    for (int hd : {64, 128}) {
      const std::string tag = std::string(oc.tag) + "_hd" + std::to_string(hd);
      run(tag, [&] {
        const fs::path src = oracle_dir().parent_path() / oc.src;
        const bool phi3 = std::string(oc.tag).rfind("phi3", 0) == 0;
        gpu_test::WidenShape s;
        s.head_dim = hd;
        s.sliding_window = 100;
        s.arch = oc.arch;
        if (phi3) s.orig_ctx = 512;
        const fs::path file = dir / (tag + ".gguf");
        gpu_test::widen_oracle(src, file, s, 2000 + hd);
        const auto m0 = Model::load(file);
        check(m0->config().layer_window(0) == 100 &&
                  m0->config().layer_window(m0->config().n_layer - 1) == 100,
              tag + "_every_layer_windowed",
              m0->config().architecture + ": layer windows " +
                  std::to_string(m0->config().layer_window(0)) + " .. " +
                  std::to_string(m0->config().layer_window(m0->config().n_layer - 1)) +
                  " (want 100 on every layer)");
        gpu_test::WidenShape sharp_s = s;
        sharp_s.q_weight_mul = 3.0f;  // no Q/K norms: larger queries peak the attention
        const fs::path sharp = dir / (tag + "_sharp.gguf");
        gpu_test::widen_oracle(src, sharp, sharp_s, 2000 + hd);
        if (!g_cpu_only) {
          check_widened(file, sharp, tag, phi3);
          check_window_sparse(sharp, tag);
        }
        if (phi3) check_longrope(file, tag, hd == 64);
        if (hd != 64) return;
        BackendOptions o;
        o.decode_products = QgemvMode::kFloatActivations;
        gpu_test::WidenShape wide = s;
        wide.sliding_window = 4096;
        const fs::path nw = dir / (tag + "_nowindow.gguf");
        gpu_test::widen_oracle(src, nw, wide, 2000 + hd);
        const int V = m0->config().n_vocab;
        const std::vector<TokenId> ids = test_ids(400, V, 7);
        auto c0 = make_cpu_backend(m0, o), c1 = make_cpu_backend(Model::load(nw), o);
        const Agreement w = compare(stream(*c0, ids, 256, 0, true), stream(*c1, ids, 256, 0, true), V);
        check(w.mean_kl > 10 * 2e-3, tag + "_window_sensitivity",
              "own window 4096 instead of 100 on the CPU: " + w.str() +
                  " (gate: mean KL > 10x the 2e-3 gate)");
      });
    }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return gpu_test::finish_checks();
}
