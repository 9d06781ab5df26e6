// SPDX-License-Identifier: Apache-2.0
// GGUF reader. Every read goes through a Cursor that checks the remaining bytes first, and every
// count read from the file is checked against what the rest of the file could possibly hold
// before anything is allocated for it, so a hostile file can neither crash us nor make us
// allocate gigabytes.
#include "engine/format/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <unordered_set>

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes little-endian");

namespace sinkscope {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr size_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
// Arrays of arrays are legal GGUF; the limit only keeps a hostile file from recursing deeply.
constexpr int kMaxArrayDepth = 8;
// Smallest possible encodings, used to reject absurd counts up front.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                  // empty key, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset

size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    default:
      return 0;  // string / array: variable size
  }
}

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

std::string quote(std::string_view s) {
  // Names come from the file; keep messages printable and short.
  std::string out = "'";
  for (char c : s.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u != 0x7f) ? c : '?';  // control bytes only; UTF-8 passes through
  }
  if (s.size() > 200) out += "...";
  return out + "'";
}

// Bounds-checked little-endian reader over [data, data + size).
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name)
      : m_data(data), m_size(size), m_name(name) {}

  size_t pos() const { return m_pos; }
  size_t remaining() const { return m_size - m_pos; }

  [[noreturn]] void fail(const std::string& what) const { throw GgufError(m_name + ": " + what); }

  void need(uint64_t n, const std::string& what) const {
    if (n > remaining()) {
      std::ostringstream os;
      os << "file truncated: " << what << " needs " << n << " bytes at offset " << m_pos
         << " but only " << remaining() << " remain (file size " << m_size << ")";
      fail(os.str());
    }
  }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, m_data + m_pos, sizeof(T));
    m_pos += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& what) {
    const uint64_t len = read<uint64_t>(what + " length");
    if (len > remaining()) {
      std::ostringstream os;
      os << "file truncated or corrupt: " << what << " has length " << len << " but only " << remaining()
         << " bytes remain in the file (offset " << m_pos << ", file size " << m_size << ")";
      fail(os.str());
    }
    std::string s(reinterpret_cast<const char*>(m_data + m_pos), static_cast<size_t>(len));
    m_pos += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* m_data;
  size_t m_size;
  size_t m_pos = 0;
  const std::string& m_name;
};

GgufValueType read_value_type(Cursor& c, const std::string& what) {
  const uint32_t t = c.read<uint32_t>(what);
  if (t > static_cast<uint32_t>(GgufValueType::kFloat64)) {
    c.fail(what + " is " + std::to_string(t) + ", not a known GGUF value type (0..12)");
  }
  return static_cast<GgufValueType>(t);
}

// Reads one scalar of type t into the variant (ints widened, uint64 kept unsigned).
void read_scalar(Cursor& c, GgufValueType t, GgufValue& v, const std::string& what) {
  switch (t) {
    case GgufValueType::kUint8:
      v.scalar = int64_t{c.read<uint8_t>(what)};
      break;
    case GgufValueType::kInt8:
      v.scalar = int64_t{c.read<int8_t>(what)};
      break;
    case GgufValueType::kUint16:
      v.scalar = int64_t{c.read<uint16_t>(what)};
      break;
    case GgufValueType::kInt16:
      v.scalar = int64_t{c.read<int16_t>(what)};
      break;
    case GgufValueType::kUint32:
      v.scalar = int64_t{c.read<uint32_t>(what)};
      break;
    case GgufValueType::kInt32:
      v.scalar = int64_t{c.read<int32_t>(what)};
      break;
    case GgufValueType::kUint64:
      v.scalar = c.read<uint64_t>(what);
      break;
    case GgufValueType::kInt64:
      v.scalar = c.read<int64_t>(what);
      break;
    case GgufValueType::kFloat32:
      v.scalar = double{c.read<float>(what)};
      break;
    case GgufValueType::kFloat64:
      v.scalar = c.read<double>(what);
      break;
    case GgufValueType::kBool:
      v.scalar = c.read<uint8_t>(what) != 0;
      break;
    case GgufValueType::kString:
      v.scalar = c.read_string(what);
      break;
    case GgufValueType::kArray:
      break;  // handled by the caller
  }
}

template <typename T>
void read_ints(Cursor& c, uint64_t n, std::vector<int64_t>& out) {
  out.resize(static_cast<size_t>(n));
  for (auto& x : out) x = static_cast<int64_t>(c.read<T>("array element"));
}

