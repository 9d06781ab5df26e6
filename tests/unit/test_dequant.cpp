// SPDX-License-Identifier: Apache-2.0
// CPU dequantizers and fp16/bf16 conversions against gguf-py (the independent oracle; golden
// files made by tests/oracle/make_dequant_golden.py), plus quantize -> dequantize error bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "test_support.h"

namespace sinkscope {
namespace {

std::filesystem::path golden(const std::string& name) {
  return test::golden_dir() / "dequant" / name;
}

std::vector<uint16_t> u16_of(const GgufTensorInfo& t) {
  std::vector<uint16_t> v(static_cast<size_t>(t.n_elements));
  std::memcpy(v.data(), t.data, v.size() * 2);
  return v;
}

// Tolerance for our dequantization against gguf-py's. Our loops use the same operation order as
// ggml/gguf-py ((d*sc)*q - m), so on x86-64 (no FMA contraction in ISO C++ mode) the results are
// bit-identical and `exact` counts every element. A compiler that fuses d*q - m into one FMA
// changes only the last bit of the result, i.e. at most ~1.2e-7 of the block's largest term;
// 1e-6 of the largest |value| in the same 32-element group allows that and nothing more.
void expect_matches_oracle(const std::vector<float>& got, const std::vector<float>& want,
                           const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t exact = 0, bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      if (std::isnan(got[i]))
        ++exact;
      else
        ++bad;
      continue;
    }
    if (std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) {
      ++exact;
      continue;
    }
    const size_t g0 = i / 32 * 32, g1 = std::min(want.size(), g0 + 32);
    float scale = 0.0f;
    for (size_t j = g0; j < g1; ++j) {
      if (std::isfinite(want[j])) scale = std::max(scale, std::fabs(want[j]));
    }
    if (!(std::fabs(got[i] - want[i]) <= 1e-6f * scale)) {
      if (++bad <= 5) {
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", gguf-py " << want[i];
      }
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " values differ";
  ::testing::Test::RecordProperty(what + "_bit_exact", static_cast<int>(exact));
}

// ---- golden files from gguf-py ---------------------------------------------------------------

class DequantGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(DequantGolden, MatchesGgufPy) {
  const std::string type = GetParam();
  auto f = GgufFile::open(golden(type + ".gguf"));
  EXPECT_EQ(f->get_string("sinkscope.golden.type"), type);
  const GgufTensorInfo& raw = f->tensor("raw");
  const GgufTensorInfo& expected = f->tensor("expected");
  EXPECT_STREQ(ggml_type_name(raw.type), type.c_str());
  EXPECT_EQ(expected.type, GgmlType::kF32);
  EXPECT_EQ(raw.dims, expected.dims);
  ASSERT_GT(raw.n_elements, 0);
  expect_matches_oracle(f->dequantize(raw), f->dequantize(expected), type);

