// SPDX-License-Identifier: Apache-2.0
// Random-weight models of real shapes, streamed to disk (see testmodel.h).
#include "engine/format/testmodel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "base/atomic_file.h"
#include "engine/format/gguf_writer.h"
#include "engine/util/thread_pool.h"

namespace sinkscope {

namespace {

// The shapes as llama.cpp's converter writes them from each model's config.json.
std::vector<TestShape> make_shapes() {
  std::vector<TestShape> v;
  {
    // meta-llama/Llama-3.1-8B-Instruct
    TestShape s;
    s.id = "llama3-8b";
    s.display_name = "Llama-3.1-8B-Instruct";
    s.architecture = "llama";
    s.n_layer = 32;
    s.n_embd = 4096;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.n_ff = 14336;
    s.n_vocab = 128256;
    s.n_ctx = 131072;
    s.rope_theta = 500000.0f;
    s.rms_eps = 1e-5f;
    s.llama3_rope = true;
    s.rope_factor = 8.0f;
    s.rope_low_freq_factor = 1.0f;
    s.rope_high_freq_factor = 4.0f;
    s.rope_orig_ctx = 8192;
    s.vocab = TestVocabKind::kLlama3;
    v.push_back(s);
  }
  {
    // Qwen/Qwen2.5-7B-Instruct (the 7B does not tie its embeddings)
    TestShape s;
    s.id = "qwen2.5-7b";
    s.display_name = "Qwen2.5-7B-Instruct";
    s.architecture = "qwen2";
    s.n_layer = 28;
    s.n_embd = 3584;
    s.n_head = 28;
    s.n_head_kv = 4;
    s.n_ff = 18944;
    s.n_vocab = 152064;
    s.n_ctx = 32768;
    s.rope_theta = 1000000.0f;
    s.rms_eps = 1e-6f;
    s.qkv_bias = true;
    s.vocab = TestVocabKind::kQwen2;
    v.push_back(s);
  }
  {
    // mistralai/Mistral-7B-Instruct-v0.3
    TestShape s;
    s.id = "mistral-7b";
    s.display_name = "Mistral-7B-Instruct-v0.3";
    s.architecture = "llama";
    s.n_layer = 32;
    s.n_embd = 4096;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.n_ff = 14336;
    s.n_vocab = 32768;
    s.n_ctx = 32768;
    s.rope_theta = 1000000.0f;
    s.rms_eps = 1e-5f;
    s.vocab = TestVocabKind::kMistral;
    v.push_back(s);
  }
  {
    // HuggingFaceTB/SmolLM2-135M-Instruct (the project's default model; tied embeddings)
    TestShape s;
    s.id = "smollm2-135m";
    s.display_name = "SmolLM2-135M-Instruct";
    s.architecture = "llama";
    s.n_layer = 30;
    s.n_embd = 576;
    s.n_head = 9;
    s.n_head_kv = 3;
    s.n_ff = 1536;
    s.n_vocab = 49152;
    s.n_ctx = 8192;
    s.rope_theta = 100000.0f;
    s.rms_eps = 1e-5f;
    s.tied_embeddings = true;
    s.vocab = TestVocabKind::kSmolLM;
    v.push_back(s);
  }
  return v;
}

constexpr int kLlama3Specials = 256;
constexpr int kQwen2Specials = 22;
constexpr int kQwen2Tokens = 151665;  // Qwen2.5's tokenizer; the embedding rows beyond it are pads
constexpr int kSmolLMSpecials = 17;
constexpr int kMistralControls = 771;  // <unk> <s> </s> + 768 control tokens, before the bytes

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
constexpr int32_t kTokNormal = 1, kTokUnknown = 2, kTokControl = 3, kTokUnused = 5, kTokByte = 6;

struct Vocab {
  std::string model, pre;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;  // gpt2 BPE
  std::vector<float> scores;        // llama SPM
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  bool add_bos = false, add_space_prefix = false;
  std::string chat_template;
};

const char* const kChatMLTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char* const kLlama3Template =
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}";
const char* const kMistralTemplate =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}"
    "{% endif %}{% endfor %}";

