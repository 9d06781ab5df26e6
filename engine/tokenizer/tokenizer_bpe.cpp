// SPDX-License-Identifier: Apache-2.0
// Byte-level BPE (tokenizer.ggml.model = "gpt2"): pre-tokenizer split, GPT-2 byte-to-unicode
// mapping, then merges by rank (rank = index in tokenizer.ggml.merges), lowest rank first and
// leftmost first on ties, which is what HF tokenizers' BPE model computes.
#include <algorithm>
#include <array>
#include <mutex>
#include <queue>

#include "engine/format/gguf.h"
#include "engine/tokenizer/tokenizer_internal.h"
#include "engine/tokenizer/unicode.h"

namespace sinkscope::tokenizer_detail {
namespace {

using unicode::PreSplit;

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other 68 bytes get
// U+0100.. in byte order, so every byte has a visible, non-space character.
std::array<uint32_t, 256> make_byte_to_cp() {
  std::array<uint32_t, 256> map{};
  auto printable = [](uint32_t b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) map[b] = printable(b) ? b : next++;
  return map;
}

PreSplit split_for(const std::string& pre, bool& ignore_merges) {
  ignore_merges = false;
  // Families whose HF pre-tokenizer is Digits(individual_digits) + ByteLevel (llama.cpp groups
  // them the same way).
  for (const char* n : {"smollm", "starcoder", "refact", "codeshell", "exaone", "minerva"})
    if (pre == n) return PreSplit::kSmolLM;
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") return PreSplit::kQwen2;
  for (const char* n : {"llama3", "llama-v3", "llama-bpe", "smaug-bpe", "dbrx"}) {
    if (pre == n) {
      // Llama 3's tokenizer.json sets ignore_merges: a word that is itself a token is emitted
      // whole, even when the merges would not reach it.
      ignore_merges = true;
      return PreSplit::kLlama3;
    }
  }
  // "default", "gpt2", an absent key, and anything unknown: the GPT-2 regex, the historical
  // default.
  return PreSplit::kGpt2;
}

struct Merge {
  int32_t rank;
  TokenId result;
};

uint64_t pair_key(TokenId a, TokenId b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// splitmix64 finaliser: std::hash<uint64_t> is the identity on libstdc++, which clusters badly
// for keys whose low half is a small id.
struct PairHash {
  size_t operator()(uint64_t x) const {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return static_cast<size_t>(x);
  }
};

class BpeTokenizer final : public TokenizerBase {
 public:
  BpeTokenizer(Vocab vocab, const BpeSettings& settings);
  std::string model_name() const override { return "gpt2"; }

 protected:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<TokenId>& out) const override;
  void append_piece(TokenId id, std::string& out) const override { out += m_token_bytes[id]; }

 private:
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;
  void merge_word(std::string_view word, std::vector<TokenId>& out) const;

  PreSplit m_split = PreSplit::kGpt2;
  bool m_ignore_merges = false;
  bool m_nfc = false;
  std::array<uint32_t, 256> m_byte_to_cp{};
  std::array<TokenId, 256> m_byte_token{};  // -1: the byte has no token (dropped, as HF does)
  std::unordered_map<uint64_t, Merge, PairHash> m_merges;
  std::vector<std::string> m_token_bytes;  // each token's raw bytes, for decode

  // Words repeat a lot in real text; the cache makes their second encoding a lookup.
  static constexpr size_t kCacheLimit = 1 << 18;
  mutable std::mutex m_cache_mutex;
  mutable std::unordered_map<std::string, std::vector<TokenId>> m_cache;
};

BpeTokenizer::BpeTokenizer(Vocab vocab, const BpeSettings& settings)
    : TokenizerBase(std::move(vocab)) {
  m_split = settings.split;
  m_ignore_merges = settings.ignore_merges;
  m_nfc = settings.nfc;

  m_byte_to_cp = make_byte_to_cp();
  std::unordered_map<uint32_t, uint8_t> cp_to_byte;
  for (uint32_t b = 0; b < 256; ++b) {
    cp_to_byte[m_byte_to_cp[b]] = static_cast<uint8_t>(b);
    std::string s;
    unicode::append_utf8(s, m_byte_to_cp[b]);
    auto it = m_vocab.ids.find(s);
    m_byte_token[b] = it == m_vocab.ids.end() ? -1 : it->second;
  }

  const size_t n = m_vocab.tokens.size();
  m_token_bytes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = m_vocab.tokens[i];
    std::string& bytes = m_token_bytes[i];
    for (size_t pos = 0; pos < t.size();) {
      const unicode::Decoded d = unicode::decode_utf8(t, pos);
      auto it = d.cp == unicode::kInvalid ? cp_to_byte.end() : cp_to_byte.find(d.cp);
      if (it != cp_to_byte.end()) {
        bytes += static_cast<char>(it->second);
      } else {
        bytes.append(t, pos, d.len);  // not a byte-level character: keep it verbatim
      }
      pos += d.len;
    }
  }

