// SPDX-License-Identifier: Apache-2.0
// GGUF writer, reference quantizers and the random-weight test model.
#include "engine/format/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <unordered_set>

namespace sinkscope {

namespace {

// Little-endian byte sink for the GGUF encoding.
struct Enc {
  std::vector<uint8_t> b;
  template <typename T>
  void put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
  }
  void put_str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void put_type(GgufValueType t) { put<uint32_t>(static_cast<uint32_t>(t)); }
};

template <typename T>
std::vector<uint8_t> scalar_kv(GgufValueType t, T v) {
  Enc e;
  e.put_type(t);
  e.put<T>(v);
  return std::move(e.b);
}

// Encodes the payload of v (without its leading type id).
void encode_payload(Enc& e, const GgufValue& v, const std::string& key) {
  auto bad = [&](const char* why) {
    throw std::invalid_argument("GgufWriter: value for key '" + key + "': " + why);
  };
  auto int_of = [&]() -> int64_t {
    if (const auto* p = std::get_if<int64_t>(&v.scalar)) return *p;
    if (const auto* p = std::get_if<uint64_t>(&v.scalar)) return static_cast<int64_t>(*p);
    throw std::invalid_argument("GgufWriter: value for key '" + key +
                                "': scalar does not hold an integer");
  };
  switch (v.type) {
    case GgufValueType::kUint8:
      e.put<uint8_t>(static_cast<uint8_t>(int_of()));
      return;
    case GgufValueType::kInt8:
      e.put<int8_t>(static_cast<int8_t>(int_of()));
      return;
    case GgufValueType::kUint16:
      e.put<uint16_t>(static_cast<uint16_t>(int_of()));
      return;
    case GgufValueType::kInt16:
      e.put<int16_t>(static_cast<int16_t>(int_of()));
      return;
    case GgufValueType::kUint32:
      e.put<uint32_t>(static_cast<uint32_t>(int_of()));
      return;
    case GgufValueType::kInt32:
      e.put<int32_t>(static_cast<int32_t>(int_of()));
      return;
    case GgufValueType::kUint64:
      e.put<uint64_t>(static_cast<uint64_t>(int_of()));
      return;
    case GgufValueType::kInt64:
      e.put<int64_t>(int_of());
      return;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64: {
      const auto* p = std::get_if<double>(&v.scalar);
      if (!p) bad("scalar does not hold a float");
      if (v.type == GgufValueType::kFloat32) {
        e.put<float>(static_cast<float>(*p));
      } else {
        e.put<double>(*p);
      }
      return;
    }
    case GgufValueType::kBool: {
      const auto* p = std::get_if<bool>(&v.scalar);
      if (!p) bad("scalar does not hold a bool");
      e.put<uint8_t>(*p ? 1 : 0);
      return;
    }
    case GgufValueType::kString: {
      const auto* p = std::get_if<std::string>(&v.scalar);
      if (!p) bad("scalar does not hold a string");
      e.put_str(*p);
      return;
    }
    case GgufValueType::kArray:
      break;
  }
  const GgufValueType et = v.array_type;
  e.put_type(et);
  e.put<uint64_t>(v.array_size());
  switch (et) {
    case GgufValueType::kUint8:
      for (int64_t x : v.ints) e.put<uint8_t>(static_cast<uint8_t>(x));
      break;
    case GgufValueType::kInt8:
      for (int64_t x : v.ints) e.put<int8_t>(static_cast<int8_t>(x));
      break;
    case GgufValueType::kBool:
      for (int64_t x : v.ints) e.put<uint8_t>(x ? 1 : 0);
      break;
    case GgufValueType::kUint16:
      for (int64_t x : v.ints) e.put<uint16_t>(static_cast<uint16_t>(x));
      break;
    case GgufValueType::kInt16:
      for (int64_t x : v.ints) e.put<int16_t>(static_cast<int16_t>(x));
      break;
    case GgufValueType::kUint32:
      for (int64_t x : v.ints) e.put<uint32_t>(static_cast<uint32_t>(x));
      break;
    case GgufValueType::kInt32:
      for (int64_t x : v.ints) e.put<int32_t>(static_cast<int32_t>(x));
      break;
    case GgufValueType::kInt64:
      for (int64_t x : v.ints) e.put<int64_t>(x);
      break;
    case GgufValueType::kUint64:
      for (uint64_t x : v.uints64) e.put<uint64_t>(x);
      break;
    case GgufValueType::kFloat32:
      for (double x : v.floats) e.put<float>(static_cast<float>(x));
      break;
    case GgufValueType::kFloat64:
      for (double x : v.floats) e.put<double>(x);
      break;
    case GgufValueType::kString:
      for (const std::string& s : v.strings) e.put_str(s);
      break;
    case GgufValueType::kArray:
      for (const GgufValue& sub : v.arrays) {
        // No per-element type tag: the outer array's element type says "array".
        if (sub.type != GgufValueType::kArray) bad("an element of an array of arrays is no array");
        encode_payload(e, sub, key);
      }
      break;
  }
}

}  // namespace

