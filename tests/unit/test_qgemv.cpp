// SPDX-License-Identifier: Apache-2.0
// The single-token products straight from GGUF blocks (engine/backend/qgemv.h) against the reference
// (dequantize the row, float dot in double here): the float-activation paths within float
// rounding, the 8-bit-activation paths (Q4_0, Q4_1, Q8_0) within their stated bound -- per block
// of 32, d_x / 2 * Σ|w_j| with d_x = max|x| / 127 -- and every path independent of the thread
// count. Random blocks with realistic scales, rows of the model's widths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/format/gguf_writer.h"
#include "engine/backend/qgemv.h"
#include "engine/backend/qgemv_int.h"
#include "engine/util/thread_pool.h"

namespace sinkscope {
namespace {

uint16_t f2h(float f) {
  // Round-to-nearest float -> half for the small positive scales used here.
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const int e = int((u >> 23) & 0xff) - 127 + 15;
  uint32_t m = u & 0x7fffff;
  if (e <= 0) return uint16_t(sign);
  uint16_t h = uint16_t(sign | (uint32_t(e) << 10) | (m >> 13));
  if (m & 0x1000) ++h;
  return h;
}

std::vector<uint8_t> random_matrix(GgmlType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  const int bb = type == GgmlType::kQ4_0 ? 18 : type == GgmlType::kQ4_1 ? 20 : 34;
  std::vector<uint8_t> m(size_t(rows * cols / 32 * bb));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f), offset(-0.1f, 0.0f);
  for (size_t b = 0; b < m.size(); b += size_t(bb)) {
    for (int i = 0; i < bb; ++i) m[b + size_t(i)] = uint8_t(byte(rng));
    const uint16_t d = f2h(scale(rng));
    std::memcpy(&m[b], &d, 2);
    if (type == GgmlType::kQ4_1) {
      const uint16_t mn = f2h(offset(rng));
      std::memcpy(&m[b + 2], &mn, 2);
    }
  }
  return m;
}

// y against the reference, row by row: |y - ref| <= bound, bound = quantization term (int8
// activations) + float rounding (1e-5 of Σ|w x| + 1e-6).
void expect_within(const QuantMatrix& w, const std::vector<float>& x, const std::vector<float>& y,
                   bool int8, const char* what, double levels = 0.0) {
  // levels > 0: activations quantized with step max|x| / levels (127 for int8, 32767 for int16).
  if (int8) levels = 127.0;
  std::vector<float> row(size_t(w.cols));
  std::vector<double> step(size_t((w.cols + 31) / 32));  // a partial last block reads as 0
  for (size_t b = 0; b < size_t(w.cols / 32); ++b) {
    float mx = 0;
    for (int j = 0; j < 32; ++j) mx = std::max(mx, std::fabs(x[b * 32 + size_t(j)]));
    step[b] = levels > 0 ? double(mx) / levels : 0.0;
  }
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, w.data + uint64_t(r) * w.row_bytes, row.data(), w.cols);
    double ref = 0, mag = 0, quant = 0;
    for (int64_t j = 0; j < w.cols; ++j) {
      ref += double(row[size_t(j)]) * x[size_t(j)];
      mag += std::fabs(double(row[size_t(j)]) * x[size_t(j)]);
      quant += step[size_t(j / 32)] / 2 * std::fabs(row[size_t(j)]);
    }
    const double bound = quant * 1.001 + 1e-5 * mag + 1e-6;
    ASSERT_LE(std::fabs(double(y[size_t(r)]) - ref), bound)
        << what << " row " << r << ": got " << y[size_t(r)] << ", reference " << ref;
  }
}

// The 16-bit-activation product of w and x with each instruction set this CPU runs (portable,
// AVX2, AVX-512, AVX-512 VNNI), named for messages.
std::vector<std::pair<std::string, std::vector<float>>> int16_every_isa(const QuantMatrix& w,
                                                                        const std::vector<float>& x) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (qint::Isa isa : qint::isas_available()) {
    qint::XQ16 xq;
    qint::quantize_x(x.data(), w.cols, xq, isa);
    std::vector<float> y(size_t(w.rows));
    qint::rows(w, xq, y.data(), 0, w.rows, isa);
    out.emplace_back(qint::isa_name(isa), std::move(y));
  }
  return out;
}

