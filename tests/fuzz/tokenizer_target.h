// SPDX-License-Identifier: Apache-2.0
// Fuzz body for the tokenizers: encode arbitrary bytes (invalid UTF-8, NULs, special-token
// strings), check every id is in the vocabulary, decode and compare with the input.
//
// Input: byte 0 picks the tokenizer (bits 0-1) and the flags (bit 2 parse_special, bit 3
// add_bos); the rest is the text. Tokenizers, built once:
//   0  SentencePiece BPE from tests/golden/tokenizer/spm_tiny.gguf (byte fallback);
//   1  byte-level BPE from make_random_llama (all 256 bytes, English merges, ChatML specials);
//   2  SmolLM2's own vocabulary, when the default model is present (else the input is skipped,
//      so a reproducer never changes meaning between machines).
// Round trips: byte-level decode(encode(t)) == t, except for bytes the vocabulary has no token
// for (SmolLM2 lacks 0xFF and a few others; like HF they are dropped). SentencePiece without
// parse_special: decode(encode(t)) == t with U+2581 read as a space (the space marker).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "engine/util/paths.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

#ifndef SINKSCOPE_SOURCE_DIR
#error "SINKSCOPE_SOURCE_DIR must name the repository root (for the golden vocabulary)"
#endif

namespace sinkscope::fuzz {

namespace tokenizer_detail {

struct Entry {
  std::vector<uint8_t> bytes;      // backing store for from_memory images
  std::unique_ptr<GgufFile> file;  // must outlive the tokenizer's use of it
  std::unique_ptr<Tokenizer> tok;
  bool byte_level = false;
  std::array<bool, 256> dropped{};  // bytes with no token (byte-level only)
};

inline void find_dropped_bytes(Entry& e) {
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    e.dropped[size_t(b)] = e.tok->decode(e.tok->encode(one, false, false)) != one;
  }
}

struct Tokenizers {
  std::array<Entry, 3> entries;
  Tokenizers() {
    Entry& spm = entries[0];
    spm.file = GgufFile::open(std::filesystem::path(SINKSCOPE_SOURCE_DIR) / "tests" / "golden" /
                              "tokenizer" / "spm_tiny.gguf");
    spm.tok = Tokenizer::from_gguf(*spm.file);

    Entry& bl = entries[1];
    TestModelShape shape;
    shape.n_layer = 1;
    shape.n_embd = 16;
    shape.n_head = 2;
    shape.n_head_kv = 1;
    shape.n_ff = 16;
    shape.n_vocab = 259 + kRandomLlamaEnglishMerges + 60;  // every English merge and more
    bl.bytes = make_random_llama(shape, 7).to_bytes();
    bl.file = GgufFile::from_memory(bl.bytes.data(), bl.bytes.size(), "random-llama.gguf");
    bl.tok = Tokenizer::from_gguf(*bl.file);
    bl.byte_level = true;
    find_dropped_bytes(bl);

    const std::filesystem::path model = default_model_path();
    std::error_code ec;
    if (std::filesystem::is_regular_file(model, ec)) {
      Entry& smol = entries[2];
      smol.file = GgufFile::open(model);
      smol.tok = Tokenizer::from_gguf(*smol.file);
      smol.byte_level = true;
      find_dropped_bytes(smol);
    }
  }
};

inline const Tokenizers& tokenizers() {
  static const Tokenizers t;
  return t;
}

inline std::string spm_expected(std::string_view text) {
  static constexpr std::string_view kMarker = "\xE2\x96\x81";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kMarker.size()) == kMarker) {
      out += ' ';
      i += kMarker.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

}  // namespace tokenizer_detail

inline void tokenizer_one_input(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const unsigned index = data[0] & 3u;
  const bool parse_special = (data[0] & 4u) != 0;
  const bool add_bos = (data[0] & 8u) != 0;
  if (index >= 3) return;
  const tokenizer_detail::Entry& e = tokenizer_detail::tokenizers().entries[index];
  if (!e.tok) return;
  const Tokenizer& tok = *e.tok;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::vector<TokenId> ids = tok.encode(text, parse_special, add_bos);
  for (TokenId id : ids)
    check(id >= 0 && id < tok.vocab_size(), "encode produced id " + std::to_string(id));
  size_t first = 0;
  if (add_bos && tok.bos() >= 0) {
    check(!ids.empty() && ids[0] == tok.bos(), "add_bos did not put BOS first");
    first = 1;
  }
  const std::vector<TokenId> body(ids.begin() + std::ptrdiff_t(first), ids.end());
  const std::string decoded = tok.decode(body);
  (void)tok.decode(ids, /*skip_special=*/true);

  if (e.byte_level) {
    std::string expected;
    for (char c : text)
      if (!e.dropped[static_cast<unsigned char>(c)]) expected += c;
    check(decoded == expected, "byte-level round trip differs (" + std::to_string(decoded.size()) +
                                   " bytes back, " + std::to_string(expected.size()) + " expected)");
    // Streaming: the pieces of the tokens concatenate to the decoded text.
    std::string streamed;
    for (TokenId id : body) streamed += tok.token_to_piece(id);
    check(streamed == decoded, "token_to_piece pieces do not concatenate to decode()");
  } else if (!parse_special) {
    check(decoded == tokenizer_detail::spm_expected(text),
          "SentencePiece round trip differs (" + std::to_string(decoded.size()) + " bytes back)");
  }
}

}  // namespace sinkscope::fuzz
