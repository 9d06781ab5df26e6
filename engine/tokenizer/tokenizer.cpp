// SPDX-License-Identifier: Apache-2.0
// Vocabulary loading, special-token splitting and the algorithm-independent half of Tokenizer.
#include <algorithm>
#include <cstring>

#include "engine/format/gguf.h"
#include "engine/tokenizer/tokenizer_internal.h"

namespace sinkscope {
namespace tokenizer_detail {
namespace {

std::string where(const GgufFile& file, std::string_view key) {
  return file.path() + ": " + std::string(key);
}

TokenId optional_id(const GgufFile& file, std::string_view key, size_t n_vocab) {
  const GgufValue* v = file.find(key);
  if (!v) return -1;
  const int64_t id = v->as_int(key);
  if (id < 0 || static_cast<size_t>(id) >= n_vocab) {
    // Some converters write -1 or an out-of-range id for "none"; treat it as absent.
    return -1;
  }
  return static_cast<TokenId>(id);
}

}  // namespace

Vocab load_vocab(const GgufFile& file) {
  Vocab v;
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->strings.empty())
    throw TokenizerError(where(file, "tokenizer.ggml.tokens") +
                         " is missing or not a string array");
  v.tokens = tokens->strings;
  const size_t n = v.tokens.size();

  v.types.assign(n, kNormal);
  if (const GgufValue* types = file.find("tokenizer.ggml.token_type")) {
    if (types->ints.size() != n)
      throw TokenizerError(where(file, "tokenizer.ggml.token_type") + " has " +
                           std::to_string(types->array_size()) + " entries, expected " +
                           std::to_string(n));
    for (size_t i = 0; i < n; ++i) v.types[i] = static_cast<int32_t>(types->ints[i]);
  }
  if (const GgufValue* scores = file.find("tokenizer.ggml.scores")) {
    if (scores->floats.size() != n)
      throw TokenizerError(where(file, "tokenizer.ggml.scores") + " has " +
                           std::to_string(scores->array_size()) + " entries, expected " +
                           std::to_string(n));
    v.scores.assign(scores->floats.begin(), scores->floats.end());
  }

  v.bos = optional_id(file, "tokenizer.ggml.bos_token_id", n);
  v.eos = optional_id(file, "tokenizer.ggml.eos_token_id", n);
  v.unk = optional_id(file, "tokenizer.ggml.unknown_token_id", n);
  v.chat_template = file.get_string_or("tokenizer.chat_template", "");
  std::vector<TokenId> extra;
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (TokenId id = optional_id(file, key, n); id >= 0) extra.push_back(id);
  }
  finish_vocab(v, extra);
  return v;
}

void finish_vocab(Vocab& v, const std::vector<TokenId>& extra_eog) {
  const size_t n = v.tokens.size();
  v.ids.clear();
  v.ids.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) v.ids.emplace(v.tokens[i], static_cast<TokenId>(i));  // first wins

  // End of generation: eos, the explicit eot/eom ids, and the end-of-turn markers of the chat
  // formats we render (SmolLM2's eos is <|im_end|>, but a base model may stop on <|endoftext|>).
  std::vector<TokenId> eog;
  if (v.eos >= 0) eog.push_back(v.eos);
  for (TokenId id : extra_eog)
    if (id >= 0 && static_cast<size_t>(id) < n) eog.push_back(id);
  for (const char* text :
       {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>"}) {
    if (auto it = v.ids.find(text); it != v.ids.end()) eog.push_back(it->second);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  v.eog = std::move(eog);

  v.always_matched.assign(n, false);
  for (auto& bucket : v.special_by_byte) bucket.clear();
  for (size_t i = 0; i < n; ++i) {
    if (!v.is_special(static_cast<TokenId>(i)) || v.tokens[i].empty()) continue;
    v.special_by_byte[static_cast<unsigned char>(v.tokens[i][0])].push_back(
        static_cast<TokenId>(i));
    v.always_matched[i] = v.types[i] == kUserDefined;
  }
  for (auto& bucket : v.special_by_byte) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](TokenId a, TokenId b) { return v.tokens[a].size() > v.tokens[b].size(); });
  }
}

std::vector<Fragment> split_special(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> out;
  size_t plain_begin = 0;
  for (size_t pos = 0; pos < text.size();) {
    const auto& bucket = vocab.special_by_byte[static_cast<unsigned char>(text[pos])];
    TokenId hit = -1;
    for (TokenId id : bucket) {  // longest first
      if (!parse_special && !vocab.always_matched[id]) continue;
      const std::string& s = vocab.tokens[id];
      if (s.size() <= text.size() - pos &&
          std::memcmp(text.data() + pos, s.data(), s.size()) == 0) {
        hit = id;
        break;
      }
    }
    if (hit < 0) {
      ++pos;
      continue;
    }
    if (pos > plain_begin) out.push_back({text.substr(plain_begin, pos - plain_begin), -1});
    out.push_back({text.substr(pos, vocab.tokens[hit].size()), hit});
    pos += vocab.tokens[hit].size();
    plain_begin = pos;
  }
  if (plain_begin < text.size()) out.push_back({text.substr(plain_begin), -1});
  return out;
}

