// SPDX-License-Identifier: Apache-2.0
// safetensors reader. The header length is checked against the file before the JSON is read,
// every tensor's byte range against the data section, and its element count (with overflow
// checks) against the range's size, so a hostile file can neither crash us nor point a tensor
// outside the mapping.
#include "engine/format/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "engine/util/json_io.h"
#include "engine/model/model.h"

static_assert(std::endian::native == std::endian::little,
              "the safetensors reader assumes little-endian");

namespace sinkscope {
namespace {

// Real headers are a few hundred bytes per tensor; 100 MB is what the reference implementation
// accepts too.
constexpr uint64_t kMaxHeaderBytes = uint64_t(100) << 20;

std::string quote(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u != 0x7f) ? c : '?';
  }
  if (s.size() > 200) out += "...";
  return out + "'";
}

}  // namespace

int safetensors_dtype_size(std::string_view d) {
  static const std::pair<std::string_view, int> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"U16", 2},  {"I16", 2}, {"F16", 2}, {"BF16", 2},    {"U32", 4},
      {"I32", 4},  {"F32", 4}, {"U64", 8}, {"I64", 8},     {"F64", 8}};
  for (const auto& [name, size] : kSizes)
    if (name == d) return size;
  return 0;
}

std::optional<GgmlType> SafetensorsTensor::ggml_type() const {
  if (dtype == "F32") return GgmlType::kF32;
  if (dtype == "F16") return GgmlType::kF16;
  if (dtype == "BF16") return GgmlType::kBF16;
  return std::nullopt;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->m_name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ModelError(f->m_name + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw ModelError(f->m_name + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ModelError(f->m_name + ": not a regular file");
  }
  if (st.st_size < 8) {
    ::close(fd);
    throw ModelError(f->m_name + ": file truncated: " + std::to_string(st.st_size) +
                     " bytes is too small for a safetensors header");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) throw ModelError(f->m_name + ": mmap failed: " + std::strerror(map_err));
  f->m_mapping = map;
  f->m_data = static_cast<const uint8_t*>(map);
  f->m_size = size;
  f->parse();
  return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::from_memory(const uint8_t* data, size_t size,
                                                              std::string display_name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->m_name = std::move(display_name);
  f->m_data = data;
  f->m_size = data ? size : 0;
  f->parse();
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (m_mapping) ::munmap(m_mapping, m_size);
}

void SafetensorsFile::parse() {
  auto fail = [&](const std::string& what) -> void { throw ModelError(m_name + ": " + what); };
  if (m_size < 8)
    fail("file truncated: " + std::to_string(m_size) +
         " bytes is too small for a safetensors header");
  uint64_t n = 0;
  std::memcpy(&n, m_data, 8);
  if (n > kMaxHeaderBytes)
    fail("header length " + std::to_string(n) + " is beyond the " +
         std::to_string(kMaxHeaderBytes) + "-byte limit (not a safetensors file?)");
  if (n > m_size - 8)
    fail("file truncated: the header needs " + std::to_string(n) + " bytes but only " +
         std::to_string(m_size - 8) + " follow its length (file size " + std::to_string(m_size) +
         ")");
  const std::string_view text(reinterpret_cast<const char*>(m_data + 8), size_t(n));
  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail("header is not a JSON object");
  const uint64_t data_begin = 8 + n;
  const uint64_t data_size = m_size - data_begin;

  // Tensors in the order of their data, so that messages about gaps and overlaps read naturally.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail("__metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail("__metadata__ entry " + quote(mk) + " is not a string");
        m_metadata.emplace_back(mk, mv.get<std::string>());
      }
      continue;
    }
    const std::string tn = "tensor " + quote(key);
    if (!value.is_object()) fail(tn + " is not an object");
    const auto dt = value.find("dtype");
    const auto sh = value.find("shape");
    const auto off = value.find("data_offsets");
    if (dt == value.end() || !dt->is_string()) fail(tn + " has no string 'dtype'");
    if (sh == value.end() || !sh->is_array()) fail(tn + " has no 'shape' array");
    if (off == value.end() || !off->is_array() || off->size() != 2)
      fail(tn + " has no 'data_offsets' pair");
    SafetensorsTensor t;
    t.name = key;
    t.dtype = dt->get<std::string>();
    const int es = safetensors_dtype_size(t.dtype);
    if (es == 0) fail(tn + " has unknown dtype " + quote(t.dtype));
    if (sh->size() > 8) fail(tn + " has " + std::to_string(sh->size()) + " dimensions (at most 8)");
    uint64_t count = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned())
        fail(tn + " has a shape entry that is not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      if (v > uint64_t(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(count, v, &count) ||
          count > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(tn + " element count overflows");
      t.shape.push_back(int64_t(v));
    }
    for (const auto& o : *off)
      if (!o.is_number_unsigned())
        fail(tn + " has a data offset that is not a non-negative integer");
    const uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
    if (b > e || e > data_size)
      fail(tn + " data [" + std::to_string(b) + ", " + std::to_string(e) +
           ") lies outside the data section (" + std::to_string(data_size) +
           " bytes; file truncated?)");
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, uint64_t(es), &bytes) || bytes != e - b)
      fail(tn + " (" + t.dtype + ", " + std::to_string(count) + " elements) needs " +
           std::to_string(count) + " x " + std::to_string(es) +
           " bytes but its data_offsets span " + std::to_string(e - b));
    t.n_elements = int64_t(count);
    t.n_bytes = bytes;
    t.data = m_data + data_begin + b;
    ranges.emplace_back(b, e);
    m_tensors.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second && ranges[i].first != ranges[i].second)
      fail("tensor data ranges overlap at offset " + std::to_string(ranges[i].first));
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  for (const SafetensorsTensor& t : m_tensors)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace sinkscope