void read_value(Cursor& c, GgufValueType t, GgufValue& v, const std::string& key, int depth) {
  v.type = t;
  if (t != GgufValueType::kArray) {
    read_scalar(c, t, v, "value of key " + quote(key));
    return;
  }
  if (depth >= kMaxArrayDepth) {
    c.fail("key " + quote(key) + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  }
  const GgufValueType et = read_value_type(c, "element type of array " + quote(key));
  v.array_type = et;
  const uint64_t n = c.read<uint64_t>("element count of array " + quote(key));
  // Smallest encoding per element: a string is at least its 8-byte length, an array at least
  // its type and count.
  const uint64_t min_elem = et == GgufValueType::kString  ? 8
                            : et == GgufValueType::kArray ? 12
                                                          : scalar_size(et);
  if (n > c.remaining() / min_elem) {
    std::ostringstream os;
    os << "file truncated or corrupt: array " << quote(key) << " claims " << n << " elements of type "
       << gguf_value_type_name(et) << " but only " << c.remaining() << " bytes remain in the file";
    c.fail(os.str());
  }
  switch (et) {
    case GgufValueType::kUint8:
      read_ints<uint8_t>(c, n, v.ints);
      break;
    case GgufValueType::kInt8:
      read_ints<int8_t>(c, n, v.ints);
      break;
    case GgufValueType::kUint16:
      read_ints<uint16_t>(c, n, v.ints);
      break;
    case GgufValueType::kInt16:
      read_ints<int16_t>(c, n, v.ints);
      break;
    case GgufValueType::kUint32:
      read_ints<uint32_t>(c, n, v.ints);
      break;
    case GgufValueType::kInt32:
      read_ints<int32_t>(c, n, v.ints);
      break;
    case GgufValueType::kInt64:
      read_ints<int64_t>(c, n, v.ints);
      break;
    case GgufValueType::kBool:
      v.ints.resize(static_cast<size_t>(n));
      for (auto& x : v.ints) x = c.read<uint8_t>("array element") != 0;
      break;
    case GgufValueType::kUint64:
      v.uints64.resize(static_cast<size_t>(n));
      for (auto& x : v.uints64) x = c.read<uint64_t>("array element");
      break;
    case GgufValueType::kFloat32:
      v.floats.resize(static_cast<size_t>(n));
      for (auto& x : v.floats) x = c.read<float>("array element");
      break;
    case GgufValueType::kFloat64:
      v.floats.resize(static_cast<size_t>(n));
      for (auto& x : v.floats) x = c.read<double>("array element");
      break;
    case GgufValueType::kString: {
      v.strings.resize(static_cast<size_t>(n));
      const std::string what = "element of string array " + quote(key);
      for (auto& s : v.strings) s = c.read_string(what);
      break;
    }
    case GgufValueType::kArray:
      v.arrays.resize(static_cast<size_t>(n));
      // Elements carry no type tag of their own: each is {element type, count, items}.
      for (auto& sub : v.arrays) read_value(c, GgufValueType::kArray, sub, key, depth + 1);
      break;
  }
}

std::string type_mismatch(std::string_view key, const GgufValue& v, const char* wanted) {
  std::string have = gguf_value_type_name(v.type);
  if (v.type == GgufValueType::kArray) {
    have = std::string("array of ") + gguf_value_type_name(v.array_type);
  }
  return "metadata key " + quote(key) + " is " + have + ", expected " + wanted;
}

}  // namespace

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

size_t GgufValue::array_size() const {
  if (type != GgufValueType::kArray) return 0;
  return ints.size() + uints64.size() + floats.size() + strings.size() + arrays.size();
}

int64_t GgufValue::as_int(std::string_view key) const {
  if (type == GgufValueType::kUint64) {
    const uint64_t u = std::get<uint64_t>(scalar);
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      throw GgufError("metadata key " + quote(key) + " = " + std::to_string(u) +
                      " does not fit in int64");
    }
    return static_cast<int64_t>(u);
  }
  if (is_integer_type(type)) return std::get<int64_t>(scalar);
  throw GgufError(type_mismatch(key, *this, "an integer"));
}

double GgufValue::as_float(std::string_view key) const {
  if (type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64) {
    return std::get<double>(scalar);
  }
  if (type == GgufValueType::kUint64) return static_cast<double>(std::get<uint64_t>(scalar));
  if (is_integer_type(type)) return static_cast<double>(std::get<int64_t>(scalar));
  throw GgufError(type_mismatch(key, *this, "a number"));
}

bool GgufValue::as_bool(std::string_view key) const {
  if (type == GgufValueType::kBool) return std::get<bool>(scalar);
  throw GgufError(type_mismatch(key, *this, "a bool"));
}

