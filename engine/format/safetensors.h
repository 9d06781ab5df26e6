// SPDX-License-Identifier: Apache-2.0
// safetensors reader: memory-mapped, header checked before anything is trusted.
// Format: an 8-byte little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the byte after the
// header) plus an optional "__metadata__" object of strings, then the data.
// Reference: https://github.com/huggingface/safetensors#format
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/format/ggml_types.h"

namespace sinkscope {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // as written: "BF16", "F16", "F32", "I64", ...
  std::vector<int64_t> shape;  // row-major, outermost first (PyTorch order)
  int64_t n_elements = 0;
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // points into the mapping; valid while the file lives
  // The engine's type for the float dtypes it reads in place (F32, F16, BF16).
  std::optional<GgmlType> ggml_type() const;
};

class SafetensorsFile {
 public:
  // Maps and validates the header. Throws ModelError naming the file and the problem.
  static std::unique_ptr<SafetensorsFile> open(const std::filesystem::path& path);
  // Parses an in-memory image (fuzzers, tests); the buffer must outlive the object.
  static std::unique_ptr<SafetensorsFile> from_memory(const uint8_t* data, size_t size,
                                                      std::string display_name = "<memory>");
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return m_name; }
  size_t file_size() const { return m_size; }
  const std::vector<SafetensorsTensor>& tensors() const { return m_tensors; }
  const SafetensorsTensor* find(std::string_view name) const;
  // "__metadata__" entries in file order.
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return m_metadata; }

 private:
  SafetensorsFile() = default;
  void parse();

  std::string m_name;
  const uint8_t* m_data = nullptr;
  size_t m_size = 0;
  void* m_mapping = nullptr;
  std::vector<SafetensorsTensor> m_tensors;
  std::vector<std::pair<std::string, std::string>> m_metadata;
};

// Bytes per element of a safetensors dtype; 0 for a dtype SinkScope does not know.
int safetensors_dtype_size(std::string_view dtype);

}  // namespace sinkscope
