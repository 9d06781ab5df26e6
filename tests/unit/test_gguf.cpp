// SPDX-License-Identifier: Apache-2.0
// GGUF reader and writer: round trips over every value/tensor type, version and alignment,
// malformed files (each must fail with a GgufError that names the problem, never crash), the
// real SmolLM2 model, and the random-weight test model.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "test_support.h"

namespace sinkscope {
namespace {

namespace fs = std::filesystem;

// ---- helpers ---------------------------------------------------------------------------------

// Hand-built GGUF bytes, for files our writer refuses to produce.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return put<uint32_t>(0x46554747).put<uint32_t>(version).put(n_tensors).put(n_kv);
  }
  Bytes& kv_u32(const std::string& key, uint32_t v) {
    return str(key).put<uint32_t>(4).put<uint32_t>(v);
  }
  Bytes& kv_str(const std::string& key, const std::string& v) {
    return str(key).put<uint32_t>(8).str(v);
  }
  Bytes& tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) put(d);
    return put(type).put(offset);
  }
  Bytes& pad(size_t align) {
    b.resize((b.size() + align - 1) / align * align, 0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

// Parses a copy of exactly `len` bytes on the heap, so an out-of-bounds read would be caught by
// ASan (SINKSCOPE_SANITIZE=ON) instead of silently reading the rest of a larger buffer.
std::unique_ptr<GgufFile> parse(const std::vector<uint8_t>& bytes, size_t len = SIZE_MAX) {
  len = std::min(len, bytes.size());
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.begin() + len);
  static std::vector<std::shared_ptr<std::vector<uint8_t>>> keep;  // outlive the GgufFile
  keep.push_back(copy);
  return GgufFile::from_memory(copy->data(), copy->size(), "bad.gguf");
}

// Expects a GgufError naming the file and containing every fragment.
void expect_error(const std::vector<uint8_t>& bytes, std::vector<std::string> fragments) {
  try {
    parse(bytes);
    ADD_FAILURE() << "no error; expected one mentioning '" << fragments.at(0) << "'";
  } catch (const GgufError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
    for (const std::string& f : fragments) {
      EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
    }
  }
}

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "sinkscope-gguf-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
    m_path = t;
  }
  ~TempDir() { fs::remove_all(m_path); }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * i) + 0.01f * (i % 7);
  return v;
}

// ---- round trip: our writer -> our reader ----------------------------------------------------

const GgmlType kAllTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0,
                              GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                              GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

GgufValue array_of(GgufValueType et) {
  GgufValue v;
  v.type = GgufValueType::kArray;
  v.array_type = et;
  return v;
}

GgufWriter full_writer(uint32_t version, size_t alignment) {
  GgufWriter w(version, alignment);
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", (uint64_t{1} << 63) + 5);
  w.set_i64("t.i64", -(int64_t{1} << 62));
  w.set_f32("t.f32", 1.5f);
  w.set_f64("t.f64", -2.25e100);
  w.set_bool("t.bool", true);
  w.set_string("t.str", std::string("h\xc3\xa9llo\0x", 8));  // UTF-8 and an embedded NUL
  w.set_string("t.empty", "");
  w.set_string_array("t.strs", {"a", "", "\xc4\xa0the"});
  w.set_i32_array("t.i32s", {1, -2, 2147483647});
  w.set_f32_array("t.f32s", {0.5f, -1e30f});
  w.set_u8_array("t.u8s", {0, 255});
  GgufValue u16s = array_of(GgufValueType::kUint16);
  u16s.ints = {0, 65535};
  w.set_value("t.u16s", u16s);
  GgufValue i16s = array_of(GgufValueType::kInt16);
  i16s.ints = {-32768, 7};
  w.set_value("t.i16s", i16s);
  GgufValue i8s = array_of(GgufValueType::kInt8);
  i8s.ints = {-128, 127};
  w.set_value("t.i8s", i8s);
  GgufValue u32s = array_of(GgufValueType::kUint32);
  u32s.ints = {4294967295};
  w.set_value("t.u32s", u32s);
  GgufValue i64s = array_of(GgufValueType::kInt64);
  i64s.ints = {INT64_MIN, INT64_MAX};
  w.set_value("t.i64s", i64s);
  GgufValue u64s = array_of(GgufValueType::kUint64);
  u64s.uints64 = {UINT64_MAX, 1};
  w.set_value("t.u64s", u64s);
  GgufValue bools = array_of(GgufValueType::kBool);
  bools.ints = {1, 0, 1};
  w.set_value("t.bools", bools);
  GgufValue f64s = array_of(GgufValueType::kFloat64);
  f64s.floats = {1e300, -0.0};
  w.set_value("t.f64s", f64s);
  w.set_value("t.empty_arr", array_of(GgufValueType::kFloat32));
  GgufValue nested = array_of(GgufValueType::kArray);  // array of arrays of strings
  for (const auto& strs : {std::vector<std::string>{"x", "yy"}, std::vector<std::string>{},
                           std::vector<std::string>{"z"}}) {
    GgufValue inner = array_of(GgufValueType::kString);
    inner.strings = strs;
    nested.arrays.push_back(inner);
  }
  w.set_value("t.nested", nested);
  int i = 0;
  for (GgmlType t : kAllTypes) {
    // Mixed ranks; dims[0] = 256 fits every block size.
    const std::vector<int64_t> dims = i % 3 == 0   ? std::vector<int64_t>{256}
                                      : i % 3 == 1 ? std::vector<int64_t>{256, 3}
                                                   : std::vector<int64_t>{256, 2, 1, 2};
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    w.add_tensor(std::string("w.") + ggml_type_name(t), dims, t, ramp(n, 1.0f + i));
    ++i;
  }
  return w;
}

