// SPDX-License-Identifier: Apache-2.0
// Private to the tokenizer sources: the vocabulary read from tokenizer.ggml.*, special-token
// splitting, and the base class the BPE and SentencePiece tokenizers share.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace sinkscope::tokenizer_detail {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Vocab {
  std::vector<std::string> tokens;  // token text as stored (byte-level chars or U+2581 pieces)
  std::vector<int32_t> types;       // TokenType per token (kNormal when the key is absent)
  std::vector<float> scores;        // SentencePiece scores (empty for byte-level BPE)
  std::unordered_map<std::string, TokenId> ids;
  TokenId bos = -1, eos = -1, unk = -1;
  bool add_bos = false;
  std::vector<TokenId> eog;  // sorted
  std::string chat_template;

  // Special tokens matched as whole strings in the input, bucketed by first byte and sorted
  // longest first so the scan finds the leftmost-longest match (what HF's added-token matcher
  // does). `always` holds user-defined tokens, which HF and llama.cpp match even without
  // parse_special.
  std::array<std::vector<TokenId>, 256> special_by_byte;
  std::vector<bool> always_matched;

  bool is_special(TokenId id) const {
    const int32_t t = types[id];
    return t == kControl || t == kUnknown || t == kUserDefined;
  }
};

// SentencePiece's word-boundary marker, U+2581 LOWER ONE EIGHTH BLOCK.
inline constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";
// The text of SentencePiece token `id` (GGUF `llama` vocabularies and tokenizer.json
// SentencePiece-style BPE alike): a byte token <0xHH> as that byte, every U+2581 as a space.
void append_spm_piece(const Vocab& v, TokenId id, std::string& out);

Vocab load_vocab(const GgufFile& file);
// The parts of a Vocab derived from tokens, types, bos/eos and chat template: the id index, the
// end-of-generation set (eos, `extra_eog`, and the chat formats' end-of-turn markers) and the
// special-token buckets. load_vocab calls it; the tokenizer.json reader too.
void finish_vocab(Vocab& v, const std::vector<TokenId>& extra_eog);

// A stretch of input: plain text (id == -1) or one matched special token.
struct Fragment {
  std::string_view text;
  TokenId id = -1;
};
std::vector<Fragment> split_special(const Vocab& vocab, std::string_view text, bool parse_special);

// Everything that does not depend on the tokenization algorithm.
class TokenizerBase : public Tokenizer {
 public:
  explicit TokenizerBase(Vocab vocab);

  std::vector<TokenId> encode(std::string_view text, bool parse_special,
                              std::optional<bool> add_bos) const override;
  std::string decode(const std::vector<TokenId>& ids, bool skip_special) const override;
  std::string token_to_piece(TokenId id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(m_vocab.tokens.size()); }
  TokenId bos() const override { return m_vocab.bos; }
  TokenId eos() const override { return m_vocab.eos; }
  bool is_eog(TokenId id) const override;
  TokenId find_token(std::string_view text) const override;
  ChatFormat chat_format() const override;
  const std::string& chat_template() const override { return m_vocab.chat_template; }

 protected:
  // Appends the ids of one plain-text fragment. `after_special` is true at the start of the input
  // and right after a special token (SentencePiece adds its space prefix there).
  virtual void encode_text(std::string_view text, bool after_special,
                           std::vector<TokenId>& out) const = 0;
  // The same with `at_start`: the fragment begins the input (tokenizer.json's Metaspace
  // prepend_scheme "first" tells the two apart).
  virtual void encode_fragment(std::string_view text, bool at_start, bool after_special,
                               std::vector<TokenId>& out) const {
    (void)at_start;
    encode_text(text, after_special, out);
  }
  // Appends the bytes of a non-special token.
  virtual void append_piece(TokenId id, std::string& out) const = 0;
  // Called by decode with the text of the first decoded token that was not BOS.
  virtual void fix_first_piece(std::string& piece) const {}

  void check_id(TokenId id) const;
  Vocab m_vocab;
};

// What a byte-level BPE tokenizer needs beyond the vocabulary, read from GGUF metadata or from
// tokenizer.json.
struct BpeSettings {
  unicode::PreSplit split = unicode::PreSplit::kGpt2;
  bool ignore_merges = false;  // a word that is itself a token is emitted whole (Llama 3)
  bool nfc = false;            // tokenizer.json's NFC normalizer: each fragment normalized first
  std::vector<std::pair<std::string, std::string>> merges;  // by rank, lowest first
};

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, const GgufFile& file);
std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, BpeSettings settings);
std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab, const GgufFile& file);

// What a SentencePiece-style tokenizer.json (Llama 2, Mistral, Gemma) says beyond the vocabulary:
// spaces become U+2581 (a Replace normalizer or the Metaspace pre-tokenizer), a U+2581 is
// prepended to each fragment (Prepend normalizer, Metaspace "always"), to the input's first
// fragment only (Metaspace "first") or never; Metaspace split cuts words before each U+2581;
// BPE merges by rank over characters, a character without a token falls back to its <0xNN> byte
// tokens (byte_fallback) or the unknown token.
struct HfSpmSettings {
  enum class Prepend { kNever, kFirst, kAlways };
  Prepend prepend = Prepend::kAlways;
  bool split = false;
  bool byte_fallback = true;
  bool nfc = false;  // an NFC step in the normalizer, before the U+2581 steps
  bool prepend_unless_space = false;  // Metaspace: no prefix where the text starts with a space
  bool fuse_unk = false;  // consecutive unknown characters give one unknown token
  bool strip_first_space = true;  // the decoder drops the first token's leading space
  std::vector<std::pair<std::string, std::string>> merges;  // by rank, lowest first
};
std::unique_ptr<Tokenizer> make_hf_spm_tokenizer(Vocab vocab, HfSpmSettings settings);

}  // namespace sinkscope::tokenizer_detail