TokenizerBase::TokenizerBase(Vocab vocab) : m_vocab(std::move(vocab)) {}

void TokenizerBase::check_id(TokenId id) const {
  if (id < 0 || id >= vocab_size())
    throw TokenizerError("token id " + std::to_string(id) + " is outside the vocabulary (size " +
                         std::to_string(vocab_size()) + ")");
}

std::vector<TokenId> TokenizerBase::encode(std::string_view text, bool parse_special,
                                           std::optional<bool> add_bos) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos.value_or(m_vocab.add_bos) && m_vocab.bos >= 0) out.push_back(m_vocab.bos);
  bool after_special = true;
  for (const Fragment& f : split_special(m_vocab, text, parse_special)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      after_special = true;
    } else {
      encode_fragment(f.text, f.text.data() == text.data(), after_special, out);
      after_special = false;
    }
  }
  return out;
}

std::string TokenizerBase::decode(const std::vector<TokenId>& ids, bool skip_special) const {
  std::string out;
  out.reserve(ids.size() * 4);
  bool first = true;
  std::string piece;
  for (TokenId id : ids) {
    check_id(id);
    if (m_vocab.is_special(id)) {
      if (!skip_special) out += m_vocab.tokens[id];
      // A leading BOS does not make the next token "not first": the space prefix was added
      // after it, so it is still stripped.
      if (id != m_vocab.bos) first = false;
      continue;
    }
    piece.clear();
    append_piece(id, piece);
    if (first) fix_first_piece(piece);
    first = false;
    out += piece;
  }
  return out;
}

std::string TokenizerBase::token_to_piece(TokenId id) const {
  check_id(id);
  if (m_vocab.is_special(id)) return m_vocab.tokens[id];
  std::string piece;
  append_piece(id, piece);
  return piece;
}

bool TokenizerBase::is_eog(TokenId id) const {
  return std::binary_search(m_vocab.eog.begin(), m_vocab.eog.end(), id);
}

TokenId TokenizerBase::find_token(std::string_view text) const {
  auto it = m_vocab.ids.find(std::string(text));
  return it == m_vocab.ids.end() ? -1 : it->second;
}

ChatFormat TokenizerBase::chat_format() const {
  const std::string& t = m_vocab.chat_template;
  if (t.find("<|start_header_id|>") != std::string::npos) return ChatFormat::kLlama3;
  if (t.find("<|im_start|>") != std::string::npos) return ChatFormat::kChatML;
  // No (recognised) template: fall back to the vocabulary's markers.
  if (m_vocab.ids.count("<|start_header_id|>") && m_vocab.ids.count("<|eot_id|>"))
    return ChatFormat::kLlama3;
  if (m_vocab.ids.count("<|im_start|>") && m_vocab.ids.count("<|im_end|>"))
    return ChatFormat::kChatML;
  return ChatFormat::kNone;
}

void append_spm_piece(const Vocab& v, TokenId id, std::string& out) {
  const std::string& t = v.tokens[size_t(id)];
  if (v.types[size_t(id)] == kByte && t.size() == 6 && t.compare(0, 3, "<0x") == 0) {
    out += static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16));
    return;
  }
  for (size_t pos = 0; pos < t.size();) {
    if (t.compare(pos, kSpaceMarker.size(), kSpaceMarker) == 0) {
      out += ' ';
      pos += kSpaceMarker.size();
    } else {
      out += t[pos++];
    }
  }
}

}  // namespace tokenizer_detail

const std::string& Tokenizer::chat_template() const {
  static const std::string empty;
  return empty;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  const GgufValue* model = file.find("tokenizer.ggml.model");
  if (!model) throw TokenizerError(file.path() + ": missing metadata key 'tokenizer.ggml.model'");
  const std::string name = model->as_string("tokenizer.ggml.model");
  tokenizer_detail::Vocab vocab = tokenizer_detail::load_vocab(file);
  if (name == "gpt2") return tokenizer_detail::make_bpe_tokenizer(std::move(vocab), file);
  if (name == "llama") return tokenizer_detail::make_spm_tokenizer(std::move(vocab), file);
  throw TokenizerError(file.path() + ": tokenizer.ggml.model '" + name +
                       "' is not supported (expected 'gpt2' or 'llama')");
}

}  // namespace sinkscope