void check_full(const GgufFile& f, uint32_t version, size_t alignment) {
  EXPECT_EQ(f.version(), version);
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.get_int("t.u8"), 200);
  EXPECT_EQ(f.get_int("t.i8"), -100);
  EXPECT_EQ(f.get_int("t.u16"), 60000);
  EXPECT_EQ(f.get_int("t.i16"), -30000);
  EXPECT_EQ(f.get_int("t.u32"), 4000000000);
  EXPECT_EQ(f.get_int("t.i32"), -2000000000);
  EXPECT_EQ(std::get<uint64_t>(f.find("t.u64")->scalar), (uint64_t{1} << 63) + 5);
  EXPECT_THROW(f.get_int("t.u64"), GgufError);  // does not fit int64
  EXPECT_EQ(f.get_int("t.i64"), -(int64_t{1} << 62));
  EXPECT_EQ(f.get_float("t.f32"), 1.5);
  EXPECT_EQ(f.find("t.f32")->type, GgufValueType::kFloat32);
  EXPECT_EQ(f.get_float("t.f64"), -2.25e100);
  EXPECT_TRUE(f.get_bool_or("t.bool", false));
  EXPECT_EQ(f.get_string("t.str"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(f.get_string("t.empty"), "");
  EXPECT_EQ(f.find("t.strs")->strings, (std::vector<std::string>{"a", "", "\xc4\xa0the"}));
  EXPECT_EQ(f.find("t.i32s")->ints, (std::vector<int64_t>{1, -2, 2147483647}));
  EXPECT_EQ(f.find("t.f32s")->floats, (std::vector<double>{0.5, double(-1e30f)}));
  EXPECT_EQ(f.find("t.u8s")->ints, (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(f.find("t.u16s")->ints, (std::vector<int64_t>{0, 65535}));
  EXPECT_EQ(f.find("t.i16s")->ints, (std::vector<int64_t>{-32768, 7}));
  EXPECT_EQ(f.find("t.i8s")->ints, (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(f.find("t.u32s")->ints, (std::vector<int64_t>{4294967295}));
  EXPECT_EQ(f.find("t.i64s")->ints, (std::vector<int64_t>{INT64_MIN, INT64_MAX}));
  EXPECT_EQ(f.find("t.u64s")->uints64, (std::vector<uint64_t>{UINT64_MAX, 1}));
  EXPECT_EQ(f.find("t.bools")->ints, (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(f.find("t.bools")->array_type, GgufValueType::kBool);
  EXPECT_EQ(f.find("t.f64s")->floats[0], 1e300);
  EXPECT_TRUE(std::signbit(f.find("t.f64s")->floats[1]));
  EXPECT_EQ(f.find("t.empty_arr")->array_size(), 0u);
  EXPECT_EQ(f.find("t.empty_arr")->array_type, GgufValueType::kFloat32);
  const GgufValue* nested = f.find("t.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->array_type, GgufValueType::kArray);
  ASSERT_EQ(nested->arrays.size(), 3u);
  EXPECT_EQ(nested->arrays[0].strings, (std::vector<std::string>{"x", "yy"}));
  EXPECT_EQ(nested->arrays[1].array_type, GgufValueType::kString);
  EXPECT_TRUE(nested->arrays[1].strings.empty());
  EXPECT_EQ(nested->arrays[2].strings, (std::vector<std::string>{"z"}));
  // general.alignment is written exactly when it differs from the default.
  EXPECT_EQ(f.has("general.alignment"), alignment != 32);

  ASSERT_EQ(f.tensors().size(), std::size(kAllTypes));
  int i = 0;
  for (GgmlType t : kAllTypes) {
    const GgufTensorInfo& ti = f.tensor(std::string("w.") + ggml_type_name(t));
    EXPECT_EQ(ti.type, t);
    EXPECT_EQ(ti.offset % alignment, 0u);
    EXPECT_EQ(ti.n_bytes, ggml_row_bytes(t, ti.n_elements));
    const std::vector<float> src = ramp(ti.n_elements, 1.0f + i);
    const std::vector<uint8_t> q = quantize_row(t, src.data(), ti.n_elements);
    ASSERT_EQ(std::memcmp(ti.data, q.data(), q.size()), 0) << ti.name;
    std::vector<float> want(src.size());
    dequantize_row(t, q.data(), want.data(), ti.n_elements);
    EXPECT_EQ(f.dequantize(ti), want) << ti.name;
    ++i;
  }
}

class GgufRoundTrip : public ::testing::TestWithParam<std::tuple<uint32_t, size_t>> {};

TEST_P(GgufRoundTrip, EveryValueAndTensorType) {
  const auto [version, alignment] = GetParam();
  const GgufWriter w = full_writer(version, alignment);
  const std::vector<uint8_t> bytes = w.to_bytes();
  check_full(*parse(bytes), version, alignment);

  TempDir dir;
  const fs::path p = dir.path() / "rt.gguf";
  w.write(p);
  auto f = GgufFile::open(p);  // the mmap path
  EXPECT_EQ(f->file_size(), bytes.size());
  EXPECT_EQ(f->path(), p.string());
  check_full(*f, version, alignment);
}

INSTANTIATE_TEST_SUITE_P(VersionsAndAlignments, GgufRoundTrip,
                         ::testing::Combine(::testing::Values(2u, 3u),
                                            ::testing::Values(size_t{1}, size_t{8}, size_t{32},
                                                              size_t{64})),
                         [](const auto& info) {
                           return "v" + std::to_string(std::get<0>(info.param)) + "_align" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(GgufWriterTest, RejectsBadArguments) {
  EXPECT_THROW(GgufWriter(1, 32), std::invalid_argument);
  EXPECT_THROW(GgufWriter(4, 32), std::invalid_argument);
  EXPECT_THROW(GgufWriter(3, 0), std::invalid_argument);
  EXPECT_THROW(GgufWriter(3, 48), std::invalid_argument);
  GgufWriter w(3, 32);
  EXPECT_THROW(w.set_u32("general.alignment", 64), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("q", {33}, GgmlType::kQ8_0, ramp(33, 1)), std::invalid_argument);
  EXPECT_THROW(w.add_tensor("q", {32}, GgmlType::kQ8_0, ramp(31, 1)), std::invalid_argument);
  EXPECT_THROW(w.add_raw_tensor("r", {32}, GgmlType::kQ8_0, std::vector<uint8_t>(33)),
               std::invalid_argument);
  w.add_tensor("a", {4}, GgmlType::kF32, ramp(4, 1));
  EXPECT_THROW(w.add_tensor("a", {4}, GgmlType::kF32, ramp(4, 1)), std::invalid_argument);
  w.set_u32("k", 1);
  w.set_u32("k", 2);  // replaces in place
  auto f = parse(w.to_bytes());
  EXPECT_EQ(f->metadata().size(), 1u);
  EXPECT_EQ(f->get_int("k"), 2);
}

TEST(GgufWriterTest, AtomicWrite) {
  TempDir dir;
  const fs::path p = dir.path() / "m.gguf";
  GgufWriter a(3, 32);
  a.set_string("v", "first");
  a.write(p);
  GgufWriter b(3, 32);
  b.set_string("v", "second");
  b.write(p);  // replaces
  EXPECT_EQ(GgufFile::open(p)->get_string("v"), "second");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "m.gguf");  // no temp file left behind
  }
  EXPECT_EQ(entries, 1);
  // A directory that does not exist: the write fails with an exception naming the path.
  try {
    a.write(dir.path() / "missing" / "x.gguf");
    ADD_FAILURE() << "write into a missing directory succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("x.gguf"), std::string::npos) << e.what();
  }
  // A target that is a directory: rename fails, and the temp file is removed.
  fs::create_directory(dir.path() / "d.gguf");
  EXPECT_THROW(a.write(dir.path() / "d.gguf"), std::runtime_error);
  entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 2);  // m.gguf and the directory d.gguf
}

// ---- malformed files -------------------------------------------------------------------------

TEST(GgufMalformed, ZeroLength) {
  EXPECT_THROW(GgufFile::from_memory(nullptr, 0, "bad.gguf"), GgufError);
  expect_error({}, {"empty"});
  TempDir dir;
  const fs::path p = dir.path() / "empty.gguf";
  { std::ofstream(p.string()); }
  try {
    GgufFile::open(p);
    ADD_FAILURE();
  } catch (const GgufError& e) {
    EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
  }
  EXPECT_THROW(GgufFile::open(dir.path() / "does-not-exist.gguf"), GgufError);
  EXPECT_THROW(GgufFile::open(dir.path()), GgufError);  // a directory
}

TEST(GgufMalformed, EveryTruncationThrows) {
  GgufWriter w(3, 8);
  w.set_string("general.name", "tiny");
  w.set_u32("n", 7);
  w.set_string_array("toks", {"a", "bc"});
  GgufValue nested = array_of(GgufValueType::kArray);
  GgufValue inner = array_of(GgufValueType::kInt16);
  inner.ints = {1, 2};
  nested.arrays = {inner, inner};
  w.set_value("nested", nested);
  w.add_tensor("q", {32, 2}, GgmlType::kQ8_0, ramp(64, 1));
  w.add_tensor("f", {3}, GgmlType::kF32, ramp(3, 1));  // 12 bytes: the file ends in padding
  const std::vector<uint8_t> bytes = w.to_bytes();
  size_t required = 0;
  for (size_t len = 0; len <= bytes.size(); ++len) {
    try {
      parse(bytes, len);
      if (required == 0) required = len;
    } catch (const GgufError& e) {
      ASSERT_EQ(required, 0u) << "a longer prefix parsed, then " << len << " failed";
      ASSERT_NE(std::string(e.what()).find("bad.gguf"), std::string::npos);
    }
  }
  // Every prefix shorter than the end of the last tensor's data must fail; the trailing padding
  // is optional. "f" holds 12 bytes and the writer pads it to the alignment 8, so its data ends
  // 4 bytes before the end of the file.
  ASSERT_GT(required, 0u);
  EXPECT_EQ(required, bytes.size() - 4);
}

TEST(GgufMalformed, RandomCorruptionNeverCrashes) {
  // Byte flips anywhere in a small valid file: each parse either fails with a GgufError or
  // yields tensors whose data lies inside the buffer (dequantizing them must be safe).
  GgufWriter w(3, 16);
  w.set_string("general.name", "tiny");
  w.set_string_array("toks", {"a", "bc", "def"});
  w.set_f32_array("f", {1, 2, 3});
  w.add_tensor("q", {32, 2}, GgmlType::kQ4_1, ramp(64, 1));
  w.add_tensor("k", {256}, GgmlType::kQ6_K, ramp(256, 1));
  const std::vector<uint8_t> good = w.to_bytes();
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = good;
    const int flips = 1 + next() % 4;
    for (int k = 0; k < flips; ++k) {
      const size_t at = next() % b.size();
      // Mostly small edits (what real corruption and length fields are sensitive to).
      b[at] = static_cast<uint8_t>(next() % 3 == 0 ? next() : b[at] ^ (1u << (next() % 8)));
    }
    try {
      auto f = parse(b);
      ++parsed;
      for (const GgufTensorInfo& t : f->tensors()) {
        if (!ggml_type_traits(static_cast<uint32_t>(t.type))->can_dequantize) continue;
        if (t.n_elements > (int64_t{1} << 20)) continue;  // in bounds, but not worth the memory
        std::vector<float> out = f->dequantize(t);
        ASSERT_EQ(out.size(), static_cast<size_t>(t.n_elements));
      }
    } catch (const GgufError&) {
    }
  }
  RecordProperty("parsed", parsed);
}

TEST(GgufMalformed, WrongMagic) {
  std::vector<uint8_t> b = GgufWriter().to_bytes();
  b[0] = 'X';
  expect_error(b, {"magic"});
  expect_error({'G', 'G', 'U'}, {"truncated"});
}

TEST(GgufMalformed, UnsupportedVersions) {
  expect_error(Bytes().header(0, 0, 1).b, {"version 1", "not supported"});
  expect_error(Bytes().header(0, 0, 99).b, {"version 99"});
  expect_error(Bytes().header(0, 0, 0x03000000).b, {"big-endian"});
  // v2 and v3 with no content are valid.
  EXPECT_EQ(parse(Bytes().header(0, 0, 2).b)->version(), 2u);
  EXPECT_EQ(parse(Bytes().header(0, 0, 3).b)->version(), 3u);
}

TEST(GgufMalformed, AbsurdCounts) {
  expect_error(Bytes().header(0, uint64_t{1} << 60).b, {"metadata count"});
  expect_error(Bytes().header(UINT64_MAX, 0).b, {"tensor count"});
  expect_error(Bytes().header(0, 2).kv_u32("a", 1).b, {"metadata count 2"});
  expect_error(Bytes().header(0, 2).kv_u32("a", 1).zeros(9).b, {"truncated"});
  // An array claiming far more elements than the file holds.
  expect_error(Bytes()
                   .header(0, 1)
                   .str("arr")
                   .put<uint32_t>(9)
                   .put<uint32_t>(8)
                   .put<uint64_t>(uint64_t{1} << 40)
                   .b,
               {"file truncated or corrupt", "arr", "1099511627776"});
  expect_error(
      Bytes().header(0, 1).str("arr").put<uint32_t>(9).put<uint32_t>(6).put<uint64_t>(UINT64_MAX).b,
      {"arr"});
}

TEST(GgufMalformed, AbsurdStringLengths) {
  expect_error(Bytes().header(0, 1).put<uint64_t>(uint64_t{1} << 62).zeros(16).b,
               {"key of metadata entry 0", "length 4611686018427387904"});
  expect_error(Bytes().header(0, 1).str("key").put<uint32_t>(8).put<uint64_t>(UINT64_MAX).b,
               {"key", "length"});
  // A string element inside an array.
  expect_error(Bytes()
                   .header(0, 1)
                   .str("toks")
                   .put<uint32_t>(9)
                   .put<uint32_t>(8)
                   .put<uint64_t>(1)
                   .put<uint64_t>(1000)
                   .b,
               {"file truncated or corrupt", "toks", "1000"});
  // A tensor name.
  expect_error(Bytes().header(1, 0).put<uint64_t>(5000).zeros(40).b, {"name of tensor 0"});
}

TEST(GgufMalformed, BadValueTypesAndDuplicates) {
  expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0).b, {"'k'", "13"});
  expect_error(Bytes().header(0, 2).kv_u32("dup", 1).kv_u32("dup", 2).b,
               {"duplicate metadata key 'dup'"});
  // Arrays nested beyond the depth limit.
  Bytes deep;
  deep.header(0, 1).str("deep").put<uint32_t>(9);
  for (int i = 0; i < 20; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  deep.put<uint32_t>(0).put<uint64_t>(0).zeros(64);
  expect_error(deep.b, {"deep", "nested"});
}

TEST(GgufMalformed, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u, 0x80000000u}) {
    expect_error(Bytes().header(0, 1).kv_u32("general.alignment", a).b,
                 {"general.alignment", std::to_string(a)});
  }
  expect_error(Bytes().header(0, 1).kv_str("general.alignment", "32").b,
               {"general.alignment", "string"});
  EXPECT_EQ(parse(Bytes().header(0, 1).kv_u32("general.alignment", 1).b)->alignment(), 1u);
}

// One valid tensor file, then each test breaks one field of the tensor info.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                                size_t data_bytes = 64) {
  Bytes b;
  b.header(1, 0).tensor("blk.0.attn_q.weight", dims, type, offset).pad(32).zeros(data_bytes);
  return b.b;
}

TEST(GgufMalformed, TensorDims) {
  EXPECT_NO_THROW(parse(one_tensor({16}, 0, 0)));
  expect_error(one_tensor({1, 1, 1, 1, 1}, 0, 0), {"blk.0.attn_q.weight", "n_dims 5"});
  expect_error(one_tensor({}, 0, 0), {"blk.0.attn_q.weight", "n_dims 0"});
  expect_error(one_tensor({16, 0}, 0, 0), {"blk.0.attn_q.weight", "dim[1] is 0"});
  expect_error(one_tensor({uint64_t(-5)}, 0, 0), {"blk.0.attn_q.weight", "negative"});
  expect_error(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0),
               {"blk.0.attn_q.weight", "overflows"});
  // Element count fits int64 but the byte size does not.
  expect_error(one_tensor({uint64_t{1} << 31, uint64_t{1} << 31}, 0, 0),
               {"blk.0.attn_q.weight", "overflows"});
  // Huge but representable: caught as data outside the file.
  expect_error(one_tensor({uint64_t{1} << 40}, 0, 0), {"blk.0.attn_q.weight", "outside the file"});
}

TEST(GgufMalformed, TensorTypeAndBlockSize) {
  expect_error(one_tensor({16}, 77, 0), {"blk.0.attn_q.weight", "unknown ggml type id 77"});
  expect_error(one_tensor({16}, 4, 0), {"unknown ggml type id 4"});  // Q4_2, long removed
  expect_error(one_tensor({33}, 8, 0, 64), {"blk.0.attn_q.weight", "Q8_0", "33", "32"});
  // A known type without a dequantizer opens, but dequantize says why it cannot.
  auto f = parse(one_tensor({256}, 10, 0, 84));
  EXPECT_EQ(f->tensors()[0].type, GgmlType::kQ2_K);
  try {
    f->dequantize(f->tensors()[0]);
    ADD_FAILURE();
  } catch (const GgufError& e) {
    EXPECT_NE(std::string(e.what()).find("Q2_K"), std::string::npos) << e.what();
  }
}

TEST(GgufMalformed, TensorOffsets) {
  // 16 F32 = 64 bytes of data present.
  expect_error(one_tensor({16}, 0, 32), {"blk.0.attn_q.weight", "outside the file"});
  expect_error(one_tensor({17}, 0, 0), {"blk.0.attn_q.weight", "outside the file"});
  expect_error(one_tensor({16}, 0, uint64_t{1} << 63), {"outside the file"});
  expect_error(one_tensor({16}, 0, UINT64_MAX - 31), {"blk.0.attn_q.weight"});
  expect_error(one_tensor({4}, 0, 8), {"blk.0.attn_q.weight", "offset 8", "alignment 32"});
  // Overlapping tensors are allowed (both at offset 0).
  Bytes b;
  b.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 0).pad(32).zeros(64);
  EXPECT_EQ(parse(b.b)->tensors().size(), 2u);
  // Data section start beyond the end of the file.
  Bytes c;
  c.header(1, 0).tensor("a", {1}, 0, 0);
  expect_error(c.b, {"data section"});
}

