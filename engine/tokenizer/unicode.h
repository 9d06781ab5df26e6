// SPDX-License-Identifier: Apache-2.0
// UTF-8 helpers and the hand-written pre-tokenizer splits used by the byte-level BPE tokenizer.
// The regexes of GPT-2, SmolLM2, Qwen2 and Llama 3 are implemented as small matchers over code
// points instead of std::regex: std::regex has no Unicode classes and is far too slow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sinkscope::unicode {

// A code point decoded from UTF-8 and the number of bytes it used. Every byte that does not start
// a valid, shortest-form sequence decodes alone to kInvalid (len 1), so callers can keep the
// original bytes and never lose input.
inline constexpr uint32_t kInvalid = 0xFFFFFFFFu;
struct Decoded {
  uint32_t cp;
  uint32_t len;
};
Decoded decode_utf8(std::string_view s, size_t pos);
void append_utf8(std::string& out, uint32_t cp);  // cp must be a valid scalar value
// Number of bytes of the (possibly invalid) UTF-8 character starting at s[pos], at least 1.
size_t utf8_char_len(std::string_view s, size_t pos);

// Unicode Normalization Form C of UTF-8 text (unicode_nfc.cpp); text that is not valid UTF-8 is
// returned unchanged.
std::string nfc(std::string_view text);

bool is_letter(uint32_t cp);      // \p{L}
bool is_number(uint32_t cp);      // \p{N} (Nd, Nl, No; the same set as Rust's char::is_numeric)
bool is_whitespace(uint32_t cp);  // \s: the Unicode White_Space property

// Pre-tokenizer splits, named after tokenizer.ggml.pre families.
enum class PreSplit {
  kGpt2,    // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kSmolLM,  // HF Digits(individual_digits) first, then the GPT-2 regex on each stretch between
  kQwen2,   // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*
            //   |\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,  // as kQwen2 but \p{N}{1,3}
};

// Splits `text` into consecutive pieces covering it exactly; returns their byte ranges
// [begin, end). Invalid UTF-8 bytes count as "other" (neither letter, number nor space).
std::vector<std::pair<size_t, size_t>> pre_split(PreSplit kind, std::string_view text);

}  // namespace sinkscope::unicode