  m_merges.reserve(settings.merges.size() * 2);
  for (size_t rank = 0; rank < settings.merges.size(); ++rank) {
    const auto& [left, right] = settings.merges[rank];
    auto l = m_vocab.ids.find(left), r = m_vocab.ids.find(right),
         res = m_vocab.ids.find(left + right);
    if (l == m_vocab.ids.end() || r == m_vocab.ids.end() || res == m_vocab.ids.end()) continue;
    // Keep the first (lowest) rank when a pair repeats.
    m_merges.emplace(pair_key(l->second, r->second),
                     Merge{static_cast<int32_t>(rank), res->second});
  }
}

void BpeTokenizer::encode_text(std::string_view raw, bool, std::vector<TokenId>& out) const {
  std::string normalized;
  if (m_nfc) normalized = unicode::nfc(raw);
  const std::string_view text = m_nfc ? std::string_view(normalized) : raw;
  for (const auto& [b, e] : unicode::pre_split(m_split, text))
    encode_word(text.substr(b, e - b), out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<TokenId>& out) const {
  if (word.size() == 1) {  // single bytes are frequent and need no merging
    if (TokenId id = m_byte_token[static_cast<unsigned char>(word[0])]; id >= 0) out.push_back(id);
    return;
  }
  if (m_ignore_merges) {
    std::string mapped;
    for (char c : word) unicode::append_utf8(mapped, m_byte_to_cp[static_cast<unsigned char>(c)]);
    if (auto it = m_vocab.ids.find(mapped); it != m_vocab.ids.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const std::string key(word);
  {
    std::lock_guard<std::mutex> lock(m_cache_mutex);
    if (auto it = m_cache.find(key); it != m_cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  merge_word(word, out);
  std::lock_guard<std::mutex> lock(m_cache_mutex);
  if (m_cache.size() >= kCacheLimit) m_cache.clear();
  m_cache.emplace(key,
                  std::vector<TokenId>(out.begin() + static_cast<ptrdiff_t>(start), out.end()));
}

void BpeTokenizer::merge_word(std::string_view word, std::vector<TokenId>& out) const {
  // Symbols form a doubly linked list over the word's bytes; a min-heap holds candidate pairs.
  // A popped pair is stale when either side has changed since it was pushed.
  struct Symbol {
    TokenId id;
    int32_t prev, next;
  };
  struct Candidate {
    int32_t rank, left, right;
    TokenId left_id, right_id, result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (char c : word) {
    // Bytes without a token are dropped, which is what HF's BPE does when it has no unk token.
    const TokenId id = m_byte_token[static_cast<unsigned char>(c)];
    if (id < 0) continue;
    const auto i = static_cast<int32_t>(sym.size());
    sym.push_back({id, i - 1, i + 1});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    auto it = m_merges.find(pair_key(sym[l].id, sym[r].id));
    if (it != m_merges.end())
      heap.push({it->second.rank, l, r, sym[l].id, sym[r].id, it->second.result});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i, i + 1);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = sym[c.left];
    if (l.id != c.left_id || l.next != c.right || sym[c.right].id != c.right_id) continue;
    Symbol& r = sym[c.right];
    l.id = c.result;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    r.id = -1;  // dead
    push(l.prev, c.left);
    push(c.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, BpeSettings settings) {
  return std::make_unique<BpeTokenizer>(std::move(vocab), settings);
}

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab vocab, const GgufFile& file) {
  BpeSettings s;
  s.split = split_for(file.get_string_or("tokenizer.ggml.pre", "default"), s.ignore_merges);
  vocab.add_bos = file.get_bool_or("tokenizer.ggml.add_bos_token", false);
  const GgufValue* merges = file.find("tokenizer.ggml.merges");
  if (!merges || merges->strings.empty())
    throw TokenizerError(file.path() +
                         ": tokenizer.ggml.merges is missing or empty (needed by gpt2 BPE)");
  s.merges.reserve(merges->strings.size());
  for (size_t rank = 0; rank < merges->strings.size(); ++rank) {
    const std::string& m = merges->strings[rank];
    // Split at the first space after the first character (byte-level tokens contain no spaces).
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos)
      throw TokenizerError(file.path() + ": tokenizer.ggml.merges[" + std::to_string(rank) +
                           "] = '" + m + "' is not 'left right'");
    s.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  return make_bpe_tokenizer(std::move(vocab), std::move(s));
}

}  // namespace sinkscope::tokenizer_detail
