// SPDX-License-Identifier: Apache-2.0
#include "engine/backend/backend_factory.h"

#ifdef SINKSCOPE_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#endif

namespace sinkscope {

const char* backend_kind_name(BackendKind k) {
  switch (k) {
    case BackendKind::kAuto:
      return "auto";
    case BackendKind::kCpu:
      return "cpu";
    case BackendKind::kCuda:
      return "cuda";
  }
  return "?";
}

std::optional<BackendKind> parse_backend_kind(std::string_view text) {
  if (text == "auto") return BackendKind::kAuto;
  if (text == "cpu") return BackendKind::kCpu;
  if (text == "cuda") return BackendKind::kCuda;
  return std::nullopt;
}

const char* gpu_weights_name(GpuWeights w) {
  return w == GpuWeights::kBf16 ? "bf16" : w == GpuWeights::kAuto ? "auto" : "native";
}

std::optional<GpuWeights> parse_gpu_weights(std::string_view text) {
  if (text == "native") return GpuWeights::kNative;
  if (text == "bf16") return GpuWeights::kBf16;
  if (text == "auto") return GpuWeights::kAuto;
  return std::nullopt;
}

const char* gpu_activations_name(GpuActivations a) {
  return a == GpuActivations::kInt8 ? "int8" : "int16";
}

std::optional<GpuActivations> parse_gpu_activations(std::string_view text) {
  if (text == "int16") return GpuActivations::kInt16;
  if (text == "int8") return GpuActivations::kInt8;
  return std::nullopt;
}

bool cuda_available(std::string* why) {
#ifdef SINKSCOPE_HAVE_CUDA
  return gpu::probe_device(why, nullptr);
#else
  if (why) *why = "built without CUDA";
  return false;
#endif
}

int select_cuda_device(int ordinal, std::string* why) {
#ifdef SINKSCOPE_HAVE_CUDA
  return gpu::select_device(ordinal, why);
#else
  (void)ordinal;
  if (why) *why = "built without CUDA";
  return -1;
#endif
}

std::string cuda_device_name() {
#ifdef SINKSCOPE_HAVE_CUDA
  std::string name;
  if (gpu::probe_device(nullptr, &name)) return name;
#endif
  return {};
}

bool cuda_memory_info(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why) {
#ifdef SINKSCOPE_HAVE_CUDA
  if (!gpu::probe_device(why, nullptr)) return false;
  return gpu::memory_info(free_bytes, total_bytes, why);
#else
  (void)free_bytes;
  (void)total_bytes;
  if (why) *why = "built without CUDA";
  return false;
#endif
}

std::string cuda_unsupported_reason(const ModelConfig& c) {
  // Nothing today: the CUDA backend applies a model's own windows on every layer or some
  // (AttentionParams::own_window) and phi3's LongRoPE (the CPU's RopeTable); what it cannot run
  // (gpt-oss, a head_dim the kernels lack) make_cuda_backend refuses by name itself.
  (void)c;
  return {};
}

#ifdef SINKSCOPE_HAVE_CUDA
namespace {
// "bf16 weights", "native weights (auto: ...)".
std::string weights_note(const CudaBackend& be) {
  std::string why;
  const GpuWeights w = be.gpu_weights(&why);
  return std::string(gpu_weights_name(w)) + " weights" + (why.empty() ? "" : " (" + why + ")");
}
}  // namespace
#endif

std::unique_ptr<Backend> make_backend(std::shared_ptr<const Model> model,
                                      const BackendOptions& options, BackendKind kind,
                                      std::string* note) {
  if (!model) throw BackendError("make_backend: no model");
  if (kind == BackendKind::kCpu) {
    if (note) *note = "cpu backend (requested)";
    return make_cpu_backend(std::move(model), options);
  }
  std::string why;
  if (!cuda_available(&why)) {
    if (kind == BackendKind::kCuda)
      throw BackendError("CUDA backend requested but not available: " + why);
    if (note) *note = "cpu backend (CUDA not available: " + why + ")";
    return make_cpu_backend(std::move(model), options);
  }
#ifdef SINKSCOPE_HAVE_CUDA
  if (const std::string unsupported = cuda_unsupported_reason(model->config());
      !unsupported.empty()) {
    if (kind == BackendKind::kCuda) throw BackendError("CUDA backend: " + unsupported);
    if (note) *note = "cpu backend (" + unsupported + ")";
    return make_cpu_backend(std::move(model), options);
  }
  if (kind == BackendKind::kCuda) {
    auto be = make_cuda_backend(model, options);
    if (note) *note = "cuda backend on " + be->device_name() + " (requested), " + weights_note(*be);
    return be;
  }
  try {
    auto be = make_cuda_backend(model, options);
    if (note) *note = "cuda backend on " + be->device_name() + ", " + weights_note(*be);
    return be;
  } catch (const BackendError& e) {
    if (note) *note = std::string("cpu backend (CUDA backend failed: ") + e.what() + ")";
  }
#endif
  return make_cpu_backend(std::move(model), options);
}

}  // namespace sinkscope
