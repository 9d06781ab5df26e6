// SPDX-License-Identifier: Apache-2.0
#include "engine/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <cstdio>

#include "engine/cuda/cuda_errors.h"

namespace sinkscope::gpu {

std::string format_bytes(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " (%.1f MiB)", double(bytes) / (1024.0 * 1024.0));
  return std::to_string(bytes) + " bytes" + buf;
}

[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw BackendError(std::string(file) + ":" + std::to_string(line) + ": " + call +
                     " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  throw BackendError(std::string(file) + ":" + std::to_string(line) + ": " + call +
                     " failed: " + cublasGetStatusName(s) + " (" + cublasGetStatusString(s) + ")");
}

[[noreturn]] void throw_status(const std::string& message, const char* call, const char* file,
                               int line) {
  throw BackendError(std::string(file) + ":" + std::to_string(line) + ": " + call +
                     " failed: " + message);
}

DeviceBuffer::DeviceBuffer(size_t bytes, std::string what) {
  if (bytes == 0) return;
  // An injected fault (fault_injection.h) reports what a full device reports, without allocating.
  const bool injected = fault_fires(Fault::kAlloc);
  const cudaError_t e = injected ? cudaErrorMemoryAllocation : cudaMalloc(&m_ptr, bytes);
  if (e != cudaSuccess) {
    m_ptr = nullptr;
    (void)cudaGetLastError();  // allocation failures are not sticky; clear them
    size_t free_b = 0, total_b = 0;
    std::string mem = "unknown";
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      mem = format_bytes(free_b) + " free of " + format_bytes(total_b);
    (void)cudaGetLastError();
    throw BackendError("cudaMalloc of " + format_bytes(bytes) + " for " + what +
                       " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                       "); device memory: " + mem + (injected ? " [injected fault]" : ""));
  }
  m_bytes = bytes;
}

void DeviceBuffer::release() noexcept {
  if (m_ptr) (void)cudaFree(m_ptr);
  m_ptr = nullptr;
  m_bytes = 0;
}

PinnedBuffer::PinnedBuffer(size_t bytes, const std::string& what) {
  if (bytes == 0) return;
  const bool injected = fault_fires(Fault::kAlloc);
  const cudaError_t e = injected ? cudaErrorMemoryAllocation : cudaMallocHost(&m_ptr, bytes);
  if (e != cudaSuccess) {
    m_ptr = nullptr;
    (void)cudaGetLastError();
    throw BackendError("cudaMallocHost of " + format_bytes(bytes) + " for " + what +
                       " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")" +
                       (injected ? " [injected fault]" : ""));
  }
  m_bytes = bytes;
}

void PinnedBuffer::release() noexcept {
  if (m_ptr) (void)cudaFreeHost(m_ptr);
  m_ptr = nullptr;
  m_bytes = 0;
}

}  // namespace sinkscope::gpu
