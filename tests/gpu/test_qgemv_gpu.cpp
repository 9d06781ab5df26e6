// SPDX-License-Identifier: Apache-2.0
// The quantized-weight kernels (kernels/qgemv.h) per format against the CPU: weights quantized
// row by row with the engine's own quantizers (quantize_row), dequantized with the engine's
// dequantize_row, products in double. The GEMV paths, store and accumulate (y += W v):
//   f32 (launch_qgemv_f32, every format; launch_qgemv's fallback): |gpu - ref| <=
//         (cols/32 + 8) * 2^-24 * sum_i |w_i v_i|, the a-priori bound of an fp32 fused-multiply-
//         add chain of cols/32 terms per lane plus the 5-level warp reduction (the weights decode
//         bit-exactly: tests/unit/test_qblock.cpp).
//   int8 (kernels/qgemv_wide.cu on Q4_K / Q6_K / Q8_0: launch_qgemv with two activation planes,
//         launch_qgemv_int8 with one): the activation quantized per 32 as the kernel does
//         (replayed here in float, bit for bit), then |gpu - W.v~| <= (cols/32 + 16) * 4 * 2^-24
//         * sum_i |v~_i| (|w_i| + o), o the largest Q4_K min offset dmin*m of the row (the
//         kernel sums the scale and min parts apart), and against the exact activation
//         |gpu - W.v| <= sum_i |w_i| (s_b/2 (1 + 2^-16) + (|v_i| + d_b) 2^-20) + that fp32 bound,
//         s_b the last plane's step of v's run of 32 (d_b = amax/127 with one plane, d_b/254 with
//         two). The relative RMS of gpu - W.v over the rows is printed.
//   prequant (launch_qgemv_quantize_x + launch_qgemv_prequant, one and two planes): equal bit
//         for bit to launch_qgemv_int8's variant 0, which quantizes inside each CTA.
//   Dequantize to bf16 (the prefill's GEMM input): bit for bit equal to fp32_to_bf16 of the CPU
//         dequantization.
//   fused (launch_qgemv_fused, the decode step's form): RMSNorm in the prologue and / or SwiGLU
//         in the epilogue, equal bit for bit to launch_rms_norm + launch_qgemv_int8 (variant 0)
//         + launch_swiglu, for rows of 576 .. 8192 (both of launch_rms_norm's register kernels),
//         one and two planes, the file layouts and the repacked ones.
// Shapes: odd row counts (a partial last CTA), K = 256 .. 14336 (shared memory above 48 KiB),
// more rows than one wave of CTAs (warps striding over rows), n_vocab 128256 x 4096 for Q6_K (the
// output matrix of Q4_K_M files), and weights at 2 and 10 bytes past a 16-byte boundary (the
// Q6_K / Q8_0 staging offsets; Q4_K then takes the f32 path). --bench (--bench-only skips the
// checks): decode-GEMV GB/s and % of 4.8 TB/s per format, path and Llama-3-8B shape, weights
// rotated through copies larger than L2 ("pre": the GEMV on an activation quantized ahead,
// "q+pre": with its quantization launch; "floor": the same bytes through a read-only kernel),
// then one decode step's GEMVs on the 8B Q4_K_M shape in a CUDA graph against read-only kernels
// over the same bytes (run_chain_bench; --bench-chain runs only that). Plain executable: "SKIP: ..." and exit 0 without a GPU;
// exit 1 on any failure.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/format/gguf_writer.h"
#include "gpu_checks.h"
#include "kernels/cuda_check.h"
#include "kernels/decode_fused.h"
#include "kernels/ops.h"
#include "kernels/qblock.h"
#include "kernels/qgemv.h"
#include "tests/gpu/attention_problem.h"
#include "tests/gpu/bench_floor.h"

namespace {

using namespace sinkscope;
using gpu_test::check;

const GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

template <class T>
struct DevBuf {
  T* p = nullptr;
  explicit DevBuf(size_t n) { SINKSCOPE_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T) + 16)); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

void require(const kernels::OpStatus& s) {
  if (!s.ok) throw std::runtime_error(s.message);
}

struct Matrix {
  int rows = 0, cols = 0;
  std::vector<uint8_t> q;    // rows * row_bytes
  std::vector<float> deq;    // CPU dequantization, rows * cols
};

Matrix make_matrix(GgmlType t, int rows, int cols, std::mt19937& rng) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  const int64_t rb = ggml_row_bytes(t, cols);
  m.q.resize(static_cast<size_t>(rows * rb));
  m.deq.resize(static_cast<size_t>(rows) * cols);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    const float scale = 0.02f * (1.f + float(r % 7));  // rows of different magnitude
    for (auto& x : row) x = nd(rng) * scale;
    quantize_row_into(t, row.data(), cols, m.q.data() + r * rb);
    dequantize_row(t, m.q.data() + r * rb, m.deq.data() + size_t(r) * cols, cols);
  }
  return m;
}

// The activation as the int8 kernel sees it, replayed in float with the kernel's operations (each
// rounded on its own: volatile keeps the compiler from fusing them). Per run of 32: d = amax / 127,
// q = rint(v * (127 / amax)); with two planes also r = v - d q, d2 = d / 254,
// q2 = clamp(rint(r * (127 / amax * 254)), +-127). vt = d q (+ d2 q2); va = |d q| (+ |d2 q2|);
// step: the last plane's step per run (d or d2), d1: d per run.
struct Int8X {
  std::vector<double> vt, va, step, d1;
};
Int8X int8_activation(const std::vector<uint16_t>& v, int planes) {
  Int8X x;
  x.vt.assign(v.size(), 0.0);
  x.va.assign(v.size(), 0.0);
  x.step.assign(v.size() / 32, 0.0);
  x.d1.assign(v.size() / 32, 0.0);
  for (size_t r = 0; r < v.size() / 32; ++r) {
    float amax = 0.f;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(bf16_to_fp32(v[32 * r + i])));
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    const float d = amax / 127.f;
    volatile float id2 = id * 254.f;
    const float d2 = d / 254.f;
    x.d1[r] = d;
    x.step[r] = planes == 2 ? d2 : d;
    for (size_t i = 0; i < 32; ++i) {
      const float f = bf16_to_fp32(v[32 * r + i]);
      volatile float p = f * id;
      const float q = std::nearbyint(float(p));
      double vt = double(d) * q, va = std::fabs(vt);
      if (planes == 2) {
        volatile float t = d * q;
        volatile float rr = f - t;
        volatile float p2 = rr * id2;
        const float q2 = std::min(127.f, std::max(-127.f, std::nearbyint(float(p2))));
        vt += double(d2) * q2;
        va += std::fabs(double(d2) * q2);
      }
      x.vt[32 * r + i] = vt;
      x.va[32 * r + i] = va;
    }
  }
  return x;
}