TEST(Qgemv, EveryPathWithinItsBoundOfTheReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.f, 1.f);
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{576, 576}, {1536, 576}, {576, 1536}}) {
      const std::vector<uint8_t> data = random_matrix(type, rows, cols, rng);
      QuantMatrix w;
      w.type = type;
      w.data = data.data();
      w.rows = rows;
      w.cols = cols;
      w.row_bytes = uint64_t(data.size() / size_t(rows));
      // Activations with outliers (as RMS-normed hidden states have).
      std::vector<float> x(static_cast<size_t>(cols));
      for (auto& v : x) v = gauss(rng);
      x[3] = 40.f;
      x[size_t(cols) - 5] = -25.f;
      std::vector<float> y8(static_cast<size_t>(rows)), yf(y8), y8p(y8);
      qgemv(w, x.data(), y8.data(), nullptr, QgemvMode::kInt8Activations);
      qgemv(w, x.data(), yf.data(), nullptr, QgemvMode::kFloatActivations);
      qgemv(w, x.data(), y8p.data(), &pool, QgemvMode::kInt8Activations);
      const std::string name = std::string(ggml_type_name(type)) + " " + std::to_string(rows) +
                               "x" + std::to_string(cols);
      expect_within(w, x, y8, /*int8=*/true, (name + " int8").c_str());
      expect_within(w, x, yf, /*int8=*/false, (name + " float").c_str());
      EXPECT_EQ(y8, y8p) << name << ": the thread pool changed a result";
    }
  }
}

// F16 / BF16 weights (safetensors checkpoints are read in place): decode's AVX2 rows and the
// portable path, and prefill's tiles, all within float rounding of a float64 product of the
// stored values; widths with and without a tail past the 16-wide loop.
TEST(Qgemv, HalfPrecisionRowsGiveTheProduct) {
  std::mt19937 rng(5);
  std::normal_distribution<float> gauss(0.f, 1.f);
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{96, 64}, {130, 72}, {33, 7}}) {
      std::vector<uint16_t> data(size_t(rows * cols));
      for (auto& h : data) {
        const float v = gauss(rng) * 0.3f;
        h = type == GgmlType::kF16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
      }
      QuantMatrix w{type, reinterpret_cast<const uint8_t*>(data.data()), rows, cols,
                    uint64_t(cols) * 2};
      std::vector<float> x(static_cast<size_t>(cols));
      for (auto& v : x) v = gauss(rng);
      std::vector<float> y(static_cast<size_t>(rows)), yr(y), yp(y);
      qgemv(w, x.data(), y.data(), nullptr);
      qgemv(w, x.data(), yp.data(), &pool);
      qgemv_reference(w, x.data(), yr.data());
      const std::string name = std::string(ggml_type_name(type)) + " " + std::to_string(rows) +
                               "x" + std::to_string(cols);
      expect_within(w, x, y, /*int8=*/false, (name + " qgemv").c_str());
      expect_within(w, x, yr, /*int8=*/false, (name + " reference").c_str());
      EXPECT_EQ(y, yp) << name << ": the thread pool changed a result";
      // Prefill: a batch of 3 rows of x through linear_q.
      const int64_t m = 3;
      std::vector<float> xs(size_t(m * cols)), ys(size_t(m * rows));
      for (auto& v : xs) v = gauss(rng);
      linear_q(xs.data(), w, ys.data(), m, &pool);
      for (int64_t i = 0; i < m; ++i) {
        std::vector<float> xi(xs.begin() + i * cols, xs.begin() + (i + 1) * cols);
        std::vector<float> yi(ys.begin() + i * rows, ys.begin() + (i + 1) * rows);
        expect_within(w, xi, yi, /*int8=*/false, (name + " linear_q").c_str());
      }
      // The values are the stored ones: every row dequantized (F16: with F16C when the width
      // allows) equals the scalar conversion.
      std::vector<float> all(static_cast<size_t>(rows * cols));
      dequantize_rows(w, 0, rows, all.data());
      for (size_t j = 0; j < all.size(); ++j)
        ASSERT_EQ(all[j], type == GgmlType::kF16 ? fp16_to_fp32(data[j]) : bf16_to_fp32(data[j]))
            << name << " element " << j;
    }
  }
}

