// SPDX-License-Identifier: Apache-2.0
// Decode's single-token products alone (a program, not a test): the 16-bit-activation integer
// path (engine/backend/qgemv_int.h) with each instruction set this CPU runs, on one thread, for
// SmolLM2-135M's decode shapes (Q, K/V, O, gate/up, down, logits) in a chosen block type, from
// weights far larger than the caches (a ring of copies, as in decode, where each layer's weights
// come from memory) and from one copy that stays in cache. Prints µs per product (median of
// repeats) and the weights' read rate.
//
//   bench_qgemv [--type Q4_1] [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/qgemv.h"
#include "engine/backend/qgemv_int.h"
#include "engine/format/ggml_types.h"
#include "engine/format/gguf_writer.h"

using namespace sinkscope;

namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

GgmlType parse_type(const std::string& s) {
  const GgmlType all[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                          GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  for (GgmlType t : all)
    if (s == ggml_type_name(t)) return t;
  std::fprintf(stderr, "bench_qgemv: --type %s is not one of Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K\n",
               s.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  GgmlType type = GgmlType::kQ4_1;
  int reps = 15;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--type" && i + 1 < argc) {
      type = parse_type(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_qgemv [--type Q4_1] [--reps N]\n");
      return 2;
    }
  }
  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  const bool k = type == GgmlType::kQ4_K || type == GgmlType::kQ5_K || type == GgmlType::kQ6_K;
  // K-quants need widths in multiples of 256: 576 -> 768 there.
  const int64_t h = k ? 768 : 576, f = 1536;
  const Shape shapes[] = {{"q / o", h, h}, {"k / v", 192, h}, {"gate / up", f, h},
                          {"down", h, f}, {"logits", 49152, h}};
  std::mt19937 rng(1);
  std::normal_distribution<float> gauss(0.f, 1.f);
  std::printf("bench_qgemv: %s weights, 1 thread, median of %d\n\n", ggml_type_name(type), reps);
  std::printf("| shape | rows x cols | ISA | from memory, µs | GB/s | in cache, µs | GB/s |\n");
  std::printf("|---|---|---|--:|--:|--:|--:|\n");
  for (const Shape& s : shapes) {
    const uint64_t rb = ggml_row_bytes(type, s.cols);
    const uint64_t bytes = rb * uint64_t(s.rows);
    // Enough copies to leave the caches (>= 256 MiB in all) for the "from memory" column.
    const int copies = int(std::max<uint64_t>(1, (uint64_t(256) << 20) / bytes));
    std::vector<uint8_t> data(size_t(bytes) * size_t(copies));
    std::vector<float> src(size_t(s.cols));
    for (int64_t r = 0; r < s.rows; ++r) {
      for (auto& v : src) v = gauss(rng) * 0.05f;
      quantize_row_into(type, src.data(), s.cols, data.data() + uint64_t(r) * rb);
    }
    for (int c = 1; c < copies; ++c) std::memcpy(data.data() + bytes * uint64_t(c), data.data(), bytes);
    std::vector<float> x(size_t(s.cols)), y(size_t(s.rows));
    for (auto& v : x) v = gauss(rng);
    for (qint::Isa isa : qint::isas_available()) {
      qint::XQ16 xq;
      auto run = [&](int copy) {
        const QuantMatrix w{type, data.data() + bytes * uint64_t(copy), s.rows, s.cols, rb};
        qint::quantize_x(x.data(), s.cols, xq, isa);
        qint::rows(w, xq, y.data(), 0, s.rows, isa);
      };
      std::vector<double> mem, hot;
      int copy = 0;
      for (int r = 0; r < reps; ++r) {
        // From memory: the next copy (the ring is far larger than the caches).
        const int per = std::max(1, copies / reps);
        const double t0 = now_us();
        for (int i = 0; i < per; ++i) run(copy = (copy + 1) % copies);
        mem.push_back((now_us() - t0) / per);
        run(0);
        const double t1 = now_us();
        for (int i = 0; i < 4; ++i) run(0);
        hot.push_back((now_us() - t1) / 4);
      }
      std::sort(mem.begin(), mem.end());
      std::sort(hot.begin(), hot.end());
      const double m = mem[mem.size() / 2], c = hot[hot.size() / 2];
      std::printf("| %s | %lld x %lld | %s | %.1f | %.1f | %.1f | %.1f |\n", s.name,
                  static_cast<long long>(s.rows), static_cast<long long>(s.cols),
                  qint::isa_name(isa), m, double(bytes) / m / 1e3, c, double(bytes) / c / 1e3);
    }
  }
  return 0;
}
