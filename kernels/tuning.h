// SPDX-License-Identifier: Apache-2.0
// Tuning of the CUDA kernels and of the CUDA backend's launch paths, as one value. Every default
// is what ships; every setting gives the same results (bit for bit, the tests check it), only
// the speed differs. The CUDA backend takes one in its options (CudaBackendOptions::tuning) and
// puts it in force for the process (set_gpu_tuning: the kernels' launchers read it); the
// SINKSCOPE_* variables of docs/environment.md set the fields (gpu_tuning_from_environment).
// Plain C++: builds and tests without CUDA.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

namespace sinkscope::kernels {

struct GpuTuning {
  bool cuda_graphs = true;    // decode steps replay CUDA graphs (SINKSCOPE_CUDA_GRAPHS=0: eager)
  bool fused_decode = true;   // the fused batch-1 decode kernels (SINKSCOPE_FUSED_DECODE=0: off)
  bool pdl = true;            // programmatic dependent launch (SINKSCOPE_PDL=0: off)
  bool prefill_ws = true;     // warp-specialised prefill on sm_90 (SINKSCOPE_PREFILL_WS=0: wgmma)
  bool prefill_ws_sparse = true;  // ... for sparse prefill too (SINKSCOPE_PREFILL_WS_SPARSE=0)
  // Consumer warpgroups of the warp-specialised prefill at d = 64: 0 = by size (3 from
  // kWsThreeConsumerRowsDense / kWsThreeConsumerRowsSparse query rows on), 2 or 3
  // (SINKSCOPE_WS_DENSE_CONSUMERS, SINKSCOPE_WS_SPARSE_CONSUMERS). d = 128 always runs 2.
  int ws_dense_consumers = 0;
  int ws_sparse_consumers = 0;
  // The decode's split plan (DecodeSplitPolicy in attention_dispatch.h): CTAs per SM its grid
  // aims at, 0 = decode_default_policy(); 1 .. 8 exactly that many
  // (SINKSCOPE_DECODE_CTAS_PER_SM). With decode_ctas_per_sm set, decode_max_ctas_per_sm and
  // decode_min_tiles complete the policy (0: none).
  int decode_ctas_per_sm = 0;
  int decode_max_ctas_per_sm = 0;
  int decode_min_tiles = 0;
  bool decode_early_loads = true;      // cache copies before the PDL wait (SINKSCOPE_DECODE_EARLY_LOADS=0)
  bool decode_fused_combine = false;   // split combine inside the decode kernel (SINKSCOPE_FUSED_COMBINE=1)
  // The int8-activation GEMV kernel variant (kernels/qgemv_wide.h, kVariants): -1 the built-in
  // default, 0 .. 8 that variant (SINKSCOPE_QGEMV_VARIANT).
  int qgemv_variant = -1;
  // A projection's single-token GEMVs of the int8 kernel share one activation quantization,
  // done once ahead into device memory (kernels/qgemv.h launch_qgemv_prequant), instead of every
  // CTA of every part quantizing it into shared memory (SINKSCOPE_QGEMV_PREQUANT=1: on). Off
  // until its end-to-end speed is measured (docs/performance.md, open goals).
  bool qgemv_prequant = false;
  // With --gpu-weights native, Q8_0 and Q6_K matrices whose rows allow it are repacked at upload
  // into the row layouts of kernels/qblock.h (kQ8_0R, kQ6_KR) so that the decode GEMV loads
  // their quants 16-byte aligned, straight from global memory (SINKSCOPE_QWEIGHT_REPACK=0: kept
  // in the file's layout, staged through shared memory).
  bool qweight_repack = true;
  // Native parts of one projection with the same type that lie back to back on the device
  // (Q|K, gate|up) are multiplied by one GEMV launch instead of one per part: fewer launches,
  // each row's result unchanged (SINKSCOPE_QWEIGHT_MERGE=0: one launch per part).
  bool qweight_merge = true;
  // A single token's native projections fold the op around them into the int8 GEMV
  // (kernels/qgemv.h launch_qgemv_fused): the RMSNorm before Q|K|V, gate|up and the LM head,
  // and the SwiGLU after gate|up, so the decode step runs three kernels fewer per layer; the same
  // logits bit for bit (SINKSCOPE_QGEMV_FUSE=0: separate norm and SwiGLU kernels).
  bool qgemv_fuse = true;
  bool operator==(const GpuTuning&) const = default;
};

inline constexpr int kDecodeMaxCtasPerSm = 8;

namespace tuning_detail {
inline const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}
// "0" turns a default-on switch off, "1" a default-off one on; other values leave the default
// and are reported in *bad.
inline void switch_from(const char* name, bool& field, std::string* bad) {
  const char* v = env(name);
  if (v == nullptr) return;
  if (std::strcmp(v, "0") == 0) field = false;
  else if (std::strcmp(v, "1") == 0) field = true;
  else if (bad) *bad += std::string(bad->empty() ? "" : "; ") + name + "=" + v + " (expected 0 or 1)";
}
inline void int_from(const char* name, int lo, int hi, int& field, std::string* bad) {
  const char* v = env(name);
  if (v == nullptr) return;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end == '\0' && x >= lo && x <= hi) field = int(x);
  else if (bad)
    *bad += std::string(bad->empty() ? "" : "; ") + name + "=" + v + " (expected " +
            std::to_string(lo) + " .. " + std::to_string(hi) + ")";
}
}  // namespace tuning_detail