// The 16-bit-activation integer path (the default), for every block type it covers: the AVX2
// code and the portable code each within their bound of the float64 product of the reference
// dequantization (dequantize_row): per block of 32, d_x / 2 * Σ|w_j| with d_x = max|x| / 32767,
// plus float rounding; the pool does not change a value; and several products in one
// qgemv_many equal the single ones. Weights are random Gaussian rows quantized with the GGUF
// writer's quantizers (realistic scales), plus one row of random bytes with finite scales (every
// code, extreme sub-block scales) for the types whose any bytes are a valid block.
TEST(Qgemv, Int16ActivationsWithinBoundForEveryBlockType) {
  std::mt19937 rng(13);
  std::normal_distribution<float> gauss(0.f, 1.f);
  std::uniform_int_distribution<int> byte(0, 255);
  ThreadPool pool(2);
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                            GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  for (GgmlType type : types) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{96, 512}, {200, 1536}}) {
      const uint64_t rb = ggml_row_bytes(type, cols);
      std::vector<uint8_t> data(size_t(rows) * rb);
      std::vector<float> src(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : src) v = gauss(rng) * 0.05f;
        quantize_row_into(type, src.data(), cols, data.data() + uint64_t(r) * rb);
      }
      QuantMatrix w{type, data.data(), rows, cols, rb};
      std::vector<float> x(static_cast<size_t>(cols));
      for (auto& v : x) v = gauss(rng);
      x[3] = 40.f;
      x[size_t(cols) - 5] = -25.f;
      std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block
      std::vector<float> y(static_cast<size_t>(rows)), yp(y), yport(y), ym(y), ym2(y);
      qgemv(w, x.data(), y.data(), nullptr);
      qgemv(w, x.data(), yp.data(), &pool);
      qgemv_int16_portable(w, x.data(), yport.data());
      const std::string name = std::string(ggml_type_name(type)) + " " + std::to_string(rows) +
                               "x" + std::to_string(cols);
      expect_within(w, x, y, false, (name + " int16").c_str(), 32767.0);
      expect_within(w, x, yport, false, (name + " int16 portable").c_str(), 32767.0);
      for (const auto& [isa, yi] : int16_every_isa(w, x))
        expect_within(w, x, yi, false, (name + " int16 " + isa).c_str(), 32767.0);
      EXPECT_EQ(y, yp) << name << ": the thread pool changed a result";
      // Two matrices in one call: each equals its single product.
      const QgemvJob jobs[2] = {{&w, ym.data()}, {&w, ym2.data()}};
      qgemv_many(jobs, 2, x.data(), &pool);
      EXPECT_EQ(ym, y) << name;
      EXPECT_EQ(ym2, y) << name;
    }
  }
}

// As above with rows of random bytes (only the fp16 scales set to finite values): every code
// and sub-block scale / min the layouts allow, so a wrong bit position in any of them shows.
TEST(Qgemv, Int16ActivationsOnRandomBlocks) {
  std::mt19937 rng(17);
  std::normal_distribution<float> gauss(0.f, 1.f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.0005f, 0.01f), offset(-0.1f, 0.1f);
  struct Layout {
    GgmlType type;
    int block, elems;
    std::vector<int> half_at;  // byte offsets of fp16 fields in a block
  };
  const Layout layouts[] = {{GgmlType::kQ4_0, 18, 32, {0}},   {GgmlType::kQ4_1, 20, 32, {0, 2}},
                            {GgmlType::kQ5_0, 22, 32, {0}},   {GgmlType::kQ5_1, 24, 32, {0, 2}},
                            {GgmlType::kQ8_0, 34, 32, {0}},   {GgmlType::kQ4_K, 144, 256, {0, 2}},
                            {GgmlType::kQ5_K, 176, 256, {0, 2}}, {GgmlType::kQ6_K, 210, 256, {208}}};
  for (const Layout& lay : layouts) {
    const int64_t rows = 40, cols = 768;
    const uint64_t rb = ggml_row_bytes(lay.type, cols);
    std::vector<uint8_t> data(size_t(rows) * rb);
    for (auto& b : data) b = uint8_t(byte(rng));
    for (size_t off = 0; off < data.size(); off += size_t(lay.block))
      for (size_t k = 0; k < lay.half_at.size(); ++k) {
        const uint16_t h = f2h(k == 1 && lay.elems == 32 ? offset(rng) : scale(rng));
        std::memcpy(&data[off + size_t(lay.half_at[k])], &h, 2);
      }
    QuantMatrix w{lay.type, data.data(), rows, cols, rb};
    std::vector<float> x(static_cast<size_t>(cols));
    for (auto& v : x) v = gauss(rng);
    x[10] = -30.f;
    std::vector<float> y(static_cast<size_t>(rows)), yport(y);
    qgemv(w, x.data(), y.data(), nullptr);
    qgemv_int16_portable(w, x.data(), yport.data());
    const std::string name = std::string(ggml_type_name(lay.type)) + " random blocks";
    expect_within(w, x, y, false, name.c_str(), 32767.0);
    expect_within(w, x, yport, false, (name + " portable").c_str(), 32767.0);
    for (const auto& [isa, yi] : int16_every_isa(w, x))
      expect_within(w, x, yi, false, (name + " " + isa).c_str(), 32767.0);
  }
}