const std::string& GgufValue::as_string(std::string_view key) const {
  if (type == GgufValueType::kString) return std::get<std::string>(scalar);
  throw GgufError(type_mismatch(key, *this, "a string"));
}

// ---------------------------------------------------------------------------------------------

std::unique_ptr<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->m_name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw GgufError(f->m_name + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw GgufError(f->m_name + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw GgufError(f->m_name + ": not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw GgufError(f->m_name + ": file is empty (0 bytes), not a GGUF file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  // Read-only private mapping: weights are paged in on demand and shared with the page cache.
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) throw GgufError(f->m_name + ": mmap failed: " + std::strerror(map_err));
  f->m_mapping = map;
  f->m_data = static_cast<const uint8_t*>(map);
  f->m_size = size;
  f->parse();  // on throw, the unique_ptr's destructor unmaps
  return f;
}

std::unique_ptr<GgufFile> GgufFile::from_memory(const uint8_t* data, size_t size,
                                                std::string display_name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->m_name = std::move(display_name);
  f->m_data = data;
  f->m_size = data ? size : 0;
  f->parse();
  return f;
}

GgufFile::~GgufFile() {
  if (m_mapping) ::munmap(m_mapping, m_size);
}

void GgufFile::parse() {
  if (m_size == 0) throw GgufError(m_name + ": file is empty (0 bytes), not a GGUF file");
  Cursor c(m_data, m_size, m_name);
  if (m_size < 4) {
    c.fail("file truncated: " + std::to_string(m_size) + " bytes is too small for a GGUF header");
  }
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%08x", magic);
    c.fail(std::string("not a GGUF file (bad magic ") + hex + ", expected \"GGUF\")");
  }
  m_version = c.read<uint32_t>("version");
  if (m_version == 1) c.fail("GGUF version 1 is not supported (only versions 2 and 3)");
  if (m_version != 2 && m_version != 3) {
    // A byte-swapped small number means a big-endian file.
    if ((m_version & 0xffff) == 0 && __builtin_bswap32(m_version) <= 3) {
      c.fail("big-endian GGUF files are not supported");
    }
    c.fail("unsupported GGUF version " + std::to_string(m_version) + " (only 2 and 3)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each entry needs at least its minimal encoding, so counts beyond remaining/min are lies.
  if (n_kv > c.remaining() / kMinKvBytes) {
    c.fail("metadata count " + std::to_string(n_kv) + " is impossible: the remaining " +
           std::to_string(c.remaining()) + " bytes hold at most " +
           std::to_string(c.remaining() / kMinKvBytes) + " entries");
  }
  if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
    c.fail("tensor count " + std::to_string(n_tensors) + " is impossible: the remaining " +
           std::to_string(c.remaining()) + " bytes hold at most " +
           std::to_string(c.remaining() / kMinTensorInfoBytes) + " tensor infos");
  }

  // --- metadata ---
  std::unordered_set<std::string> keys;
  m_kv.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("key of metadata entry " + std::to_string(i));
    if (!keys.insert(key).second) c.fail("duplicate metadata key " + quote(key));
    GgufValue v;
    const GgufValueType t = read_value_type(c, "value type of key " + quote(key));
    read_value(c, t, v, key, 0);
    m_kv.emplace_back(std::move(key), std::move(v));
  }
  m_alignment = kDefaultAlignment;
  if (const GgufValue* a = find("general.alignment")) {
    if (!is_integer_type(a->type)) {
      c.fail(type_mismatch("general.alignment", *a, "an integer (uint32)"));
    }
    const bool neg = a->type != GgufValueType::kUint64 && std::get<int64_t>(a->scalar) < 0;
    const uint64_t al = a->type == GgufValueType::kUint64
                            ? std::get<uint64_t>(a->scalar)
                            : static_cast<uint64_t>(std::get<int64_t>(a->scalar));
    if (neg || !std::has_single_bit(al) || al > (uint64_t{1} << 30)) {
      c.fail("general.alignment = " +
             (neg ? std::to_string(std::get<int64_t>(a->scalar)) : std::to_string(al)) +
             " is not a nonzero power of two (at most 2^30)");
    }
    m_alignment = static_cast<size_t>(al);
  }

  // --- tensor infos ---
  std::unordered_set<std::string> names;
  m_tensors.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.read_string("name of tensor " + std::to_string(i));
    const std::string tn = "tensor " + quote(t.name);
    if (!names.insert(t.name).second) c.fail("duplicate " + tn);
    const uint32_t n_dims = c.read<uint32_t>("n_dims of " + tn);
    if (n_dims == 0 || n_dims > kMaxDims) {
      c.fail(tn + " has n_dims " + std::to_string(n_dims) + " (must be 1.." +
             std::to_string(kMaxDims) + ")");
    }
    uint64_t n_el = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = c.read<uint64_t>("dims of " + tn);
      const std::string dn = tn + " dim[" + std::to_string(d) + "]";
      if (dim == 0) c.fail(dn + " is 0");
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        c.fail(dn + " = " + std::to_string(static_cast<int64_t>(dim)) + " is negative");
      }
      if (!checked_mul(n_el, dim, &n_el) ||
          n_el > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        c.fail(tn + " element count overflows at " + dn + " = " + std::to_string(dim));
      }
      t.dims.push_back(static_cast<int64_t>(dim));
    }
    t.n_elements = static_cast<int64_t>(n_el);
    const uint32_t type_id = c.read<uint32_t>("type of " + tn);
    const GgmlTypeTraits* tr = ggml_type_traits(type_id);
    if (!tr) c.fail(tn + " has unknown ggml type id " + std::to_string(type_id));
    t.type = static_cast<GgmlType>(type_id);
    if (t.dims[0] % tr->block_elems != 0) {
      c.fail(tn + " (" + tr->name + ") row length " + std::to_string(t.dims[0]) +
             " is not a multiple of the block size " + std::to_string(tr->block_elems));
    }
    if (!checked_mul(n_el / static_cast<uint64_t>(tr->block_elems),
                     static_cast<uint64_t>(tr->block_bytes), &t.n_bytes)) {
      c.fail(tn + " byte size overflows");
    }
    t.offset = c.read<uint64_t>("data offset of " + tn);
    m_tensors.push_back(std::move(t));
  }

  // --- data section ---
  // It starts at the next multiple of the alignment after the tensor infos. A file without
  // tensors may end right after its header.
  const uint64_t header_end = c.pos();
  const uint64_t data_start = (header_end + m_alignment - 1) / m_alignment * m_alignment;
  if (m_tensors.empty()) return;
  if (data_start > m_size) {
    c.fail("file truncated: data section would start at offset " + std::to_string(data_start) +
           " beyond the file size " + std::to_string(m_size));
  }
  const uint64_t data_size = m_size - data_start;
  for (GgufTensorInfo& t : m_tensors) {
    const std::string tn = "tensor " + quote(t.name);
    if (t.offset % m_alignment != 0) {
      c.fail(tn + " data offset " + std::to_string(t.offset) +
             " is not a multiple of the alignment " + std::to_string(m_alignment));
    }
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      std::ostringstream os;
      os << tn << " data [" << data_start + t.offset << ", " << data_start + t.offset << " + "
         << t.n_bytes << ") lies outside the file (size " << m_size << ")";
      c.fail(os.str());
    }
    t.data = m_data + data_start + t.offset;
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : m_kv) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {
template <typename F>
auto with_file(const std::string& file, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const GgufError& e) {
    throw GgufError(file + ": " + e.what());
  }
}
}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw GgufError(m_name + ": missing metadata key " + quote(key));
  return with_file(m_name, [&] { return v->as_string(key); });
}

