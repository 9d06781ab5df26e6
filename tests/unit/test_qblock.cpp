// SPDX-License-Identifier: Apache-2.0
// The block decode shared by the CUDA quantized GEMV / dequantize kernels (kernels/qblock.h)
// against the engine's CPU dequantizer (engine/format/dequant.cpp), bit for bit, for every format
// the GPU keeps in its file layout. Blocks come from the engine's own quantizers and from random
// bytes (every bit pattern of scales and quants, subnormal and large fp16 scales included).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/format/gguf_writer.h"
#include "kernels/qblock.h"

namespace sinkscope {
namespace {

const GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

// Equal bit patterns, or both NaN (the payload of a NaN scale times a quant is not specified).
bool same_value(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

void expect_decode_matches(GgmlType t, const std::vector<uint8_t>& bytes, int64_t n,
                           const std::string& what) {
  const int type = static_cast<int>(t);
  ASSERT_TRUE(qblock::supported(type)) << what;
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
  ASSERT_NE(tr, nullptr);
  ASSERT_EQ(qblock::block_elems(type), tr->block_elems) << what;
  ASSERT_EQ(qblock::block_bytes(type), tr->block_bytes) << what;
  std::vector<float> want(static_cast<size_t>(n));
  dequantize_row(t, bytes.data(), want.data(), n);
  std::vector<float> got(static_cast<size_t>(n), -12345.0f);
  const int64_t nb = n / tr->block_elems;
  for (int64_t b = 0; b < nb; ++b) {
    qblock::decode_block(type, bytes.data() + b * tr->block_bytes, got.data() + b * tr->block_elems);
  }
  int64_t mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!same_value(got[size_t(i)], want[size_t(i)])) {
      if (++mismatches <= 5) {
        ADD_FAILURE() << what << " element " << i << ": block decode " << got[size_t(i)]
                      << " vs dequantize_row " << want[size_t(i)];
      }
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
}

TEST(QBlock, HalfToFloatIsExactForEveryBitPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = qblock::half_to_float(static_cast<uint16_t>(h));
    const float b = fp16_to_fp32(static_cast<uint16_t>(h));
    ASSERT_TRUE(same_value(a, b)) << "fp16 0x" << std::hex << h;
  }
}

TEST(QBlock, DecodeEqualsDequantizeForQuantizerOutput) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (GgmlType t : kTypes) {
    const int64_t n = 256 * 12;  // a multiple of both block sizes
    std::vector<float> x(static_cast<size_t>(n));
    // Mixed magnitudes per block, plus one block of all zeros and one constant block.
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = nd(rng) * (1.0f + float((i / 256) % 5) * 3.0f);
    for (int64_t i = 256; i < 512; ++i) x[size_t(i)] = 0.0f;
    for (int64_t i = 512; i < 768; ++i) x[size_t(i)] = 0.37f;
    const std::vector<uint8_t> q = quantize_row(t, x.data(), n);
    expect_decode_matches(t, q, n, std::string(ggml_type_name(t)) + " quantized");
  }
}

TEST(QBlock, DecodeEqualsDequantizeForRandomBytes) {
  std::mt19937 rng(11);
  for (GgmlType t : kTypes) {
    const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
    const int64_t nb = 400;
    std::vector<uint8_t> bytes(static_cast<size_t>(nb * tr->block_bytes));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    expect_decode_matches(t, bytes, nb * tr->block_elems,
                          std::string(ggml_type_name(t)) + " random bytes");
  }
}

TEST(QBlock, UnsupportedTypesAreReported) {
  EXPECT_FALSE(qblock::supported(static_cast<int>(GgmlType::kQ5_0)));
  EXPECT_FALSE(qblock::supported(static_cast<int>(GgmlType::kQ2_K)));
  EXPECT_FALSE(qblock::supported(static_cast<int>(GgmlType::kF16)));
  EXPECT_EQ(qblock::block_elems(static_cast<int>(GgmlType::kBF16)), 0);
  EXPECT_EQ(qblock::block_bytes(static_cast<int>(GgmlType::kQ3_K)), 0);
}

// The row layouts the CUDA backend repacks Q8_0 and Q6_K into (qblock::kQ8_0R, kQ6_KR): every
// element of a repacked row decodes (decode8_in_row) to the bits dequantize_row gives for the
// file's row, the repack moves every byte (none left at its poison value), and the row keeps
// its size.
TEST(QBlock, RepackedRowsDecodeToTheFileRowsValues) {
  std::mt19937 rng(23);
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ6_K}) {
    const int type = static_cast<int>(t);
    const int rtype = qblock::repacked_type(type);
    ASSERT_NE(rtype, type);
    ASSERT_TRUE(qblock::repacked(rtype));
    ASSERT_FALSE(qblock::supported(rtype));  // not a ggml type: decode8 does not take it
    EXPECT_EQ(qblock::file_type(rtype), type);
    EXPECT_EQ(qblock::block_elems(rtype), qblock::block_elems(type));
    EXPECT_EQ(qblock::block_bytes(rtype), qblock::block_bytes(type));
    const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
    for (const int64_t n : {int64_t(2048), int64_t(4096), int64_t(14336)}) {
      const int64_t nb = n / tr->block_elems;
      std::vector<uint8_t> row(static_cast<size_t>(nb * tr->block_bytes));
      for (auto& b : row) b = static_cast<uint8_t>(rng());
      std::vector<float> want(static_cast<size_t>(n));
      dequantize_row(t, row.data(), want.data(), n);
      std::vector<uint8_t> rep(row.size(), 0xA5);
      for (int64_t b = 0; b < nb; ++b) qblock::repack_block(type, row.data(), nb, b, rep.data());
      // Each byte of the file row lands exactly once: the multisets of bytes agree.
      std::vector<int> hist(256, 0);
      for (uint8_t b : row) ++hist[b];
      for (uint8_t b : rep) --hist[b];
      EXPECT_TRUE(std::all_of(hist.begin(), hist.end(), [](int h) { return h == 0; }))
          << ggml_type_name(t) << " n " << n;
      EXPECT_NE(rep, row) << ggml_type_name(t) << " n " << n << ": the layout must change";
      int64_t bad = 0;
      for (int64_t b = 0; b < nb; ++b) {
        for (int e0 = 0; e0 < tr->block_elems; e0 += qblock::kChunk) {
          float got[qblock::kChunk];
          qblock::decode8_in_row(rtype, rep.data(), nb, b, e0, got);
          for (int i = 0; i < qblock::kChunk; ++i)
            bad += !same_value(got[i], want[size_t(b * tr->block_elems + e0 + i)]);
        }
      }
      EXPECT_EQ(bad, 0) << ggml_type_name(t) << " repacked, n " << n;
    }
  }
}

TEST(QBlock, RepackFitsRowsWhoseFieldsStay16ByteAligned) {
  const int q8 = static_cast<int>(GgmlType::kQ8_0), q6 = static_cast<int>(GgmlType::kQ6_K);
  EXPECT_TRUE(qblock::repack_fits(q8, 4096));
  EXPECT_TRUE(qblock::repack_fits(q8, 256));
  EXPECT_FALSE(qblock::repack_fits(q8, 576));   // 18 blocks: 612 bytes
  EXPECT_FALSE(qblock::repack_fits(q8, 100));   // not whole blocks
  EXPECT_TRUE(qblock::repack_fits(q6, 4096));
  EXPECT_TRUE(qblock::repack_fits(q6, 14336));
  EXPECT_FALSE(qblock::repack_fits(q6, 3584));  // 14 blocks: 2940 bytes
  EXPECT_FALSE(qblock::repack_fits(q6, 1024));
  EXPECT_FALSE(qblock::repack_fits(static_cast<int>(GgmlType::kQ4_K), 4096));  // no layout
  EXPECT_EQ(qblock::repacked_type(static_cast<int>(GgmlType::kQ4_K)),
            static_cast<int>(GgmlType::kQ4_K));
}

}  // namespace
}  // namespace sinkscope
