// SPDX-License-Identifier: Apache-2.0
// The CUDA backend with weights kept in their file format (BackendOptions::gpu_weights native,
// kernels/qgemv.h) against the CPU backend on the same file, for the real model re-quantized with
// the engine's own writer and quantizers into the test's temp directory:
//   q8_0: every matrix whose rows are a multiple of 32 long re-quantized to Q8_0;
//   q4_k: every matrix whose rows are a multiple of 256 long re-quantized to Q4_K (SmolLM2's
//         576-long rows are not: those tensors keep their type, so the file mixes Q4_K with the
//         original type, and the backend mixes the quantized GEMV with bf16 for them).
// Gates as tests/gpu/test_cuda_backend.cpp: teacher-forced logits, mean KL(cpu || gpu) <= 1e-3
// nats and top-1 agreement >= 99 %, for one 400-token prefill and for prefill 64 + 192 decode
// steps. Plain executable: "SKIP: <reason>" and exit 0 without a GPU or the model.
//   model: $SINKSCOPE_MODEL, else sinkscope::default_model_path()
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/format/ggml_types.h"
#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "engine/model/model.h"
#include "gpu_agreement.h"
#include "gpu_checks.h"
#include "gpu_model.h"
#include "sample_text.h"

using namespace sinkscope;
using gpu_test::check;

namespace {

// Copies src to dst with every 2-D tensor whose row length is a multiple of `to`'s block size
// re-quantized to `to` (dequantized with the engine's dequantizer first); the rest as stored.
// Returns how many tensors were re-quantized.
int requantize(const std::filesystem::path& src, const std::filesystem::path& dst, GgmlType to) {
  const auto in = GgufFile::open(src);
  GgufWriter w;
  for (const auto& [key, value] : in->metadata()) {
    if (key == "general.alignment") continue;  // the writer's own
    if (key == "general.file_type") continue;  // no longer the file's single type
    w.set_value(key, value);
  }
  const GgmlTypeTraits* tt = ggml_type_traits(static_cast<uint32_t>(to));
  int n = 0;
  for (const GgufTensorInfo& t : in->tensors()) {
    const bool matrix = t.dims.size() == 2 && t.dims[0] % tt->block_elems == 0;
    if (matrix && t.type != to) {
      std::vector<float> f(static_cast<size_t>(t.n_elements));
      dequantize_row(t.type, t.data, f.data(), t.n_elements);
      w.add_tensor(t.name, t.dims, to, f);
      ++n;
    } else {
      w.add_raw_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    }
  }
  w.write(dst);
  return n;
}

std::vector<float> prefill_then_decode(Backend& be, const std::vector<TokenId>& ids, int n_prefill,
                                       int steps) {
  std::vector<float> all, l;
  be.forward(std::span(ids.data(), size_t(n_prefill)), LogitsMode::kLast, l);
  all.insert(all.end(), l.begin(), l.end());
  for (int t = 0; t < steps; ++t) {
    be.forward(std::span(ids.data() + n_prefill + t, 1), LogitsMode::kLast, l);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

void check_model(const std::filesystem::path& path, const std::string& tag) {
  const auto model = Model::load(path);
  const int V = model->config().n_vocab;
  std::vector<TokenId> text = model->tokenizer().encode(gpu_test::kText);
  std::vector<TokenId> ids = text;
  while (ids.size() < 400) ids.insert(ids.end(), text.begin(), text.end());
  ids.resize(400);
  auto cpu = make_cpu_backend(model, {});
  BackendOptions native;
  native.gpu_weights = GpuWeights::kNative;
  auto gpu = make_cuda_backend(model, native);
  std::string why;
  const bool fused = gpu->fused_decode(&why);
  std::printf("%s: %.1f MiB of device memory; decode %s\n", tag.c_str(),
              double(gpu->device_bytes()) / (1 << 20),
              fused ? "fused (no projection kept quantized)" : ("unfused: " + why).c_str());
  std::vector<float> lc, lg;
  cpu->forward(ids, LogitsMode::kAll, lc);
  gpu->forward(ids, LogitsMode::kAll, lg);
  const gpu_test::Agreement a = gpu_test::compare(lc, lg, V);
  check(a.finite && a.mean_kl <= 1e-3 && a.top1 >= 0.99, tag + "_prefill_teacher_forced",
        a.str() + " (gates: mean KL <= 1e-3, top-1 >= 99 %)");
  cpu->reset();
  gpu->reset();
  const std::vector<float> dc = prefill_then_decode(*cpu, ids, 64, 192);
  const std::vector<float> dg = prefill_then_decode(*gpu, ids, 64, 192);
  const gpu_test::Agreement d = gpu_test::compare(dc, dg, V);
  check(d.finite && d.mean_kl <= 1e-3 && d.top1 >= 0.99, tag + "_decode_teacher_forced",
        d.str() + " (gates: mean KL <= 1e-3, top-1 >= 99 %)");
}

}  // namespace

int main() {
  std::filesystem::path path;
  if (!gpu_test::gpu_and_model(&path)) return 0;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("sinkscope_qweights_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  gpu_test::run("original", [&] { check_model(path, "original"); });
  for (const auto& [type, tag] : {std::pair{GgmlType::kQ8_0, std::string("q8_0")},
                                  std::pair{GgmlType::kQ4_K, std::string("q4_k")}}) {
    gpu_test::run(tag, [&, type = type, tag = tag] {
      const std::filesystem::path out = dir / (tag + ".gguf");
      const int n = requantize(path, out, type);
      check(n > 0, tag + "_requantized", std::to_string(n) + " tensors re-quantized to " + tag);
      check_model(out, tag);
    });
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return gpu_test::finish_checks();
}
