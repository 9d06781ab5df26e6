// SPDX-License-Identifier: Apache-2.0
// A small validation dataset (two short texts, a "long" and a "very long" one cut to a few
// hundred tokens, two passkey tasks) and a random-weight model, written once per test process
// into a temporary folder; shared by the validation and CLI tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <unistd.h>

#include "engine/format/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/util/sha256.h"

namespace sinkscope::test {

namespace fs = std::filesystem;

struct Fixture {
  fs::path dir;
  fs::path manifest;
  fs::path model_path;
  std::shared_ptr<const Model> model;
};

inline const char* const kProse =
    "The quick brown fox jumps over the lazy dog while the world keeps turning and the river "
    "runs down to the sea, where the old boats rest on the sand and the gulls cry over the "
    "harbour wall in the evening light. ";

inline void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

inline std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// A dataset of two short texts, one "long" and one "very long" (small max_tokens so the random
// model stays fast) and two passkey tasks.
inline Fixture make_fixture(const std::string& name) {
  Fixture f;
  f.dir = fs::temp_directory_path() / ("sinkscope_validation_" + name);
  fs::remove_all(f.dir);
  fs::create_directories(f.dir / "samples");
  const std::string t1 = repeat(kProse, 2);
  const std::string t2 = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n";
  const std::string t3 = repeat(kProse, 6);
  const std::string t4 = repeat(kProse, 8);
  write_file(f.dir / "samples/a.txt", t1);
  write_file(f.dir / "samples/b.txt", t2);
  write_file(f.dir / "samples/c.txt", t3);
  write_file(f.dir / "samples/d.txt", t4);
  std::string m = R"({"format": "sinkscope-dataset-1", "name": "unit", "samples": [)";
  m += R"({"id": "a", "kind": "prose", "class": "short", "file": "samples/a.txt", "sha256": ")" + sha256_hex(t1) + R"("},)";
  m += R"({"id": "b", "kind": "code", "class": "short", "file": "samples/b.txt", "sha256": ")" + sha256_hex(t2) + R"("},)";
  m += R"({"id": "c", "kind": "prose", "class": "long", "max_tokens": 200, "file": "samples/c.txt", "sha256": ")" + sha256_hex(t3) + R"("},)";
  m += R"({"id": "d", "kind": "prose", "class": "very_long", "max_tokens": 260, "file": "samples/d.txt", "sha256": ")" + sha256_hex(t4) + R"("},)";
  m += R"({"id": "p1", "kind": "passkey", "class": "passkey", "target_tokens": 300, "depth": 0.5, "seed": 3},)";
  m += R"({"id": "p2", "kind": "passkey", "class": "passkey", "target_tokens": 360, "depth": 0.0, "seed": 4}]})";
  f.manifest = f.dir / "manifest.json";
  write_file(f.manifest, m);
  TestModelShape shape;
  shape.n_vocab = 400;
  shape.n_embd = 128;  // head_dim 32: the smallest quantization group (32) divides it
  shape.n_ctx = 1024;
  f.model_path = f.dir / "model.gguf";
  make_random_llama(shape, 21).write(f.model_path);
  f.model = Model::load(f.model_path);
  return f;
}

inline const Fixture& fixture() {
  static const Fixture f = make_fixture("shared_" + std::to_string(::getpid()));
  return f;
}

}  // namespace sinkscope::test