  // Row by row through dequantize_row as the model loader will use it.
  std::vector<float> row(static_cast<size_t>(raw.dims[0]));
  const std::vector<float> want = f->dequantize(expected);
  const uint64_t row_bytes = ggml_row_bytes(raw.type, raw.dims[0]);
  for (int64_t r = 0; r < raw.rows(); ++r) {
    dequantize_row(raw.type, raw.data + r * row_bytes, row.data(), raw.dims[0]);
    const std::vector<float> w(want.begin() + r * raw.dims[0],
                               want.begin() + (r + 1) * raw.dims[0]);
    expect_matches_oracle(row, w, type + " row " + std::to_string(r));
  }
}

INSTANTIATE_TEST_SUITE_P(GoldenTypes, DequantGolden,
                         ::testing::Values("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                           "Q8_0", "Q4_K", "Q5_K", "Q6_K", "MXFP4"),
                         [](const auto& info) { return std::string(info.param); });

TEST(Fp16Conversion, EncodingMatchesNumpy) {
  // numpy's float16 cast rounds to nearest even; the inputs include exact halfway cases.
  auto f = GgufFile::open(golden("F16.gguf"));
  const std::vector<float> in = f->dequantize(f->tensor("f32_inputs"));
  const std::vector<uint16_t> want = u16_of(f->tensor("f16_of_inputs"));
  ASSERT_EQ(in.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t got = fp32_to_fp16(in[i]);
    if (got != want[i] && ++bad <= 5) {
      ADD_FAILURE() << "fp32_to_fp16(" << in[i] << ") = 0x" << std::hex << got << ", numpy 0x"
                    << want[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(Bf16Conversion, EncodingMatchesGgufPy) {
  auto f = GgufFile::open(golden("BF16.gguf"));
  const std::vector<float> in = f->dequantize(f->tensor("f32_inputs"));
  const std::vector<uint16_t> want = u16_of(f->tensor("bf16_of_inputs"));
  ASSERT_EQ(in.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t got = fp32_to_bf16(in[i]);
    if (got != want[i] && ++bad <= 5) {
      ADD_FAILURE() << "fp32_to_bf16(" << in[i] << ") = 0x" << std::hex << got << ", gguf-py 0x"
                    << want[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

// ---- conversions: exhaustive properties ----------------------------------------------------

TEST(Fp16Conversion, EveryValueDecodesByDefinitionAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const uint32_t e = (h >> 10) & 31, m = h & 1023;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 31) {
      if (m == 0) {
        EXPECT_TRUE(std::isinf(f) && std::signbit(f) == bool(h & 0x8000)) << h;
      } else {
        EXPECT_TRUE(std::isnan(f)) << h;
        EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
      }
      continue;
    }
    const double want =
        e == 0 ? sign * std::ldexp(m, -24) : sign * std::ldexp(1024 + m, int(e) - 25);
    ASSERT_EQ(static_cast<double>(f), want) << "h=0x" << std::hex << h;
    ASSERT_EQ(fp32_to_fp16(f), h) << "h=0x" << std::hex << h;  // -0 included
  }
}

TEST(Fp16Conversion, SpecialValues) {
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7bff);  // just below the midpoint to 2^16
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);    // midpoint, odd mantissa: rounds up to Inf
  EXPECT_EQ(fp32_to_fp16(1e30f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);  // halfway to 0: even is 0
  EXPECT_EQ(fp32_to_fp16(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(0x3p-25f), 0x0002);  // 1.5 ulp: halfway, rounds to even 2
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1e-45f), 0x0000);                             // float subnormal
  const uint16_t n = fp32_to_fp16(std::bit_cast<float>(0x7f800001u));  // NaN, low payload only
  EXPECT_TRUE((n & 0x7c00) == 0x7c00 && (n & 0x3ff) != 0) << std::hex << n;
}

TEST(Bf16Conversion, SpecialValuesAndRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    EXPECT_EQ(std::bit_cast<uint32_t>(f), h << 16);
    if (!std::isnan(f)) {
      ASSERT_EQ(fp32_to_bf16(f), h);
    } else {
      ASSERT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(f))));
    }
  }
  // Payload only in the dropped bits: must stay NaN, not turn into Inf.
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::bit_cast<float>(0x7f800001u)))));
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // halfway, even stays
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // halfway, odd rounds up
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to Inf
  EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xff80);
}

// ---- type table ------------------------------------------------------------------------------