// Synthetic multi-character tokens, breadth first: every token of a level is a token of the
// previous level plus one letter, so each is one merge of two existing tokens and all are
// distinct. `frontier` is level 0 (its tokens must already exist); emit(a, b) adds a + b.
template <typename Emit>
void extend_by_letters(std::vector<std::string> frontier, int count, Emit emit) {
  int made = 0;
  while (made < count) {
    std::vector<std::string> next;
    for (const std::string& t : frontier) {
      for (char c = 'a'; c <= 'z' && made < count; ++c) {
        emit(t, std::string(1, c));
        next.push_back(t + c);
        ++made;
      }
      if (made >= count) break;
    }
    frontier = std::move(next);
  }
}

// Byte tokens then n_merged merge tokens (gpt2 BPE). "Ġ" is the space byte.
void add_bpe_body(Vocab& v, int n_merged) {
  for (std::string& b : gpt2_byte_tokens()) {
    v.tokens.push_back(std::move(b));
    v.types.push_back(kTokNormal);
  }
  std::vector<std::string> roots{"\xC4\xA0"};  // U+0120 "Ġ"
  for (char c = 'a'; c <= 'z'; ++c) roots.emplace_back(1, c);
  extend_by_letters(roots, n_merged, [&](const std::string& a, const std::string& b) {
    v.merges.push_back(a + " " + b);
    v.tokens.push_back(a + b);
    v.types.push_back(kTokNormal);
  });
}

void add_specials(Vocab& v, const std::vector<std::string>& names) {
  for (const std::string& s : names) {
    v.tokens.push_back(s);
    v.types.push_back(kTokControl);
  }
}

