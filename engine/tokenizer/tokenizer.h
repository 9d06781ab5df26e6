// SPDX-License-Identifier: Apache-2.0
// Tokenizer built from GGUF metadata (tokenizer.ggml.*):
//  - "gpt2": byte-level BPE with a pre-tokenizer chosen by tokenizer.ggml.pre (SmolLM2, Qwen2,
//    Llama 3, GPT-2 regexes);
//  - "llama": SentencePiece-style BPE over scores, with byte fallback (<0xNN>) and the
//    U+2581 space marker.
// or from a Hugging Face tokenizer.json (byte-level BPE with a GPT-2 / SmolLM2 / Qwen2 / Llama 3
// pre-tokenizer, engine/tokenizer/tokenizer_hf.cpp).
// Special/control tokens are matched as whole strings before normal tokenization when
// `parse_special` is set. Chat formats: ChatML (SmolLM2, Qwen) and Llama 3.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sinkscope {

class GgufFile;

class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using TokenId = int32_t;

struct ChatMessage {
  std::string role;  // system | user | assistant
  std::string content;
};

enum class ChatFormat { kNone, kChatML, kLlama3 };

// The files of a Hugging Face tokenizer, as text (read by the caller; the fuzzers pass their own).
struct HfTokenizerFiles {
  std::string tokenizer_json;         // tokenizer.json
  std::string tokenizer_config_json;  // tokenizer_config.json; "" when absent
  std::string chat_template;          // chat_template.jinja; "" when absent
  std::string config_json;            // the model's config.json (bos/eos ids); "" when absent
  std::string generation_config_json; // generation_config.json (eos ids); "" when absent
  std::string source;                 // the checkpoint directory, for messages
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Builds the tokenizer described by the file's metadata. Throws TokenizerError naming the
  // missing or inconsistent key.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& file);
  // Builds a BPE tokenizer from tokenizer.json: byte-level (the pre-tokenizer of GPT-2, SmolLM2
  // (Digits + ByteLevel), Qwen2 or Llama 3 (Split with their regex + ByteLevel), no normalizer
  // or NFC, applied per fragment) or SentencePiece-style (byte_fallback,
  // U+2581 by Replace / Prepend normalizers or Metaspace; tokenizer_hf_spm.cpp), the
  // added tokens (special ones matched with parse_special, the others always). bos/eos, add_bos
  // and the chat template come from tokenizer_config.json (chat_template.jinja when it has
  // none), eos ids from generation_config.json and config.json also end generation. Throws
  // TokenizerError naming the file and the unsupported kind (e.g. a Unigram model).
  static std::unique_ptr<Tokenizer> from_hf(const HfTokenizerFiles& files);

  // Text to ids. add_bos follows tokenizer.ggml.add_bos_token unless overridden.
  // Invalid UTF-8 is not an error: bytes are encoded as-is (byte-level) or by byte fallback.
  virtual std::vector<TokenId> encode(std::string_view text, bool parse_special = false,
                                      std::optional<bool> add_bos = std::nullopt) const = 0;
  // Ids to text (bytes; may be invalid UTF-8 for a partial multi-byte sequence).
  virtual std::string decode(const std::vector<TokenId>& ids, bool skip_special = false) const = 0;
  // One token's bytes, for streaming output.
  virtual std::string token_to_piece(TokenId id) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual TokenId bos() const = 0;  // -1 when absent
  virtual TokenId eos() const = 0;  // -1 when absent
  virtual bool is_eog(TokenId id) const = 0;  // end of generation (eos, <|im_end|>, <|eot_id|>)
  virtual TokenId find_token(std::string_view text) const = 0;  // -1 when absent
  virtual std::string model_name() const = 0;  // "gpt2" | "llama"

  // Chat formatting (template picked from tokenizer.chat_template or the vocabulary).
  virtual ChatFormat chat_format() const = 0;
  // The Jinja source from tokenizer.chat_template ("" when absent). Only read for the few facts
  // the fixed renderers need (e.g. SmolLM2's default system prompt); it is never executed.
  virtual const std::string& chat_template() const;
  // Renders messages and appends the assistant prompt header, as HF's
  // apply_chat_template(add_generation_prompt=True) does for the supported templates
  // (including a default system prompt the template inserts when the first message is not one).
  std::string apply_chat_template(const std::vector<ChatMessage>& messages) const;
  // The prompt ids of apply_chat_template(messages), as HF's apply_chat_template(tokenize=True)
  // gives them: special tokens parsed, and no BOS added by the tokenizer for a real template (the
  // template writes its own: Llama 3 starts with <|begin_of_text|>, so encoding with the
  // tokenizer's add_bos would put two BOS tokens first). Without a template (ChatFormat::kNone)
  // the tokenizer's add_bos applies as for plain text.
  std::vector<TokenId> encode_chat(const std::vector<ChatMessage>& messages) const;
};

// `default_system`, when not empty, is rendered as a system message first unless the first
// message already is one. kNone renders "role: content" lines ending with "assistant: ".
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                        std::string_view default_system = {});
// The default system prompt a ChatML template inserts when the conversation has none
// (SmolLM2, Qwen2.5); empty when the template has none.
std::string chatml_default_system(std::string_view chat_template);

}  // namespace sinkscope