// The products' ISA is one this CPU runs (the best, unless SINKSCOPE_QGEMV_ISA picks one); the
// list is printed so that a log shows which paths the tests above and below ran.
TEST(Qgemv, DefaultIsaIsOneThisCpuRuns) {
  std::string names;
  bool found = false;
  for (qint::Isa isa : qint::isas_available()) {
    names += std::string(" ") + qint::isa_name(isa);
    found |= isa == qint::default_isa();
  }
  std::printf("qgemv int16 ISAs on this CPU:%s; default %s\n", names.c_str(),
              qint::isa_name(qint::default_isa()));
  EXPECT_TRUE(found);
  EXPECT_EQ(qint::isas_available().front(), qint::Isa::kPortable);
}

// Each instruction set on row ranges that start and end anywhere (the pool's chunks), rows of
// one block and of an odd number of blocks (the kernels' block pairs leave one over): every
// row equals the same row computed alone, and is within the bound.
TEST(Qgemv, Int16EveryIsaOnPartialRowRanges) {
  std::mt19937 rng(23);
  std::normal_distribution<float> gauss(0.f, 1.f);
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                            GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  for (GgmlType type : types) {
    const bool k = type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K;
    for (int64_t cols : k ? std::vector<int64_t>{256, 768} : std::vector<int64_t>{32, 96}) {
      const int64_t rows = 37;
      const uint64_t rb = ggml_row_bytes(type, cols);
      std::vector<uint8_t> data(size_t(rows) * rb);
      std::vector<float> src(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : src) v = gauss(rng) * 0.05f;
        quantize_row_into(type, src.data(), cols, data.data() + uint64_t(r) * rb);
      }
      const QuantMatrix w{type, data.data(), rows, cols, rb};
      std::vector<float> x(static_cast<size_t>(cols));
      for (auto& v : x) v = gauss(rng);
      for (qint::Isa isa : qint::isas_available()) {
        const std::string name = std::string(ggml_type_name(type)) + " cols " +
                                 std::to_string(cols) + " " + qint::isa_name(isa);
        qint::XQ16 xq;
        qint::quantize_x(x.data(), cols, xq, isa);
        std::vector<float> whole(static_cast<size_t>(rows)), parts(static_cast<size_t>(rows), -1.0f);
        qint::rows(w, xq, whole.data(), 0, rows, isa);
        expect_within(w, x, whole, false, name.c_str(), 32767.0);
        for (int64_t r0 = 0; r0 < rows;) {
          const int64_t r1 = std::min(rows, r0 + 1 + (r0 * 7) % 11);
          qint::rows(w, xq, parts.data(), r0, r1, isa);
          r0 = r1;
        }
        EXPECT_EQ(parts, whole) << name;
      }
    }
  }
}

TEST(Qgemv, Int8ActivationsHandleZeroAndTinyBlocks) {
  std::mt19937 rng(3);
  const int64_t rows = 64, cols = 128;
  const std::vector<uint8_t> data = random_matrix(GgmlType::kQ8_0, rows, cols, rng);
  QuantMatrix w{GgmlType::kQ8_0, data.data(), rows, cols, uint64_t(data.size() / rows)};
  std::vector<float> x(size_t(cols), 0.f);  // block 0 all zero
  for (int64_t j = 32; j < 64; ++j) x[size_t(j)] = 1e-30f;  // block 1 tiny
  for (int64_t j = 64; j < cols; ++j) x[size_t(j)] = float(j % 7) - 3.f;
  std::vector<float> y(static_cast<size_t>(rows));
  qgemv(w, x.data(), y.data(), nullptr, QgemvMode::kInt8Activations);
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
  expect_within(w, x, y, true, "zero and tiny blocks");
}

}  // namespace
}  // namespace sinkscope