Vocab make_vocab(TestVocabKind kind, int n_vocab) {
  Vocab v;
  const int32_t n = n_vocab;
  switch (kind) {
    case TestVocabKind::kLlama3: {
      v.model = "gpt2";
      v.pre = "llama-bpe";
      add_bpe_body(v, n - kLlama3Specials - 256);
      std::vector<std::string> sp = {"<|begin_of_text|>",
                                     "<|end_of_text|>",
                                     "<|reserved_special_token_0|>",
                                     "<|reserved_special_token_1|>",
                                     "<|finetune_right_pad_id|>",
                                     "<|reserved_special_token_2|>",
                                     "<|start_header_id|>",
                                     "<|end_header_id|>",
                                     "<|eom_id|>",
                                     "<|eot_id|>",
                                     "<|python_tag|>"};
      for (int i = 3; static_cast<int>(sp.size()) < kLlama3Specials; ++i)
        sp.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
      const auto first = static_cast<int32_t>(v.tokens.size());
      add_specials(v, sp);
      v.bos = first;      // 128000
      v.eos = first + 9;  // 128009 <|eot_id|> (the Instruct model's eos)
      v.add_bos = true;
      v.chat_template = kLlama3Template;
      break;
    }
    case TestVocabKind::kQwen2: {
      v.model = "gpt2";
      v.pre = "qwen2";
      const int n_pad = std::max(0, n - kQwen2Tokens);
      add_bpe_body(v, n - n_pad - kQwen2Specials - 256);
      const auto first = static_cast<int32_t>(v.tokens.size());
      add_specials(v, {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
                       "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
                       "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                       "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                       "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                       "<|repo_name|>", "<|file_sep|>"});
      // llama.cpp's converter fills embedding rows without a token with unused [PADn] tokens.
      while (static_cast<int32_t>(v.tokens.size()) < n) {
        v.tokens.push_back("[PAD" + std::to_string(v.tokens.size()) + "]");
        v.types.push_back(kTokUnused);
      }
      v.bos = first;      // <|endoftext|>
      v.eos = first + 2;  // <|im_end|>
      v.pad = first;
      v.chat_template = kChatMLTemplate;
      break;
    }
    case TestVocabKind::kSmolLM: {
      v.model = "gpt2";
      v.pre = "smollm";
      add_specials(v, {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>",
                       "<reponame>", "<file_sep>", "<filename>", "<gh_stars>", "<issue_start>",
                       "<issue_comment>", "<issue_closed>", "<jupyter_start>", "<jupyter_text>",
                       "<jupyter_code>", "<jupyter_output>", "<jupyter_script>",
                       "<empty_output>"});
      add_bpe_body(v, n - kSmolLMSpecials - 256);
      v.unk = 0;
      v.bos = 1;
      v.eos = 2;
      v.pad = 2;
      v.chat_template = kChatMLTemplate;
      break;
    }
    case TestVocabKind::kMistral: {
      v.model = "llama";
      v.pre = "default";
      v.tokens = {"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]",
                  "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"};
      v.types = {kTokUnknown};
      v.types.resize(v.tokens.size(), kTokControl);
      for (int i = 8; static_cast<int>(v.tokens.size()) < kMistralControls; ++i) {
        v.tokens.push_back("[control_" + std::to_string(i) + "]");
        v.types.push_back(kTokControl);
      }
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        v.tokens.emplace_back(name);
        v.types.push_back(kTokByte);
      }
      v.scores.assign(v.tokens.size(), 0.0f);
      // Pieces, most frequent (highest score) first: single characters, then "▁" and letters
      // extended a letter at a time. SentencePiece merges two pieces when their concatenation
      // is a piece, so every longer piece is reachable from the characters.
      const std::string space = "\xE2\x96\x81";  // U+2581
      std::vector<std::string> singles{space};
      for (char c = 'a'; c <= 'z'; ++c) singles.emplace_back(1, c);
      for (char c = 'A'; c <= 'Z'; ++c) singles.emplace_back(1, c);
      for (char c = '0'; c <= '9'; ++c) singles.emplace_back(1, c);
      for (char c : std::string(".,!?'-:;()\"/")) singles.emplace_back(1, c);
      int left = n - static_cast<int>(v.tokens.size());
      auto piece = [&](const std::string& p) {
        v.scores.push_back(-static_cast<float>(v.tokens.size() - kMistralControls - 256));
        v.tokens.push_back(p);
        v.types.push_back(kTokNormal);
        --left;
      };
      for (const std::string& s : singles) {
        if (left > 0) piece(s);
      }
      std::vector<std::string> roots{space};
      for (char c = 'a'; c <= 'z'; ++c) roots.emplace_back(1, c);
      extend_by_letters(roots, std::max(0, left),
                        [&](const std::string& a, const std::string& b) { piece(a + b); });
      v.unk = 0;
      v.bos = 1;
      v.eos = 2;
      v.add_bos = true;
      v.add_space_prefix = true;
      v.chat_template = kMistralTemplate;
      break;
    }
  }
  if (static_cast<int32_t>(v.tokens.size()) != n)
    throw std::logic_error("make_test_model: vocabulary has " + std::to_string(v.tokens.size()) +
                           " tokens, expected " + std::to_string(n));
  return v;
}

// A fast generator per row: splitmix64, seeded from (seed, tensor, row).
class RowRng {
 public:
  RowRng(uint64_t seed, uint64_t tensor, uint64_t row)
      : m_state(mix(seed ^ mix(tensor * 0x9e3779b97f4a7c15ull + row + 1))) {}
  uint64_t next() {
    uint64_t z = (m_state += 0x9e3779b97f4a7c15ull);
    return mix(z);
  }
  // Approximately standard normal: the sum of four 16-bit uniforms (Irwin-Hall), scaled to unit
  // variance. One 64-bit draw per value; bounded at +-3.46, which random weights do not miss.
  float normal() {
    const uint64_t z = next();
    const uint32_t s = static_cast<uint32_t>(z & 0xffff) + static_cast<uint32_t>((z >> 16) & 0xffff) +
                       static_cast<uint32_t>((z >> 32) & 0xffff) + static_cast<uint32_t>(z >> 48);
    constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / 2^16
    return (static_cast<float>(s) - 131070.0f) * kScale;
  }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t m_state;
};

// llama.cpp's fallback for rows that are not a multiple of the K-quant super-block.
GgmlType with_fallback(GgmlType t, int64_t row) {
  const GgmlTypeTraits* tr = ggml_type_traits(static_cast<uint32_t>(t));
  if (row % tr->block_elems == 0) return t;
  if (t == GgmlType::kQ4_K) t = GgmlType::kQ5_0;
  if (t == GgmlType::kQ6_K) t = GgmlType::kQ8_0;
  return row % ggml_type_traits(static_cast<uint32_t>(t))->block_elems == 0 ? t : GgmlType::kF16;
}

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

void check_shape(const TestShape& s) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("make_test_model: " + s.id + ": " + why);
  };
  if (s.architecture != "llama" && s.architecture != "qwen2")
    bad("architecture must be llama or qwen2");
  if (s.n_layer < 1 || s.n_embd < 1 || s.n_head < 1 || s.n_head_kv < 1 || s.n_ff < 1 ||
      s.n_ctx < 1)
    bad("all sizes must be positive");
  if (s.n_embd % s.n_head != 0 || s.head_dim() % 2 != 0)
    bad("n_embd must be an even multiple of n_head");
  if (s.n_head % s.n_head_kv != 0) bad("n_head must be a multiple of n_head_kv");
  if (s.n_embd % 32 != 0 || s.n_ff % 32 != 0) bad("n_embd and n_ff must be multiples of 32");
  const int min_vocab = test_model_min_vocab(s.vocab);
  if (s.n_vocab < min_vocab)
    bad("the vocabulary needs at least " + std::to_string(min_vocab) + " tokens");
}

}  // namespace