GgufWriter::GgufWriter(uint32_t version, size_t alignment)
    : m_version(version), m_alignment(alignment) {
  if (version != 2 && version != 3) {
    throw std::invalid_argument("GgufWriter: version " + std::to_string(version) +
                                " is not supported (2 or 3)");
  }
  if (!std::has_single_bit(alignment) || alignment > (size_t{1} << 30)) {
    throw std::invalid_argument("GgufWriter: alignment " + std::to_string(alignment) +
                                " is not a power of two");
  }
  if (alignment != 32) {
    m_kv.push_back(
        {"general.alignment", scalar_kv(GgufValueType::kUint32, static_cast<uint32_t>(alignment))});
  }
}

void GgufWriter::put_kv(const std::string& key, std::vector<uint8_t> encoded) {
  if (key == "general.alignment") {
    throw std::invalid_argument("GgufWriter: general.alignment is set by the constructor");
  }
  for (Kv& kv : m_kv) {
    if (kv.key == key) {
      kv.encoded = std::move(encoded);
      return;
    }
  }
  m_kv.push_back({key, std::move(encoded)});
}

void GgufWriter::set_u8(const std::string& k, uint8_t v) {
  put_kv(k, scalar_kv(GgufValueType::kUint8, v));
}
void GgufWriter::set_i8(const std::string& k, int8_t v) {
  put_kv(k, scalar_kv(GgufValueType::kInt8, v));
}
void GgufWriter::set_u16(const std::string& k, uint16_t v) {
  put_kv(k, scalar_kv(GgufValueType::kUint16, v));
}
void GgufWriter::set_i16(const std::string& k, int16_t v) {
  put_kv(k, scalar_kv(GgufValueType::kInt16, v));
}
void GgufWriter::set_u32(const std::string& k, uint32_t v) {
  put_kv(k, scalar_kv(GgufValueType::kUint32, v));
}
void GgufWriter::set_i32(const std::string& k, int32_t v) {
  put_kv(k, scalar_kv(GgufValueType::kInt32, v));
}
void GgufWriter::set_u64(const std::string& k, uint64_t v) {
  put_kv(k, scalar_kv(GgufValueType::kUint64, v));
}
void GgufWriter::set_i64(const std::string& k, int64_t v) {
  put_kv(k, scalar_kv(GgufValueType::kInt64, v));
}
void GgufWriter::set_f32(const std::string& k, float v) {
  put_kv(k, scalar_kv(GgufValueType::kFloat32, v));
}
void GgufWriter::set_f64(const std::string& k, double v) {
  put_kv(k, scalar_kv(GgufValueType::kFloat64, v));
}
void GgufWriter::set_bool(const std::string& k, bool v) {
  put_kv(k, scalar_kv(GgufValueType::kBool, static_cast<uint8_t>(v ? 1 : 0)));
}
void GgufWriter::set_string(const std::string& k, const std::string& v) {
  Enc e;
  e.put_type(GgufValueType::kString);
  e.put_str(v);
  put_kv(k, std::move(e.b));
}