// The defaults with the SINKSCOPE_* variables applied. A value out of range is ignored (the
// default stays) and named in *ignored when given.
inline GpuTuning gpu_tuning_from_environment(std::string* ignored = nullptr) {
  using namespace tuning_detail;
  GpuTuning t;
  switch_from("SINKSCOPE_CUDA_GRAPHS", t.cuda_graphs, ignored);
  switch_from("SINKSCOPE_FUSED_DECODE", t.fused_decode, ignored);
  switch_from("SINKSCOPE_PDL", t.pdl, ignored);
  switch_from("SINKSCOPE_PREFILL_WS", t.prefill_ws, ignored);
  switch_from("SINKSCOPE_PREFILL_WS_SPARSE", t.prefill_ws_sparse, ignored);
  int_from("SINKSCOPE_WS_DENSE_CONSUMERS", 2, 3, t.ws_dense_consumers, ignored);
  int_from("SINKSCOPE_WS_SPARSE_CONSUMERS", 2, 3, t.ws_sparse_consumers, ignored);
  int_from("SINKSCOPE_DECODE_CTAS_PER_SM", 1, kDecodeMaxCtasPerSm, t.decode_ctas_per_sm, ignored);
  switch_from("SINKSCOPE_DECODE_EARLY_LOADS", t.decode_early_loads, ignored);
  switch_from("SINKSCOPE_FUSED_COMBINE", t.decode_fused_combine, ignored);
  int_from("SINKSCOPE_QGEMV_VARIANT", 0, 8, t.qgemv_variant, ignored);
  switch_from("SINKSCOPE_QGEMV_PREQUANT", t.qgemv_prequant, ignored);
  switch_from("SINKSCOPE_QWEIGHT_REPACK", t.qweight_repack, ignored);
  switch_from("SINKSCOPE_QWEIGHT_MERGE", t.qweight_merge, ignored);
  switch_from("SINKSCOPE_QGEMV_FUSE", t.qgemv_fuse, ignored);
  return t;
}

// The tuning in force for this process's kernel launches: the last set_gpu_tuning(), else
// gpu_tuning_from_environment() (read on first use). Defined with the kernels (CUDA builds).
GpuTuning gpu_tuning();
void set_gpu_tuning(const GpuTuning& t);

}  // namespace sinkscope::kernels

namespace sinkscope::kernels {
// A changed copy of the tuning in force for one scope (tests, benchmarks), e.g.
//   ScopedGpuTuning s([](GpuTuning& t) { t.ws_sparse_consumers = 3; });
class ScopedGpuTuning {
 public:
  template <class Change>
  explicit ScopedGpuTuning(Change&& change) : m_saved(gpu_tuning()) {
    GpuTuning t = m_saved;
    change(t);
    set_gpu_tuning(t);
  }
  ~ScopedGpuTuning() { set_gpu_tuning(m_saved); }
  ScopedGpuTuning(const ScopedGpuTuning&) = delete;
  ScopedGpuTuning& operator=(const ScopedGpuTuning&) = delete;

 private:
  GpuTuning m_saved;
};
}  // namespace sinkscope::kernels
