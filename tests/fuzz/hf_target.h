// SPDX-License-Identifier: Apache-2.0
// Fuzz body for the Hugging Face checkpoint readers: the safetensors header parser, the
// tokenizer.json reader and the config.json reader. A malformed input must end in ModelError /
// TokenizerError, never in a crash, a sanitizer report or another exception.
//
// Input: byte 0 picks the reader (0 safetensors, 1 tokenizer.json, 2 config.json, 3 a
// tokenizer.json with the rest as its tokenizer_config.json too); the rest is the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/format/hf_checkpoint.h"
#include "engine/format/safetensors.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

namespace sinkscope::fuzz {

inline void hf_safetensors(const uint8_t* data, size_t size) {
  std::unique_ptr<SafetensorsFile> f;
  try {
    f = SafetensorsFile::from_memory(data, size, "fuzz.safetensors");
  } catch (const ModelError&) {
    return;
  }
  const uint8_t* end = data + size;
  for (const SafetensorsTensor& t : f->tensors()) {
    check(f->find(t.name) != nullptr, "find('" + t.name + "') fails");
    check(t.data >= data && t.n_bytes <= uint64_t(end - t.data),
          "tensor '" + t.name + "' data lies outside the buffer");
    check(t.n_bytes == uint64_t(t.n_elements) * uint64_t(safetensors_dtype_size(t.dtype)),
          "tensor '" + t.name + "' size does not match its shape");
    // The float dtypes are read in place by the loader: convert the small ones (an empty tensor
    // has nothing to convert; the loader's shape checks never accept one).
    if (const auto type = t.ggml_type();
        type && t.n_elements > 0 && t.n_elements <= (int64_t(1) << 16)) {
      std::vector<float> out(size_t(t.n_elements));
      dequantize_row(*type, t.data, out.data(), t.n_elements);
    }
  }
}

inline void hf_tokenizer(const std::string& json, const std::string& config) {
  HfTokenizerFiles files;
  files.tokenizer_json = json;
  files.tokenizer_config_json = config;
  files.config_json = config;
  files.generation_config_json = config;
  files.source = "fuzz";
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = Tokenizer::from_hf(files);
  } catch (const TokenizerError&) {
    return;
  }
  for (bool special : {false, true}) {
    const std::vector<TokenId> ids = tok->encode("Hello <|im_start|> wörld 123\n\xff", special);
    for (TokenId id : ids)
      check(id >= 0 && id < tok->vocab_size(), "encode produced id " + std::to_string(id));
    (void)tok->decode(ids);
    (void)tok->decode(ids, /*skip_special=*/true);
  }
  (void)tok->apply_chat_template({{"user", "hi"}});
}

inline void hf_one_input(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] & 3) {
    case 0:
      hf_safetensors(data + 1, size - 1);
      break;
    case 1:
      hf_tokenizer(rest, "");
      break;
    case 2:
      try {
        (void)read_hf_config(rest, "fuzz/config.json");
      } catch (const ModelError&) {
      }
      break;
    default:
      hf_tokenizer(rest, rest);
      break;
  }
}

}  // namespace sinkscope::fuzz
