// SPDX-License-Identifier: Apache-2.0
// The dynamic-sparse decode's kernel choice (kernels/decode_choice.h): the cost model against the
// H200 measurements it was fitted to (docs/performance.md, "Decode, dynamic-sparse"; tolerance
// 0.005 in the ratio), and the shape of the decision the CUDA backend takes from it.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/decode_choice.h"

namespace sinkscope::kernels {
namespace {

TEST(DecodeChoice, ReproducesTheMeasuredSpeedUps) {
  struct Point {
    int d;
    int64_t L;
    double skipped, measured_speedup;  // dense time / sparse time
  };
  for (const Point& p : {Point{64, 16384, 0.7, 0.76}, Point{64, 65536, 0.7, 0.88},
                         Point{128, 16384, 0.7, 0.99}, Point{128, 65536, 0.7, 1.12},
                         Point{128, 65536, 0.9, 1.33}})
    EXPECT_NEAR(sparse_decode_time_ratio(p.d, p.L, p.skipped), 1.0 / p.measured_speedup, 0.005)
        << "d=" << p.d << " L=" << p.L << " skipped=" << p.skipped;
}

TEST(DecodeChoice, SparseOnlyWhereMeasuredFaster) {
  // Where the measurements say sparse is slower, the dense kernels run.
  EXPECT_FALSE(sparse_decode_pays(64, 16384, 0.7));
  EXPECT_FALSE(sparse_decode_pays(64, 65536, 0.7));
  EXPECT_FALSE(sparse_decode_pays(128, 16384, 0.7));
  // Where they say it is faster, the sparse ones.
  EXPECT_TRUE(sparse_decode_pays(128, 65536, 0.7));
  EXPECT_TRUE(sparse_decode_pays(128, 65536, 0.9));
  // Short contexts never pay, whatever is skipped.
  for (int d : {64, 128})
    for (int64_t L : {1, 64, 512, 2048, 4096})
      EXPECT_FALSE(sparse_decode_pays(d, L, 1.0)) << "d=" << d << " L=" << L;
  // A borderline prediction (within the margin) keeps the dense kernels.
  EXPECT_FALSE(sparse_decode_pays(128, 16384, 0.715));
}

TEST(DecodeChoice, RatioFallsWithSkippedShareAndLength) {
  for (int d : {64, 128}) {
    double prev = 1e9;
    for (double s = 0.0; s <= 1.0; s += 0.05) {
      const double r = sparse_decode_time_ratio(d, 32768, s);
      EXPECT_LT(r, prev);
      prev = r;
    }
    prev = 1e9;
    for (int64_t L = 1024; L <= (1 << 20); L *= 2) {
      const double r = sparse_decode_time_ratio(d, L, 0.8);
      EXPECT_LT(r, prev);
      prev = r;
    }
  }
  // Out-of-range inputs are clamped, not extrapolated.
  EXPECT_DOUBLE_EQ(sparse_decode_time_ratio(128, 65536, 1.5), sparse_decode_time_ratio(128, 65536, 1.0));
  EXPECT_DOUBLE_EQ(sparse_decode_time_ratio(128, 65536, -1.0), sparse_decode_time_ratio(128, 65536, 0.0));
  EXPECT_TRUE(std::isfinite(sparse_decode_time_ratio(64, 0, 0.5)));
}

}  // namespace
}  // namespace sinkscope::kernels