TEST(GgufMalformed, DuplicateTensorName) {
  Bytes b;
  b.header(2, 0).tensor("w", {16}, 0, 0).tensor("w", {16}, 0, 0).pad(32).zeros(64);
  expect_error(b.b, {"duplicate tensor 'w'"});
}

TEST(GgufReader, AccessorErrorsNameFileAndKey) {
  GgufWriter w;
  w.set_string("s", "text");
  w.set_u32("i", 5);
  w.set_f32("x", 0.25f);
  auto f = parse(w.to_bytes());
  auto expect_msg = [](auto&& fn, std::vector<std::string> frags) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const GgufError& e) {
      for (const auto& s : frags) {
        EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
      }
    }
  };
  expect_msg([&] { f->get_int("s"); }, {"bad.gguf", "'s'", "string", "integer"});
  expect_msg([&] { f->get_string("missing.key"); },
             {"bad.gguf", "missing metadata key 'missing.key'"});
  expect_msg([&] { f->get_string_or("i", "x"); }, {"bad.gguf", "'i'"});
  expect_msg([&] { f->tensor("nope"); }, {"bad.gguf", "'nope'"});
  EXPECT_EQ(f->get_int_or("absent", 42), 42);
  EXPECT_EQ(f->get_float("i"), 5.0);  // ints widen to float
  EXPECT_EQ(f->get_float_or("x", 1.0), 0.25);
  EXPECT_EQ(f->get_string_or("absent", "fb"), "fb");
  EXPECT_FALSE(f->get_bool_or("absent", false));
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
}

