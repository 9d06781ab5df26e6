// SPDX-License-Identifier: Apache-2.0
// The CUDA backend: the whole Llama-family forward on one GPU, mirroring the CPU reference
// (engine/backend/cpu_backend.cpp) step for step. Precision: bf16 weights and GEMM inputs, fp32
// accumulation, fp32 residual stream, bf16 paged KV cache, fp32 logits. No CUDA headers here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "kernels/tuning.h"

namespace sinkscope {

struct CudaBackendOptions {
  int device = -1;         // CUDA device ordinal; -1: the current device
  int max_batch = 2048;    // tokens per device pass (prefill chunk); rounded to a multiple of 128
  // Tests: run the sparse attention kernels even when lambda = 0 (must equal dense bit for bit).
  bool force_sparse_kernel = false;
  // Launch paths and kernel choices (kernels/tuning.h; the SINKSCOPE_* variables of
  // docs/environment.md set the defaults). This backend reads cuda_graphs (decode steps as CUDA
  // graph replays), fused_decode (the fused batch-1 kernels of kernels/decode_fused.h: RMSNorm
  // folded into the QKV and gate|up projections, RoPE + KV append and SwiGLU in their
  // epilogues, residual adds in the O and down projections) and prefill_ws / prefill_ws_sparse
  // (prefill on sm_90 through the warp-specialised kernels, else the wgmma ones; each family's
  // sparse kernel at lambda = 0 equals its dense one bit for bit) itself; the constructor puts
  // the kernel-level fields in force for the process (kernels::set_gpu_tuning).
  kernels::GpuTuning tuning = kernels::gpu_tuning_from_environment();
};
// How decode steps ran. A decode step replays a CUDA Graph captured once for a bound of the
// cache length (a power of two) and reused for every position below it; it is captured when the
// bound or the attention settings change. Steps run eagerly only when graphs are off or failed.
struct CudaGraphStats {
  int64_t graph_steps = 0;      // decode steps replayed from a graph
  int64_t eager_steps = 0;      // decode steps launched eagerly (graphs off or disabled)
  int64_t captures = 0;         // decode graphs captured (one per new (settings, bound) key)
  int64_t instantiations = 0;   // cudaGraphInstantiate (== captures unless one failed)
  int64_t graphs_cached = 0;    // executable graphs held now
  // Single-token native projections enqueued with their RMSNorm (and for gate|up the SwiGLU)
  // folded into the GEMV (kernels/qgemv.h launch_qgemv_fused; tuning qgemv_fuse): per eager
  // pass or graph capture, not per replay.
  int64_t fused_norm_projections = 0;
  std::string disabled_reason;  // non-empty: graphs were turned off after a capture failure
};

class CudaBackend : public Backend {
 public:
  virtual CudaGraphStats graph_stats() const = 0;
  virtual void set_use_graphs(bool on) = 0;
  virtual std::string device_name() const = 0;
  // Where the projections live (BackendOptions::gpu_weights with kAuto resolved: kBf16 or
  // kNative); *why: the reason of an automatic choice, empty when it was asked for, and with
  // native weights whether an untied LM head stayed in its file blocks ("LM head kept as Q6_K").
  virtual GpuWeights gpu_weights(std::string* why = nullptr) const = 0;
  virtual uint64_t device_bytes() const = 0;  // device memory the backend holds
  // Whether decode steps run the fused kernels; if not, why (switched off, or the model's shape
  // is outside what they support: kernels/decode_fused_plan.h).
  virtual bool fused_decode(std::string* why_not = nullptr) const = 0;
};

// Throws BackendError: no device, unsupported model shape (attention needs head_dim 64 or 128),
// or not enough device memory (naming the bytes requested and the bytes free).
std::unique_ptr<CudaBackend> make_cuda_backend(std::shared_ptr<const Model> model,
                                               const BackendOptions& options,
                                               const CudaBackendOptions& cuda_options = {});

namespace gpu {
// Whether a usable CUDA device exists; fills why (no) or name (yes, device 0) when given.
bool probe_device(std::string* why, std::string* name);
// Makes device (ordinal modulo the device count) current for this thread; returns the ordinal
// used, or -1 with *why when there is no device.
int select_device(int ordinal, std::string* why);
// Free and total memory of the current device (cudaMemGetInfo: device-wide, every process);
// false with the runtime's error in *why when it cannot be read.
bool memory_info(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why = nullptr);
}  // namespace gpu

}  // namespace sinkscope
