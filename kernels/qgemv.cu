// SPDX-License-Identifier: Apache-2.0
// Quantized-weight GEMV and dequantize-to-bf16 kernels (kernels/qgemv.h).
//
// launch_qgemv takes the wide int8 kernel (qgemv_wide.cu) for Q4_K / Q6_K / Q8_0 when the
// alignment allows; everything else, and launch_qgemv_f32, runs the kernel below.
//
// GEMV (fp32 activation): a CTA of kWarps warps stages the bf16 activation as fp32 in shared memory once, then
// each warp computes one row. A row is cut into chunks of 8 elements (qblock::decode8); lane l
// takes chunks l, l+32, ... so neighbouring lanes read neighbouring bytes of the same block, and
// the per-lane fp32 sums meet in a butterfly shuffle. Rows past the end leave the kernel after
// the shared-memory stage as a whole warp, so the shuffle always runs with all 32 lanes.
//
// Dequantize: one thread per chunk of 8, written as one 16-byte store of 8 bf16 values.
#include "kernels/qgemv.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <string>

#include "kernels/cuda_check.h"
#include "kernels/qblock.h"
#include "kernels/qgemv_wide.h"

namespace sinkscope::kernels {
namespace {

constexpr int kWarps = 8;  // rows per CTA
constexpr int kMaxCols = 227 * 1024 / 4;  // the fp32 activation stage in sm_90 shared memory
constexpr int kThreads = kWarps * 32;
constexpr size_t kDefaultSmem = 48 * 1024;  // usable without opting in

template <int T>
__global__ void __launch_bounds__(kThreads)
    qgemv_kernel(const uint8_t* __restrict__ w, int rows, int cols, int64_t row_bytes,
                 const uint16_t* __restrict__ v, float* __restrict__ y, int accumulate) {
  extern __shared__ float xs[];
  for (int i = threadIdx.x; i < cols; i += kThreads) {
    xs[i] = __uint_as_float(static_cast<uint32_t>(v[i]) << 16);
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarps + warp;
  if (row >= rows) return;  // the whole warp: row depends on the warp only
  constexpr int kBlockElems = qblock::block_elems(T);
  constexpr int kChunksPerBlock = kBlockElems / qblock::kChunk;
  const uint8_t* wr = w + static_cast<int64_t>(row) * row_bytes;
  const int n_chunks = cols / qblock::kChunk;
  const int nb = cols / kBlockElems;
  float acc = 0.f;
  for (int c = lane; c < n_chunks; c += 32) {
    const int b = c / kChunksPerBlock;
    const int e0 = (c - b * kChunksPerBlock) * qblock::kChunk;
    float q[qblock::kChunk];
    qblock::decode8_in_row(T, wr, nb, b, e0, q);
    const float* xp = xs + c * qblock::kChunk;
#pragma unroll
    for (int i = 0; i < qblock::kChunk; ++i) acc = fmaf(q[i], xp[i], acc);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) y[row] = accumulate ? y[row] + acc : acc;
}

template <int T>
__global__ void __launch_bounds__(256)
    qdequant_kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols, int64_t row_bytes,
                    uint16_t* __restrict__ out) {
  constexpr int kBlockElems = qblock::block_elems(T);
  constexpr int kChunksPerBlock = kBlockElems / qblock::kChunk;
  const int64_t chunks_per_row = cols / qblock::kChunk;
  const int64_t total = rows * chunks_per_row;
  const int64_t nb = cols / kBlockElems;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / chunks_per_row;
    const int64_t c = i - r * chunks_per_row;
    const int64_t b = c / kChunksPerBlock;
    const int e0 = static_cast<int>(c - b * kChunksPerBlock) * qblock::kChunk;
    float q[qblock::kChunk];
    qblock::decode8_in_row(T, w + r * row_bytes, nb, b, e0, q);
    uint32_t packed[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t lo = __bfloat16_as_ushort(__float2bfloat16_rn(q[2 * k]));
      const uint32_t hi = __bfloat16_as_ushort(__float2bfloat16_rn(q[2 * k + 1]));
      packed[k] = lo | (hi << 16);
    }
    *reinterpret_cast<uint4*>(out + i * qblock::kChunk) =
        make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

// The dynamic shared memory qgemv_kernel<T> may use as set so far (process-wide; a process that
// drives several devices sets it on the first one only, see qgemv.h).
template <int T>
std::atomic<size_t>& smem_limit() {
  static std::atomic<size_t> v{kDefaultSmem};
  return v;
}

template <int T>
cudaError_t raise_smem(size_t smem) {
  if (smem <= smem_limit<T>().load()) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(
      qgemv_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e == cudaSuccess) smem_limit<T>().store(smem);
  return e;
}

template <int T>
cudaError_t launch_gemv_t(const void* w, int rows, int cols, int64_t row_bytes, const uint16_t* v,
                          float* y, bool accumulate, cudaStream_t st) {
  const size_t smem = static_cast<size_t>(cols) * sizeof(float);
  if (const cudaError_t e = raise_smem<T>(smem); e != cudaSuccess) return e;
  const int grid = (rows + kWarps - 1) / kWarps;
  qgemv_kernel<T><<<grid, kThreads, smem, st>>>(static_cast<const uint8_t*>(w), rows, cols,
                                                row_bytes, v, y, accumulate ? 1 : 0);
  return cudaGetLastError();
}

template <int T>
cudaError_t launch_dequant_t(const void* w, int64_t rows, int64_t cols, int64_t row_bytes,
                             uint16_t* out, cudaStream_t st) {
  const int64_t total = rows * (cols / qblock::kChunk);
  const int64_t want = (total + 255) / 256;
  const int grid = static_cast<int>(want < 65536 ? want : 65536);  // grid-stride beyond that
  qdequant_kernel<T><<<grid, 256, 0, st>>>(static_cast<const uint8_t*>(w), rows, cols, row_bytes,
                                           out);
  return cudaGetLastError();
}

}  // namespace

namespace {
// A ggml type with a device block decode, or one of its repacked row layouts.
bool device_layout(int type) { return qblock::supported(type) || qblock::repacked(type); }
}  // namespace

int64_t qweight_row_bytes(int type, int64_t cols) {
  if (!device_layout(type) || cols <= 0) return 0;
  const int be = qblock::block_elems(type);
  if (cols % be != 0) return 0;
  return cols / be * qblock::block_bytes(type);
}

std::string qgemv_shape_error(int type, int64_t rows, int64_t cols) {
  if (!device_layout(type)) {
    return "ggml type " + std::to_string(type) + " has no device block decode";
  }
  if (qblock::repacked(type) && !qblock::repack_fits(qblock::file_type(type), cols)) {
    return "row length " + std::to_string(cols) + " has no 16-byte aligned repacked layout";
  }
  if (rows <= 0 || cols <= 0) return "empty matrix";
  if (cols % qblock::block_elems(type) != 0) {
    return "row length " + std::to_string(cols) + " is not a multiple of the block size " +
           std::to_string(qblock::block_elems(type));
  }
  if (rows > (int64_t(1) << 30)) return "matrix too large";
  if (cols > kMaxCols) {
    return "row length " + std::to_string(cols) + " exceeds the GEMV's shared-memory stage (" +
           std::to_string(kMaxCols) + ")";
  }
  return {};
}

OpStatus qgemv_prepare(int max_cols) {
  if (max_cols <= 0 || max_cols > kMaxCols) {
    return OpStatus::error("qgemv_prepare: max_cols " + std::to_string(max_cols) +
                           " outside 1.." + std::to_string(kMaxCols));
  }
  const size_t smem = static_cast<size_t>(max_cols) * sizeof(float);
  for (const cudaError_t e : {raise_smem<qblock::kQ4_0>(smem), raise_smem<qblock::kQ4_1>(smem),
                              raise_smem<qblock::kQ8_0>(smem), raise_smem<qblock::kQ4_K>(smem),
                              raise_smem<qblock::kQ5_K>(smem), raise_smem<qblock::kQ6_K>(smem),
                              raise_smem<qblock::kQ8_0R>(smem), raise_smem<qblock::kQ6_KR>(smem)}) {
    if (e != cudaSuccess) {
      return OpStatus::error(cuda_error_text(e, "qgemv_prepare", __FILE__, __LINE__));
    }
  }
  if (const cudaError_t e = qwide::prepare(max_cols); e != cudaSuccess) {
    return OpStatus::error(cuda_error_text(e, "qgemv_prepare (wide)", __FILE__, __LINE__));
  }
  return {};
}

int qgemv_wide_variants() { return qwide::kVariants; }
int qgemv_wide_variant() { return qwide::variant(); }
bool set_qgemv_wide_variant(int which) { return qwide::set_variant(which); }
const char* qgemv_wide_variant_name(int which) { return qwide::variant_name(which); }
bool qgemv_wide_variant_fuses(int which) { return which == 0 || which == 7 || which == 8; }

bool qgemv_int8_activation(int type, const void* w, int64_t cols, const void* v) {
  return qwide::eligible(type, w, cols, qweight_row_bytes(type, cols), v);
}

OpStatus launch_qgemv(int type, const void* w, int rows, int cols, const uint16_t* v, float* y,
                      bool accumulate, void* stream) {
  static constexpr const char* fn = "launch_qgemv: ";
  if (rows == 0) return {};
  if (!w || !v || !y) return OpStatus::error(std::string(fn) + "a required pointer is null");
  if (std::string why = qgemv_shape_error(type, rows, cols); !why.empty()) {
    return OpStatus::error(fn + why);
  }
  const int64_t rb = qweight_row_bytes(type, cols);
  if (qwide::eligible(type, w, cols, rb, v)) {
    return launch_qgemv_int8(type, w, rows, cols, v, y, accumulate, qwide::kDefaultPlanes, stream);
  }
  return launch_qgemv_f32(type, w, rows, cols, v, y, accumulate, stream);
}

namespace {
// The arguments of the int8 kernel's launchers (x: v, or the activation quantized ahead):
// empty when they are usable, else what is wrong, after fn.
std::string int8_args_error(const char* fn, const char* x_name, int type, const void* w, int rows,
                            int cols, const void* x, const float* y, int planes) {
  if (!w || !x || !y) return std::string(fn) + "a required pointer is null";
  if (std::string why = qgemv_shape_error(type, rows, cols); !why.empty()) return fn + why;
  if (planes != 1 && planes != 2)
    return std::string(fn) + "planes must be 1 or 2, got " + std::to_string(planes);
  if (!qwide::eligible(type, w, cols, qweight_row_bytes(type, cols), x))
    return std::string(fn) +
           "needs Q4_K, Q8_0R, Q6_KR (16-byte aligned), Q6_K or Q8_0 (2-byte aligned) weights "
           "and a 16-byte "
           "aligned " + x_name;
  return {};
}
}  // namespace

OpStatus launch_qgemv_int8(int type, const void* w, int rows, int cols, const uint16_t* v,
                           float* y, bool accumulate, int planes, void* stream) {
  if (rows == 0) return {};
  if (std::string why = int8_args_error("launch_qgemv_int8: ", "v", type, w, rows, cols, v, y, planes);
      !why.empty())
    return OpStatus::error(why);
  const int64_t rb = qweight_row_bytes(type, cols);
  if (const cudaError_t e = qwide::launch(type, w, rows, cols, rb, v, y, accumulate, stream, planes);
      e != cudaSuccess) {
    return OpStatus::error(cuda_error_text(e, "qgemv_wide_kernel", __FILE__, __LINE__));
  }
  return {};
}

size_t qgemv_x_bytes(int cols, int planes) {
  return cols > 0 && cols % 32 == 0 && (planes == 1 || planes == 2) ? qwide::x_bytes(cols, planes)
                                                                    : 0;
}

OpStatus launch_qgemv_quantize_x(const uint16_t* v, int cols, int planes, void* xq,
                                 void* stream) {
  static constexpr const char* fn = "launch_qgemv_quantize_x: ";
  if (!v || !xq) return OpStatus::error(std::string(fn) + "a required pointer is null");
  if (cols <= 0 || cols % 32 != 0 || cols > qwide::kMaxCols)
    return OpStatus::error(std::string(fn) + "cols must be a positive multiple of 32 up to " +
                           std::to_string(qwide::kMaxCols) + ", got " + std::to_string(cols));
  if (planes != 1 && planes != 2)
    return OpStatus::error(std::string(fn) + "planes must be 1 or 2, got " + std::to_string(planes));
  if (reinterpret_cast<uintptr_t>(v) % 16 != 0 || reinterpret_cast<uintptr_t>(xq) % 16 != 0)
    return OpStatus::error(std::string(fn) + "v and xq must be 16-byte aligned");
  if (const cudaError_t e = qwide::quantize(v, cols, planes, static_cast<int8_t*>(xq), stream);
      e != cudaSuccess) {
    return OpStatus::error(cuda_error_text(e, "quantize_x_kernel", __FILE__, __LINE__));
  }
  return {};
}

OpStatus launch_qgemv_prequant(int type, const void* w, int rows, int cols, const void* xq,
                               float* y, bool accumulate, int planes, void* stream) {
  if (rows == 0) return {};
  if (std::string why = int8_args_error("launch_qgemv_prequant: ", "xq", type, w, rows, cols, xq, y,
                                        planes);
      !why.empty())
    return OpStatus::error(why);
  const int64_t rb = qweight_row_bytes(type, cols);
  if (const cudaError_t e = qwide::launch_pre(type, w, rows, cols, rb, static_cast<const int8_t*>(xq),
                                              y, accumulate, stream, planes);
      e != cudaSuccess) {
    return OpStatus::error(cuda_error_text(e, "qgemv_wide_kernel", __FILE__, __LINE__));
  }
  return {};
}

namespace {
const void* fused_input(const QgemvFusedArgs& a) {
  return a.x ? static_cast<const void*>(a.x) : static_cast<const void*>(a.v);
}
}  // namespace

bool qgemv_fused_eligible(const QgemvFusedArgs& a) {
  if (a.rows <= 0 || a.cols <= 0 || !a.w || !fused_input(a)) return false;
  if (a.x && (!a.norm_w || reinterpret_cast<uintptr_t>(a.norm_w) % 16 != 0)) return false;
  if (a.act && a.rows % 2 != 0) return false;
  if (!qgemv_shape_error(a.type, a.rows, a.cols).empty()) return false;
  return qwide::fused_eligible(a.type, a.w, a.cols, qweight_row_bytes(a.type, a.cols),
                               fused_input(a), a.x != nullptr);
}

OpStatus launch_qgemv_fused(const QgemvFusedArgs& a, void* stream) {
  static constexpr const char* fn = "launch_qgemv_fused: ";
  if (a.rows == 0) return {};
  if (!a.w || !fused_input(a) || (!a.y && !a.act) || (a.x && !a.norm_w))
    return OpStatus::error(std::string(fn) + "a required pointer is null");
  if ((a.x != nullptr) == (a.v != nullptr))
    return OpStatus::error(std::string(fn) + "give exactly one input: v, or x with norm_w");
  if ((a.y != nullptr) == (a.act != nullptr))
    return OpStatus::error(std::string(fn) + "give exactly one output: y, or act (SwiGLU)");
  if (a.planes != 1 && a.planes != 2)
    return OpStatus::error(std::string(fn) + "planes must be 1 or 2, got " + std::to_string(a.planes));
  if (a.act && a.rows % 2 != 0)
    return OpStatus::error(std::string(fn) + "SwiGLU needs gate and up rows, an even count; got " +
                           std::to_string(a.rows));
  if (std::string why = qgemv_shape_error(a.type, a.rows, a.cols); !why.empty())
    return OpStatus::error(fn + why);
  if (!qgemv_fused_eligible(a))
    return OpStatus::error(std::string(fn) +
                           "needs the int8 kernel's formats and alignment (qgemv_int8_activation), "
                           "16-byte aligned x and norm_w, and with the norm cols % 8 == 0 and "
                           "cols <= 8192");
  const int64_t rb = qweight_row_bytes(a.type, a.cols);
  if (const cudaError_t e = qwide::launch_fused(a.type, a.w, a.rows, a.cols, rb, a.v, a.x, a.norm_w,
                                                a.eps, a.y, a.accumulate, a.act, stream, a.planes);
      e != cudaSuccess) {
    return OpStatus::error(cuda_error_text(e, "qgemv_wide_kernel", __FILE__, __LINE__));
  }
  return {};
}

OpStatus launch_qgemv_f32(int type, const void* w, int rows, int cols, const uint16_t* v, float* y,
                          bool accumulate, void* stream) {
  static constexpr const char* fn = "launch_qgemv_f32: ";
  if (rows == 0) return {};
  if (!w || !v || !y) return OpStatus::error(std::string(fn) + "a required pointer is null");
  if (std::string why = qgemv_shape_error(type, rows, cols); !why.empty()) {
    return OpStatus::error(fn + why);
  }
  const int64_t rb = qweight_row_bytes(type, cols);
  const auto st = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaErrorInvalidValue;
  switch (type) {
    case qblock::kQ4_0: e = launch_gemv_t<qblock::kQ4_0>(w, rows, cols, rb, v, y, accumulate, st); break;
    case qblock::kQ4_1: e = launch_gemv_t<qblock::kQ4_1>(w, rows, cols, rb, v, y, accumulate, st); break;
    case qblock::kQ8_0: e = launch_gemv_t<qblock::kQ8_0>(w, rows, cols, rb, v, y, accumulate, st); break;
    case qblock::kQ4_K: e = launch_gemv_t<qblock::kQ4_K>(w, rows, cols, rb, v, y, accumulate, st); break;
    case qblock::kQ5_K: e = launch_gemv_t<qblock::kQ5_K>(w, rows, cols, rb, v, y, accumulate, st); break;
    case qblock::kQ6_K: e = launch_gemv_t<qblock::kQ6_K>(w, rows, cols, rb, v, y, accumulate, st); break;
    case qblock::kQ8_0R: e = launch_gemv_t<qblock::kQ8_0R>(w, rows, cols, rb, v, y, accumulate, st); break;
    case qblock::kQ6_KR: e = launch_gemv_t<qblock::kQ6_KR>(w, rows, cols, rb, v, y, accumulate, st); break;
    default: break;
  }
  if (e != cudaSuccess) return OpStatus::error(cuda_error_text(e, "qgemv_kernel", __FILE__, __LINE__));
  return {};
}

OpStatus launch_qdequant_bf16(int type, const void* w, int64_t rows, int64_t cols, uint16_t* out,
                              void* stream) {
  static constexpr const char* fn = "launch_qdequant_bf16: ";
  if (rows == 0) return {};
  if (!w || !out) return OpStatus::error(std::string(fn) + "a required pointer is null");
  if (std::string why = qgemv_shape_error(type, rows, cols); !why.empty()) {
    return OpStatus::error(fn + why);
  }
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) {
    return OpStatus::error(std::string(fn) + "out must be 16-byte aligned");
  }
  const int64_t rb = qweight_row_bytes(type, cols);
  const auto st = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaErrorInvalidValue;
  switch (type) {
    case qblock::kQ4_0: e = launch_dequant_t<qblock::kQ4_0>(w, rows, cols, rb, out, st); break;
    case qblock::kQ4_1: e = launch_dequant_t<qblock::kQ4_1>(w, rows, cols, rb, out, st); break;
    case qblock::kQ8_0: e = launch_dequant_t<qblock::kQ8_0>(w, rows, cols, rb, out, st); break;
    case qblock::kQ4_K: e = launch_dequant_t<qblock::kQ4_K>(w, rows, cols, rb, out, st); break;
    case qblock::kQ5_K: e = launch_dequant_t<qblock::kQ5_K>(w, rows, cols, rb, out, st); break;
    case qblock::kQ6_K: e = launch_dequant_t<qblock::kQ6_K>(w, rows, cols, rb, out, st); break;
    case qblock::kQ8_0R: e = launch_dequant_t<qblock::kQ8_0R>(w, rows, cols, rb, out, st); break;
    case qblock::kQ6_KR: e = launch_dequant_t<qblock::kQ6_KR>(w, rows, cols, rb, out, st); break;
    default: break;
  }
  if (e != cudaSuccess) {
    return OpStatus::error(cuda_error_text(e, "qdequant_kernel", __FILE__, __LINE__));
  }
  return {};
}

int qweight_repacked_type(int type, int64_t cols) {
  return qblock::repack_fits(type, cols) ? qblock::repacked_type(type) : type;
}

namespace {
// One thread per block: its fields copied byte by byte to their places in the repacked row (an
// upload-time pass, one read and one write of each byte).
template <int T>
__global__ void __launch_bounds__(256)
    qrepack_kernel(const uint8_t* __restrict__ src, int64_t rows, int64_t nb, int64_t row_bytes,
                   uint8_t* __restrict__ dst) {
  const int64_t total = rows * nb;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / nb, b = i - r * nb;
    qblock::repack_block(T, src + r * row_bytes, nb, b, dst + r * row_bytes);
  }
}
}  // namespace