namespace sinkscope {
namespace {

// Prefill's path (linear_q): dequantize_rows equals dequantize_row bit for bit (its AVX2 rows do
// the same operations), and y = x W^T over tiles dequantized on the fly equals a float64 product
// of the dequantized weights within float rounding, for tile counts of 1 and many, and with or
// without a pool (which does not change a value).
TEST(LinearQ, TilesOfDequantizedRowsGiveTheProduct) {
  std::mt19937 rng(11);
  std::normal_distribution<float> gauss(0.f, 1.f);
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{40, 64}, {1000, 576}}) {
      const std::vector<uint8_t> data = random_matrix(type, rows, cols, rng);
      QuantMatrix w;
      w.type = type;
      w.data = data.data();
      w.rows = rows;
      w.cols = cols;
      w.row_bytes = uint64_t(data.size() / size_t(rows));
      const std::string name = std::string(ggml_type_name(type)) + " " + std::to_string(rows) +
                               "x" + std::to_string(cols);
      const std::vector<float> all = dequantize(w);
      std::vector<float> ref(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(type, w.data + uint64_t(r) * w.row_bytes, ref.data(), cols);
        ASSERT_EQ(0, std::memcmp(ref.data(), &all[size_t(r * cols)], sizeof(float) * size_t(cols)))
            << name << " row " << r;
      }
      const int64_t m = 37;
      std::vector<float> x(size_t(m * cols));
      for (auto& v : x) v = gauss(rng);
      std::vector<float> y(size_t(m * rows)), yp(y);
      linear_q(x.data(), w, y.data(), m, nullptr);
      linear_q(x.data(), w, yp.data(), m, &pool);
      EXPECT_EQ(y, yp) << name;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < rows; ++j) {
          double acc = 0, mag = 0;
          for (int64_t t = 0; t < cols; ++t) {
            const double p = double(x[size_t(i * cols + t)]) * all[size_t(j * cols + t)];
            acc += p;
            mag += std::fabs(p);
          }
          ASSERT_NEAR(y[size_t(i * rows + j)], acc, 1e-5 * mag + 1e-6) << name << " (" << i << ", " << j << ")";
        }
    }
  }
}

// The K-quant rows (Q4_K, Q6_K: 256-element super-blocks with sub-block scales; any bytes are a
// valid block once the fp16 scales are finite) dequantize bit-identically through
// dequantize_rows' AVX2 path and the reference dequantize_row, and linear_q's product agrees.
TEST(LinearQ, KQuantRowsMatchTheReferenceBitForBit) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.0005f, 0.01f);
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const int64_t rows = 24, cols = 512;
    const uint64_t row_bytes = ggml_row_bytes(type, cols);
    std::vector<uint8_t> data(size_t(rows) * row_bytes);
    for (auto& b : data) b = uint8_t(byte(rng));
    const int64_t block = type == GgmlType::kQ4_K ? 144 : 210;
    for (size_t off = 0; off < data.size(); off += size_t(block)) {
      // Q4_K: d and dmin first; Q6_K: d last.
      const uint16_t d = f2h(scale(rng)), dm = f2h(scale(rng));
      if (type == GgmlType::kQ4_K) {
        std::memcpy(&data[off], &d, 2);
        std::memcpy(&data[off + 2], &dm, 2);
      } else {
        std::memcpy(&data[off + 208], &d, 2);
      }
    }
    QuantMatrix w;
    w.type = type;
    w.data = data.data();
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = row_bytes;
    const std::vector<float> all = dequantize(w);
    std::vector<float> ref(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(type, w.data + uint64_t(r) * row_bytes, ref.data(), cols);
      ASSERT_EQ(0, std::memcmp(ref.data(), &all[size_t(r * cols)], sizeof(float) * size_t(cols)))
          << ggml_type_name(type) << " row " << r;
    }
    std::normal_distribution<float> gauss(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(3 * cols)), y(static_cast<size_t>(3 * rows));
    std::vector<float> y1(static_cast<size_t>(rows));
    for (auto& v : x) v = gauss(rng);
    linear_q(x.data(), w, y.data(), 3, nullptr);
    qgemv(w, x.data(), y1.data(), nullptr, QgemvMode::kFloatActivations);
    for (int64_t j = 0; j < rows; ++j) {
      double acc = 0, mag = 0;
      for (int64_t t = 0; t < cols; ++t) {
        acc += double(x[size_t(t)]) * all[size_t(j * cols + t)];
        mag += std::fabs(double(x[size_t(t)]) * all[size_t(j * cols + t)]);
      }
      EXPECT_NEAR(y[size_t(j)], acc, 1e-5 * mag + 1e-6) << ggml_type_name(type) << " linear_q row " << j;
      EXPECT_NEAR(y1[size_t(j)], acc, 1e-5 * mag + 1e-6) << ggml_type_name(type) << " qgemv row " << j;
    }
  }
}

}  // namespace
}  // namespace sinkscope
