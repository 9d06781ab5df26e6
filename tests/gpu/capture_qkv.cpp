// SPDX-License-Identifier: Apache-2.0
// Captures the post-RoPE Q, K, V of chosen SmolLM2 layers from the CUDA backend for a real text
// prompt of L tokens (Backend::request_qkv_capture), one file per (L, layer) in the format of
// tests/gpu/qkv_file.h, for bench_captured (our dense vs sparse prefill kernels on real data)
// and torch_sdpa_captured.py (torch SDPA on the same tensors).
//   capture_qkv --out DIR [--lengths 2048,4096,8192] [--layers 3,15,27] [--text FILE]
// Files: DIR/qkv_L<L>_layer<l>.bin (DIR is scratch: never commit captures). Text as in
// test_skip_agreement (--text, $SINKSCOPE_TEXT, <cache>/eval/kjv.txt, else the fixed passage
// repeated). "SKIP: <reason>" and exit 0 without a GPU or the model.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/backend_factory.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model/model.h"
#include "engine/util/paths.h"
#include "qkv_file.h"
#include "sample_text.h"
#include "gpu_model.h"

using namespace sinkscope;

namespace {
std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) v.push_back(std::stoi(item));
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  std::string out, text_arg;
  std::vector<int> lengths = {2048, 4096, 8192}, layers = {3, 15, 27};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--out") out = v;
    else if (a == "--lengths") lengths = parse_ints(v);
    else if (a == "--layers") layers = parse_ints(v);
    else if (a == "--text") text_arg = v;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: capture_qkv --out DIR [--lengths 2048,4096,8192] [--layers 3,15,27] [--text FILE]\n");
    return 2;
  }
  std::filesystem::path path;
  if (!gpu_test::gpu_and_model(&path)) return 0;
  try {
    auto model = Model::load(path);
    const ModelConfig& c = model->config();
    std::string from;
    const std::string text = gpu_test::load_eval_text(text_arg, size_t(512) << 10, &from);
    const std::vector<TokenId> piece = model->tokenizer().encode(text);
    int max_len = 0;
    for (int L : lengths) max_len = std::max(max_len, L);
    std::vector<TokenId> ids;
    while (int(ids.size()) < max_len) ids.insert(ids.end(), piece.begin(), piece.end());
    BackendOptions opt;
    opt.max_context = std::max(max_len, 256);
    auto gpu = make_cuda_backend(model, opt);
    std::filesystem::create_directories(out);
    std::printf("capture_qkv: %s, text %s (%zu tokens of it), model context %d\n",
                gpu->name().c_str(), from.c_str(), piece.size(), c.n_ctx_train);
    std::vector<float> logits;
    for (int L : lengths)
      for (int layer : layers) {
        gpu->reset();
        gpu->request_qkv_capture({layer});
        gpu->forward(std::span(ids.data(), size_t(L)), LogitsMode::kLast, logits);
        const QkvCapture& cap = gpu->qkv_capture();
        gpu_test::QkvFile f;
        f.layer = cap.layer;
        f.n_q = cap.n_q;
        f.q_start = cap.q_start;
        f.n_kv = cap.n_kv;
        f.n_head = cap.n_head;
        f.n_head_kv = cap.n_head_kv;
        f.head_dim = cap.head_dim;
        f.scale = float(1.0 / std::sqrt(double(cap.head_dim)));
        f.q = cap.q;
        f.k = cap.k;
        f.v = cap.v;
        const std::string file = out + "/qkv_L" + std::to_string(L) + "_layer" + std::to_string(layer) + ".bin";
        std::string err;
        if (cap.n_q != L || cap.n_kv != L || !gpu_test::write_qkv_file(file, f, &err)) {
          std::printf("FAIL capture L=%d layer %d: %s\n", L, layer,
                      err.empty() ? "capture has the wrong shape" : err.c_str());
          return 1;
        }
        std::printf("wrote %s (q %d x %d x %d, k/v %d x %d x %d)\n", file.c_str(), f.n_q, f.n_head,
                    f.head_dim, f.n_kv, f.n_head_kv, f.head_dim);
      }
    gpu->request_qkv_capture({});
  } catch (const std::exception& e) {
    std::printf("FAIL capture: %s\n", e.what());
    return 1;
  }
  return 0;
}
