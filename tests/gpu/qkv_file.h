// SPDX-License-Identifier: Apache-2.0
// The Q/K/V capture file (tests/gpu/capture_qkv.cpp writes it, bench_captured.cpp and
// torch_sdpa_captured.py read it): post-RoPE attention inputs of one layer of a real prompt.
// Little-endian; a 64-byte header, then q, k, v as bf16 bit patterns:
//   char magic[8] = "SSQKV001"; int32 version = 1, layer, n_q, q_start, n_kv, n_head, n_head_kv,
//   head_dim; float32 scale (softmax, 1/sqrt(head_dim)); int32 zero padding to 64 bytes;
//   q (n_q, n_head, head_dim); k (n_kv, n_head_kv, head_dim); v like k.
// Captures are scratch data (a few MB per layer and length): written to a folder given on the
// command line, never committed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace sinkscope::gpu_test {

struct QkvFile {
  int layer = -1, n_q = 0, q_start = 0, n_kv = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  float scale = 0.f;
  std::vector<uint16_t> q, k, v;
};

inline constexpr char kQkvMagic[8] = {'S', 'S', 'Q', 'K', 'V', '0', '0', '1'};

inline bool write_qkv_file(const std::string& path, const QkvFile& f, std::string* err) {
  FILE* fp = std::fopen(path.c_str(), "wb");
  if (!fp) return *err = "cannot open " + path + " for writing", false;
  int32_t h[14] = {1, f.layer, f.n_q, f.q_start, f.n_kv, f.n_head, f.n_head_kv, f.head_dim, 0};
  std::memcpy(&h[8], &f.scale, 4);
  bool ok = std::fwrite(kQkvMagic, 1, 8, fp) == 8 && std::fwrite(h, 4, 14, fp) == 14;
  for (const auto* v : {&f.q, &f.k, &f.v})
    ok = ok && std::fwrite(v->data(), 2, v->size(), fp) == v->size();
  ok = std::fclose(fp) == 0 && ok;
  if (!ok) *err = "write failed: " + path;
  return ok;
}

inline bool read_qkv_file(const std::string& path, QkvFile& f, std::string* err) {
  FILE* fp = std::fopen(path.c_str(), "rb");
  if (!fp) return *err = "cannot open " + path, false;
  char magic[8];
  int32_t h[14];
  bool ok = std::fread(magic, 1, 8, fp) == 8 && std::memcmp(magic, kQkvMagic, 8) == 0 &&
            std::fread(h, 4, 14, fp) == 14 && h[0] == 1;
  if (ok) {
    f.layer = h[1], f.n_q = h[2], f.q_start = h[3], f.n_kv = h[4], f.n_head = h[5];
    f.n_head_kv = h[6], f.head_dim = h[7];
    std::memcpy(&f.scale, &h[8], 4);
    ok = f.n_q > 0 && f.n_kv >= f.q_start + f.n_q && f.n_head > 0 && f.n_head_kv > 0 &&
         f.n_head % f.n_head_kv == 0 && f.head_dim > 0;
  }
  if (ok) {
    f.q.resize(size_t(f.n_q) * f.n_head * f.head_dim);
    f.k.resize(size_t(f.n_kv) * f.n_head_kv * f.head_dim);
    f.v.resize(f.k.size());
    for (auto* v : {&f.q, &f.k, &f.v}) ok = ok && std::fread(v->data(), 2, v->size(), fp) == v->size();
  }
  std::fclose(fp);
  if (!ok) *err = path + ": not a valid Q/K/V capture (tests/gpu/qkv_file.h)";
  return ok;
}

}  // namespace sinkscope::gpu_test