// Largest |dmin * m| over the sub-blocks of a Q4_K / Q5_K row (0 for the other formats).
double min_offset(GgmlType t, const uint8_t* row, int cols) {
  if (t != GgmlType::kQ4_K && t != GgmlType::kQ5_K) return 0.0;
  const int bb = qblock::block_bytes(static_cast<int>(t));
  double o = 0;
  for (int b = 0; b < cols / 256; ++b) {
    const uint8_t* blk = row + int64_t(b) * bb;
    const double dmin = qblock::load_half(blk + 2);
    for (int j = 0; j < 8; ++j) {
      int sc = 0, mn = 0;
      qblock::k_scale_min(j, blk + 4, &sc, &mn);
      o = std::max(o, std::fabs(dmin * mn));
    }
  }
  return o;
}

// The GEMV paths: launch_qgemv_f32, launch_qgemv_int8 with one plane, launch_qgemv (two planes
// when qgemv_int8_activation holds, else the f32 kernel).
enum class Path { kF32, kInt8x1, kAuto };

// One GEMV path on one matrix: store (y poisoned with NaN first) and accumulate onto y0.
// kt: the type the kernels are given (t, or its repacked row layout when dw holds that).
void check_gemv(const Matrix& m, GgmlType t, const uint8_t* dw, const std::vector<uint16_t>& v,
                const uint16_t* dv, const std::vector<float>& y0, float* dy, Path how,
                const std::string& name, int kt = -1) {
  const int rows = m.rows, cols = m.cols;
  const int ti = kt >= 0 ? kt : static_cast<int>(t);
  const bool eligible = kernels::qgemv_int8_activation(ti, dw, cols, dv);
  if (how == Path::kInt8x1 && !eligible) return;
  const int planes = how == Path::kInt8x1 ? 1 : how == Path::kAuto && eligible ? 2 : 0;
  const bool int8 = planes > 0;
  Int8X xi;
  if (int8) xi = int8_activation(v, planes);
  const int64_t rb = ggml_row_bytes(t, cols);
  std::string path = how == Path::kF32 ? "f32" : planes == 1 ? "int8x1" : planes == 2
                                                                         ? "int8x2"
                                                                         : "auto->f32";
  if (int8) path += std::string("/") + kernels::qgemv_wide_variant_name(kernels::qgemv_wide_variant());
  for (int accumulate = 0; accumulate < 2; ++accumulate) {
    if (accumulate) {
      SINKSCOPE_CUDA_CHECK(cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
    } else {
      SINKSCOPE_CUDA_CHECK(cudaMemset(dy, 0xff, y0.size() * 4));
    }
    const bool acc = accumulate != 0;
    require(how == Path::kF32      ? kernels::launch_qgemv_f32(ti, dw, rows, cols, dv, dy, acc, nullptr)
            : how == Path::kInt8x1 ? kernels::launch_qgemv_int8(ti, dw, rows, cols, dv, dy, acc, 1, nullptr)
                                   : kernels::launch_qgemv(ti, dw, rows, cols, dv, dy, acc, nullptr));
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> y(y0.size());
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0, bad_dev = 0;
    double worst = 0, worst_dev = 0, dev2 = 0, ref2 = 0;  // err / bound; sums of squares
    for (int r = 0; r < rows; ++r) {
      const double base = accumulate ? double(y0[size_t(r)]) : 0.0;
      const float* wrow = m.deq.data() + size_t(r) * cols;
      double ref = base, mag = std::fabs(base);  // exact activation
      double reft = base, magt = std::fabs(base), qdev = 0;  // int8 activation
      const double o = int8 ? min_offset(t, m.q.data() + r * rb, cols) : 0.0;
      for (int c = 0; c < cols; ++c) {
        const double wv = wrow[c], x = bf16_to_fp32(v[size_t(c)]);
        ref += wv * x;
        mag += std::fabs(wv * x);
        if (int8) {
          reft += wv * xi.vt[size_t(c)];
          magt += xi.va[size_t(c)] * (std::fabs(wv) + o);
          qdev += std::fabs(wv) * (xi.step[size_t(c) / 32] * 0.5 * (1 + std::ldexp(1.0, -16)) +
                                  (std::fabs(x) + xi.d1[size_t(c) / 32]) * std::ldexp(1.0, -20));
        }
      }
      const double gy = y[size_t(r)];
      double err, bound;
      if (int8) {
        err = std::fabs(gy - reft);
        bound = (cols / 32 + 16) * 4 * std::ldexp(1.0, -24) * magt + 1e-30;
        const double dev = std::fabs(gy - ref), dbound = qdev + bound;
        if (!(dev <= dbound)) ++bad_dev;
        worst_dev = std::max(worst_dev, dev / dbound);
        dev2 += (gy - base - (ref - base)) * (gy - base - (ref - base));
        ref2 += (ref - base) * (ref - base);
      } else {
        err = std::fabs(gy - ref);
        bound = (cols / 32 + 8) * std::ldexp(1.0, -24) * mag + 1e-30;
      }
      if (!(err <= bound)) {
        if (++bad <= 3) {
          std::printf("  row %d: gpu %.9g ref %.9g bound %.3g\n", r, gy, int8 ? reft : ref, bound);
        }
      }
      worst = std::max(worst, err / bound);
    }
    char detail[256];
    std::snprintf(detail, sizeof detail, "%d of %d rows outside the bound, worst err/bound %.3f",
                  bad, rows, worst);
    const std::string what = name + " " + path + (accumulate ? " accumulate" : " store");
    check(bad == 0, what, detail);
    if (int8) {
      std::snprintf(detail, sizeof detail,
                    "%d of %d rows outside the int8 bound, worst dev/bound %.3f, relative RMS "
                    "deviation %.2e",
                    bad_dev, rows, worst_dev, std::sqrt(dev2 / std::max(ref2, 1e-300)));
      check(bad_dev == 0, what + " vs exact activation", detail);
    }
  }
}

// The activation quantized once ahead (launch_qgemv_quantize_x + launch_qgemv_prequant) against
// the kernel that quantizes it per CTA (launch_qgemv_int8, variant 0): equal bit for bit, store
// and accumulate, one and two planes.
void check_prequant(GgmlType t, const uint8_t* dw, int rows, int cols, const uint16_t* dv,
                    const std::vector<float>& y0, float* dy, const std::string& name,
                    int kt = -1) {
  const int ti = kt >= 0 ? kt : static_cast<int>(t);
  if (!kernels::qgemv_int8_activation(ti, dw, cols, dv)) return;
  const int keep = kernels::qgemv_wide_variant();
  kernels::set_qgemv_wide_variant(0);
  DevBuf<uint8_t> xq(kernels::qgemv_x_bytes(cols, 2));
  std::vector<float> want(y0.size()), got(y0.size());
  for (int planes : {1, 2}) {
    for (int accumulate = 0; accumulate < 2; ++accumulate) {
      const bool acc = accumulate != 0;
      auto run = [&](bool pre, std::vector<float>& out) {
        if (acc) {
          SINKSCOPE_CUDA_CHECK(cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
        } else {
          SINKSCOPE_CUDA_CHECK(cudaMemset(dy, 0xff, y0.size() * 4));
        }
        if (pre) {
          SINKSCOPE_CUDA_CHECK(cudaMemset(xq.p, 0x5a, kernels::qgemv_x_bytes(cols, 2)));
          require(kernels::launch_qgemv_quantize_x(dv, cols, planes, xq.p, nullptr));
          require(kernels::launch_qgemv_prequant(ti, dw, rows, cols, xq.p, dy, acc, planes, nullptr));
        } else {
          require(kernels::launch_qgemv_int8(ti, dw, rows, cols, dv, dy, acc, planes, nullptr));
        }
        SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(out.data(), dy, out.size() * 4, cudaMemcpyDeviceToHost));
      };
      run(false, want);
      run(true, got);
      size_t diff = 0;
      for (size_t i = 0; i < got.size(); ++i)
        diff += std::memcmp(&got[i], &want[i], 4) != 0;
      check(diff == 0,
            name + " prequant int8x" + std::to_string(planes) + (acc ? " accumulate" : " store"),
            std::to_string(diff) + " of " + std::to_string(got.size()) +
                " rows differ from the per-CTA quantization");
    }
  }
  kernels::set_qgemv_wide_variant(keep);
}

// Variants 5-8 run variant 0's arithmetic (a different launch, a prefetch, or two rows per warp
// pass sharing the activation reads): their results must equal variant 0's bit for bit, store
// and accumulate, one and two planes.
void check_same_as_v0(int ti, const uint8_t* dw, int rows, int cols, const uint16_t* dv,
                      const std::vector<float>& y0, float* dy, const std::string& name) {
  if (!kernels::qgemv_int8_activation(ti, dw, cols, dv)) return;
  const int keep = kernels::qgemv_wide_variant();
  auto run = [&](int var, int planes, bool acc) {
    kernels::set_qgemv_wide_variant(var);
    if (acc) {
      SINKSCOPE_CUDA_CHECK(cudaMemcpy(dy, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
    } else {
      SINKSCOPE_CUDA_CHECK(cudaMemset(dy, 0xff, y0.size() * 4));
    }
    require(kernels::launch_qgemv_int8(ti, dw, rows, cols, dv, dy, acc, planes, nullptr));
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(y0.size());
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(out.data(), dy, out.size() * 4, cudaMemcpyDeviceToHost));
    return out;
  };
  for (int planes : {1, 2}) {
    for (const bool acc : {false, true}) {
      const std::vector<float> want = run(0, planes, acc);
      for (int var = 5; var < kernels::qgemv_wide_variants(); ++var) {
        const std::vector<float> got = run(var, planes, acc);
        size_t diff = 0;
        for (size_t i = 0; i < got.size(); ++i) diff += std::memcmp(&got[i], &want[i], 4) != 0;
        check(diff == 0,
              name + " int8x" + std::to_string(planes) + "/" +
                  kernels::qgemv_wide_variant_name(var) + (acc ? " accumulate" : " store") +
                  " equals v0",
              std::to_string(diff) + " of " + std::to_string(got.size()) + " rows differ");
      }
    }
  }
  kernels::set_qgemv_wide_variant(keep);
}

// all_paths false: the one-plane path is left out (the vocab-size case, to bound the host time).
void check_case(GgmlType t, int rows, int cols, uint32_t seed, int w_offset, bool all_paths = true) {
  std::mt19937 rng(seed);
  const Matrix m = make_matrix(t, rows, cols, rng);
  const std::string name = std::string("qgemv ") + ggml_type_name(t) + " " + std::to_string(rows) +
                           "x" + std::to_string(cols) + " w+" + std::to_string(w_offset) +
                           " seed " + std::to_string(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> v(static_cast<size_t>(cols));
  for (auto& x : v) x = fp32_to_bf16(nd(rng));
  std::vector<float> y0(static_cast<size_t>(rows));
  for (auto& x : y0) x = nd(rng);

  DevBuf<uint8_t> dwb(m.q.size() + 16);
  uint8_t* dw = dwb.p + w_offset;
  DevBuf<uint16_t> dv(v.size());
  DevBuf<float> dy(y0.size());
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(dw, m.q.data(), m.q.size(), cudaMemcpyHostToDevice));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(dv.p, v.data(), v.size() * 2, cudaMemcpyHostToDevice));

  // Every kernel variant of the int8 paths (kernels::qgemv_wide_variants), then the default again.
  const int keep = kernels::qgemv_wide_variant();
  for (int var = 0; var < kernels::qgemv_wide_variants(); ++var) {
    kernels::set_qgemv_wide_variant(var);
    for (Path how : {Path::kAuto, Path::kInt8x1}) {
      if (how == Path::kInt8x1 && !all_paths && var != 0) continue;
      check_gemv(m, t, dw, v, dv.p, y0, dy.p, how, name);
    }
  }
  kernels::set_qgemv_wide_variant(keep);
  check_gemv(m, t, dw, v, dv.p, y0, dy.p, Path::kF32, name);
  check_prequant(t, dw, rows, cols, dv.p, y0, dy.p, name);
  if (all_paths) check_same_as_v0(static_cast<int>(t), dw, rows, cols, dv.p, y0, dy.p, name);

  // Dequantize to bf16.
  DevBuf<uint16_t> dout(m.deq.size());
  auto check_dequant = [&](int kt, const uint8_t* w, const std::string& what) {
    SINKSCOPE_CUDA_CHECK(cudaMemset(dout.p, 0xff, m.deq.size() * 2));
    require(kernels::launch_qdequant_bf16(kt, w, rows, cols, dout.p, nullptr));
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> out(m.deq.size());
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(out.data(), dout.p, out.size() * 2, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < out.size(); ++i) bad += out[i] != fp32_to_bf16(m.deq[i]);
    check(bad == 0, "qdequant_bf16 " + what + " " + std::to_string(rows) + "x" +
                        std::to_string(cols) + " w+" + std::to_string(w_offset),
          std::to_string(bad) + " of " + std::to_string(out.size()) + " bf16 values differ");
  };
  check_dequant(static_cast<int>(t), dw, ggml_type_name(t));

  // The repacked row layout (kernels::launch_qrepack, as the CUDA backend's upload does), where
  // the rows allow one: every path against the same CPU reference, the dequantization bit for
  // bit against the file layout's values.
  const int rt = kernels::qweight_repacked_type(static_cast<int>(t), cols);
  if (rt == static_cast<int>(t)) return;
  DevBuf<uint8_t> rw(m.q.size());
  SINKSCOPE_CUDA_CHECK(cudaMemset(rw.p, 0xa5, m.q.size()));
  require(kernels::launch_qrepack(static_cast<int>(t), dw, rows, cols, rw.p, nullptr));
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  const std::string rname = name + " repacked";
  for (int var = 0; var < kernels::qgemv_wide_variants(); ++var) {
    if (!all_paths && var != 0) continue;
    kernels::set_qgemv_wide_variant(var);
    for (Path how : {Path::kAuto, Path::kInt8x1}) {
      if (how == Path::kInt8x1 && !all_paths) continue;
      check_gemv(m, t, rw.p, v, dv.p, y0, dy.p, how, rname, rt);
    }
  }
  kernels::set_qgemv_wide_variant(keep);
  check(kernels::qgemv_int8_activation(rt, rw.p, cols, dv.p), rname + " takes the int8 kernel",
        "qgemv_int8_activation is false for the repacked layout");
  if (all_paths) check_gemv(m, t, rw.p, v, dv.p, y0, dy.p, Path::kF32, rname, rt);
  check_prequant(t, rw.p, rows, cols, dv.p, y0, dy.p, rname, rt);
  check_same_as_v0(rt, rw.p, rows, cols, dv.p, y0, dy.p, rname);
  check_dequant(rt, rw.p, std::string(ggml_type_name(t)) + " repacked");
}

// launch_qgemv_fused against the separate kernels it replaces (launch_rms_norm, then
// launch_qgemv_int8 with variant 0, then launch_swiglu): equal bit for bit. x and the gain
// are random with a spread of magnitudes; rows is even (gate rows, then up rows for SwiGLU).
void check_fused(GgmlType t, int rows, int cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const Matrix m = make_matrix(t, rows, cols, rng);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(cols)), g(static_cast<size_t>(cols));
  for (auto& e : x) e = nd(rng) * std::exp2(static_cast<float>(static_cast<int>(rng() % 9)) - 4.f);
  for (auto& e : g) e = 1.f + 0.25f * nd(rng);
  std::vector<float> y0(static_cast<size_t>(rows));
  for (auto& e : y0) e = nd(rng);
  const float eps = 1e-5f;
  DevBuf<uint8_t> dw(m.q.size());
  DevBuf<float> dx(x.size()), dg(g.size()), dy(y0.size()), dgu(y0.size());
  DevBuf<uint16_t> dxn(x.size()), dact(y0.size() / 2);
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(dw.p, m.q.data(), m.q.size(), cudaMemcpyHostToDevice));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(dg.p, g.data(), g.size() * 4, cudaMemcpyHostToDevice));
  require(kernels::launch_rms_norm(dx.p, dg.p, dxn.p, 1, cols, eps, nullptr));
  const int keep = kernels::qgemv_wide_variant();
  auto fetch_f = [](const float* d, size_t n) {
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> h(n);
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return h;
  };
  auto fetch_h = [](const uint16_t* d, size_t n) {
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> h(n);
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
    return h;
  };
  auto differ = [](const auto& a, const auto& b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(a[i])) != 0;
    return n;
  };
  // The file layout, then the repacked one where the rows have it.
  const int ti = static_cast<int>(t);
  const int rt = kernels::qweight_repacked_type(ti, cols);
  DevBuf<uint8_t> rw(m.q.size());
  if (rt != ti) require(kernels::launch_qrepack(ti, dw.p, rows, cols, rw.p, nullptr));
  std::vector<int> layouts{ti};
  if (rt != ti) layouts.push_back(rt);
  for (const int kt : layouts) {
    const uint8_t* w = kt == ti ? dw.p : rw.p;
    const std::string name = std::string("qgemv fused ") + ggml_type_name(t) +
                             (kt != ti ? " repacked " : " ") + std::to_string(rows) + "x" +
                             std::to_string(cols);
    kernels::QgemvFusedArgs a;
    a.type = kt;
    a.w = w;
    a.rows = rows;
    a.cols = cols;
    a.eps = eps;
    a.x = dx.p;
    a.norm_w = dg.p;
    check(kernels::qgemv_fused_eligible(a), name + " eligible", "qgemv_fused_eligible is false");
    for (int planes : {1, 2}) {
      a.planes = planes;
      const std::string np = name + " x" + std::to_string(planes);
      kernels::set_qgemv_wide_variant(0);
      // The separate kernels: norm -> GEMV store and accumulate; GEMV store -> SwiGLU.
      require(kernels::launch_qgemv_int8(kt, w, rows, cols, dxn.p, dy.p, false, planes, nullptr));
      const std::vector<float> want_store = fetch_f(dy.p, y0.size());
      SINKSCOPE_CUDA_CHECK(cudaMemcpy(dy.p, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
      require(kernels::launch_qgemv_int8(kt, w, rows, cols, dxn.p, dy.p, true, planes, nullptr));
      const std::vector<float> want_acc = fetch_f(dy.p, y0.size());
      require(kernels::launch_qgemv_int8(kt, w, rows, cols, dxn.p, dgu.p, false, planes, nullptr));
      require(kernels::launch_swiglu(dgu.p, dact.p, 1, rows / 2, nullptr));
      const std::vector<uint16_t> want_act = fetch_h(dact.p, y0.size() / 2);
      // With variant 3 selected launch_qgemv_fused runs variant 0's kernel; with 7 its form
      // with the L2 prefetch, with 8 two rows per warp pass: the same products every time.
      for (const int sel : {3, 7, 8}) {
        kernels::set_qgemv_wide_variant(sel);
        for (const bool norm : {true, false}) {
          a.x = norm ? dx.p : nullptr;
          a.norm_w = norm ? dg.p : nullptr;
          a.v = norm ? nullptr : dxn.p;
          const std::string nn =
              np + (norm ? " norm" : " bf16 in") + (sel == 3 ? "" : " v" + std::to_string(sel));
          a.act = nullptr;
          a.y = dy.p;
          a.accumulate = false;
          SINKSCOPE_CUDA_CHECK(cudaMemset(dy.p, 0xff, y0.size() * 4));
          require(kernels::launch_qgemv_fused(a, nullptr));
          size_t d = differ(fetch_f(dy.p, y0.size()), want_store);
          check(d == 0, nn + " store", std::to_string(d) + " of " + std::to_string(rows) +
                                           " rows differ from the separate kernels");
          a.accumulate = true;
          SINKSCOPE_CUDA_CHECK(cudaMemcpy(dy.p, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
          require(kernels::launch_qgemv_fused(a, nullptr));
          d = differ(fetch_f(dy.p, y0.size()), want_acc);
          check(d == 0, nn + " accumulate", std::to_string(d) + " of " + std::to_string(rows) +
                                                " rows differ from the separate kernels");
          a.y = nullptr;
          a.accumulate = false;
          a.act = dact.p;
          SINKSCOPE_CUDA_CHECK(cudaMemset(dact.p, 0xff, y0.size()));
          require(kernels::launch_qgemv_fused(a, nullptr));
          d = differ(fetch_h(dact.p, y0.size() / 2), want_act);
          check(d == 0, nn + " swiglu", std::to_string(d) + " of " + std::to_string(rows / 2) +
                                            " SwiGLU outputs differ from the separate kernels");
        }
      }
    }
  }
  kernels::set_qgemv_wide_variant(keep);
}

// Launches back to back without synchronizing, as a decode step issues them (the pipelined
// variants launch with PDL and read the weights before waiting for the previous kernel): a
// dequantization kernel writes v (poisoned with NaN before), then one GEMV stores y and two
// accumulate onto it. Per variant, y must equal, bit for bit, fl(fl(a + a) + a) with a the
// store-only result of the same variant on a v prepared and synchronized beforehand (each launch
// computes the same fp32 sums).
// repack: the weights in their repacked row layout (kernels::launch_qrepack).
void check_chain(GgmlType t, bool repack = false) {
  constexpr int rows = 4097, cols = 4096;
  std::mt19937 rng(900 + static_cast<uint32_t>(t));
  const Matrix m = make_matrix(t, rows, cols, rng);
  const Matrix vm = make_matrix(GgmlType::kQ8_0, 1, cols, rng);  // v's source row
  DevBuf<uint8_t> dw(m.q.size());
  DevBuf<uint8_t> dvq(vm.q.size());
  DevBuf<uint16_t> dv(static_cast<size_t>(cols));
  DevBuf<float> dy(static_cast<size_t>(rows));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(dw.p, m.q.data(), m.q.size(), cudaMemcpyHostToDevice));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(dvq.p, vm.q.data(), vm.q.size(), cudaMemcpyHostToDevice));
  int ti = static_cast<int>(t);
  const int q8 = static_cast<int>(GgmlType::kQ8_0);
  DevBuf<uint8_t> rw(repack ? m.q.size() : 1);
  if (repack) {
    require(kernels::launch_qrepack(ti, dw.p, rows, cols, rw.p, nullptr));
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(dw.p, rw.p, m.q.size(), cudaMemcpyDeviceToDevice));
    ti = kernels::qweight_repacked_type(ti, cols);
  }
  const int keep = kernels::qgemv_wide_variant();
  for (int var = 0; var < kernels::qgemv_wide_variants(); ++var) {
    kernels::set_qgemv_wide_variant(var);
    require(kernels::launch_qdequant_bf16(q8, dvq.p, 1, cols, dv.p, nullptr));
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    require(kernels::launch_qgemv(ti, dw.p, rows, cols, dv.p, dy.p, false, nullptr));
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> a(static_cast<size_t>(rows)), y(static_cast<size_t>(rows));
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(a.data(), dy.p, a.size() * 4, cudaMemcpyDeviceToHost));
    SINKSCOPE_CUDA_CHECK(cudaMemset(dv.p, 0xff, size_t(cols) * 2));
    SINKSCOPE_CUDA_CHECK(cudaMemset(dy.p, 0xff, size_t(rows) * 4));
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    require(kernels::launch_qdequant_bf16(q8, dvq.p, 1, cols, dv.p, nullptr));
    require(kernels::launch_qgemv(ti, dw.p, rows, cols, dv.p, dy.p, false, nullptr));
    require(kernels::launch_qgemv(ti, dw.p, rows, cols, dv.p, dy.p, true, nullptr));
    require(kernels::launch_qgemv(ti, dw.p, rows, cols, dv.p, dy.p, true, nullptr));
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0, finite = 0;
    for (int r = 0; r < rows; ++r) {
      const float x = a[size_t(r)];
      volatile float twice = x + x;
      const float want = twice + x;
      finite += std::isfinite(x) ? 1 : 0;
      if (std::memcmp(&want, &y[size_t(r)], 4) != 0 && ++bad <= 3) {
        std::printf("  row %d: chained %.9g, expected %.9g\n", r, y[size_t(r)], want);
      }
    }
    check(bad == 0 && finite == rows,
          std::string("qgemv chain ") + ggml_type_name(t) + (repack ? " repacked " : " ") +
              kernels::qgemv_wide_variant_name(var),
          std::to_string(bad) + " of " + std::to_string(rows) + " rows differ, " +
              std::to_string(rows - finite) + " non-finite single results");
  }
  kernels::set_qgemv_wide_variant(keep);
}