TEST(GgmlTypes, TraitsAndRowBytes) {
  struct Want {
    GgmlType t;
    int64_t be, bb;
    bool dq;
  };
  const Want wants[] = {
      {GgmlType::kF32, 1, 4, true},       {GgmlType::kF16, 1, 2, true},
      {GgmlType::kBF16, 1, 2, true},      {GgmlType::kQ4_0, 32, 18, true},
      {GgmlType::kQ4_1, 32, 20, true},    {GgmlType::kQ5_0, 32, 22, true},
      {GgmlType::kQ5_1, 32, 24, true},    {GgmlType::kQ8_0, 32, 34, true},
      {GgmlType::kQ8_1, 32, 40, false},   {GgmlType::kQ2_K, 256, 84, false},
      {GgmlType::kQ3_K, 256, 110, false}, {GgmlType::kQ4_K, 256, 144, true},
      {GgmlType::kQ5_K, 256, 176, true},  {GgmlType::kQ6_K, 256, 210, true},
      {GgmlType::kQ8_K, 256, 292, false}, {GgmlType::kI32, 1, 4, false},
      {GgmlType::kMXFP4, 32, 17, true},
  };
  for (const Want& w : wants) {
    const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(w.t));
    ASSERT_NE(tr, nullptr);
    EXPECT_EQ(tr->block_elems, w.be) << tr->name;
    EXPECT_EQ(tr->block_bytes, w.bb) << tr->name;
    EXPECT_EQ(tr->can_dequantize, w.dq) << tr->name;
    EXPECT_EQ(ggml_row_bytes(w.t, w.be * 3), static_cast<uint64_t>(w.bb * 3)) << tr->name;
  }
  EXPECT_EQ(ggml_type_traits(4), nullptr);  // removed Q4_2
  EXPECT_EQ(ggml_type_traits(1000), nullptr);
  EXPECT_THROW(ggml_row_bytes(GgmlType::kQ4_K, 100), std::invalid_argument);
  EXPECT_THROW(ggml_row_bytes(GgmlType::kF32, int64_t{1} << 62), std::invalid_argument);
  std::vector<uint8_t> buf(84);
  float out[256];
  EXPECT_THROW(dequantize_row(GgmlType::kQ2_K, buf.data(), out, 256), std::invalid_argument);
  EXPECT_THROW(dequantize_row(GgmlType::kQ8_0, buf.data(), out, 31), std::invalid_argument);
}

// ---- quantize_row -> dequantize_row error bounds ---------------------------------------------

// Test data: N(0,1) rows with magnitudes over four decades, plus all-zero, constant, all-positive
// and all-negative blocks (the edge cases of min/scale handling).
std::vector<float> test_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float mag = std::pow(10.0f, static_cast<float>((i / 256) % 4) - 2.0f);
    x[i] = nd(rng) * mag;
  }
  std::fill(x.begin(), x.begin() + 256, 0.0f);
  std::fill(x.begin() + 256, x.begin() + 512, 0.5f);
  for (int64_t i = 512; i < 768; ++i) x[i] = std::fabs(x[i]) + 0.25f;
  for (int64_t i = 768; i < 1024; ++i) x[i] = -std::fabs(x[i]) - 0.25f;
  return x;
}