const std::vector<TestShape>& test_model_shapes() {
  static const std::vector<TestShape> shapes = make_shapes();
  return shapes;
}

std::optional<TestShape> find_test_model_shape(std::string_view id) {
  for (const TestShape& s : test_model_shapes())
    if (s.id == id) return s;
  return std::nullopt;
}

std::string test_model_shape_names() {
  std::string out;
  for (const TestShape& s : test_model_shapes()) out += (out.empty() ? "" : ", ") + s.id;
  return out;
}

std::optional<TestModelType> parse_test_model_type(std::string_view name) {
  for (TestModelType t :
       {TestModelType::kQ4_K_M, TestModelType::kQ8_0, TestModelType::kBF16, TestModelType::kF32})
    if (name == test_model_type_name(t)) return t;
  return std::nullopt;
}

const char* test_model_type_name(TestModelType t) {
  switch (t) {
    case TestModelType::kQ4_K_M:
      return "q4_k_m";
    case TestModelType::kQ8_0:
      return "q8_0";
    case TestModelType::kBF16:
      return "bf16";
    case TestModelType::kF32:
      return "f32";
  }
  return "?";
}

std::string test_model_type_names() { return "q4_k_m, q8_0, bf16, f32"; }

uint32_t test_model_file_type(TestModelType t) {
  switch (t) {
    case TestModelType::kQ4_K_M:
      return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    case TestModelType::kQ8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case TestModelType::kBF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    case TestModelType::kF32:
      return 0;  // LLAMA_FTYPE_ALL_F32
  }
  return 0;
}

