// SPDX-License-Identifier: Apache-2.0
#include "engine/backend/simd.h"

#ifdef SINKSCOPE_X86
#include <cpuid.h>
#endif

namespace sinkscope::simd {

bool have_avx2() {
#ifdef SINKSCOPE_X86
  // F16C is read from CPUID directly: clang before 15 rejects __builtin_cpu_supports("f16c").
  static const bool ok = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  }();
  return ok;
#else
  return false;
#endif
}

bool have_avx512() {
#ifdef SINKSCOPE_X86
  // __builtin_cpu_supports checks that the OS saves the AVX-512 state (XGETBV) too.
  static const bool ok = have_avx2() && __builtin_cpu_supports("avx512f") &&
                         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return ok;
#else
  return false;
#endif
}

bool have_avx512_vnni() {
#ifdef SINKSCOPE_X86
  static const bool ok = have_avx512() && __builtin_cpu_supports("avx512vnni");
  return ok;
#else
  return false;
#endif
}

}  // namespace sinkscope::simd
