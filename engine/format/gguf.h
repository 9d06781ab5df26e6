// SPDX-License-Identifier: Apache-2.0
// GGUF v2/v3 reader: memory-mapped, bounds-checked, every metadata value type.
// Format reference: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/format/ggml_types.h"

namespace sinkscope {

// Every malformed-file problem is reported as a GgufError whose message names the file
// and what is wrong (e.g. "model.gguf: tensor 'blk.0.attn_q.weight' data [off, off+n) lies
// outside the file (size N)").
class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

// One metadata value. Scalars are widened into the variant; arrays keep their element type.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType array_type = GgufValueType::kUint8;  // element type when type == kArray
  // Scalar storage (ints as int64/uint64, floats as double, bool as bool, string as string).
  // Every integer type is held as int64_t except uint64, which is held as uint64_t.
  std::variant<std::monostate, int64_t, uint64_t, double, bool, std::string> scalar;
  // Array storage: exactly one of these is filled, depending on array_type.
  std::vector<int64_t> ints;          // all signed/unsigned ints up to 32 bit, int64, bool
  std::vector<uint64_t> uints64;      // uint64
  std::vector<double> floats;         // float32 / float64
  std::vector<std::string> strings;   // string
  std::vector<GgufValue> arrays;      // array (arrays of arrays; each element has type kArray)
  size_t array_size() const;          // number of elements (0 for scalars)

  // Typed access; throws GgufError naming the key if the value does not convert.
  int64_t as_int(std::string_view key) const;
  double as_float(std::string_view key) const;
  bool as_bool(std::string_view key) const;
  const std::string& as_string(std::string_view key) const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the fastest-varying (row length)
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;        // relative to the start of the data section
  uint64_t n_bytes = 0;       // bytes occupied by the tensor data
  int64_t n_elements = 0;
  const uint8_t* data = nullptr;  // points into the mapping; valid while the GgufFile lives
  int64_t rows() const { return n_elements / (dims.empty() ? 1 : dims[0]); }
};

class GgufFile {
 public:
  // Opens and validates the whole header, metadata and tensor table. Throws GgufError.
  static std::unique_ptr<GgufFile> open(const std::filesystem::path& path);
  // Parses an in-memory image (used by the fuzzers and tests); the buffer must outlive the file.
  static std::unique_ptr<GgufFile> from_memory(const uint8_t* data, size_t size,
                                               std::string display_name = "<memory>");
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return m_name; }
  uint32_t version() const { return m_version; }
  size_t alignment() const { return m_alignment; }
  size_t file_size() const { return m_size; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return m_kv; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Required accessors throw GgufError("<file>: missing metadata key 'k'") when absent.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  // Optional accessors return the fallback when absent (but throw on a type mismatch).
  std::string get_string_or(std::string_view key, std::string fallback) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;

  const std::vector<GgufTensorInfo>& tensors() const { return m_tensors; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const GgufTensorInfo& tensor(std::string_view name) const;  // throws when absent

  // Dequantizes a whole tensor to float32 (row-major in ggml order). Throws for types
  // without a CPU dequantizer.
  std::vector<float> dequantize(const GgufTensorInfo& t) const;
  void dequantize_into(const GgufTensorInfo& t, float* dst) const;

 private:
  GgufFile() = default;
  void parse();

  std::string m_name;
  const uint8_t* m_data = nullptr;
  size_t m_size = 0;
  void* m_mapping = nullptr;  // non-null when we own an mmap
  uint32_t m_version = 0;
  size_t m_alignment = 32;
  std::vector<std::pair<std::string, GgufValue>> m_kv;
  std::vector<GgufTensorInfo> m_tensors;
};

}  // namespace sinkscope