void check_errors() {
  // Bad shapes and types come back as errors naming the problem, not launches.
  const kernels::OpStatus a = kernels::launch_qgemv(static_cast<int>(GgmlType::kQ4_K),
                                                    reinterpret_cast<void*>(256), 4, 100,
                                                    reinterpret_cast<uint16_t*>(256),
                                                    reinterpret_cast<float*>(256), false, nullptr);
  check(!a.ok && a.message.find("multiple of the block size") != std::string::npos,
        "qgemv rejects a row length off the block size", a.message);
  const kernels::OpStatus b = kernels::launch_qgemv(static_cast<int>(GgmlType::kQ5_0),
                                                    reinterpret_cast<void*>(256), 4, 256,
                                                    reinterpret_cast<uint16_t*>(256),
                                                    reinterpret_cast<float*>(256), false, nullptr);
  check(!b.ok && b.message.find("no device block decode") != std::string::npos,
        "qgemv rejects a type without a device decode", b.message);
  const kernels::OpStatus c = kernels::launch_qgemv_int8(static_cast<int>(GgmlType::kQ4_K),
                                                         reinterpret_cast<void*>(258), 4, 256,
                                                         reinterpret_cast<uint16_t*>(256),
                                                         reinterpret_cast<float*>(256), false, 2,
                                                         nullptr);
  check(!c.ok && c.message.find("16-byte aligned") != std::string::npos,
        "qgemv_int8 rejects Q4_K weights off a 16-byte boundary", c.message);
  const kernels::OpStatus d = kernels::launch_qgemv_int8(static_cast<int>(GgmlType::kQ8_0),
                                                         reinterpret_cast<void*>(256), 4, 256,
                                                         reinterpret_cast<uint16_t*>(256),
                                                         reinterpret_cast<float*>(256), false, 3,
                                                         nullptr);
  check(!d.ok && d.message.find("planes must be 1 or 2") != std::string::npos,
        "qgemv_int8 rejects a plane count other than 1 or 2", d.message);
  // The repacked layouts exist only where every field stays 16-byte aligned.
  const kernels::OpStatus e = kernels::launch_qrepack(static_cast<int>(GgmlType::kQ6_K),
                                                      reinterpret_cast<void*>(256), 4, 3584,
                                                      reinterpret_cast<void*>(1 << 20), nullptr);
  check(!e.ok && e.message.find("no 16-byte aligned repacked layout") != std::string::npos,
        "qrepack rejects Q6_K rows of 3584", e.message);
  const kernels::OpStatus f = kernels::launch_qgemv(qblock::kQ8_0R, reinterpret_cast<void*>(256),
                                                    4, 576, reinterpret_cast<uint16_t*>(256),
                                                    reinterpret_cast<float*>(256), false, nullptr);
  check(!f.ok && f.message.find("no 16-byte aligned repacked layout") != std::string::npos,
        "qgemv rejects a Q8_0R matrix of rows of 576", f.message);
  {
    kernels::QgemvFusedArgs fa;
    fa.type = static_cast<int>(GgmlType::kQ8_0);
    fa.w = reinterpret_cast<void*>(256);
    fa.rows = 5;
    fa.cols = 256;
    fa.x = reinterpret_cast<const float*>(256);
    fa.norm_w = reinterpret_cast<const float*>(512);
    fa.act = reinterpret_cast<uint16_t*>(256);
    const kernels::OpStatus h = kernels::launch_qgemv_fused(fa, nullptr);
    check(!h.ok && h.message.find("even count") != std::string::npos,
          "qgemv_fused rejects SwiGLU over an odd row count", h.message);
    fa.rows = 4;
    fa.v = reinterpret_cast<const uint16_t*>(256);
    const kernels::OpStatus i = kernels::launch_qgemv_fused(fa, nullptr);
    check(!i.ok && i.message.find("exactly one input") != std::string::npos,
          "qgemv_fused rejects both inputs at once", i.message);
    fa.v = nullptr;
    fa.cols = 12288;  // RMSNorm rows longer than launch_rms_norm's register kernels
    const kernels::OpStatus j = kernels::launch_qgemv_fused(fa, nullptr);
    check(!j.ok && j.message.find("cols <= 8192") != std::string::npos,
          "qgemv_fused rejects a norm over more than 8192 columns", j.message);
  }
  const kernels::OpStatus g = kernels::launch_qrepack(static_cast<int>(GgmlType::kQ8_0),
                                                      reinterpret_cast<void*>(256), 4, 4096,
                                                      reinterpret_cast<void*>(256 + 4096), nullptr);
  check(!g.ok && g.message.find("overlap") != std::string::npos,
        "qrepack rejects overlapping src and dst", g.message);
}

