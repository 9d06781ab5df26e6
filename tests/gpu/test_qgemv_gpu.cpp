// SPDX-License-Identifier: Apache-2.0
// The quantized-weight kernels (kernels/qgemv.h) per format against the CPU: weights quantized
// row by row with the engine's own quantizers (quantize_row), dequantized with the engine's
// dequantize_row, products in double.
//   GEMV: |gpu - ref| <= (cols/32 + 8) * 2^-24 * sum_i |w_i v_i|, the a-priori bound of an fp32
//         fused-multiply-add chain of cols/32 terms per lane plus the 5-level warp reduction
//         (the weights themselves decode bit-exactly: tests/unit/test_qblock.cpp). Also with
//         accumulate (y += W v).
//   Dequantize to bf16 (the prefill's GEMM input): bit for bit equal to fp32_to_bf16 of the CPU
//         dequantization.
// Shapes include odd row counts (grids with a partial last CTA) and a 14336-long row (the
// shared-memory stage above 48 KiB). --bench: decode-GEMV timing on Llama-3-8B projection
// shapes, quantized vs the bf16 fused GEMV (kernels/decode_fused.h) on the same shapes.
// Plain executable: "SKIP: ..." and exit 0 without a GPU; exit 1 on any failure.
#include <cuda_runtime.h>

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
#include "kernels/qgemv.h"
#include "tests/gpu/attention_problem.h"

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

