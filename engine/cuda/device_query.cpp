// SPDX-License-Identifier: Apache-2.0
// Device queries through the CUDA runtime (engine/cuda/cuda_backend.h, namespace gpu): whether a
// usable device exists, selecting one for the calling thread, and the device-wide memory figures
// (cudaMemGetInfo) for the soak benchmark and diagnostics. The driver API (libcuda) is not linked.
#include <cuda_runtime.h>

#include <filesystem>
#include <string>

#include "engine/cuda/cuda_backend.h"

namespace sinkscope::gpu {

int select_device(int ordinal, std::string* why) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    if (why) *why = "no CUDA device found";
    return -1;
  }
  const int dev = ((ordinal % count) + count) % count;
  const cudaError_t e = cudaSetDevice(dev);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = std::string("cudaSetDevice failed: ") + cudaGetErrorString(e);
    return -1;
  }
  return dev;
}

namespace {
// Why cudaGetDeviceCount failed, in the user's terms. The runtime answers
// cudaErrorInsufficientDriver both when the driver is older than the runtime and when there is
// no driver at all (a machine without an NVIDIA GPU); the kernel module's /proc entry tells them
// apart.
std::string device_count_error(cudaError_t e) {
  const bool driver_loaded = std::filesystem::exists("/proc/driver/nvidia/version");
  if ((e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice) && !driver_loaded)
    return "no NVIDIA driver is loaded (no /proc/driver/nvidia)";
  std::string s = std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" +
                  cudaGetErrorString(e) + ")";
  if (e == cudaErrorInsufficientDriver) {
    int runtime = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    s += "; the NVIDIA driver is older than this build's CUDA runtime " +
         std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) +
         ": update the driver";
  }
  return s;
}
}  // namespace

bool probe_device(std::string* why, std::string* name) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = device_count_error(e);
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found";
    return false;
  }
  if (name) {
    cudaDeviceProp prop{};
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
      *name = prop.name;
    (void)cudaGetLastError();
  }
  return true;
}

bool memory_info(uint64_t* free_bytes, uint64_t* total_bytes, std::string* why) {
  size_t f = 0, t = 0;
  const cudaError_t e = cudaMemGetInfo(&f, &t);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why)
      *why = std::string("cudaMemGetInfo failed: ") + cudaGetErrorName(e) + " (" +
             cudaGetErrorString(e) + ")";
    return false;
  }
  if (free_bytes) *free_bytes = f;
  if (total_bytes) *total_bytes = t;
  return true;
}

}  // namespace sinkscope::gpu