int64_t GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw GgufError(m_name + ": missing metadata key " + quote(key));
  return with_file(m_name, [&] { return v->as_int(key); });
}

double GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw GgufError(m_name + ": missing metadata key " + quote(key));
  return with_file(m_name, [&] { return v->as_float(key); });
}

std::string GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  return with_file(m_name, [&] { return v->as_string(key); });
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  return with_file(m_name, [&] { return v->as_int(key); });
}

double GgufFile::get_float_or(std::string_view key, double fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  return with_file(m_name, [&] { return v->as_float(key); });
}

bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  return with_file(m_name, [&] { return v->as_bool(key); });
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensorInfo& t : m_tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) throw GgufError(m_name + ": missing tensor " + quote(name));
  return *t;
}

std::vector<float> GgufFile::dequantize(const GgufTensorInfo& t) const {
  std::vector<float> out(static_cast<size_t>(t.n_elements));
  dequantize_into(t, out.data());
  return out;
}

void GgufFile::dequantize_into(const GgufTensorInfo& t, float* dst) const {
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t.type));
  if (!tr || !tr->can_dequantize) {
    throw GgufError(m_name + ": tensor " + quote(t.name) + " has type " +
                    (tr ? tr->name : "unknown") + ", which has no CPU dequantizer");
  }
  // Rows are whole blocks (checked at open), so the tensor is one contiguous run of blocks.
  dequantize_row(t.type, t.data, dst, t.n_elements);
}

}  // namespace sinkscope
