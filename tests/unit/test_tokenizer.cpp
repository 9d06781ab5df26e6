// SPDX-License-Identifier: Apache-2.0
// Tokenizer tests against golden ids from HF tokenizers / sentencepiece
// (tests/oracle/make_tokenizer_golden.py writes tests/golden/tokenizer/*).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "engine/util/json_io.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"
#include "tests/unit/test_support.h"

namespace sinkscope {
namespace {

using Value = Json;

const Value& golden() {
  static const Value v = [] {
    std::ifstream in(test::golden_dir() / "tokenizer" / "smollm2.json", std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return Json::parse(ss.str());
  }();
  return v;
}

std::vector<TokenId> to_ids(const Value& arr) {
  std::vector<TokenId> out;
  for (const Value& x : arr) out.push_back(static_cast<TokenId>(x.get<int64_t>()));
  return out;
}

std::string show(const std::vector<TokenId>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  s += ']';
  return s;
}

class SmolLM2Tokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    SINKSCOPE_REQUIRE_DEFAULT_MODEL(path);
    m_file = GgufFile::open(path);
    m_tok = Tokenizer::from_gguf(*m_file);
  }
  std::unique_ptr<GgufFile> m_file;
  std::unique_ptr<Tokenizer> m_tok;
};

// Compares every golden text's ids; reports each mismatch with the text.
void expect_golden_ids(const Tokenizer& tok, const Value& expected, bool parse_special) {
  const Value& texts = golden().at("texts");
  ASSERT_EQ(texts.size(), expected.size());
  size_t ok = 0, n_ids = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i].get<std::string>();
    const std::vector<TokenId> want = to_ids(expected[i]);
    const std::vector<TokenId> got = tok.encode(text, parse_special, false);
    n_ids += want.size();
    if (got == want) {
      ++ok;
    } else {
      ADD_FAILURE() << "text #" << i << " '" << text.substr(0, 80) << "'\n  want " << show(want)
                    << "\n  got  " << show(got);
    }
    EXPECT_EQ(tok.decode(got), text) << "round trip of text #" << i;
  }
  std::printf("[golden] %zu/%zu texts, %zu ids, parse_special=%d\n", ok, texts.size(), n_ids,
              int(parse_special));
}

TEST_F(SmolLM2Tokenizer, Metadata) {
  EXPECT_EQ(m_tok->model_name(), "gpt2");
  EXPECT_EQ(m_tok->vocab_size(), 49152);
  EXPECT_EQ(m_tok->bos(), 1);
  EXPECT_EQ(m_tok->eos(), 2);
  EXPECT_EQ(m_tok->find_token("<|im_start|>"), 1);
  EXPECT_EQ(m_tok->find_token("<|im_end|>"), 2);
  EXPECT_EQ(m_tok->find_token("no such token"), -1);
  EXPECT_EQ(m_tok->chat_format(), ChatFormat::kChatML);
  // add_bos_token is false for SmolLM2; an explicit request still adds it.
  EXPECT_EQ(m_tok->encode("Hi"), m_tok->encode("Hi", false, false));
  EXPECT_EQ(m_tok->encode("Hi", false, true).front(), 1);
}

TEST_F(SmolLM2Tokenizer, GoldenIdsWithSpecialParsing) {
  expect_golden_ids(*m_tok, golden().at("smollm2").at("ids_special"), true);
}

TEST_F(SmolLM2Tokenizer, GoldenIdsWithoutSpecialParsing) {
  expect_golden_ids(*m_tok, golden().at("smollm2").at("ids_plain"), false);
}

TEST_F(SmolLM2Tokenizer, ParseSpecialSwitch) {
  EXPECT_EQ(m_tok->encode("<|im_start|>", true), std::vector<TokenId>{1});
  const auto plain = m_tok->encode("<|im_start|>", false);
  EXPECT_GT(plain.size(), 1u);
  for (TokenId id : plain) EXPECT_GT(id, 16) << "no special id without parse_special";
  EXPECT_EQ(m_tok->decode(plain), "<|im_start|>");
  // Leftmost-longest, adjacent and partial markers.
  EXPECT_EQ(m_tok->encode("<|im_end|><|im_end|>", true), (std::vector<TokenId>{2, 2}));
  const auto partial = m_tok->encode("<|im_end|", true);
  EXPECT_EQ(std::count(partial.begin(), partial.end(), 2), 0);
}

TEST_F(SmolLM2Tokenizer, DecodeAndPieces) {
  const std::string text = "Hello, wörld! 你好 😀 <|im_end|>";
  const auto ids = m_tok->encode(text, true);
  std::string joined;
  for (TokenId id : ids) joined += m_tok->token_to_piece(id);
  EXPECT_EQ(joined, text);
  EXPECT_EQ(m_tok->decode(ids), text);
  EXPECT_EQ(m_tok->decode(ids, /*skip_special=*/true), "Hello, wörld! 你好 😀 ");
  EXPECT_THROW(m_tok->decode({49152}), TokenizerError);
  EXPECT_THROW(m_tok->token_to_piece(-1), TokenizerError);
}

TEST_F(SmolLM2Tokenizer, IsEog) {
  EXPECT_TRUE(m_tok->is_eog(m_tok->eos()));
  EXPECT_TRUE(m_tok->is_eog(m_tok->find_token("<|im_end|>")));
  EXPECT_TRUE(m_tok->is_eog(m_tok->find_token("<|endoftext|>")));
  EXPECT_FALSE(m_tok->is_eog(m_tok->find_token("<|im_start|>")));
  EXPECT_FALSE(m_tok->is_eog(m_tok->encode("Hello").front()));
  EXPECT_FALSE(m_tok->is_eog(-1));
}

