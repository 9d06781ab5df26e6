// SPDX-License-Identifier: Apache-2.0
// End-to-end speed of the CUDA backend on the real model: prefill tokens/s for a 2K-token
// prompt and greedy decode tokens/s (256 tokens after that prompt), median of several
// repetitions, decode with CUDA Graphs and eagerly. Prints a table; optional CSV.
//   bench_e2e [--csv FILE] [--ids FILE] [--prompt N] [--decode N] [--reps N]
//             [--weights native|bf16] [--act int16|int8] [--no-eager]
// --weights: projections in their file format on the GPU (default) or all bf16 (BackendOptions::
// gpu_weights); the device weight bytes are printed with the table.
// --act: the activation precision of the quantized GEMVs with native weights (BackendOptions::
// gpu_activations).
// --no-eager: only the CUDA-graph engine (long prompts, where the eager row adds nothing).
// --ids writes the prompt's token ids (one line, space-separated) for hf_e2e_bench.py.
// Without a GPU or the model: "SKIP: <reason>", exit 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "engine/util/paths.h"
#include "gpu_model.h"

using namespace sinkscope;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TokenId argmax(const std::vector<float>& l) {
  return TokenId(std::max_element(l.begin(), l.end()) - l.begin());
}

const char* kParagraph =
    "Rivers carve their valleys slowly, grain by grain, over thousands of years. A traveller who "
    "follows one from its source in the mountains to its mouth at the sea passes through forests, "
    "farmland, small towns and finally a wide delta where the water spreads into a hundred "
    "channels. Each stretch has its own character: fast and cold near the top, broad and patient "
    "near the bottom, carrying the silt that will one day become new land. ";

struct Result {
  double prefill_tps = 0, prefill_ms = 0, decode_tps = 0, decode_ms_per_tok = 0;
};

