// SPDX-License-Identifier: Apache-2.0
// SentencePiece-style BPE (tokenizer.ggml.model = "llama"): spaces become U+2581, an optional
// space prefix is added, then adjacent pieces are merged highest score first (leftmost first on
// ties) while the merged text is a vocabulary piece; characters left without a piece fall back to
// <0xNN> byte tokens. This is SentencePiece's BPE encoder (bpe_model.cc), which llama.cpp follows.
#include <array>
#include <cstdio>
#include <queue>

#include "engine/format/gguf.h"
#include "engine/tokenizer/tokenizer_internal.h"
#include "engine/tokenizer/unicode.h"

namespace sinkscope::tokenizer_detail {
namespace {

class SpmTokenizer final : public TokenizerBase {
 public:
  SpmTokenizer(Vocab vocab, const GgufFile& file);
  std::string model_name() const override { return "llama"; }

 protected:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<TokenId>& out) const override;
  void append_piece(TokenId id, std::string& out) const override;
  void fix_first_piece(std::string& piece) const override {
    // Undo the space prefix encode added (HF's Metaspace decoder does the same for token 0).
    if (m_add_space_prefix && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  }

 private:
  // Pieces SentencePiece may produce by merging: control, unknown and byte pieces are reserved
  // and never formed from text.
  TokenId mergeable(std::string_view text) const {
    auto it = m_vocab.ids.find(std::string(text));
    if (it == m_vocab.ids.end()) return -1;
    const int32_t t = m_vocab.types[it->second];
    return (t == kControl || t == kUnknown || t == kByte) ? -1 : it->second;
  }

  bool m_add_space_prefix = true;
  std::array<TokenId, 256> m_byte_token{};
};

SpmTokenizer::SpmTokenizer(Vocab vocab, const GgufFile& file) : TokenizerBase(std::move(vocab)) {
  if (m_vocab.scores.size() != m_vocab.tokens.size())
    throw TokenizerError(file.path() +
                         ": tokenizer.ggml.scores is missing (needed by the llama tokenizer)");
  m_add_space_prefix = file.get_bool_or("tokenizer.ggml.add_space_prefix", true);
  m_vocab.add_bos = file.get_bool_or("tokenizer.ggml.add_bos_token", true);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = m_vocab.ids.find(name);
    m_byte_token[b] = it == m_vocab.ids.end() ? -1 : it->second;
  }
}

void SpmTokenizer::encode_text(std::string_view text, bool after_special,
                               std::vector<TokenId>& out) const {
  std::string s;
  s.reserve(text.size() + 8);
  if (m_add_space_prefix && after_special) s += kSpaceMarker;
  for (char c : text) {
    if (c == ' ') {
      s += kSpaceMarker;
    } else {
      s += c;
    }
  }

  // One symbol per UTF-8 character (an invalid byte is a symbol of its own), linked as a list.
  struct Symbol {
    size_t begin, len;
    int32_t prev, next;
  };
  std::vector<Symbol> sym;
  for (size_t pos = 0; pos < s.size();) {
    const size_t len = unicode::utf8_char_len(s, pos);
    const auto i = static_cast<int32_t>(sym.size());
    sym.push_back({pos, len, i - 1, i + 1});
    pos += len;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Bigram {
    float score;
    int32_t left, right;
    size_t len;  // merged length; a mismatch later means a side has changed
    bool operator<(const Bigram& o) const {
      return score != o.score ? score < o.score : left > o.left;  // max score, then leftmost
    }
  };
  std::priority_queue<Bigram> heap;
  auto push = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const size_t len = sym[l].len + sym[r].len;
    const TokenId id = mergeable(std::string_view(s).substr(sym[l].begin, len));
    if (id >= 0) heap.push({m_vocab.scores[id], l, r, len});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i, i + 1);

  while (!heap.empty()) {
    const Bigram b = heap.top();
    heap.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    push(l.prev, b.left);
    push(b.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = std::string_view(s).substr(sym[i].begin, sym[i].len);
    if (const TokenId id = mergeable(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {  // byte fallback
      const TokenId id = m_byte_token[static_cast<unsigned char>(c)];
      if (id >= 0) {
        out.push_back(id);
      } else if (m_vocab.unk >= 0) {
        out.push_back(m_vocab.unk);
      }
    }
  }
}

void SpmTokenizer::append_piece(TokenId id, std::string& out) const {
  append_spm_piece(m_vocab, id, out);
}

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab vocab, const GgufFile& file) {
  return std::make_unique<SpmTokenizer>(std::move(vocab), file);
}

}  // namespace sinkscope::tokenizer_detail