// ---- files written by gguf-py (tests/oracle/make_dequant_golden.py) ----------------------------

TEST(GgufPyCompat, ReadsEveryValueTypeWrittenByGgufPy) {
  auto f = GgufFile::open(test::golden_dir() / "dequant" / "metadata.gguf");
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->get_string("general.architecture"), "sinkscope-golden");
  EXPECT_EQ(f->get_int("m.u8"), 200);
  EXPECT_EQ(f->get_int("m.i8"), -100);
  EXPECT_EQ(f->get_int("m.u16"), 60000);
  EXPECT_EQ(f->get_int("m.i16"), -30000);
  EXPECT_EQ(f->get_int("m.u32"), 4000000000);
  EXPECT_EQ(f->get_int("m.i32"), -2000000000);
  EXPECT_EQ(std::get<uint64_t>(f->find("m.u64")->scalar), (uint64_t{1} << 63) + 5);
  EXPECT_EQ(f->get_int("m.i64"), -(int64_t{1} << 62));
  EXPECT_EQ(f->get_float("m.f32"), 1.5);
  EXPECT_EQ(f->get_float("m.f64"), -2.25e100);
  EXPECT_TRUE(f->get_bool_or("m.bool", false));
  EXPECT_EQ(f->get_string("m.str"), "h\xc3\xa9llo");
  EXPECT_EQ(f->find("m.arr_u8")->ints, (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(f->find("m.arr_i16")->ints, (std::vector<int64_t>{-32768, 7}));
  EXPECT_EQ(f->find("m.arr_u64")->uints64, (std::vector<uint64_t>{UINT64_MAX, 1}));
  EXPECT_EQ(f->find("m.arr_f64")->floats[0], 1e300);
  EXPECT_EQ(f->find("m.arr_bool")->ints, (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(f->find("m.arr_str")->strings, (std::vector<std::string>{"a", "", "\xc4\xa0the"}));
  const GgufValue* ns = f->find("m.nested_str");
  ASSERT_EQ(ns->arrays.size(), 2u);
  EXPECT_EQ(ns->arrays[0].strings, (std::vector<std::string>{"x", "yy"}));
  EXPECT_EQ(ns->arrays[1].strings, (std::vector<std::string>{"z"}));
  const GgufValue* ni = f->find("m.nested_int");
  ASSERT_EQ(ni->arrays.size(), 2u);
  EXPECT_EQ(ni->arrays[0].array_type, GgufValueType::kInt32);
  EXPECT_EQ(ni->arrays[0].ints, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ni->arrays[1].ints, (std::vector<int64_t>{3}));
  EXPECT_EQ(f->tensor("u").offset, 64u);  // gguf-py padded "t" (32 bytes) to the alignment
  EXPECT_EQ(f->dequantize(f->tensor("u")), (std::vector<float>{0, -1, -2}));

  // Our writer produces the same values, so a re-encoded copy reads back identically.
  GgufWriter w(3, 64);
  for (const auto& [k, v] : f->metadata()) {
    if (k != "general.alignment") w.set_value(k, v);
  }
  auto g = parse(w.to_bytes());
  ASSERT_EQ(g->metadata().size(), f->metadata().size());
  for (size_t i = 0; i < g->metadata().size(); ++i) {
    const GgufValue& a = f->metadata()[i].second;
    const GgufValue& b = *g->find(f->metadata()[i].first);
    EXPECT_EQ(a.type, b.type) << f->metadata()[i].first;
    EXPECT_EQ(a.scalar, b.scalar) << f->metadata()[i].first;
    EXPECT_EQ(a.array_size(), b.array_size()) << f->metadata()[i].first;
  }
}

// ---- the real model --------------------------------------------------------------------------

TEST(GgufRealModel, OpensWithExpectedLayout) {
  SINKSCOPE_REQUIRE_DEFAULT_MODEL(model_path);
  const auto t0 = std::chrono::steady_clock::now();
  auto f = GgufFile::open(model_path);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  RecordProperty("open_ms", std::to_string(ms));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->tensors().size(), 272u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 30);
  EXPECT_EQ(f->get_int("llama.embedding_length"), 576);
  EXPECT_EQ(f->get_int("llama.attention.head_count"), 9);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(f->get_int("llama.context_length"), 8192);
  EXPECT_FLOAT_EQ(f->get_float("llama.rope.freq_base"), 100000.0f);
  EXPECT_FLOAT_EQ(f->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->strings.size(), 49152u);
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->strings[0], "<|endoftext|>");
  EXPECT_EQ(f->find("tokenizer.ggml.merges")->strings.size(), 48900u);
  EXPECT_EQ(f->find("tokenizer.ggml.token_type")->ints.size(), 49152u);
  EXPECT_FALSE(f->get_bool_or("tokenizer.ggml.add_bos_token", true));
  const GgufTensorInfo& emb = f->tensor("token_embd.weight");
  EXPECT_EQ(emb.type, GgmlType::kQ8_0);
  EXPECT_EQ(emb.dims, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(f->find_tensor("output.weight"), nullptr);  // tied embeddings
  EXPECT_EQ(f->tensor("blk.29.ffn_down.weight").dims, (std::vector<int64_t>{1536, 576}));
  std::map<GgmlType, int> by_type;
  for (const GgufTensorInfo& t : f->tensors()) {
    ++by_type[t.type];
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
  }
  EXPECT_EQ(by_type[GgmlType::kQ4_1], 210);
  EXPECT_EQ(by_type[GgmlType::kF32], 61);
  EXPECT_EQ(by_type[GgmlType::kQ8_0], 1);
}

// ---- make_random_llama -----------------------------------------------------------------------

struct ModelCase {
  std::string name;
  TestModelShape shape;
};

void PrintTo(const ModelCase& c, std::ostream* os) {
  *os << c.name;
}

class RandomLlamaModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(RandomLlamaModel, LoadsWithExpectedTensorsAndVocab) {
  const TestModelShape& s = GetParam().shape;
  const std::vector<uint8_t> bytes = make_random_llama(s, 42).to_bytes();
  auto f = parse(bytes);
  const std::string& a = s.architecture;
  EXPECT_EQ(f->get_string("general.architecture"), a);
  EXPECT_EQ(f->get_int(a + ".block_count"), s.n_layer);
  EXPECT_EQ(f->get_int(a + ".context_length"), s.n_ctx);
  EXPECT_EQ(f->get_int(a + ".embedding_length"), s.n_embd);
  EXPECT_EQ(f->get_int(a + ".feed_forward_length"), s.n_ff);
  EXPECT_EQ(f->get_int(a + ".attention.head_count"), s.n_head);
  EXPECT_EQ(f->get_int(a + ".attention.head_count_kv"), s.n_head_kv);
  EXPECT_EQ(f->get_int(a + ".rope.dimension_count"), s.n_embd / s.n_head);
  EXPECT_EQ(f->get_int(a + ".vocab_size"), s.n_vocab);
  EXPECT_FLOAT_EQ(f->get_float(a + ".rope.freq_base"), s.rope_theta);
  EXPECT_FLOAT_EQ(f->get_float(a + ".attention.layer_norm_rms_epsilon"), s.rms_eps);

  // Tensors: names, ggml dims [in, out], types.
  const int64_t hd = s.n_embd / s.n_head, kv = hd * s.n_head_kv;
  std::map<std::string, std::pair<std::vector<int64_t>, GgmlType>> want;
  const GgmlType wt = s.weight_type;
  want["token_embd.weight"] = {{s.n_embd, s.n_vocab}, wt};
  want["output_norm.weight"] = {{s.n_embd}, GgmlType::kF32};
  if (!s.tied_embeddings) want["output.weight"] = {{s.n_embd, s.n_vocab}, wt};
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    want[p + "attn_norm.weight"] = {{s.n_embd}, GgmlType::kF32};
    want[p + "ffn_norm.weight"] = {{s.n_embd}, GgmlType::kF32};
    want[p + "attn_q.weight"] = {{s.n_embd, s.n_embd}, wt};
    want[p + "attn_k.weight"] = {{s.n_embd, kv}, wt};
    want[p + "attn_v.weight"] = {{s.n_embd, kv}, wt};
    want[p + "attn_output.weight"] = {{s.n_embd, s.n_embd}, wt};
    want[p + "ffn_gate.weight"] = {{s.n_embd, s.n_ff}, wt};
    want[p + "ffn_up.weight"] = {{s.n_embd, s.n_ff}, wt};
    want[p + "ffn_down.weight"] = {{s.n_ff, s.n_embd}, wt};
    if (a == "qwen2") {
      want[p + "attn_q.bias"] = {{s.n_embd}, GgmlType::kF32};
      want[p + "attn_k.bias"] = {{kv}, GgmlType::kF32};
      want[p + "attn_v.bias"] = {{kv}, GgmlType::kF32};
    }
  }
  ASSERT_EQ(f->tensors().size(), want.size());
  for (const auto& [name, dt] : want) {
    const GgufTensorInfo* t = f->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dims, dt.first) << name;
    EXPECT_EQ(t->type, dt.second) << name;
  }
  // Weight statistics: projections ~N(0, 0.02), norms ~1.
  auto stats = [&](const std::string& name) {
    const std::vector<float> v = f->dequantize(f->tensor(name));
    double m = 0, m2 = 0;
    for (float x : v) {
      m += x;
      m2 += double(x) * x;
    }
    m /= v.size();
    return std::pair<double, double>{m, std::sqrt(m2 / v.size() - m * m)};
  };
  const auto [em, es] = stats("token_embd.weight");
  EXPECT_NEAR(em, 0.0, 0.002);
  EXPECT_NEAR(es, 0.02, 0.003);  // quantization noise of 4-bit types included
  const auto [nm, ns] = stats("blk.0.attn_norm.weight");
  EXPECT_NEAR(nm, 1.0, 0.01);
  EXPECT_LT(ns, 0.05);

  // Tokenizer.
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "smollm");
  const auto& toks = f->find("tokenizer.ggml.tokens")->strings;
  const auto& types = f->find("tokenizer.ggml.token_type")->ints;
  const auto& merges = f->find("tokenizer.ggml.merges")->strings;
  ASSERT_EQ(toks.size(), static_cast<size_t>(s.n_vocab));
  ASSERT_EQ(types.size(), toks.size());
  ASSERT_EQ(merges.size(), static_cast<size_t>(s.n_vocab - 259));
  EXPECT_EQ(toks[0], "!");
  EXPECT_EQ(toks[93], "~");
  EXPECT_EQ(toks[188], "\xc4\x80");       // byte 0 -> U+0100
  EXPECT_EQ(toks[188 + 32], "\xc4\xa0");  // space -> U+0120 'Ġ'
  EXPECT_EQ(std::set<std::string>(toks.begin(), toks.end()).size(), toks.size()) << "duplicates";
  for (size_t i = 0; i < merges.size(); ++i) {
    const size_t sp = merges[i].find(' ');
    ASSERT_NE(sp, std::string::npos);
    const std::string l = merges[i].substr(0, sp), r = merges[i].substr(sp + 1);
    EXPECT_EQ(toks[256 + i], l + r) << merges[i];
    const auto before = toks.begin() + 256 + static_cast<long>(i);
    EXPECT_NE(std::find(toks.begin(), before, l), before) << merges[i];
    EXPECT_NE(std::find(toks.begin(), before, r), before) << merges[i];
  }
  const size_t n = toks.size();
  EXPECT_EQ(toks[n - 3], "<|endoftext|>");
  EXPECT_EQ(toks[n - 2], "<|im_start|>");
  EXPECT_EQ(toks[n - 1], "<|im_end|>");
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(types[i], i + 3 >= n ? 3 : 1) << i;
  EXPECT_EQ(f->get_int("tokenizer.ggml.bos_token_id"), static_cast<int64_t>(n - 2));
  EXPECT_EQ(f->get_int("tokenizer.ggml.eos_token_id"), static_cast<int64_t>(n - 1));
  EXPECT_FALSE(f->get_bool_or("tokenizer.ggml.add_bos_token", true));
}