// Per-type bound for |dequant(quant(x)) - x| over one block (32 elements, 256 for K-quants),
// with amax = max|x|, lo = min(x), hi = max(x) of the block (range R = hi - lo):
//   F32 0; F16 2^-11 |x| (+2^-25 subnormal); BF16 2^-8 |x|;
//   Q8_0 d/2 = amax/254 (+fp16 rounding of d); Q4_0 amax/8, Q5_0 amax/16 (ggml's scale choice
//   clamps values near -max by up to one step);
//   Q4_1 R/30, Q5_1 R/62 (half a step) + fp16 rounding of min and step (2^-10 of max(|lo|,|hi|));
//   Q4_K, Q5_K half a step where step <= R'/top * (1 + 3/63), R' = max(hi,0) - min(lo,0),
//   top = 15 / 31 (the 6-bit sub-scales and mins are rounded up by at most one unit);
//   Q6_K half a step <= amax/62 * (1 + 2/127).
double error_bound(GgmlType t, const float* x, int n) {
  double amax = 0, lo = x[0], hi = x[0];
  for (int i = 0; i < n; ++i) {
    amax = std::max(amax, double(std::fabs(x[i])));
    lo = std::min(lo, double(x[i]));
    hi = std::max(hi, double(x[i]));
  }
  const double r = hi - lo, rk = std::max(hi, 0.0) - std::min(lo, 0.0);
  const double fp16_rel = 0x1p-11, tiny = 1e-7;
  switch (t) {
    case GgmlType::kF32:
      return 0;
    case GgmlType::kF16:
      return amax * fp16_rel + 0x1p-25;
    case GgmlType::kBF16:
      return amax * 0x1p-8;
    case GgmlType::kQ8_0:
      return amax / 254 * 1.01 + amax * fp16_rel + tiny;
    case GgmlType::kQ4_0:
      return amax / 8 * 1.01 + tiny;
    case GgmlType::kQ5_0:
      return amax / 16 * 1.01 + tiny;
    case GgmlType::kQ4_1:
      return r / 30 * 1.01 + amax * 2 * fp16_rel + tiny;
    case GgmlType::kQ5_1:
      return r / 62 * 1.01 + amax * 2 * fp16_rel + tiny;
    case GgmlType::kQ4_K:
      return 0.5 * rk / 15 * (1 + 3.0 / 63) + tiny;
    case GgmlType::kQ5_K:
      return 0.5 * rk / 31 * (1 + 3.0 / 63) + tiny;
    case GgmlType::kQ6_K:
      return 0.5 * amax / 31 * (1 + 2.0 / 127) + tiny;
    default:
      return 0;
  }
}

class QuantRoundTrip : public ::testing::TestWithParam<GgmlType> {};

TEST_P(QuantRoundTrip, WithinStatedBound) {
  const GgmlType t = GetParam();
  const int64_t n = 256 * 64;
  const std::vector<float> x = test_values(n, 7 + static_cast<uint32_t>(t));
  const std::vector<uint8_t> q = quantize_row(t, x.data(), n);
  ASSERT_EQ(q.size(), ggml_row_bytes(t, n));
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, q.data(), y.data(), n);
  const int bsz = static_cast<int>(ggml_type_traits(static_cast<uint32_t>(t))->block_elems);
  const int group = std::max(bsz, 32);
  double worst_ratio = 0;
  for (int64_t b = 0; b < n; b += group) {
    const double bound = error_bound(t, x.data() + b, group);
    for (int64_t i = b; i < b + group; ++i) {
      const double err = std::fabs(double(y[i]) - double(x[i]));
      ASSERT_LE(err, bound) << ggml_type_name(t) << " element " << i << ": x=" << x[i]
                            << " y=" << y[i];
      if (bound > 0) worst_ratio = std::max(worst_ratio, err / bound);
    }
  }
  // Zero blocks must come back as exact zeros (no 0 * inf, no stray min).
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], 0.0f) << ggml_type_name(t) << " " << i;
  RecordProperty("worst_error_over_bound", std::to_string(worst_ratio));
}

INSTANTIATE_TEST_SUITE_P(QuantTypes, QuantRoundTrip,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                           GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                           GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ4_K,
                                           GgmlType::kQ5_K, GgmlType::kQ6_K),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

TEST(QuantRoundTrip, KQuantErrorIsRoundingNoiseOfEachSubBlock) {
  // The bounds above are worst cases. This checks the encoders really use per-sub-block scales:
  // the RMS error must be close to the uniform rounding noise step_j / sqrt(12) of each sub-block
  // (step_j = sub-block range / 15 or / 31, amax / 31 for Q6_K), with 15 % slack for the
  // rounded-up 6/8-bit sub-scales.
  const int64_t n = 256 * 16;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> x(n);
  for (float& v : x) v = nd(rng);
  for (GgmlType t : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const auto q = quantize_row(t, x.data(), n);
    std::vector<float> y(n);
    dequantize_row(t, q.data(), y.data(), n);
    const int sub = t == GgmlType::kQ6_K ? 16 : 32;
    double err2 = 0, noise2 = 0;
    for (int64_t b = 0; b < n; b += sub) {
      const auto [lo, hi] = std::minmax_element(x.begin() + b, x.begin() + b + sub);
      const double step = t == GgmlType::kQ6_K ? std::max(-*lo, *hi) / 31.0
                                               : (std::max(*hi, 0.0f) - std::min(*lo, 0.0f)) /
                                                     (t == GgmlType::kQ4_K ? 15.0 : 31.0);
      noise2 += step * step / 12.0 * sub;
      for (int64_t i = b; i < b + sub; ++i) err2 += double(y[i] - x[i]) * (y[i] - x[i]);
    }
    EXPECT_LT(std::sqrt(err2 / n), 1.15 * std::sqrt(noise2 / n)) << ggml_type_name(t);
  }
}

