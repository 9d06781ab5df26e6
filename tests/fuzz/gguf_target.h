// SPDX-License-Identifier: Apache-2.0
// Fuzz body for the GGUF reader: parse an in-memory image, then touch everything a caller can
// reach -- every metadata value through every typed accessor, every tensor's info and data, the
// model hyper-parameters and the tokenizer built from the metadata. A malformed file must end in
// GgufError / ModelError / TokenizerError, never in a crash, a sanitizer report or another
// exception.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

namespace sinkscope::fuzz {

namespace gguf_detail {

// Dequantizing is the one place where tensor data is read; keep per-input work small.
inline constexpr int64_t kMaxDequantElements = int64_t(1) << 16;

inline void touch_value(const GgufValue& v, const std::string& key, int depth) {
  try { (void)v.as_int(key); } catch (const GgufError&) {}
  try { (void)v.as_float(key); } catch (const GgufError&) {}
  try { (void)v.as_bool(key); } catch (const GgufError&) {}
  try { (void)v.as_string(key).size(); } catch (const GgufError&) {}
  const size_t n = v.array_size();
  if (v.type != GgufValueType::kArray) {
    check(n == 0, "scalar '" + key + "' reports array elements");
    return;
  }
  const size_t held = v.ints.size() + v.uints64.size() + v.floats.size() + v.strings.size() +
                      v.arrays.size();
  check(held == n, "array '" + key + "' holds " + std::to_string(held) + " elements, reports " +
                       std::to_string(n));
  for (const std::string& s : v.strings) (void)s.size();
  for (const GgufValue& inner : v.arrays) touch_value(inner, key, depth + 1);
}

}  // namespace gguf_detail

inline void gguf_one_input(const uint8_t* data, size_t size) {
  std::unique_ptr<GgufFile> f;
  try {
    f = GgufFile::from_memory(data, size, "fuzz.gguf");
  } catch (const GgufError&) {
    return;
  }
  check(f->version() == 2 || f->version() == 3, "accepted version " + std::to_string(f->version()));
  for (const auto& [key, value] : f->metadata()) {
    gguf_detail::touch_value(value, key, 0);
    check(f->find(key) == &value, "find('" + key + "') does not return the first entry");
  }
  for (const char* key : {"general.architecture", "general.name", "general.alignment"}) {
    try { (void)f->get_string_or(key, ""); } catch (const GgufError&) {}
    try { (void)f->get_int_or(key, 0); } catch (const GgufError&) {}
    try { (void)f->get_float_or(key, 0.0); } catch (const GgufError&) {}
    try { (void)f->get_bool_or(key, false); } catch (const GgufError&) {}
  }
  const uint8_t* end = data + size;
  for (const GgufTensorInfo& t : f->tensors()) {
    check(f->find_tensor(t.name) == &t, "find_tensor('" + t.name + "') mismatch");
    check(!t.dims.empty() && t.n_elements > 0, "tensor '" + t.name + "' has no elements");
    check(t.data >= data && t.n_bytes <= uint64_t(end - t.data),
          "tensor '" + t.name + "' data lies outside the buffer");
    (void)t.rows();
    const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t.type));
    check(tr != nullptr, "tensor '" + t.name + "' has an unknown type after parsing");
    if (!tr->can_dequantize || t.n_elements > gguf_detail::kMaxDequantElements) continue;
    const std::vector<float> out = f->dequantize(t);
    check(out.size() == size_t(t.n_elements), "dequantize size mismatch for '" + t.name + "'");
  }
  // What the model loader and tokenizer read from the metadata.
  try {
    (void)read_model_config(*f);
  } catch (const ModelError&) {
  } catch (const GgufError&) {
  }
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = Tokenizer::from_gguf(*f);
  } catch (const TokenizerError&) {
    return;
  } catch (const GgufError&) {
    return;
  }
  // A tokenizer that was built must work on ordinary text.
  for (bool special : {false, true}) {
    const std::vector<TokenId> ids = tok->encode("Hello <s> wörld\n\xff", special, false);
    for (TokenId id : ids)
      check(id >= 0 && id < tok->vocab_size(), "encode produced id " + std::to_string(id));
    (void)tok->decode(ids);
    (void)tok->decode(ids, /*skip_special=*/true);
  }
}

}  // namespace sinkscope::fuzz