void check_case(GgmlType t, int rows, int cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const Matrix m = make_matrix(t, rows, cols, rng);
  const std::string name = std::string("qgemv ") + ggml_type_name(t) + " " + std::to_string(rows) +
                           "x" + std::to_string(cols) + " seed " + std::to_string(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> v(static_cast<size_t>(cols));
  for (auto& x : v) x = fp32_to_bf16(nd(rng));
  std::vector<float> y0(static_cast<size_t>(rows));
  for (auto& x : y0) x = nd(rng);

  DevBuf<uint8_t> dw(m.q.size());
  DevBuf<uint16_t> dv(v.size());
  DevBuf<float> dy(y0.size());
  DevBuf<uint16_t> dout(m.deq.size());
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(dw.p, m.q.data(), m.q.size(), cudaMemcpyHostToDevice));
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(dv.p, v.data(), v.size() * 2, cudaMemcpyHostToDevice));

  for (int accumulate = 0; accumulate < 2; ++accumulate) {
    // Poison (NaN) unless accumulating onto y0.
    if (accumulate) {
      SINKSCOPE_CUDA_CHECK(cudaMemcpy(dy.p, y0.data(), y0.size() * 4, cudaMemcpyHostToDevice));
    } else {
      SINKSCOPE_CUDA_CHECK(cudaMemset(dy.p, 0xff, y0.size() * 4));
    }
    require(kernels::launch_qgemv(static_cast<int>(t), dw.p, rows, cols, dv.p, dy.p,
                                  accumulate != 0, nullptr));
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> y(y0.size());
    SINKSCOPE_CUDA_CHECK(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    double worst = 0;  // largest |err| / bound
    for (int r = 0; r < rows; ++r) {
      double ref = accumulate ? double(y0[size_t(r)]) : 0.0, mag = accumulate ? std::fabs(ref) : 0;
      for (int c = 0; c < cols; ++c) {
        const double p = double(m.deq[size_t(r) * cols + c]) * double(bf16_to_fp32(v[size_t(c)]));
        ref += p;
        mag += std::fabs(p);
      }
      const double bound = (cols / 32 + 8) * std::ldexp(1.0, -24) * mag + 1e-30;
      const double err = std::fabs(double(y[size_t(r)]) - ref);
      if (!(err <= bound)) {
        if (++bad <= 3) {
          std::printf("  row %d: gpu %.9g ref %.9g bound %.3g\n", r, double(y[size_t(r)]), ref,
                      bound);
        }
      }
      if (err / bound > worst) worst = err / bound;
    }
    char detail[160];
    std::snprintf(detail, sizeof detail, "%d of %d rows outside the bound, worst err/bound %.3f",
                  bad, rows, worst);
    check(bad == 0, name + (accumulate ? " accumulate" : " store"), detail);
  }

  // Dequantize to bf16.
  SINKSCOPE_CUDA_CHECK(cudaMemset(dout.p, 0xff, m.deq.size() * 2));
  require(kernels::launch_qdequant_bf16(static_cast<int>(t), dw.p, rows, cols, dout.p, nullptr));
  SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> out(m.deq.size());
  SINKSCOPE_CUDA_CHECK(cudaMemcpy(out.data(), dout.p, out.size() * 2, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < out.size(); ++i) bad += out[i] != fp32_to_bf16(m.deq[i]);
  check(bad == 0, std::string("qdequant_bf16 ") + ggml_type_name(t) + " " +
                      std::to_string(rows) + "x" + std::to_string(cols),
        std::to_string(bad) + " of " + std::to_string(out.size()) + " bf16 values differ");
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
}

// Decode-GEMV time per projection of Llama-3-8B (batch 1), quantized vs bf16.
void bench() {
  struct Shape { const char* what; int rows, cols; };
  const Shape shapes[] = {{"q/o 4096x4096", 4096, 4096},
                          {"gate|up 28672x4096", 28672, 4096},
                          {"down 4096x14336", 4096, 14336}};
  std::mt19937 rng(1);
  cudaEvent_t e0, e1;
  SINKSCOPE_CUDA_CHECK(cudaEventCreate(&e0));
  SINKSCOPE_CUDA_CHECK(cudaEventCreate(&e1));
  constexpr int kIters = 50;
  auto time_us = [&](auto&& launch) {
    launch();
    SINKSCOPE_CUDA_CHECK(cudaDeviceSynchronize());
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(e0));
    for (int i = 0; i < kIters; ++i) launch();
    SINKSCOPE_CUDA_CHECK(cudaEventRecord(e1));
    SINKSCOPE_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    SINKSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return 1000.0 * ms / kIters;
  };
  std::printf("%-20s %-6s %10s %10s\n", "shape", "type", "us", "GB/s");
  for (const Shape& s : shapes) {
    DevBuf<uint16_t> v(size_t(s.cols));
    DevBuf<float> y(size_t(s.rows));
    SINKSCOPE_CUDA_CHECK(cudaMemset(v.p, 0, size_t(s.cols) * 2));
    SINKSCOPE_CUDA_CHECK(cudaMemset(y.p, 0, size_t(s.rows) * 4));
    {
      DevBuf<uint16_t> w(size_t(s.rows) * s.cols);
      SINKSCOPE_CUDA_CHECK(cudaMemset(w.p, 0, size_t(s.rows) * s.cols * 2));
      const double us = time_us([&] {
        require(kernels::launch_fused_gemv_residual(v.p, w.p, y.p, s.rows, s.cols, nullptr));
      });
      std::printf("%-20s %-6s %10.1f %10.1f\n", s.what, "bf16", us,
                  double(s.rows) * s.cols * 2 / us / 1e3);
    }
    for (GgmlType t : kTypes) {
      const int64_t rb = ggml_row_bytes(t, s.cols);
      // Random bytes are valid blocks for timing (scales may be NaN; the sums are not read).
      std::vector<uint8_t> host(size_t(s.rows * rb));
      for (auto& b : host) b = static_cast<uint8_t>(rng());
      DevBuf<uint8_t> w(host.size());
      SINKSCOPE_CUDA_CHECK(cudaMemcpy(w.p, host.data(), host.size(), cudaMemcpyHostToDevice));
      const double us = time_us([&] {
        require(kernels::launch_qgemv(static_cast<int>(t), w.p, s.rows, s.cols, v.p, y.p, true,
                                      nullptr));
      });
      std::printf("%-20s %-6s %10.1f %10.1f\n", s.what, ggml_type_name(t), us,
                  double(host.size()) / us / 1e3);
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

}  // namespace

int main(int argc, char** argv) {
  if (!sinkscope::testing::have_gpu("test_qgemv_gpu")) return 0;
  bool do_bench = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bench") == 0) {
      do_bench = true;
    } else {
      std::fprintf(stderr, "test_qgemv_gpu: unknown argument '%s' (use --bench)\n", argv[i]);
      return 2;
    }
  }
  const int shapes[][2] = {{37, 256}, {1003, 2048}, {515, 14336}, {1, 4096}};
  uint32_t seed = 100;
  for (GgmlType t : kTypes) {
    for (const auto& s : shapes) {
      gpu_test::run(std::string("qgemv ") + ggml_type_name(t), [&] { check_case(t, s[0], s[1], seed++); });
    }
  }
  gpu_test::run("errors", check_errors);
  if (do_bench) gpu_test::run("bench", bench);
  return gpu_test::finish_checks();
}