// Decode-GEMV throughput per Llama-3-8B shape (batch 1): weight bytes read per second and the
// share of the H200's 4.8 TB/s, per format and path, and the bf16 fused GEMV on the same shapes.
// Each timed launch reads another copy of the weights (copies totalling >= 512 MiB, beyond the
// 50 MB L2), so the figures are HBM reads, not L2 hits.
void run_bench() {
  struct Shape { const char* what; int rows, cols; };
  const Shape shapes[] = {{"q/o 4096x4096", 4096, 4096},
                          {"k/v 1024x4096", 1024, 4096},
                          {"gate/up 14336x4096", 14336, 4096},
                          {"down 4096x14336", 4096, 14336},
                          {"vocab 128256x4096", 128256, 4096}};
  constexpr double kPeakGBs = 4800.0;
  constexpr size_t kRotateBytes = size_t(512) << 20;
  std::mt19937 rng(1);
  cudaEvent_t e0, e1;
  SINKSCOPE_CUDA_CHECK(cudaEventCreate(&e0));
  SINKSCOPE_CUDA_CHECK(cudaEventCreate(&e1));
  constexpr int kIters = 40;
  auto time_us = [&](auto&& launch) {  // launch(i): the i-th timed call
    launch(0);
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(e0));
    for (int i = 0; i < kIters; ++i) launch(i + 1);
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(e1));
    SINKSCOPE_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    SINKSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return 1000.0 * ms / kIters;
  };
  auto row = [&](const Shape& s, const char* type, const char* path, double us, double bytes) {
    const double gbs = bytes / us / 1e3;
    std::printf("%-20s %-6s %-9s %10.2f %10.1f %7.1f%%\n", s.what, type, path, us, gbs,
                100.0 * gbs / kPeakGBs);
    std::fflush(stdout);
  };
  std::printf("%-20s %-6s %-9s %10s %10s %8s\n", "shape", "type", "path", "us", "GB/s",
              "of 4.8TB/s");
  for (const Shape& s : shapes) {
    DevBuf<uint16_t> v(size_t(s.cols));
    DevBuf<float> y(size_t(s.rows));
    SINKSCOPE_CUDA_CHECK(cudaMemset(v.p, 0, size_t(s.cols) * 2));
    SINKSCOPE_CUDA_CHECK(cudaMemset(y.p, 0, size_t(s.rows) * 4));
    {
      const size_t bytes = size_t(s.rows) * s.cols * 2;
      const int copies = int(std::max<size_t>(1, (kRotateBytes + bytes - 1) / bytes));
      DevBuf<uint16_t> w(size_t(s.rows) * s.cols * copies);
      SINKSCOPE_CUDA_CHECK(cudaMemset(w.p, 0, bytes * copies));
      const double us = time_us([&](int i) {
        require(kernels::launch_fused_gemv_residual(v.p, w.p + size_t(i % copies) * s.rows * s.cols,
                                                    y.p, s.rows, s.cols, nullptr));
      });
      row(s, "bf16", "fused", us, double(bytes));
    }
    for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0, GgmlType::kQ5_K,
                       GgmlType::kQ4_0, GgmlType::kQ4_1}) {
      const size_t bytes = size_t(s.rows) * ggml_row_bytes(t, s.cols);
      const int copies = int(std::max<size_t>(1, (kRotateBytes + bytes - 1) / bytes));
      // Random bytes are valid blocks for timing (scales may be NaN; the sums are not read).
      std::vector<uint8_t> host(bytes);
      for (auto& b : host) b = static_cast<uint8_t>(rng());
      DevBuf<uint8_t> w(bytes * copies);
      for (int c = 0; c < copies; ++c) {
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(w.p + bytes * c, host.data(), bytes, cudaMemcpyHostToDevice));
      }
      const int ti = static_cast<int>(t);
      const bool int8 = kernels::qgemv_int8_activation(ti, w.p, s.cols, v.p);
      // planes: 2 (launch_qgemv's choice), 1 (plain int8), 0 (the f32-activation kernel); the
      // int8 paths once per kernel variant (path "int8x2/v1": variant 1; variant 0, the
      // original kernel, keeps the plain name).
      const int keep = kernels::qgemv_wide_variant();
      for (int planes : {2, 1, 0}) {
        if (planes > 0 && !int8) continue;
        for (int var = 0; var < (planes > 0 ? kernels::qgemv_wide_variants() : 1); ++var) {
          if (planes > 0) kernels::set_qgemv_wide_variant(var);
          const double us = time_us([&](int i) {
            const uint8_t* wi = w.p + bytes * size_t(i % copies);
            require(planes == 0
                        ? kernels::launch_qgemv_f32(ti, wi, s.rows, s.cols, v.p, y.p, true, nullptr)
                        : kernels::launch_qgemv_int8(ti, wi, s.rows, s.cols, v.p, y.p, true,
                                                     planes, nullptr));
          });
          std::string path = planes == 2 ? "int8x2" : planes == 1 ? "int8x1" : "f32";
          if (planes > 0 && var > 0) path += std::string("/") + kernels::qgemv_wide_variant_name(var);
          row(s, ggml_type_name(t), path.c_str(), us, double(bytes));
        }
      }
      kernels::set_qgemv_wide_variant(keep);
      // The repacked row layout of the CUDA backend's upload (Q8_0, Q6_K where the rows allow),
      // launch_qgemv's two planes and one plane, variant 0.
      if (const int rt = kernels::qweight_repacked_type(ti, s.cols); rt != ti) {
        DevBuf<uint8_t> rw(bytes * copies);
        for (int c = 0; c < copies; ++c) {
          require(kernels::launch_qrepack(ti, w.p + bytes * c, s.rows, s.cols, rw.p + bytes * c,
                                          nullptr));
        }
        SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
        for (int planes : {2, 1}) {
          const double us = time_us([&](int i) {
            require(kernels::launch_qgemv_int8(rt, rw.p + bytes * size_t(i % copies), s.rows,
                                               s.cols, v.p, y.p, true, planes, nullptr));
          });
          row(s, ggml_type_name(t), planes == 2 ? "rep x2" : "rep x1", us, double(bytes));
        }
      }
      if (int8 && (t == GgmlType::kQ4_K || t == GgmlType::kQ6_K || t == GgmlType::kQ8_0)) {
        // "floor": the same bytes read by a kernel that does nothing else (a grid-stride
        // stream, one wave, PDL-chained to the launch before; bench_floor.cu): what one launch
        // per matrix of this size costs at least.
        int sms = 0;
        SINKSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        DevBuf<unsigned> sink(1);
        const double fus = time_us([&](int i) {
          SINKSCOPE_CUDA_CHECK(bench::launch_read_floor(w.p + bytes * size_t(i % copies),
                                                        bytes / 16 * 16, sink.p, sms, nullptr));
        });
        row(s, ggml_type_name(t), "floor", fus, double(bytes));
      }
      if (int8 && (t == GgmlType::kQ4_K || t == GgmlType::kQ6_K || t == GgmlType::kQ8_0)) {
        // The decode step's forms on the layout the CUDA backend uploads (repacked where the rows
        // allow), two planes: "n+gemv" launch_rms_norm then the GEMV, "fused n" the GEMV with
        // the norm in its prologue; "gemv+sw" the GEMV then launch_swiglu over its rows (gate
        // half, up half), "fused sw" the GEMV with the SwiGLU epilogue and the norm.
        const int kt = kernels::qweight_repacked_type(ti, s.cols);
        DevBuf<uint8_t> kw(kt != ti ? bytes * copies : 0);
        for (int c = 0; c < copies && kt != ti; ++c) {
          require(kernels::launch_qrepack(ti, w.p + bytes * c, s.rows, s.cols, kw.p + bytes * c,
                                          nullptr));
        }
        const uint8_t* wb = kt != ti ? kw.p : w.p;
        DevBuf<float> x(size_t(s.cols)), g(size_t(s.cols));
        DevBuf<uint16_t> act(size_t(s.rows));
        std::vector<float> ones(size_t(s.cols), 1.f);
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(x.p, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice));
        SINKSCOPE_CUDA_CHECK(cudaMemcpy(g.p, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice));
        const int keep_var = kernels::qgemv_wide_variant();
        kernels::set_qgemv_wide_variant(0);
        kernels::QgemvFusedArgs fa;
        fa.type = kt;
        fa.rows = s.rows;
        fa.cols = s.cols;
        fa.x = x.p;
        fa.norm_w = g.p;
        for (int form = 0; form < 4; ++form) {
          if (!kernels::qgemv_fused_eligible([&] { auto b = fa; b.w = wb; return b; }())) break;
          const double us = time_us([&](int i) {
            const uint8_t* wi = wb + bytes * size_t(i % copies);
            if (form == 0 || form == 2) {
              require(kernels::launch_rms_norm(x.p, g.p, v.p, 1, s.cols, 1e-5f, nullptr));
              require(kernels::launch_qgemv_int8(kt, wi, s.rows, s.cols, v.p, y.p, false, 2, nullptr));
              if (form == 2) require(kernels::launch_swiglu(y.p, act.p, 1, s.rows / 2, nullptr));
            } else {
              kernels::QgemvFusedArgs b = fa;
              b.w = wi;
              if (form == 1) b.y = y.p;
              else b.act = act.p;
              require(kernels::launch_qgemv_fused(b, nullptr));
            }
          });
          static const char* kForm[] = {"n+gemv", "fused n", "n+gemv+sw", "fused sw"};
          row(s, ggml_type_name(t), kForm[form], us, double(bytes));
        }
        kernels::set_qgemv_wide_variant(keep_var);
      }
      if (int8) {
        // The activation quantized once ahead: "pre" the GEMV alone (x shared by a
        // projection's parts), "q+pre" with its quantization launch.
        DevBuf<uint8_t> xq(kernels::qgemv_x_bytes(s.cols, 2));
        for (int planes : {2, 1}) {
          require(kernels::launch_qgemv_quantize_x(v.p, s.cols, planes, xq.p, nullptr));
          for (int with_q = 0; with_q < 2; ++with_q) {
            const double us = time_us([&](int i) {
              const uint8_t* wi = w.p + bytes * size_t(i % copies);
              if (with_q) require(kernels::launch_qgemv_quantize_x(v.p, s.cols, planes, xq.p, nullptr));
              require(kernels::launch_qgemv_prequant(ti, wi, s.rows, s.cols, xq.p, y.p, true,
                                                     planes, nullptr));
            });
            const std::string path = std::string(with_q ? "q+pre" : "pre") + "x" + std::to_string(planes);
            row(s, ggml_type_name(t), path.c_str(), us, double(bytes));
          }
        }
      }
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// One decode step's weight reads on the Llama-3.1-8B Q4_K_M shape (llama.cpp's mix: Q6_K attn_v
// and ffn_down in 16 of the 32 layers, Q6_K LM head; Q|K merged, Q|K|V where V is Q4_K too; Q6_K
// rows repacked as the CUDA backend uploads them), one launch per projection in the order the
// backend issues them, captured in one CUDA graph and replayed:
//   gemv   the decode's GEMVs (RMSNorm folded in before Q|K|V, gate|up and the head, SwiGLU
//          after gate|up, the O and down products on a bf16 activation), with one activation
//          plane (x1: --gpu-activations int8, the default) and two (x2: int16), under GEMV
//          variants 0 and 8 (two rows per warp pass);
//   floor  a read-only kernel over each matrix's bytes instead (bench_floor.cu), the same
//          launches: what one launch per projection costs with no arithmetic at all;
//   stream one read-only kernel over all of the step's bytes at once: the card's rate.
// Weights are the same bytes for all three (4.62 GB, each matrix read once per step).
void run_chain_bench() {
  struct Mat { int type, rows, cols, form; };  // form: 0 norm in, 1 bf16 in, 2 norm + SwiGLU
  const int q4k = static_cast<int>(GgmlType::kQ4_K);
  const int q6r = kernels::qweight_repacked_type(static_cast<int>(GgmlType::kQ6_K), 4096);
  std::vector<Mat> step;
  for (int l = 0; l < 32; ++l) {
    const bool more = l < 4 || l >= 28 || (l - 4) % 3 == 2;  // llama.cpp's use_more_bits
    if (more) {
      step.push_back({q4k, 5120, 4096, 0});
      step.push_back({q6r, 1024, 4096, 0});
    } else {
      step.push_back({q4k, 6144, 4096, 0});
    }
    step.push_back({q4k, 4096, 4096, 1});
    step.push_back({q4k, 28672, 4096, 2});
    step.push_back({more ? q6r : q4k, 4096, 14336, 1});
  }
  step.push_back({q6r, 128256, 4096, 0});
  std::vector<size_t> off;
  size_t total = 0;
  for (const Mat& m : step) {
    off.push_back(total);
    total += (size_t(m.rows) * size_t(kernels::qweight_row_bytes(m.type, m.cols)) + 255) / 256 * 256;
  }
  DevBuf<uint8_t> w(total);
  SINKSCOPE_CUDA_CHECK(cudaMemset(w.p, 0x3c, total));
  DevBuf<float> x(4096), g(4096), y(128256);
  DevBuf<uint16_t> v(14336), act(14336);
  std::vector<float> ones(4096, 1.f);
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(x.p, ones.data(), 4096 * 4, cudaMemcpyHostToDevice));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(g.p, ones.data(), 4096 * 4, cudaMemcpyHostToDevice));
  SINKSCOPE_CUDA_CHECK(cudaMemset(v.p, 0, 14336 * 2));
  DevBuf<unsigned> sink(1);
  int sms = 0;
  SINKSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int keep = kernels::qgemv_wide_variant();
  require(kernels::qgemv_prepare(14336));
  cudaStream_t st;
  SINKSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  // mode: 0 gemv x1, 1 floor, 2 stream, 3 gemv x2
  auto enqueue = [&](int mode) {
    const int planes = mode == 3 ? 2 : 1;
    if (mode == 2) {
      SINKSCOPE_CUDA_CHECK(bench::launch_read_floor(w.p, total, sink.p, sms, st));
      return;
    }
    for (size_t i = 0; i < step.size(); ++i) {
      const Mat& m = step[i];
      const uint8_t* wi = w.p + off[i];
      if (mode == 1) {
        const size_t bytes = size_t(m.rows) * size_t(kernels::qweight_row_bytes(m.type, m.cols));
        SINKSCOPE_CUDA_CHECK(bench::launch_read_floor(wi, bytes / 16 * 16, sink.p, sms, st));
      } else if (m.form == 1) {
        require(kernels::launch_qgemv_int8(m.type, wi, m.rows, m.cols, v.p, y.p, true, planes, st));
      } else {
        kernels::QgemvFusedArgs a;
        a.type = m.type;
        a.w = wi;
        a.rows = m.rows;
        a.cols = m.cols;
        a.x = x.p;
        a.norm_w = g.p;
        a.planes = planes;
        if (m.form == 2) a.act = act.p;
        else a.y = y.p;
        require(kernels::launch_qgemv_fused(a, st));
      }
    }
  };
  cudaDeviceProp prop{};
  SINKSCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::string name = prop.name;
  const double peak = name.find("H200") != std::string::npos   ? 4.8e12
                      : name.find("H100") != std::string::npos ? 3.35e12
                                                               : 0.0;
  std::printf("\ndecode step of the Llama-3.1-8B Q4_K_M shape, %zu launches, %.3f GB of weights "
              "(one CUDA graph, median of 20 replays; %s)\n",
              step.size(), double(total) / 1e9, name.c_str());
  std::printf("%-11s %10s %10s %12s %14s\n", "what", "ms/step", "GB/s", "tok/s bound",
              peak > 0 ? "% of HBM peak" : "");
  // {mode, GEMV variant}: variant 0, then 8 (two rows per warp pass), then the read-only rows.
  const int runs[][2] = {{0, 0}, {3, 0}, {0, 8}, {3, 8}, {1, 0}, {2, 0}};
  for (const auto& run : runs) {
    const int mode = run[0];
    if (run[1] >= kernels::qgemv_wide_variants()) continue;
    kernels::set_qgemv_wide_variant(run[1]);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    SINKSCOPE_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    enqueue(mode);
    SINKSCOPE_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    SINKSCOPE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t e0, e1;
    SINKSCOPE_CUDA_CHECK(cudaEventCreate(&e0));
    SINKSCOPE_CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<float> ms;
    for (int r = 0; r < 22; ++r) {
      SINKSCOPE_CUDA_CHECK(cudaEventRecord(e0, st));
      SINKSCOPE_CUDA_CHECK(cudaGraphLaunch(exec, st));
      SINKSCOPE_CUDA_CHECK(cudaEventRecord(e1, st));
      SINKSCOPE_CUDA_CHECK(cudaEventSynchronize(e1));
      float t = 0;
      SINKSCOPE_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
      if (r >= 2) ms.push_back(t);  // two warm-up replays
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    const double gbs = double(total) / (med * 1e-3) / 1e9;
    static const char* kWhat[] = {"gemv x1", "floor", "stream", "gemv x2"};
    const std::string what = std::string(kWhat[mode]) +
                             (mode == 0 || mode == 3 ? " v" + std::to_string(run[1]) : "");
    if (peak > 0) {
      std::printf("%-11s %10.3f %10.1f %12.1f %13.1f%%\n", what.c_str(), med, gbs, 1e3 / med,
                  100.0 * gbs * 1e9 / peak);
    } else {
      std::printf("%-11s %10.3f %10.1f %12.1f\n", what.c_str(), med, gbs, 1e3 / med);
    }
    std::fflush(stdout);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    SINKSCOPE_CUDA_CHECK(cudaGraphExecDestroy(exec));
    SINKSCOPE_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  SINKSCOPE_CUDA_CHECK(cudaStreamDestroy(st));
  kernels::set_qgemv_wide_variant(keep);
}

}  // namespace