void GgufWriter::set_string_array(const std::string& k, const std::vector<std::string>& v) {
  Enc e;
  e.put_type(GgufValueType::kArray);
  e.put_type(GgufValueType::kString);
  e.put<uint64_t>(v.size());
  for (const std::string& s : v) e.put_str(s);
  put_kv(k, std::move(e.b));
}

namespace {
template <typename T>
std::vector<uint8_t> array_kv(GgufValueType et, const std::vector<T>& v) {
  Enc e;
  e.put_type(GgufValueType::kArray);
  e.put_type(et);
  e.put<uint64_t>(v.size());
  for (T x : v) e.put<T>(x);
  return std::move(e.b);
}
}  // namespace

void GgufWriter::set_i32_array(const std::string& k, const std::vector<int32_t>& v) {
  put_kv(k, array_kv(GgufValueType::kInt32, v));
}
void GgufWriter::set_f32_array(const std::string& k, const std::vector<float>& v) {
  put_kv(k, array_kv(GgufValueType::kFloat32, v));
}
void GgufWriter::set_u8_array(const std::string& k, const std::vector<uint8_t>& v) {
  put_kv(k, array_kv(GgufValueType::kUint8, v));
}

void GgufWriter::set_value(const std::string& key, const GgufValue& v) {
  Enc e;
  e.put_type(v.type);
  encode_payload(e, v, key);
  put_kv(key, std::move(e.b));
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& dims,
                            GgmlType type, const std::vector<float>& values) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (dims.empty() || static_cast<int64_t>(values.size()) != n) {
    throw std::invalid_argument("GgufWriter: tensor '" + name + "' has " +
                                std::to_string(values.size()) +
                                " values, which does not match its dims");
  }
  add_raw_tensor(name, dims, type, quantize_row(type, values.data(), n));
}

void GgufWriter::check_tensor(const std::string& name, const std::vector<int64_t>& dims,
                              GgmlType type, const uint64_t* n_bytes) const {
  const std::string tn = "GgufWriter: tensor '" + name + "'";
  if (dims.empty() || dims.size() > 4) throw std::invalid_argument(tn + ": needs 1..4 dims");
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d <= 0) throw std::invalid_argument(tn + ": dims must be positive");
    n *= d;
  }
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(type));
  if (!tr) throw std::invalid_argument(tn + ": unknown type");
  if (dims[0] % tr->block_elems != 0) {
    throw std::invalid_argument(tn + ": row length " + std::to_string(dims[0]) +
                                " is not a multiple of the " + tr->name + " block size " +
                                std::to_string(tr->block_elems));
  }
  if (n_bytes && *n_bytes != ggml_row_bytes(type, n)) {
    throw std::invalid_argument(tn + ": " + std::to_string(*n_bytes) + " bytes, expected " +
                                std::to_string(ggml_row_bytes(type, n)));
  }
  for (const Tensor& t : m_tensors) {
    if (t.name == name) throw std::invalid_argument(tn + ": duplicate tensor name");
  }
}

void GgufWriter::add_raw_tensor(const std::string& name, const std::vector<int64_t>& dims,
                                GgmlType type, std::vector<uint8_t> bytes) {
  const uint64_t n_bytes = bytes.size();
  check_tensor(name, dims, type, &n_bytes);
  m_tensors.push_back({name, dims, type, std::move(bytes)});
}