Result bench(CudaBackend& be, const std::vector<TokenId>& prompt, int n_decode, int reps) {
  std::vector<double> pre, dec;
  std::vector<float> logits;
  for (int r = 0; r <= reps; ++r) {  // r = 0: warm-up
    be.reset();
    auto t0 = Clock::now();
    be.forward(prompt, LogitsMode::kLast, logits);
    const double tp = seconds_since(t0);
    TokenId next = argmax(logits);
    t0 = Clock::now();
    for (int i = 0; i < n_decode; ++i) {
      const TokenId one[1] = {next};
      be.forward(one, LogitsMode::kLast, logits);
      next = argmax(logits);
    }
    const double td = seconds_since(t0);
    if (r > 0) {
      pre.push_back(tp);
      dec.push_back(td);
    }
  }
  Result res;
  res.prefill_ms = 1e3 * median(pre);
  res.prefill_tps = double(prompt.size()) / median(pre);
  res.decode_tps = double(n_decode) / median(dec);
  res.decode_ms_per_tok = 1e3 * median(dec) / n_decode;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  std::string csv, ids_path;
  int n_prompt = 2048, n_decode = 256, reps = 5;
  GpuWeights weights = GpuWeights::kBf16;
  GpuActivations act = kDefaultGpuActivations;
  bool with_eager = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--csv")
      csv = next();
    else if (a == "--ids")
      ids_path = next();
    else if (a == "--prompt")
      n_prompt = std::atoi(next().c_str());
    else if (a == "--decode")
      n_decode = std::atoi(next().c_str());
    else if (a == "--reps")
      reps = std::max(1, std::atoi(next().c_str()));
    else if (a == "--no-eager")
      with_eager = false;
    else if (a == "--weights" && parse_gpu_weights(argv[i + 1 < argc ? i + 1 : i]))
      weights = *parse_gpu_weights(next());
    else if (a == "--act" && parse_gpu_activations(argv[i + 1 < argc ? i + 1 : i]))
      act = *parse_gpu_activations(next());
    else {
      std::fprintf(
          stderr,
          "usage: bench_e2e [--csv FILE] [--ids FILE] [--prompt N] [--decode N] [--reps N] "
          "[--weights native|bf16] [--act int16|int8] [--no-eager]\n");
      return 2;
    }
  }
  std::filesystem::path path;
  if (!gpu_test::gpu_and_model(&path)) return 0;
  try {
    auto model = Model::load(path);
    std::vector<TokenId> prompt = model->tokenizer().encode(kParagraph);
    const std::vector<TokenId> para = model->tokenizer().encode(kParagraph, false, false);
    while (int(prompt.size()) < n_prompt) prompt.insert(prompt.end(), para.begin(), para.end());
    prompt.resize(size_t(n_prompt));
    if (!ids_path.empty()) {
      std::ofstream f(ids_path);
      for (size_t i = 0; i < prompt.size(); ++i) f << (i ? " " : "") << prompt[i];
      f << "\n";
    }
    BackendOptions opt;
    opt.max_context = n_prompt + n_decode;
    opt.gpu_weights = weights;
    opt.gpu_activations = act;
    auto graphs = make_cuda_backend(model, opt);
    const Result rg = bench(*graphs, prompt, n_decode, reps);
    Result re;
    if (with_eager) {
      CudaBackendOptions eager_opt;
      eager_opt.tuning.cuda_graphs = false;
      auto eager = make_cuda_backend(model, opt, eager_opt);
      re = bench(*eager, prompt, n_decode, reps);
    }
    const CudaGraphStats s = graphs->graph_stats();
    std::printf("device: %s   model: %s\n", graphs->name().c_str(),
                path.filename().string().c_str());
    std::printf("activations (native GEMVs): %s\n", gpu_activations_name(act));
    std::printf("weights: %s; device memory held by the backend: %.1f MiB\n",
                gpu_weights_name(weights), double(graphs->device_bytes()) / (1024.0 * 1024.0));
    std::printf("prompt %d tokens, greedy decode %d tokens, median of %d runs (after 1 warm-up)\n",
                n_prompt, n_decode, reps);
    const int64_t steps = s.graph_steps + s.eager_steps;
    std::printf(
        "graph stats: %lld graph steps, %lld eager, %lld captures (%.4f per step), %lld "
        "instantiations, %lld graphs held%s%s\n",
        (long long)s.graph_steps, (long long)s.eager_steps, (long long)s.captures,
        steps ? double(s.captures) / double(steps) : 0.0, (long long)s.instantiations,
        (long long)s.graphs_cached, s.disabled_reason.empty() ? "" : "; DISABLED: ",
        s.disabled_reason.c_str());
    std::string unfused_why;
    const bool fused = graphs->fused_decode(&unfused_why);
    std::printf("decode path: %s\n",
                fused ? "fused batch-1 kernels (kernels/decode_fused.h)"
                      : ("unfused (" + unfused_why + ")").c_str());
    std::printf(
        "\n| engine               | prefill tok/s | prefill ms | decode tok/s | decode ms/tok |\n");
    std::printf(
        "|----------------------|---------------|------------|--------------|---------------|\n");
    std::printf("| sinkscope cuda graph | %13.0f | %10.2f | %12.1f | %13.3f |\n", rg.prefill_tps,
                rg.prefill_ms, rg.decode_tps, rg.decode_ms_per_tok);
    if (with_eager)
      std::printf("| sinkscope cuda eager | %13.0f | %10.2f | %12.1f | %13.3f |\n",
                  re.prefill_tps, re.prefill_ms, re.decode_tps, re.decode_ms_per_tok);
    if (!csv.empty()) {
      std::ofstream f(csv);
      f << "engine,weights,prompt,decode,prefill_tok_s,decode_tok_s\n";
      f << "sinkscope_graph," << gpu_weights_name(weights) << "," << n_prompt << "," << n_decode << "," << rg.prefill_tps << ","
        << rg.decode_tps << "\n";
      if (with_eager)
        f << "sinkscope_eager," << gpu_weights_name(weights) << "," << n_prompt << ","
          << n_decode << "," << re.prefill_tps << "," << re.decode_tps << "\n";
    }
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return 0;
}
