// SPDX-License-Identifier: Apache-2.0
// gpt-oss on the CUDA backend at gpt-oss-20b's widths (no download: the tiny transformers oracle
// tests/data/oracles/gpt_oss_mxfp4.gguf widened by family_models.h to n_embd 2880, 64 query / 8
// KV heads of 64, 32 MXFP4 experts of width 2880 with 4 per token, window 128 on alternating
// layers; the oracle's 2 layers, random weights): prefill time per length and decode time per
// step, with the experts grouped into one GEMM per expert (default) and as per-token GEMVs
// (SINKSCOPE_MOE_GROUPED=0), dense attention.
//   bench_gpt_oss [--lengths 128,512,2048] [--steps 64] [--reps 3] [--weights bf16|native]
// --weights native keeps the experts in MXFP4 on the device (GpuWeights::kNative).
// The widened file is written next to this program (build/, ~0.9 GB) and removed afterwards.
// Prefill: the median over --reps of a whole prefill of L tokens (last-row logits,
// synchronised) after a warm-up; decode: the mean step time of --steps steps (CUDA graphs) after
// a prefill of 128 tokens. Without a GPU: "SKIP: <reason>", exit 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "family_models.h"

using namespace sinkscope;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(std::atoi(item.c_str()));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> lengths = {128, 512, 2048};
  int steps = 64, reps = 3;
  GpuWeights weights = GpuWeights::kBf16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--lengths" && i + 1 < argc) lengths = parse_ints(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--weights" && i + 1 < argc)
      weights = std::string(argv[++i]) == "native" ? GpuWeights::kNative : GpuWeights::kBf16;
    else {
      std::fprintf(stderr, "usage: bench_gpt_oss [--lengths 128,512,2048] [--steps 64] [--reps 3] "
                           "[--weights bf16|native]\n");
      return 2;
    }
  }
  std::string why;
  if (!cuda_available(&why)) {
    std::printf("SKIP: %s\n", why.c_str());
    return 0;
  }
  const fs::path src = fs::path(SINKSCOPE_SOURCE_DIR) / "tests" / "data" / "oracles" / "gpt_oss_mxfp4.gguf";
  const fs::path file = fs::absolute(fs::path(argv[0])).parent_path() / "bench_gpt_oss_20b_widths.gguf";
  gpu_test::WidenShape s;
  s.n_embd = 2880;
  s.head_dim = 64;
  s.n_ff = 2880;
  s.n_head = 64;
  s.n_head_kv = 8;
  s.n_expert = 32;
  s.n_expert_used = 4;
  s.sliding_window = 128;
  s.n_ctx = 4096;
  const auto t_w = Clock::now();
  gpu_test::widen_oracle(src, file, s, 20);
  std::printf("device: %s; widened file %s (%.2f GB) in %.1f s\n", cuda_device_name().c_str(),
              file.string().c_str(), double(fs::file_size(file)) / 1e9, ms_since(t_w) / 1e3);
  const auto model = Model::load(file);
  const ModelConfig& c = model->config();
  std::printf("model: %d layers, D %d, %d/%d heads of %d, %d experts of width %d, %d per token, "
              "window %d\n", c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_expert,
              c.n_ff, c.n_expert_used, c.sliding_window);
  std::vector<TokenId> ids(size_t(*std::max_element(lengths.begin(), lengths.end()) + 128 + steps));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = TokenId((i * 7919 + 13) % size_t(c.n_vocab));

  std::vector<std::pair<std::string, double>> decode_rows;
  for (bool grouped : {true, false}) {
    if (!grouped) setenv("SINKSCOPE_MOE_GROUPED", "0", 1);
    BackendOptions o;
    o.max_context = int(ids.size()) + 128;
    o.gpu_weights = weights;
    auto be = make_cuda_backend(model, o);
    if (grouped)
      std::printf("weights: %s; device memory %.2f GB\n"
                  "\n| experts | prefill tokens | prefill ms (median of %d) | prefill tok/s |\n"
                  "|---|---:|---:|---:|\n",
                  weights == GpuWeights::kNative ? "native (MXFP4 experts)" : "bf16",
                  double(be->device_bytes()) / 1e9, reps);
    if (!grouped) unsetenv("SINKSCOPE_MOE_GROUPED");
    const char* name = grouped ? "grouped GEMMs" : "per-token GEMVs";
    std::vector<float> logits;
    for (int L : lengths) {
      be->reset();
      be->forward(std::span(ids.data(), size_t(L)), LogitsMode::kLast, logits);  // warm-up
      std::vector<double> t;
      for (int r = 0; r < reps; ++r) {
        be->reset();
        const auto t0 = Clock::now();
        be->forward(std::span(ids.data(), size_t(L)), LogitsMode::kLast, logits);
        t.push_back(ms_since(t0));
      }
      std::sort(t.begin(), t.end());
      const double med = t[t.size() / 2];
      std::printf("| %s | %d | %.2f | %.0f |\n", name, L, med, 1e3 * L / med);
    }
    be->reset();
    be->forward(std::span(ids.data(), size_t(128)), LogitsMode::kLast, logits);
    for (int i = 0; i < 4; ++i)  // warm-up steps (graph capture)
      be->forward(std::span(ids.data() + 128 + i, 1), LogitsMode::kLast, logits);
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i)
      be->forward(std::span(ids.data() + 132 + i, 1), LogitsMode::kLast, logits);
    decode_rows.emplace_back(name, ms_since(t0) / steps);
  }
  std::printf("\n| experts | decode ms / step (%d steps after 132 tokens) |\n|---|---:|\n", steps);
  for (const auto& [n, ms] : decode_rows) std::printf("| %s | %.3f |\n", n.c_str(), ms);
  std::error_code ec;
  fs::remove(file, ec);
  return 0;
}