void GgufWriter::declare_tensor(const std::string& name, const std::vector<int64_t>& dims,
                                GgmlType type) {
  check_tensor(name, dims, type, nullptr);
  m_tensors.push_back({name, dims, type, {}, /*declared_only=*/true});
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
  Enc e;
  e.put<uint32_t>(0x46554747);  // "GGUF"
  e.put<uint32_t>(m_version);
  e.put<uint64_t>(m_tensors.size());
  e.put<uint64_t>(m_kv.size());
  for (const Kv& kv : m_kv) {
    e.put_str(kv.key);
    e.b.insert(e.b.end(), kv.encoded.begin(), kv.encoded.end());
  }
  auto align_up = [&](uint64_t x) { return (x + m_alignment - 1) / m_alignment * m_alignment; };
  uint64_t offset = 0;
  for (const Tensor& t : m_tensors) {
    e.put_str(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    int64_t n = 1;
    for (int64_t d : t.dims) {
      e.put<uint64_t>(static_cast<uint64_t>(d));
      n *= d;
    }
    e.put<uint32_t>(static_cast<uint32_t>(t.type));
    e.put<uint64_t>(offset);
    offset = align_up(offset + ggml_row_bytes(t.type, n));
  }
  e.b.resize(align_up(e.b.size()), 0);
  return std::move(e.b);
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  for (const Tensor& t : m_tensors) {
    if (t.declared_only) {
      throw std::logic_error("GgufWriter: tensor '" + t.name +
                             "' is declared only; its bytes are streamed by the caller");
    }
  }
  std::vector<uint8_t> b = header_bytes();
  // Like ggml, every tensor (the last included) is padded to the alignment with zeros.
  auto align_up = [&](uint64_t x) { return (x + m_alignment - 1) / m_alignment * m_alignment; };
  for (const Tensor& t : m_tensors) {
    b.insert(b.end(), t.bytes.begin(), t.bytes.end());
    b.resize(align_up(b.size()), 0);
  }
  return b;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  const std::vector<uint8_t> bytes = to_bytes();
  // Write a temp file in the target directory (so rename is atomic on the same file system),
  // fsync it, then rename over the target: readers never see a half-written model.
  std::filesystem::path dir = path.parent_path();
  if (dir.empty()) dir = ".";
  std::string tmp_name = ".";  // built stepwise: "." + string&& trips a GCC 12 false warning
  tmp_name += path.filename().string();
  tmp_name += ".tmp-XXXXXX";
  std::string tmp = (dir / tmp_name).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    throw std::runtime_error(path.string() + ": cannot create temp file in " + dir.string() + ": " +
                             std::strerror(errno));
  }
  auto fail = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(path.string() + ": " + what + ": " + std::strerror(err));
  };
  ::fchmod(fd, 0644);  // mkstemp creates 0600; a model file is normally world-readable
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed", errno);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail("fsync failed", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path.string() + ": close failed: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(path.string() + ": rename failed: " + std::strerror(err));
  }
  // Persist the directory entry too (best effort: some file systems refuse fsync on dirs).
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// ---------------------------------------------------------------------------------------------
// Random-weight Llama / Qwen2 model.

namespace {

// splitmix64: tiny, good enough for test weights, and identical on every platform (unlike
// std::normal_distribution, whose algorithm is up to the standard library).
class Rng {
 public:
  explicit Rng(uint64_t seed) : m_state(seed) {}
  uint64_t next() {
    uint64_t z = (m_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1].
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1p-53; }
  // Standard normal via Box-Muller (one of the pair is enough here).
  double normal() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t m_state;
};

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

}  // namespace

std::vector<std::string> gpt2_byte_tokens() {
  std::vector<int> bs;
  auto printable = [](int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  };
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    if (printable(b)) tokens.push_back(utf8(static_cast<uint32_t>(b)));
  }
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    if (!printable(b)) tokens.push_back(utf8(next++));
  }
  return tokens;
}

