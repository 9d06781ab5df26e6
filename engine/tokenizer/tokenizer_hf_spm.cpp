// SPDX-License-Identifier: Apache-2.0
// SentencePiece-style BPE as a Hugging Face tokenizer.json describes it (Llama 2, Mistral,
// Gemma): the `tokenizers` library's pipeline, step for step. Each fragment between added tokens
// has its spaces replaced by U+2581 and (per HfSpmSettings::prepend) a U+2581 prepended; with
// Metaspace split it is cut before each U+2581; each word is split into characters, a character
// the vocabulary lacks becoming its UTF-8 bytes' <0xNN> tokens (byte_fallback) or the unknown
// token, and adjacent symbols are merged lowest merge rank first (leftmost on ties), as
// tokenizers' BPE::merge_word does. Decoding maps U+2581 back to spaces and <0xNN> to bytes.
#include <array>
#include <cstdio>
#include <queue>

#include "engine/tokenizer/tokenizer_internal.h"
#include "engine/tokenizer/unicode.h"

namespace sinkscope::tokenizer_detail {
namespace {

uint64_t pair_key(TokenId a, TokenId b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

class HfSpmTokenizer final : public TokenizerBase {
 public:
  HfSpmTokenizer(Vocab vocab, HfSpmSettings settings);
  std::string model_name() const override { return "llama"; }

 protected:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<TokenId>& out) const override {
    encode_fragment(text, after_special, after_special, out);
  }
  void encode_fragment(std::string_view text, bool at_start, bool after_special,
                       std::vector<TokenId>& out) const override;
  void append_piece(TokenId id, std::string& out) const override;
  void fix_first_piece(std::string& piece) const override {
    if (m_s.strip_first_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  }

 private:
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

  HfSpmSettings m_s;
  std::array<TokenId, 256> m_byte_token{};
  std::unordered_map<uint64_t, std::pair<int32_t, TokenId>> m_merges;  // -> (rank, result)
};

HfSpmTokenizer::HfSpmTokenizer(Vocab vocab, HfSpmSettings settings)
    : TokenizerBase(std::move(vocab)), m_s(std::move(settings)) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = m_vocab.ids.find(name);
    m_byte_token[size_t(b)] = it == m_vocab.ids.end() ? -1 : it->second;
    if (it != m_vocab.ids.end() && m_vocab.types[it->second] == kNormal)
      m_vocab.types[it->second] = kByte;
  }
  m_merges.reserve(m_s.merges.size() * 2);
  for (size_t rank = 0; rank < m_s.merges.size(); ++rank) {
    const auto& [left, right] = m_s.merges[rank];
    auto l = m_vocab.ids.find(left), r = m_vocab.ids.find(right),
         res = m_vocab.ids.find(left + right);
    if (l == m_vocab.ids.end() || r == m_vocab.ids.end() || res == m_vocab.ids.end()) continue;
    m_merges.emplace(pair_key(l->second, r->second), std::make_pair(int32_t(rank), res->second));
  }
  m_s.merges.clear();
  m_s.merges.shrink_to_fit();
}

void HfSpmTokenizer::encode_fragment(std::string_view text, bool at_start, bool,
                                     std::vector<TokenId>& out) const {
  std::string normalized;
  if (m_s.nfc) {
    normalized = unicode::nfc(text);
    text = normalized;
  }
  if (text.empty()) return;
  std::string s;
  s.reserve(text.size() + 8);
  using P = HfSpmSettings::Prepend;
  // The Prepend normalizer prepends always; Metaspace only where the text does not already
  // start with U+2581 (tokenizers' Metaspace::pre_tokenize), i.e. with a space.
  if ((m_s.prepend == P::kAlways || (m_s.prepend == P::kFirst && at_start)) &&
      !(m_s.prepend_unless_space && text[0] == ' '))
    s += kSpaceMarker;
  for (char c : text) {
    if (c == ' ') {
      s += kSpaceMarker;
    } else {
      s += c;
    }
  }
  if (!m_s.split) {
    encode_word(s, out);
    return;
  }
  // Metaspace split: each word starts at a U+2581 (tokenizers' MergedWithNext).
  size_t begin = 0;
  for (size_t pos = kSpaceMarker.size(); pos <= s.size(); ++pos) {
    if (pos == s.size() || s.compare(pos, kSpaceMarker.size(), kSpaceMarker) == 0) {
      if (pos > begin) encode_word(std::string_view(s).substr(begin, pos - begin), out);
      begin = pos;
    }
  }
}

void HfSpmTokenizer::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  struct Symbol {
    TokenId id;
    int32_t prev, next;
  };
  std::vector<Symbol> sym;
  auto add = [&](TokenId id) {
    const auto i = static_cast<int32_t>(sym.size());
    sym.push_back({id, i - 1, i + 1});
  };
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = unicode::utf8_char_len(word, pos);
    auto it = m_vocab.ids.find(std::string(word.substr(pos, len)));
    if (it != m_vocab.ids.end() && m_vocab.types[it->second] != kByte) {
      add(it->second);
    } else if (m_s.byte_fallback &&
               [&] {
                 for (size_t k = 0; k < len; ++k)
                   if (m_byte_token[static_cast<unsigned char>(word[pos + k])] < 0) return false;
                 return true;
               }()) {
      for (size_t k = 0; k < len; ++k) add(m_byte_token[static_cast<unsigned char>(word[pos + k])]);
    } else if (m_vocab.unk >= 0) {
      // fuse_unk (Llama's files set it): consecutive unknowns give one unknown token.
      if (!m_s.fuse_unk || sym.empty() || sym.back().id != m_vocab.unk) add(m_vocab.unk);
    }
    pos += len;
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Candidate {
    int32_t rank, left, right;
    TokenId left_id, right_id, result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    auto it = m_merges.find(pair_key(sym[size_t(l)].id, sym[size_t(r)].id));
    if (it != m_merges.end())
      heap.push({it->second.first, l, r, sym[size_t(l)].id, sym[size_t(r)].id, it->second.second});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i, i + 1);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = sym[size_t(c.left)];
    if (l.id != c.left_id || l.next != c.right || sym[size_t(c.right)].id != c.right_id) continue;
    Symbol& r = sym[size_t(c.right)];
    l.id = c.result;
    l.next = r.next;
    r.id = -1;
    if (r.next >= 0) sym[size_t(r.next)].prev = c.left;
    push(l.prev, c.left);
    push(c.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
}

void HfSpmTokenizer::append_piece(TokenId id, std::string& out) const {
  append_spm_piece(m_vocab, id, out);
}

}  // namespace

std::unique_ptr<Tokenizer> make_hf_spm_tokenizer(Vocab vocab, HfSpmSettings settings) {
  return std::make_unique<HfSpmTokenizer>(std::move(vocab), std::move(settings));
}

}  // namespace sinkscope::tokenizer_detail
