// SPDX-License-Identifier: Apache-2.0
// Checked CUDA calls (docs/architecture.md, design principle 14). SINKSCOPE_CUDA_TRY returns an
// AttentionStatus-like error from the enclosing function; SINKSCOPE_CUDA_CHECK is for test and
// benchmark programs, where printing and exiting is the right reaction.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace sinkscope::kernels {

inline std::string cuda_error_text(cudaError_t e, const char* what, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
         cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

}  // namespace sinkscope::kernels

// Returns ReturnType::error(message) from the calling function when the call fails.
#define SINKSCOPE_CUDA_TRY(ReturnType, call)                                                  \
  do {                                                                                        \
    cudaError_t sinkscope_err_ = (call);                                                      \
    if (sinkscope_err_ != cudaSuccess) {                                                      \
      /* consume the runtime's record of this (non-sticky) error, so that the next launch's */ \
      /* cudaGetLastError() does not report this call's failure as its own; a different     */ \
      /* pending error is left for whoever owns it                                          */ \
      if (cudaPeekAtLastError() == sinkscope_err_) (void)cudaGetLastError();                   \
      return ReturnType::error(                                                               \
          ::sinkscope::kernels::cuda_error_text(sinkscope_err_, #call, __FILE__, __LINE__)); \
    }                                                                                         \
  } while (0)

// Prints file, line and the error, then exits: for test and benchmark programs only.
#define SINKSCOPE_CUDA_CHECK(call)                                                              \
  do {                                                                                          \
    cudaError_t sinkscope_err_ = (call);                                                        \
    if (sinkscope_err_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s\n",                                                              \
                   ::sinkscope::kernels::cuda_error_text(sinkscope_err_, #call, __FILE__, __LINE__) \
                       .c_str());                                                               \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)