// ---- the real model --------------------------------------------------------------------------

TEST(DequantRealModel, DequantizationMatchesGgufPyReference) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model_path);
  auto model = GgufFile::open(model_path);
  auto ref = GgufFile::open(golden("smollm2_ref.gguf"));
  ASSERT_EQ(static_cast<int64_t>(model->file_size()), ref->get_int("sinkscope.ref.model_size"))
      << "the reference values were made from a different model file";
  const int64_t count = ref->get_int("sinkscope.ref.count");
  ASSERT_GE(count, 3);
  bool saw_q4_1 = false;
  for (int64_t i = 0; i < count; ++i) {
    const std::string p = "sinkscope.ref." + std::to_string(i) + ".";
    const std::string name = ref->get_string(p + "name");
    const GgufTensorInfo& t = model->tensor(name);
    EXPECT_STREQ(ggml_type_name(t.type), ref->get_string(p + "type").c_str());
    saw_q4_1 |= t.type == GgmlType::kQ4_1;
    const std::vector<float> y = model->dequantize(t);

    const std::vector<float> first =
        ref->dequantize(ref->tensor("ref." + std::to_string(i) + ".first64"));
    expect_matches_oracle(std::vector<float>(y.begin(), y.begin() + 64), first, name + " first64");
    const int64_t stride = ref->get_int(p + "stride");
    const std::vector<float> strided =
        ref->dequantize(ref->tensor("ref." + std::to_string(i) + ".strided"));
    std::vector<float> mine;
    for (size_t k = 0; k < y.size(); k += static_cast<size_t>(stride)) mine.push_back(y[k]);
    expect_matches_oracle(mine, strided, name + " strided");

    // numpy sums pairwise, we sum sequentially: 1e-9 relative covers the ordering difference.
    double sum = 0, sum_abs = 0, sum_sq = 0;
    for (float v : y) {
      sum += v;
      sum_abs += std::fabs(v);
      sum_sq += double(v) * v;
    }
    EXPECT_NEAR(sum, ref->get_float(p + "sum"), 1e-9 * sum_abs) << name;
    EXPECT_NEAR(sum_abs, ref->get_float(p + "sum_abs"), 1e-9 * sum_abs) << name;
    EXPECT_NEAR(sum_sq, ref->get_float(p + "sum_sq"), 1e-9 * sum_sq) << name;
  }
  EXPECT_TRUE(saw_q4_1);
}

TEST(DequantRealModel, WholeModelDequantizesQuickly) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model_path);
  auto model = GgufFile::open(model_path);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t total = 0;
  double checksum = 0;
  std::vector<float> buf;
  for (const GgufTensorInfo& t : model->tensors()) {
    buf.resize(static_cast<size_t>(t.n_elements));
    model->dequantize_into(t, buf.data());
    for (float v : buf) ASSERT_TRUE(std::isfinite(v)) << t.name;
    checksum += buf[0];
    total += t.n_elements;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("seconds", std::to_string(s));
  std::printf("dequantized %lld weights in %.3f s\n", static_cast<long long>(total), s);
  EXPECT_GT(total, 130'000'000);
  EXPECT_LT(s, 20.0);  // generous: shared CI cores; typically well under a second
}

}  // namespace
}  // namespace sinkscope