namespace {

// Common English merges in byte-token form ("Ġ" is the space byte). Order is merge priority;
// each pair only uses tokens that exist by then.
constexpr const char* kEnglishMerges[kRandomLlamaEnglishMerges] = {
    "Ġ t",  "h e", "i n", "Ġ a", "e r",  "o n", "r e",   "Ġt he", "a t",     "e n",
    "Ġ s",  "Ġ o", "o r", "i s", "e s",  "i t", "a n",   "n d",   "Ġ w",     "Ġ c",
    "in g", "Ġ b", "o u", "Ġ f", "Ġ m",  "Ġ h", "Ġa nd", "Ġo f",  "Ġt o",    "l l",
    "e d",  "Ġ i", "Ġ p", "Ġ d", "Ġi s", "Ġ H", "Ġw or", "l d",   "Ġwor ld", "e l",
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<std::string> merges;
  std::vector<int32_t> types;
  int32_t endoftext = 0, im_start = 0, im_end = 0;
};

Vocab make_vocab(int n_vocab) {
  Vocab v;
  v.tokens = gpt2_byte_tokens();
  std::unordered_set<std::string> have(v.tokens.begin(), v.tokens.end());
  const int n_merges = n_vocab - 259;
  auto add_merge = [&](const std::string& a, const std::string& b) {
    if (!have.count(a) || !have.count(b)) {
      throw std::logic_error("make_random_llama: merge '" + a + " " + b + "' uses unknown tokens");
    }
    if (have.count(a + b)) {
      throw std::logic_error("make_random_llama: merge '" + a + " " + b + "' is not new");
    }
    v.merges.push_back(a + " " + b);
    v.tokens.push_back(a + b);
    have.insert(a + b);
  };
  for (int i = 0; i < n_merges && i < kRandomLlamaEnglishMerges; ++i) {
    const std::string m = kEnglishMerges[i];
    const size_t sp = m.find(' ');
    add_merge(m.substr(0, sp), m.substr(sp + 1));
  }
  // Then extend tokens by one letter, breadth first: "ab", "ac", ..., "aba", ... Deterministic
  // and unbounded, so any vocabulary size can be filled with valid merges.
  std::vector<std::string> frontier;
  for (char c = 'a'; c <= 'z'; ++c) frontier.emplace_back(1, c);
  while (static_cast<int>(v.merges.size()) < n_merges) {
    std::vector<std::string> next;
    for (const std::string& t : frontier) {
      for (char c = 'a'; c <= 'z' && static_cast<int>(v.merges.size()) < n_merges; ++c) {
        const std::string l(1, c);
        if (have.count(t + l)) continue;
        add_merge(t, l);
        next.push_back(t + l);
      }
    }
    frontier = std::move(next);
  }
  v.types.assign(v.tokens.size(), 1);  // 1 = normal
  v.endoftext = static_cast<int32_t>(v.tokens.size());
  v.im_start = v.endoftext + 1;
  v.im_end = v.endoftext + 2;
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.emplace_back(s);
    v.types.push_back(3);  // 3 = control
  }
  return v;
}

}  // namespace

void set_llama_hparams(GgufWriter& w, const std::string& a, int n_layer, int n_ctx, int n_embd,
                       int n_ff, int n_head, int n_head_kv, float rope_theta, float rms_eps) {
  w.set_u32(a + ".block_count", static_cast<uint32_t>(n_layer));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(n_embd));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(n_head_kv));
  w.set_f32(a + ".rope.freq_base", rope_theta);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", rms_eps);
}

