// SPDX-License-Identifier: Apache-2.0
#include "engine/cuda/head_map.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "engine/cuda/cuda_errors.h"
#include "kernels/head_map.h"

namespace sinkscope::gpu {

namespace {

// A stream and its stream-ordered allocations, released in order on every exit.
struct MapStream {
  cudaStream_t s = nullptr;
  std::vector<void*> bufs;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  MapStream() { SS_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~MapStream() {
    for (void* b : bufs) cudaFreeAsync(b, s);
    cudaStreamSynchronize(s);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaStreamDestroy(s);
  }
  template <class T>
  T* alloc(size_t count, const char* what) {
    void* p = nullptr;
    const cudaError_t e = cudaMallocAsync(&p, count * sizeof(T), s);
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw BackendError(std::string("attention map on the GPU: cannot allocate ") + what + " (" +
                         format_bytes(count * sizeof(T)) + "): " + cudaGetErrorString(e));
    }
    bufs.push_back(p);
    return static_cast<T*>(p);
  }
};

}  // namespace

HeadMapSums head_map_on_gpu(const float* q, const float* k, int n, int d, float scale,
                            const HeadMapRule& rule, const std::vector<int>& edges) {
  if (!q || !k) throw std::invalid_argument("attention map on the GPU: q or k is null");
  if (n <= 0 || d <= 0)
    throw std::invalid_argument("attention map on the GPU: n = " + std::to_string(n) +
                                ", d = " + std::to_string(d) + " (both must be >= 1)");
  const int bins = int(edges.size()) - 1;
  if (bins < 1 || bins > n || edges.front() != 0 || edges.back() != n)
    throw std::invalid_argument("attention map on the GPU: " + std::to_string(edges.size()) +
                                " bin edges do not split 0 .. " + std::to_string(n));
  std::vector<int32_t> binOf(static_cast<size_t>(n));
  for (int b = 0; b < bins; ++b) {
    if (edges[size_t(b) + 1] <= edges[size_t(b)])
      throw std::invalid_argument("attention map on the GPU: bin edges must increase (edge " +
                                  std::to_string(b + 1) + ")");
    for (int j = edges[size_t(b)]; j < edges[size_t(b) + 1]; ++j) binOf[size_t(j)] = b;
  }
  MapStream ms;
  kernels::HeadMapProblem p;
  const size_t nd = size_t(n) * size_t(d);
  float* dq = ms.alloc<float>(nd, "the queries");
  float* dk = ms.alloc<float>(nd, "the keys");
  int32_t* dbin = ms.alloc<int32_t>(size_t(n), "the bin index");
  p.q = dq;
  p.k = dk;
  p.bin_of = dbin;
  p.row_max = ms.alloc<float>(size_t(n), "the row maxima");
  p.row_inv = ms.alloc<float>(size_t(n), "the row denominators");
  p.cells = ms.alloc<double>(size_t(bins) * size_t(bins), "the cells");
  p.col_sum = ms.alloc<double>(size_t(n), "the column sums");
  p.n = n;
  p.d = d;
  p.scale = scale;
  p.sinks = rule.sinks;
  p.window = rule.window;
  p.own_window = rule.own_window;
  p.softcap = rule.softcap;
  p.sink_logit = rule.sink_logit;
  p.bins = bins;
  SS_CUDA(cudaMemcpyAsync(dq, q, nd * sizeof(float), cudaMemcpyHostToDevice, ms.s));
  SS_CUDA(cudaMemcpyAsync(dk, k, nd * sizeof(float), cudaMemcpyHostToDevice, ms.s));
  SS_CUDA(cudaMemcpyAsync(dbin, binOf.data(), size_t(n) * sizeof(int32_t), cudaMemcpyHostToDevice,
                          ms.s));
  SS_CUDA(cudaEventCreate(&ms.e0));
  SS_CUDA(cudaEventCreate(&ms.e1));
  SS_CUDA(cudaEventRecord(ms.e0, ms.s));
  SS_LAUNCH(kernels::launch_head_map(p, ms.s));
  SS_CUDA(cudaEventRecord(ms.e1, ms.s));
  std::vector<double> cells(size_t(bins) * size_t(bins));
  HeadMapSums r;
  r.bins = bins;
  r.col_sum.resize(static_cast<size_t>(n));
  SS_CUDA(cudaMemcpyAsync(cells.data(), p.cells, cells.size() * sizeof(double),
                          cudaMemcpyDeviceToHost, ms.s));
  SS_CUDA(cudaMemcpyAsync(r.col_sum.data(), p.col_sum, r.col_sum.size() * sizeof(double),
                          cudaMemcpyDeviceToHost, ms.s));
  SS_CUDA(cudaStreamSynchronize(ms.s));
  float ms_gpu = 0;
  SS_CUDA(cudaEventElapsedTime(&ms_gpu, ms.e0, ms.e1));
  r.gpu_ms = ms_gpu;
  r.cells.resize(cells.size());
  for (int a = 0; a < bins; ++a)
    for (int b = 0; b < bins; ++b) {
      const double size = double(edges[size_t(a) + 1] - edges[size_t(a)]) *
                          double(edges[size_t(b) + 1] - edges[size_t(b)]);
      r.cells[size_t(a) * bins + b] = float(cells[size_t(a) * bins + b] / size);
    }
  return r;
}

}  // namespace sinkscope::gpu