OpStatus launch_qrepack(int type, const void* src, int64_t rows, int64_t cols, void* dst,
                        void* stream) {
  static constexpr const char* fn = "launch_qrepack: ";
  if (rows == 0) return {};
  if (!src || !dst) return OpStatus::error(std::string(fn) + "a required pointer is null");
  if (!qblock::repack_fits(type, cols)) {
    return OpStatus::error(std::string(fn) + "ggml type " + std::to_string(type) + " with rows of " +
                           std::to_string(cols) + " has no 16-byte aligned repacked layout");
  }
  const int64_t rb = qweight_row_bytes(type, cols);
  const auto* s8 = static_cast<const uint8_t*>(src);
  auto* d8 = static_cast<uint8_t*>(dst);
  if (rows < 0 || (s8 < d8 + rows * rb && d8 < s8 + rows * rb)) {
    return OpStatus::error(std::string(fn) + "src and dst overlap or rows is negative");
  }
  const int64_t nb = cols / qblock::block_elems(type);
  const int64_t want = (rows * nb + 255) / 256;
  const int grid = static_cast<int>(want < 65536 ? want : 65536);
  const auto st = static_cast<cudaStream_t>(stream);
  if (type == qblock::kQ8_0) qrepack_kernel<qblock::kQ8_0><<<grid, 256, 0, st>>>(s8, rows, nb, rb, d8);
  else qrepack_kernel<qblock::kQ6_K><<<grid, 256, 0, st>>>(s8, rows, nb, rb, d8);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    return OpStatus::error(cuda_error_text(e, "qrepack_kernel", __FILE__, __LINE__));
  }
  return {};
}

}  // namespace sinkscope::kernels
