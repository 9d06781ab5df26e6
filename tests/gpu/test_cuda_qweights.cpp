// SPDX-License-Identifier: Apache-2.0
// The CUDA backend with weights kept in their file format (BackendOptions::gpu_weights native,
// kernels/qgemv.h) against the CPU backend on the same file, for the real model re-quantized with
// the engine's own writer and quantizers into the test's temp directory:
//   q8_0: every matrix whose rows are a multiple of 32 long re-quantized to Q8_0;
//   q4_k: every matrix whose rows are a multiple of 256 long re-quantized to Q4_K (SmolLM2's
//         576-long rows are not: those tensors keep their type, so the file mixes Q4_K with the
//         original type, and the backend mixes the quantized GEMV with bf16 for them).
// Teacher-forced logits for one 400-token prefill and for prefill 64 + 192 decode steps, with
// both activation precisions of the quantized GEMVs; gates at check_model. Plain executable: "SKIP: <reason>" and exit 0 without a GPU or the model.
//   model: $SINKSCOPE_MODEL, else sinkscope::default_model_path()
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
using gpu_test::prefill_then_decode;

namespace {

// Copies src to dst with every 2-D tensor whose row length is a multiple of `to`'s block size
// re-quantized to `to` (dequantized with the engine's dequantizer first); the rest as stored.
// untie: a tied model gets its own LM head (output.weight, type `to`): the embedding table's rows
// in reverse order, so that a head read from the wrong matrix cannot pass the gates. Returns how
// many tensors were re-quantized (or added).
int requantize(const std::filesystem::path& src, const std::filesystem::path& dst, GgmlType to,
               bool untie = false) {
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
  if (untie && in->find_tensor("output.weight") == nullptr) {
    const GgufTensorInfo& e = in->tensor("token_embd.weight");
    const int64_t D = e.dims[0], V = e.dims[1];
    std::vector<float> f(static_cast<size_t>(e.n_elements)), r(f.size());
    dequantize_row(e.type, e.data, f.data(), e.n_elements);
    for (int64_t v = 0; v < V; ++v)
      std::copy_n(f.data() + (V - 1 - v) * D, D, r.data() + v * D);
    w.add_tensor("output.weight", e.dims, to, r);
    ++n;
  }
  w.write(dst);
  return n;
}

// Gates per activation precision of the quantized GEMVs (BackendOptions::gpu_activations):
// int16 (two int8 planes, about 15 bits, like the CPU's int16 products): mean KL <= 1e-3; int8
// (one plane, llama.cpp's Q8_1 activations): mean KL <= 5e-3. Top-1 agreement is gated on the
// rows where the CPU's top-2 gap is at least 0.25 logits (>= 99 %): on near-ties two correct
// roundings may pick different tokens; the plain top-1 share is printed too.
void check_model(const std::filesystem::path& path, const std::string& tag, GpuActivations act) {
  const auto model = Model::load(path);
  const int V = model->config().n_vocab;
  std::vector<TokenId> text = model->tokenizer().encode(gpu_test::kText);
  std::vector<TokenId> ids = text;
  while (ids.size() < 400) ids.insert(ids.end(), text.begin(), text.end());
  ids.resize(400);
  auto cpu = make_cpu_backend(model, {});
  BackendOptions native;
  native.gpu_weights = GpuWeights::kNative;
  native.gpu_activations = act;
  auto gpu = make_cuda_backend(model, native);
  const std::string name = tag + "_" + gpu_activations_name(act);
  const double kl_gate = act == GpuActivations::kInt8 ? 5e-3 : 1e-3;
  constexpr double kGap = 0.25;
  std::string why;
  const bool fused = gpu->fused_decode(&why);
  std::printf("%s: %.1f MiB of device memory; decode %s\n", name.c_str(),
              double(gpu->device_bytes()) / (1 << 20),
              fused ? "fused (no projection kept quantized)" : ("unfused: " + why).c_str());
  auto gate = [&](const std::vector<float>& ref, const std::vector<float>& test,
                  const std::string& what) {
    const gpu_test::Agreement a = gpu_test::compare(ref, test, V);
    int rows = 0;
    const double ct = gpu_test::confident_top1(ref, test, V, kGap, &rows);
    char extra[160];
    std::snprintf(extra, sizeof extra, "; top-1 on %d rows with a gap >= %.2f: %.2f %% (gates: "
                  "mean KL <= %.0e, that top-1 >= 99 %%)", rows, kGap, 100.0 * ct, kl_gate);
    check(a.finite && a.mean_kl <= kl_gate && ct >= 0.99, name + what, a.str() + extra);
  };
  std::vector<float> lc, lg;
  cpu->forward(ids, LogitsMode::kAll, lc);
  gpu->forward(ids, LogitsMode::kAll, lg);
  gate(lc, lg, "_prefill_teacher_forced");
  cpu->reset();
  gpu->reset();
  const std::vector<float> dc = prefill_then_decode(*cpu, ids, 64, 192);
  const std::vector<float> dg = prefill_then_decode(*gpu, ids, 64, 192);
  gate(dc, dg, "_decode_teacher_forced");
}

// The device layouts of the native weights (kernels/tuning.h) against each other on one file:
// parts merged into one GEMV launch (SINKSCOPE_QWEIGHT_MERGE) must give the same logits bit for
// bit (every row is computed as before); Q8_0 / Q6_K rows repacked at upload
// (SINKSCOPE_QWEIGHT_REPACK) change only the fp32 summation order within a row, so mean KL
// <= 1e-6 against the file layout and the same top-1 on rows with a gap >= 0.25.
void check_layouts(const std::filesystem::path& path, const std::string& tag) {
  const auto model = Model::load(path);
  const int V = model->config().n_vocab;
  const std::vector<TokenId> text = model->tokenizer().encode(gpu_test::kText);
  std::vector<TokenId> ids = text;
  while (ids.size() < 160) ids.insert(ids.end(), text.begin(), text.end());
  ids.resize(160);
  BackendOptions native;
  native.gpu_weights = GpuWeights::kNative;
  native.gpu_activations = GpuActivations::kInt8;
  int64_t fused = 0;  // fused_norm_projections of the last backend
  auto logits = [&](const char* var, const char* value) {
    ::setenv(var, value, 1);
    auto gpu = make_cuda_backend(model, native);
    ::unsetenv(var);
    std::vector<float> all;
    gpu->forward(ids, LogitsMode::kAll, all);
    gpu->reset();
    const std::vector<float> d = prefill_then_decode(*gpu, ids, 96, 63);
    all.insert(all.end(), d.begin(), d.end());
    fused = dynamic_cast<CudaBackend&>(*gpu).graph_stats().fused_norm_projections;
    return all;
  };
  auto differ = [](const std::vector<float>& a, const std::vector<float>& b) {
    size_t diff = a.size() == b.size() ? 0 : a.size();
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      diff += std::memcmp(&a[i], &b[i], 4) != 0;
    return diff;
  };
  const std::vector<float> base = logits("SINKSCOPE_QWEIGHT_MERGE", "1");
  const int64_t fused_base = fused;
  const std::vector<float> split = logits("SINKSCOPE_QWEIGHT_MERGE", "0");
  size_t diff = differ(base, split);
  check(diff == 0, tag + "_merged_parts_bit_identical",
        std::to_string(diff) + " of " + std::to_string(base.size()) +
            " logits differ between one launch per part and merged parts");
  // The decode's RMSNorms and SwiGLU folded into the GEMVs (SINKSCOPE_QGEMV_FUSE) against the
  // separate kernels: the same logits bit for bit, and the fused path was taken (the decode
  // steps' projections, at least Q|K|V and gate|up per layer).
  const std::vector<float> unfused = logits("SINKSCOPE_QGEMV_FUSE", "0");
  diff = differ(base, unfused);
  const int64_t want = 2 * int64_t(model->config().n_layer);
  check(diff == 0 && fused_base >= want && fused == 0, tag + "_fused_norm_swiglu_bit_identical",
        std::to_string(diff) + " of " + std::to_string(base.size()) +
            " logits differ between the fused and the separate kernels; fused projections " +
            std::to_string(fused_base) + " (want >= " + std::to_string(want) + "), with the " +
            "switch off " + std::to_string(fused));
  const std::vector<float> file = logits("SINKSCOPE_QWEIGHT_REPACK", "0");
  const gpu_test::Agreement a = gpu_test::compare(file, base, V);
  int rows = 0;
  const double ct = gpu_test::confident_top1(file, base, V, 0.25, &rows);
  check(a.finite && a.mean_kl <= 1e-6 && ct == 1.0, tag + "_repacked_vs_file_layout",
        a.str() + "; top-1 on " + std::to_string(rows) + " rows with a gap >= 0.25: " +
            std::to_string(100.0 * ct) + " % (gates: mean KL <= 1e-6, 100 %)");
}

void check_model(const std::filesystem::path& path, const std::string& tag) {
  for (GpuActivations act : {GpuActivations::kInt16, GpuActivations::kInt8})
    check_model(path, tag, act);
  check_layouts(path, tag);
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
  // An untied LM head in Q8_0: with native weights it stays in its blocks (the quantized GEMV
  // for one row, the sliced dequantize + GEMM for several), so the device holds less than with
  // SINKSCOPE_GPU_LM_HEAD=bf16, and both agree with the CPU.
  gpu_test::run("q8_0_untied", [&] {
    const std::filesystem::path out = dir / "q8_0_untied.gguf";
    const int n = requantize(path, out, GgmlType::kQ8_0, /*untie=*/true);
    const auto model = Model::load(out);
    check(n > 0 && !model->config().tied_embeddings && !model->weights().output.empty(),
          "q8_0_untied_written", std::to_string(n) + " tensors, output.weight added");
    BackendOptions native;
    native.gpu_weights = GpuWeights::kNative;
    auto bytes_with = [&](const char* head) {
      ::setenv("SINKSCOPE_GPU_LM_HEAD", head, 1);
      const uint64_t b = make_cuda_backend(model, native)->device_bytes();
      ::unsetenv("SINKSCOPE_GPU_LM_HEAD");
      return b;
    };
    const uint64_t quant = bytes_with("native"), bf16 = bytes_with("bf16");
    std::string why;
    make_cuda_backend(model, native)->gpu_weights(&why);
    check(why.find("LM head kept as Q8_0") != std::string::npos, "q8_0_untied_head_named",
          "the backend's weight note: " + why);
    const int64_t V = model->config().n_vocab, D = model->config().n_embd;
    // bf16 holds 2 V D bytes for the head instead of its Q8_0 blocks (34 bytes per 32 values);
    // the quantized head's slices grow the dequantization scratch by at most 2 * 8192 * D.
    const int64_t saved = 2 * V * D - V * D / 32 * 34 - 2 * 8192 * D;
    check(int64_t(bf16) - int64_t(quant) >= saved, "q8_0_untied_head_memory",
          "device MiB: " + std::to_string(double(quant) / (1 << 20)) + " (head in Q8_0) vs " +
              std::to_string(double(bf16) / (1 << 20)) + " (bf16 head)");
    check_model(out, "q8_0_untied");
  });
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return gpu_test::finish_checks();
}