int test_model_min_vocab(TestVocabKind kind) {
  switch (kind) {
    case TestVocabKind::kLlama3:
      return 256 + kLlama3Specials;
    case TestVocabKind::kQwen2:
      return 256 + kQwen2Specials;
    case TestVocabKind::kSmolLM:
      return 256 + kSmolLMSpecials;
    case TestVocabKind::kMistral:
      return kMistralControls + 256;
  }
  return 0;
}

std::vector<float> llama3_rope_factors(int head_dim, float theta, float factor,
                                       float low_freq_factor, float high_freq_factor,
                                       int orig_ctx) {
  // Same steps and float32 precision as convert_hf_to_gguf.py (torch float32 tensors).
  const float low_wavelen = static_cast<float>(orig_ctx) / low_freq_factor;
  const float high_wavelen = static_cast<float>(orig_ctx) / high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    const float freq =
        1.0f / std::pow(theta, static_cast<float>(i) / static_cast<float>(head_dim));
    const float wavelen = static_cast<float>(2.0 * 3.141592653589793) / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(factor);
    } else {
      const float smooth = (static_cast<float>(orig_ctx) / wavelen - low_freq_factor) /
                           (high_freq_factor - low_freq_factor);
      out.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return out;
}

std::vector<TestTensorPlan> plan_test_model_tensors(const TestShape& s, TestModelType type) {
  const int64_t D = s.n_embd, KV = int64_t(s.head_dim()) * s.n_head_kv, F = s.n_ff,
                V = s.n_vocab;
  std::vector<TestTensorPlan> plan;
  // The type of a 2-D weight. `more_bits`: a tensor llama.cpp's Q4_K_M gives Q6_K.
  auto wtype = [&](int64_t row, bool more_bits) {
    switch (type) {
      case TestModelType::kQ4_K_M:
        return with_fallback(more_bits ? GgmlType::kQ6_K : GgmlType::kQ4_K, row);
      case TestModelType::kQ8_0:
        return GgmlType::kQ8_0;
      case TestModelType::kBF16:
        return GgmlType::kBF16;
      case TestModelType::kF32:
        return GgmlType::kF32;
    }
    return GgmlType::kF32;
  };
  auto weight = [&](std::string name, int64_t in, int64_t out, bool more_bits) {
    plan.push_back({std::move(name), {in, out}, wtype(in, more_bits), TestTensorInit::kWeight});
  };
  auto vec = [&](std::string name, int64_t n, TestTensorInit init) {
    plan.push_back({std::move(name), {n}, GgmlType::kF32, init});
  };
  if (s.llama3_rope) vec("rope_freqs.weight", s.head_dim() / 2, TestTensorInit::kRopeFreqs);
  // Tied: llama.cpp quantizes token_embd like the output tensor it stands in for.
  weight("token_embd.weight", D, V, s.tied_embeddings);
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool more = use_more_bits(l, s.n_layer);
    vec(p + "attn_norm.weight", D, TestTensorInit::kNorm);
    weight(p + "attn_q.weight", D, D, false);
    if (s.qkv_bias) vec(p + "attn_q.bias", D, TestTensorInit::kBias);
    weight(p + "attn_k.weight", D, KV, false);
    if (s.qkv_bias) vec(p + "attn_k.bias", KV, TestTensorInit::kBias);
    weight(p + "attn_v.weight", D, KV, more);
    if (s.qkv_bias) vec(p + "attn_v.bias", KV, TestTensorInit::kBias);
    weight(p + "attn_output.weight", D, D, false);
    vec(p + "ffn_norm.weight", D, TestTensorInit::kNorm);
    weight(p + "ffn_gate.weight", D, F, false);
    weight(p + "ffn_up.weight", D, F, false);
    weight(p + "ffn_down.weight", F, D, more);
  }
  vec("output_norm.weight", D, TestTensorInit::kNorm);
  // more_bits: Q4_K_M gives the output tensor Q6_K (q8_0, bf16, f32 keep their one type).
  if (!s.tied_embeddings) weight("output.weight", D, V, true);
  return plan;
}

