// SPDX-License-Identifier: Apache-2.0
// The AVX-512 variants of the 16-bit-activation products (engine/backend/qgemv_int.h): the
// kernels in qgemv_int_avx512.inc compiled twice, with and without AVX512_VNNI, each under its
// own target attribute so that the binary runs on CPUs without AVX-512 (qint::rows picks a
// variant at run time) and the variant without VNNI has no VNNI instruction in it.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which its
// -Wmaybe-uninitialized reports at every use (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "engine/backend/qgemv_int.h"
#include "engine/backend/simd.h"
#include "engine/format/ggml_types.h"

#ifdef SINKSCOPE_X86

namespace sinkscope::qint::avx512 {
#define QI_TARGET __attribute__((target(SINKSCOPE_AVX512_TARGET)))
#define QI_VNNI 0
#include "engine/backend/qgemv_int_avx512.inc"
#undef QI_VNNI
#undef QI_TARGET
}  // namespace sinkscope::qint::avx512

namespace sinkscope::qint::avx512vnni {
#define QI_TARGET __attribute__((target(SINKSCOPE_AVX512VNNI_TARGET)))
#define QI_VNNI 1
#include "engine/backend/qgemv_int_avx512.inc"
#undef QI_VNNI
#undef QI_TARGET
}  // namespace sinkscope::qint::avx512vnni

#else

// Not x86: never called (isas_available() lists no AVX-512).
namespace sinkscope::qint {
void avx512::rows(const QuantMatrix&, const XQ16&, float*, int64_t, int64_t) {
  throw std::logic_error("qgemv_int: AVX-512 kernels on a non-x86 build");
}
void avx512vnni::rows(const QuantMatrix&, const XQ16&, float*, int64_t, int64_t) {
  throw std::logic_error("qgemv_int: AVX-512 kernels on a non-x86 build");
}
}  // namespace sinkscope::qint

#endif
