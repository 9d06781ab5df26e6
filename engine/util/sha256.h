// SPDX-License-Identifier: Apache-2.0
// SHA-256 (FIPS 180-4) for model and dataset provenance.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace sinkscope {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::string hex_digest();  // finalises; call once

 private:
  void block(const uint8_t* p);
  uint32_t m_h[8];
  uint8_t m_buf[64];
  size_t m_buf_len = 0;
  uint64_t m_total = 0;
};

std::string sha256_hex(std::string_view data);
// Throws std::runtime_error naming the file when it cannot be read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace sinkscope