TestModelShape shape(const std::string& arch, bool tied, GgmlType t, int n_embd = 64,
                     int n_ff = 128, int n_vocab = 300) {
  TestModelShape s;
  s.architecture = arch;
  s.tied_embeddings = tied;
  s.weight_type = t;
  s.n_embd = n_embd;
  s.n_ff = n_ff;
  s.n_vocab = n_vocab;
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, RandomLlamaModel,
    ::testing::Values(ModelCase{"llama_tied_f32", shape("llama", true, GgmlType::kF32)},
                      ModelCase{"llama_untied_q8_0", shape("llama", false, GgmlType::kQ8_0)},
                      ModelCase{"qwen2_tied_f16", shape("qwen2", true, GgmlType::kF16)},
                      ModelCase{"qwen2_untied_q4_1", shape("qwen2", false, GgmlType::kQ4_1)},
                      ModelCase{"llama_q4_k_big_vocab",
                                shape("llama", true, GgmlType::kQ4_K, 256, 512, 1000)}),
    [](const auto& info) { return info.param.name; });

TEST(RandomLlamaModel, DeterministicAndValidated) {
  const TestModelShape s;
  EXPECT_EQ(make_random_llama(s, 7).to_bytes(), make_random_llama(s, 7).to_bytes());
  EXPECT_NE(make_random_llama(s, 7).to_bytes(), make_random_llama(s, 8).to_bytes());
  auto expect_invalid = [](TestModelShape t) {
    EXPECT_THROW(make_random_llama(t, 1), std::invalid_argument);
  };
  TestModelShape t = s;
  t.n_vocab = 258;
  expect_invalid(t);
  t = s;
  t.weight_type = GgmlType::kQ4_K;  // n_embd 64 is not a multiple of 256
  expect_invalid(t);
  t = s;
  t.n_head = 5;
  expect_invalid(t);
  t = s;
  t.architecture = "gpt2";
  expect_invalid(t);
  // The minimum vocabulary has no merges; 259 + kRandomLlamaEnglishMerges has all English ones.
  t = s;
  t.n_vocab = 259;
  EXPECT_TRUE(
      parse(make_random_llama(t, 1).to_bytes())->find("tokenizer.ggml.merges")->strings.empty());
  t.n_vocab = 259 + kRandomLlamaEnglishMerges;
  const auto f = parse(make_random_llama(t, 1).to_bytes());
  const auto& toks = f->find("tokenizer.ggml.tokens")->strings;
  EXPECT_NE(std::find(toks.begin(), toks.end(), "\xc4\xa0the"), toks.end());
  EXPECT_NE(std::find(toks.begin(), toks.end(), "\xc4\xa0world"), toks.end());
}

TEST(RandomLlamaModel, WritesAFileTheReaderMaps) {
  TempDir dir;
  const fs::path p = dir.path() / "random.gguf";
  make_random_llama(TestModelShape{}, 3).write(p);
  auto f = GgufFile::open(p);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->tensors().size(), 2u + 9u * 2u);  // embd, output_norm (tied), 2 layers
}

}  // namespace
}  // namespace sinkscope