int main(int argc, char** argv) {
  if (!sinkscope::testing::have_gpu("test_qgemv_gpu")) return 0;
  bool do_bench = false, do_checks = true, do_chain = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bench") == 0) {
      do_bench = true;
    } else if (std::strcmp(argv[i], "--bench-only") == 0) {
      do_bench = true;
      do_checks = false;
    } else if (std::strcmp(argv[i], "--bench-chain") == 0) {
      do_chain = true;
      do_checks = false;
    } else {
      std::fprintf(stderr,
                   "test_qgemv_gpu: unknown argument '%s' (use --bench, --bench-only or "
                   "--bench-chain)\n",
                   argv[i]);
      return 2;
    }
  }
  if (do_checks) {
    // {rows, cols, weight offset past a 16-byte boundary}
    const int shapes[][3] = {{37, 256, 0},   {1003, 2048, 0}, {515, 14336, 0}, {1, 4096, 0},
                             {9001, 512, 0}, {4097, 4096, 0}, {37, 256, 2},    {1003, 2048, 10},
                             {515, 14336, 2}};
    uint32_t seed = 100;
    for (GgmlType t : kTypes) {
      for (const auto& s : shapes) {
        gpu_test::run(std::string("qgemv ") + ggml_type_name(t),
                      [&] { check_case(t, s[0], s[1], seed++, s[2]); });
      }
    }
    gpu_test::run("qgemv Q6_K vocab", [&] { check_case(GgmlType::kQ6_K, 128256, 4096, 7, 0, false); });
    for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
      gpu_test::run(std::string("qgemv chain ") + ggml_type_name(t), [&] { check_chain(t); });
    }
    for (GgmlType t : {GgmlType::kQ6_K, GgmlType::kQ8_0}) {
      gpu_test::run(std::string("qgemv chain repacked ") + ggml_type_name(t),
                    [&] { check_chain(t, true); });
    }
    gpu_test::run("qgemv Q8_0 vocab", [&] { check_case(GgmlType::kQ8_0, 128256, 4096, 8, 0, false); });
    // {rows, cols}: RMSNorm rows of launch_rms_norm's one-warp kernel (576, 2048) and of its
    // 256-thread kernel (2304 .. 8192), more rows than one wave of CTAs (8194).
    const int fused_shapes[][2] = {{1030, 576}, {1030, 2048}, {998, 2304}, {1000, 3584},
                                   {8194, 4096}, {514, 8192}};
    for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ8_0}) {
      for (const auto& s : fused_shapes) {
        if (s[1] % ggml_type_traits(static_cast<uint32_t>(t))->block_elems != 0) continue;
        gpu_test::run(std::string("qgemv fused ") + ggml_type_name(t),
                      [&] { check_fused(t, s[0], s[1], seed++); });
      }
    }
    gpu_test::run("errors", check_errors);
  }
  if (do_bench) gpu_test::run("bench", run_bench);
  if (do_bench || do_chain) gpu_test::run("bench chain", run_chain_bench);
  return gpu_test::finish_checks();
}