GgufWriter make_random_llama(const TestModelShape& s, uint64_t seed) {
  auto bad = [](const std::string& why) {
    throw std::invalid_argument("make_random_llama: " + why);
  };
  const bool qwen2 = s.architecture == "qwen2", qwen3 = s.architecture == "qwen3";
  if (!qwen2 && !qwen3 && s.architecture != "llama")
    bad("architecture must be llama, qwen2 or qwen3");
  if (s.n_layer < 1 || s.n_embd < 1 || s.n_head < 1 || s.n_head_kv < 1 || s.n_ff < 1 ||
      s.n_ctx < 1) {
    bad("all sizes must be positive");
  }
  if (s.head_dim < 0 || s.head_dim % 2 != 0) bad("head_dim must be even (0: n_embd / n_head)");
  if (s.head_dim == 0 && s.n_embd % s.n_head != 0) bad("n_embd must be a multiple of n_head");
  if (s.n_head % s.n_head_kv != 0) bad("n_head must be a multiple of n_head_kv");
  if (s.n_vocab < 259) bad("n_vocab must be >= 259 (256 byte tokens + 3 specials)");
  const GgmlTypeTraits* wt = ggml_type_traits(static_cast<uint32_t>(s.weight_type));
  if (!wt || !wt->can_dequantize) bad("weight_type has no quantizer");
  if (s.n_embd % wt->block_elems != 0 || s.n_ff % wt->block_elems != 0) {
    bad(std::string("n_embd and n_ff must be multiples of the ") + wt->name + " block size " +
        std::to_string(wt->block_elems));
  }
  const int head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int n_embd_q = head_dim * s.n_head, n_embd_kv = head_dim * s.n_head_kv;
  if (n_embd_q % wt->block_elems != 0)
    bad(std::string("the Q width must be a multiple of the ") + wt->name + " block size");
  const std::string& a = s.architecture;

  GgufWriter w(3, 32);
  w.set_string("general.architecture", a);
  w.set_string("general.type", "model");
  w.set_string("general.name", "sinkscope-random-" + a);
  w.set_u32("general.quantization_version", 2);
  set_llama_hparams(w, a, s.n_layer, s.n_ctx, s.n_embd, s.n_ff, s.n_head, s.n_head_kv,
                    s.rope_theta, s.rms_eps);
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
  if (s.head_dim > 0) {
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(head_dim));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(head_dim));
  }
  w.set_u32(a + ".vocab_size", static_cast<uint32_t>(s.n_vocab));

  const Vocab v = make_vocab(s.n_vocab);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "smollm");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.im_start));
  w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.im_end));
  w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.endoftext));
  w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.im_end));
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_string("tokenizer.chat_template",
               "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
               "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");

  Rng rng(seed);
  // ggml dims are [in, out]: dims[0] is the row (input) length.
  auto weight = [&](const std::string& name, int in, int out) {
    std::vector<float> x(static_cast<size_t>(in) * static_cast<size_t>(out));
    for (float& e : x) e = static_cast<float>(0.02 * rng.normal());
    w.add_tensor(name, {in, out}, s.weight_type, x);
  };
  // Norm gains near 1 (as trained models have), biases small.
  auto vec = [&](const std::string& name, int n, double mean, double sd) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& e : x) e = static_cast<float>(mean + sd * rng.normal());
    w.add_tensor(name, {n}, GgmlType::kF32, x);
  };
  weight("token_embd.weight", s.n_embd, s.n_vocab);
  vec("output_norm.weight", s.n_embd, 1.0, 0.02);
  if (!s.tied_embeddings) weight("output.weight", s.n_embd, s.n_vocab);
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vec(p + "attn_norm.weight", s.n_embd, 1.0, 0.02);
    weight(p + "attn_q.weight", s.n_embd, n_embd_q);
    weight(p + "attn_k.weight", s.n_embd, n_embd_kv);
    weight(p + "attn_v.weight", s.n_embd, n_embd_kv);
    if (qwen2) {
      vec(p + "attn_q.bias", n_embd_q, 0.0, 0.02);
      vec(p + "attn_k.bias", n_embd_kv, 0.0, 0.02);
      vec(p + "attn_v.bias", n_embd_kv, 0.0, 0.02);
    }
    if (qwen3) {  // gains spread enough that a missing norm changes the logits visibly
      vec(p + "attn_q_norm.weight", head_dim, 1.0, 0.2);
      vec(p + "attn_k_norm.weight", head_dim, 1.0, 0.2);
    }
    weight(p + "attn_output.weight", n_embd_q, s.n_embd);
    vec(p + "ffn_norm.weight", s.n_embd, 1.0, 0.02);
    weight(p + "ffn_gate.weight", s.n_embd, s.n_ff);
    weight(p + "ffn_up.weight", s.n_embd, s.n_ff);
    weight(p + "ffn_down.weight", s.n_ff, s.n_embd);
  }
  return w;
}

}  // namespace sinkscope
