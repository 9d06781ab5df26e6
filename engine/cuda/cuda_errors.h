// SPDX-License-Identifier: Apache-2.0
// Checked CUDA / cuBLAS / kernel-launcher calls for the CUDA backend (docs/architecture.md, design
// principle 14): every failure becomes a BackendError naming the call, file and line. Never exits.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "engine/backend/backend.h"
#include "engine/cuda/fault_injection.h"

namespace sinkscope::gpu {

[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line);
[[noreturn]] void throw_status(const std::string& message, const char* call, const char* file,
                               int line);
std::string format_bytes(uint64_t bytes);  // "123456789 bytes (117.7 MiB)"
// The message of an injected launch failure (fault_injection.h).
inline constexpr const char* kInjectedLaunchFailure =
    "kernel launch failed (injected fault: the kernel was not launched)";

}  // namespace sinkscope::gpu

#define SS_CUDA(call)                                                                             \
  do {                                                                                            \
    const cudaError_t ss_err_ = (call);                                                           \
    if (ss_err_ != cudaSuccess) ::sinkscope::gpu::throw_cuda(ss_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define SS_CUBLAS(call)                                                  \
  do {                                                                   \
    const cublasStatus_t ss_st_ = (call);                                \
    if (ss_st_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::sinkscope::gpu::throw_cublas(ss_st_, #call, __FILE__, __LINE__); \
  } while (0)

// For launchers returning {bool ok; std::string message;} (kernels/ops.h, kernels/attention.h).
// A fault injected by tests (engine/cuda/fault_injection.h) fails the launch without making it.
#define SS_LAUNCH(call)                                                              \
  do {                                                                               \
    if (::sinkscope::gpu::fault_fires(::sinkscope::gpu::Fault::kLaunch))             \
      ::sinkscope::gpu::throw_status(::sinkscope::gpu::kInjectedLaunchFailure, #call, \
                                     __FILE__, __LINE__);                            \
    const auto ss_status_ = (call);                                                  \
    if (!ss_status_.ok)                                                              \
      ::sinkscope::gpu::throw_status(ss_status_.message, #call, __FILE__, __LINE__); \
  } while (0)