TEST_F(SmolLM2Tokenizer, InvalidUtf8) {
  // Lone continuation bytes, truncated sequences, an overlong form, a surrogate: all bytes that
  // SmolLM2's vocabulary has round-trip exactly.
  const std::string bad = "a\x80 b\xC3 c\xE2\x82 d\xC3\xA9\xA9 e\xE0\x80\x80 f\xED\xA0\x80 g";
  const auto ids = m_tok->encode(bad, true);
  EXPECT_EQ(m_tok->decode(ids), bad);
  // 0xFF (and 20 other bytes) have no token in SmolLM2's vocabulary: like HF, they are dropped.
  EXPECT_EQ(m_tok->decode(m_tok->encode("x\xFFy")), "xy");
  // Decoding half of a multi-byte character gives the partial bytes, for streaming.
  const auto euro = m_tok->encode("\xE2\x82\xAC");
  std::string bytes;
  for (TokenId id : euro) bytes += m_tok->token_to_piece(id);
  EXPECT_EQ(bytes, "\xE2\x82\xAC");
}

TEST_F(SmolLM2Tokenizer, ChatTemplateMatchesHf) {
  const Value& rows = golden().at("smollm2").at("chat");
  ASSERT_GT(rows.size(), 0u);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<ChatMessage> msgs;
    for (const Value& m : rows[i].at("messages"))
      msgs.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    const std::string rendered = m_tok->apply_chat_template(msgs);
    EXPECT_EQ(rendered, rows[i].at("rendered").get<std::string>()) << "chat #" << i;
    EXPECT_EQ(m_tok->encode(rendered, true), to_ids(rows[i].at("ids"))) << "chat #" << i;
  }
  EXPECT_EQ(m_tok->apply_chat_template({}), "<|im_start|>assistant\n");
}

TEST(Tokenizer, PreSplitMatchesHfRegexes) {
  const Value& texts = golden().at("texts");
  const std::pair<const char*, unicode::PreSplit> families[] = {
      {"gpt2", unicode::PreSplit::kGpt2},
      {"smollm", unicode::PreSplit::kSmolLM},
      {"qwen2", unicode::PreSplit::kQwen2},
      {"llama3", unicode::PreSplit::kLlama3},
  };
  for (const auto& [name, kind] : families) {
    const Value& rows = golden().at("pre_split").at(name);
    size_t ok = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string& text = texts[i].get<std::string>();
      std::vector<int64_t> want, got;
      for (const Value& n : rows[i]) want.push_back(n.get<int64_t>());
      for (const auto& [b, e] : unicode::pre_split(kind, text)) got.push_back(int64_t(e - b));
      if (got == want) {
        ++ok;
      } else {
        ADD_FAILURE() << name << " text #" << i << " '" << text.substr(0, 60) << "'";
      }
    }
    std::printf("[pre_split] %s: %zu/%zu texts\n", name, ok, texts.size());
  }
}

class SpmTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    m_file = GgufFile::open(test::golden_dir() / "tokenizer" / "spm_tiny.gguf");
    m_tok = Tokenizer::from_gguf(*m_file);
  }
  std::unique_ptr<GgufFile> m_file;
  std::unique_ptr<Tokenizer> m_tok;
};

TEST_F(SpmTokenizer, GoldenIdsFromSentencePiece) {
  EXPECT_EQ(m_tok->model_name(), "llama");
  expect_golden_ids(*m_tok, golden().at("spm").at("ids"), false);
}

TEST_F(SpmTokenizer, BosSpacePrefixAndBytes) {
  const auto ids = m_tok->encode("Hello world");  // add_bos_token = true in the file
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), m_tok->bos());
  EXPECT_EQ(m_tok->decode(ids, true), "Hello world");
  EXPECT_EQ(m_tok->decode(ids), "<s>Hello world");
  // Every byte has a <0xNN> fallback, so any input round-trips, invalid UTF-8 included.
  std::string all;
  for (int b = 1; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(m_tok->decode(m_tok->encode(all, false, false)), all);
  EXPECT_EQ(m_tok->encode("", false, false), std::vector<TokenId>{});
  EXPECT_EQ(m_tok->encode("</s>", true, false), std::vector<TokenId>{m_tok->eos()});
  EXPECT_TRUE(m_tok->is_eog(m_tok->eos()));
  EXPECT_EQ(m_tok->chat_format(), ChatFormat::kNone);
}

TEST(Tokenizer, MissingMetadataIsAnError) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  const auto bytes = w.to_bytes();
  auto file = GgufFile::from_memory(bytes.data(), bytes.size(), "empty.gguf");
  try {
    Tokenizer::from_gguf(*file);
    FAIL() << "expected TokenizerError";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model"), std::string::npos) << e.what();
  }
  w.set_string("tokenizer.ggml.model", "wordpiece");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  const auto bytes2 = w.to_bytes();
  auto file2 = GgufFile::from_memory(bytes2.data(), bytes2.size(), "wp.gguf");
  EXPECT_THROW(Tokenizer::from_gguf(*file2), TokenizerError);
}

TEST(Tokenizer, RenderLlama3) {
  const std::string out =
      render_chat(ChatFormat::kLlama3, {{"system", " Be brief. "}, {"user", "Hi\n"}});
  EXPECT_EQ(out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(Tokenizer, ChatmlDefaultSystemFromTemplate) {
  const std::string qwen =
      "{%- else %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
      "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
      "helpful assistant.<|im_end|>\\n' }}";
  EXPECT_EQ(chatml_default_system(qwen),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(chatml_default_system("{{'<|im_start|>' + message['role'] + '\\n'}}"), "");
}

}  // namespace
}  // namespace sinkscope