float sink_qk_weight(int n_embd, int head_dim) {
  return float(576.0 / double(n_embd) * std::pow(double(head_dim) / 64.0, 0.25));
}

TestModelResult write_test_model(const TestModelOptions& o, const std::filesystem::path& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const TestShape& s = o.shape;
  check_shape(s);
  const std::vector<TestTensorPlan> plan = plan_test_model_tensors(s, o.type);
  const std::string& a = s.architecture;

  GgufWriter w(3, 32);
  w.set_string("general.architecture", a);
  w.set_string("general.type", "model");
  w.set_string("general.name", s.display_name + " (random weights)");
  w.set_string("general.description",
               "Random weights in the shape of " + s.display_name +
                   ", written by sinkscope-cli make-test-model --shape " + s.id + " --type " +
                   test_model_type_name(o.type) + " --seed " + std::to_string(o.seed) +
                   (o.sink_pattern ? " --sink-pattern" : "") +
                   ". For speed and memory measurements only: its output is noise.");
  w.set_u32("general.file_type", test_model_file_type(o.type));
  w.set_u32("general.quantization_version", 2);
  set_llama_hparams(w, a, s.n_layer, s.n_ctx, s.n_embd, s.n_ff, s.n_head, s.n_head_kv,
                    s.rope_theta, s.rms_eps);
  if (a == "llama") {
    // LlamaModel in convert_hf_to_gguf.py adds these two; Qwen2Model does not.
    w.set_u32(a + ".vocab_size", static_cast<uint32_t>(s.n_vocab));
    w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(s.head_dim()));
  }

  int bos = -1;
  {
    const Vocab v = make_vocab(s.vocab, s.n_vocab);
    bos = v.bos;
    w.set_string("tokenizer.ggml.model", v.model);
    w.set_string("tokenizer.ggml.pre", v.pre);
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    if (!v.scores.empty()) w.set_f32_array("tokenizer.ggml.scores", v.scores);
    w.set_i32_array("tokenizer.ggml.token_type", v.types);
    if (!v.merges.empty()) w.set_string_array("tokenizer.ggml.merges", v.merges);
    if (v.bos >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos));
    if (v.eos >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos));
    if (v.unk >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk));
    if (v.pad >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad));
    w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
    if (v.model == "llama") w.set_bool("tokenizer.ggml.add_eos_token", false);
    w.set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
    w.set_string("tokenizer.chat_template", v.chat_template);
  }

  TestModelResult r;
  uint64_t total = 0;
  for (const TestTensorPlan& t : plan) {
    w.declare_tensor(t.name, t.dims, t.type);
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d;
    r.n_params += static_cast<uint64_t>(n);
    total += (ggml_row_bytes(t.type, n) + 31) / 32 * 32;
  }
  const std::vector<uint8_t> header = w.header_bytes();
  total += header.size();
  r.n_tensors = static_cast<int>(plan.size());

  AtomicFileWriter file(out);
  file.write(header.data(), header.size());
  const std::vector<float> rope_factors =
      s.llama3_rope ? llama3_rope_factors(s.head_dim(), s.rope_theta, s.rope_factor,
                                          s.rope_low_freq_factor, s.rope_high_freq_factor,
                                          s.rope_orig_ctx)
                    : std::vector<float>{};

  // Rows are generated and quantized in batches of about kBatchBytes of output, each batch
  // split over the pool in items of about kItemElems values; memory is one batch plus a row of
  // floats per thread.
  constexpr uint64_t kBatchBytes = uint64_t{32} << 20;
  constexpr int64_t kItemElems = int64_t{1} << 18;
  // The designed sink (TestModelOptions::sink_pattern): what each tensor's rows get.
  enum class SinkRole { kNone, kEmbd, kQ, kK };
  const auto sink_role = [&](const std::string& name) {
    if (!o.sink_pattern) return SinkRole::kNone;
    if (name == "token_embd.weight") return SinkRole::kEmbd;
    const auto ends = [&](const char* suffix) {
      const std::string x(suffix);
      return name.size() > x.size() && name.compare(name.size() - x.size(), x.size(), x) == 0;
    };
    if (ends(".attn_q.weight")) return SinkRole::kQ;
    if (ends(".attn_k.weight")) return SinkRole::kK;
    return SinkRole::kNone;
  };
  if (o.sink_pattern && (bos < 0 || s.n_embd < 2))
    throw std::invalid_argument("make_test_model: the sink pattern needs a BOS token and n_embd >= 2");
  const int64_t hd = s.head_dim();
  const float sink_w = sink_qk_weight(s.n_embd, s.head_dim());
  std::vector<uint8_t> buf;
  for (size_t ti = 0; ti < plan.size(); ++ti) {
    const TestTensorPlan& t = plan[ti];
    const SinkRole role = sink_role(t.name);
    const int64_t row = t.dims[0];
    const int64_t rows = t.dims.size() > 1 ? t.dims[1] : 1;
    const uint64_t row_bytes = ggml_row_bytes(t.type, row);
    const int64_t batch_rows =
        std::max<int64_t>(1, static_cast<int64_t>(kBatchBytes / std::max<uint64_t>(row_bytes, 1)));
    const int64_t item_rows = std::max<int64_t>(1, kItemElems / row);
    for (int64_t r0 = 0; r0 < rows; r0 += batch_rows) {
      const int64_t nr = std::min(batch_rows, rows - r0);
      buf.resize(static_cast<size_t>(nr) * row_bytes);
      const int64_t n_items = (nr + item_rows - 1) / item_rows;
      auto work = [&](int64_t item) {
        thread_local std::vector<float> x;
        x.resize(static_cast<size_t>(row));
        const int64_t i0 = item * item_rows, i1 = std::min(nr, i0 + item_rows);
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t rr = r0 + i;
          switch (t.init) {
            case TestTensorInit::kRopeFreqs:
              std::copy(rope_factors.begin(), rope_factors.end(), x.begin());
              break;
            case TestTensorInit::kWeight:
            case TestTensorInit::kBias:
            case TestTensorInit::kNorm: {
              RowRng rng(o.seed, ti, static_cast<uint64_t>(rr));
              const float mean = t.init == TestTensorInit::kNorm ? 1.0f : 0.0f;
              for (float& v : x) v = mean + 0.02f * rng.normal();
              break;
            }
          }
          switch (role) {  // rows are output channels; x holds the row's input weights
            case SinkRole::kEmbd:
              x[1] = kSinkCommon;
              if (rr == bos) x[0] = kSinkBos;
              break;
            case SinkRole::kQ:
              if (rr % hd == hd - 1) x[1] = sink_w;
              break;
            case SinkRole::kK:
              if (rr % hd == hd - 1) x[0] = sink_w;
              break;
            case SinkRole::kNone:
              break;
          }
          quantize_row_into(t.type, x.data(), row, buf.data() + static_cast<size_t>(i) * row_bytes);
        }
      };
      if (o.pool) {
        o.pool->parallel_for(n_items, work);
      } else {
        for (int64_t i = 0; i < n_items; ++i) work(i);
      }
      file.write(buf.data(), buf.size());
      if (o.progress) {
        o.progress({static_cast<int>(ti) + 1, r.n_tensors, t.name, r0 + nr == rows,
                    file.bytes_written(), total});
      }
    }
    static const char kZeros[32] = {};
    const uint64_t pad = (32 - file.bytes_written() % 32) % 32;
    file.write(kZeros, pad);
  }
  if (file.bytes_written() != total)
    throw std::logic_error("make_test_model: wrote " + std::to_string(file.bytes_written()) +
                           " bytes, expected " + std::to_string(total));
  file.commit();
  r.file_size = total;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace sinkscope
