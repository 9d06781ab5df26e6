// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <string>

#include "engine/util/sha256.h"

namespace sinkscope {
namespace {

// FIPS 180-4 example vectors.
TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data += char('a' + i % 26);
  Sha256 s;
  for (size_t off = 0; off < data.size(); off += 37) s.update(data.data() + off, std::min<size_t>(37, data.size() - off));
  EXPECT_EQ(s.hex_digest(), sha256_hex(data));
}

TEST(Sha256, MissingFileNamesIt) {
  try {
    sha256_file("/nonexistent/x.gguf");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.gguf"), std::string::npos);
  }
}

}  // namespace
}  // namespace sinkscope
