// SPDX-License-Identifier: Apache-2.0
// Fixed renderers for the chat formats we support. We do not run Jinja: the supported templates
// are simple loops, and rendering them in C++ keeps the engine free of a template interpreter.
// The output matches HF's apply_chat_template(add_generation_prompt=True) byte for byte
// (checked by tests/golden/tokenizer/smollm2.json for SmolLM2).
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace sinkscope {
namespace {

bool is_jinja_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Jinja's `| trim` (Python str.strip() on ASCII whitespace, which is what Llama 3's template uses).
std::string_view trim(std::string_view s) {
  while (!s.empty() && is_jinja_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_jinja_space(s.back())) s.remove_suffix(1);
  return s;
}

// Resolves the backslash escapes of a Jinja string literal; false when the text is not the inside
// of one literal (an unescaped quote ends it).
bool unescape_literal(std::string_view s, std::string& out) {
  out.clear();
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\'' || c == '"') return false;
    if (c != '\\' || i + 1 == s.size()) {
      out += c;
      continue;
    }
    switch (const char e = s[++i]) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      default:
        out += e;
        break;  // \\ \' \"
    }
  }
  return true;
}

}  // namespace

std::string chatml_default_system(std::string_view tmpl) {
  // The default prompt is a literal '<|im_start|>system\n...<|im_end|>' inside the template; a
  // system header followed by a closing quote is the branch that renders the user's own prompt.
  for (std::string_view header : {"<|im_start|>system\\n", "<|im_start|>system\n"}) {
    for (size_t pos = tmpl.find(header); pos != std::string_view::npos;
         pos = tmpl.find(header, pos + 1)) {
      const size_t begin = pos + header.size();
      const size_t end = tmpl.find("<|im_end|>", begin);
      if (end == std::string_view::npos) break;
      std::string text;
      if (end > begin && unescape_literal(tmpl.substr(begin, end - begin), text)) return text;
    }
  }
  return {};
}

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                        std::string_view default_system) {
  std::string out;
  const bool add_default =
      !default_system.empty() && !messages.empty() && messages.front().role != "system";
  switch (format) {
    case ChatFormat::kChatML: {
      auto turn = [&](std::string_view role, std::string_view content) {
        out.append("<|im_start|>").append(role).append("\n").append(content).append("<|im_end|>\n");
      };
      if (add_default) turn("system", default_system);
      for (const ChatMessage& m : messages) turn(m.role, m.content);
      out += "<|im_start|>assistant\n";
      break;
    }
    case ChatFormat::kLlama3: {
      // Llama 3 trims every message and starts with the BOS text, so the rendered prompt must be
      // encoded with parse_special and without another BOS.
      auto turn = [&](std::string_view role, std::string_view content) {
        out.append("<|start_header_id|>").append(role).append("<|end_header_id|>\n\n");
        out.append(trim(content)).append("<|eot_id|>");
      };
      out += "<|begin_of_text|>";
      if (add_default) turn("system", default_system);
      for (const ChatMessage& m : messages) turn(m.role, m.content);
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    }
    case ChatFormat::kNone: {
      if (add_default) out.append("system: ").append(default_system).append("\n");
      for (const ChatMessage& m : messages)
        out.append(m.role).append(": ").append(m.content).append("\n");
      out += "assistant: ";
      break;
    }
  }
  return out;
}

std::string Tokenizer::apply_chat_template(const std::vector<ChatMessage>& messages) const {
  const ChatFormat format = chat_format();
  const std::string system =
      format == ChatFormat::kChatML ? chatml_default_system(chat_template()) : "";
  return render_chat(format, messages, system);
}

std::vector<TokenId> Tokenizer::encode_chat(const std::vector<ChatMessage>& messages) const {
  const bool templated = chat_format() != ChatFormat::kNone;
  return encode(apply_chat_template(messages), /*parse_special=*/true,
                templated ? std::optional<bool>(false) : std::nullopt);
}

}  // namespace sinkscope
