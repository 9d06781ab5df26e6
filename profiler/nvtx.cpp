// SPDX-License-Identifier: Apache-2.0
#include "profiler/nvtx.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if SINKSCOPE_PROFILER_CUPTI
#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <nvtx3/nvToolsExt.h>
#endif

namespace sinkscope::prof {

namespace detail {
std::atomic<bool> g_nvtx_mirror{false};
void nvtx_push(const char* name, int64_t arg) { nvtx::push(name, arg); }
void nvtx_pop() { nvtx::pop(); }
}  // namespace detail

namespace nvtx {

#if SINKSCOPE_PROFILER_CUPTI
namespace {
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA(kDomain);
  return d;
}
}  // namespace

bool compiled() { return true; }

void push(const char* name, int64_t arg) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  char buf[128];
  if (arg != kNoArg) {
    // The arg is part of the name ("layer 3"), so every NVTX viewer shows it; also the payload.
    std::snprintf(buf, sizeof buf, "%s %lld", name, static_cast<long long>(arg));
    a.message.ascii = buf;
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = arg;
  } else {
    a.message.ascii = name;
  }
  nvtxDomainRangePushEx(domain(), &a);
}

void pop() { nvtxDomainRangePop(domain()); }
#else
bool compiled() { return false; }
void push(const char*, int64_t) {}
void pop() {}
#endif

void set_mirror(bool on) {
  detail::g_nvtx_mirror.store(on && compiled(), std::memory_order_relaxed);
}
bool mirror() { return detail::g_nvtx_mirror.load(std::memory_order_relaxed); }

}  // namespace nvtx

Status prepare_nvtx_injection(std::string* path) {
  if (const char* set = std::getenv("NVTX_INJECTION64_PATH"); set && *set) {
    if (path) *path = set;
    return Status::success();
  }
#if SINKSCOPE_PROFILER_CUPTI
  // The libcupti this program is linked with: the loaded object named libcupti.so*. (dladdr on
  // a CUPTI function could name the executable, whose PLT stub may be the canonical address.)
  std::string found;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        const char* name = info->dlpi_name;
        if (name && std::strstr(name, "/libcupti.so")) {
          *static_cast<std::string*>(data) = name;
          return 1;
        }
        return 0;
      },
      &found);
  if (found.empty()) {
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&cuptiGetTimestamp), &info) != 0 && info.dli_fname &&
        std::strstr(info.dli_fname, "libcupti"))
      found = info.dli_fname;
  }
  if (found.empty())
    return Status::error("cannot locate the loaded libcupti; NVTX ranges will not be captured");
  if (::setenv("NVTX_INJECTION64_PATH", found.c_str(), 0) != 0)
    return Status::error("cannot set NVTX_INJECTION64_PATH");
  if (path) *path = found;
  return Status::success();
#else
  return Status::error("built without CUDA: no NVTX capture");
#endif
}

}  // namespace sinkscope::prof
