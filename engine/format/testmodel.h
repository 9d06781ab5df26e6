// SPDX-License-Identifier: Apache-2.0
// Random-weight GGUF models of the exact shapes of deployed models (Llama 3.1 8B, Qwen2.5 7B,
// Mistral 7B v0.3, SmolLM2 135M), for speed, memory and scale runs where the real weights are
// not at hand. Metadata keys, tensor names, shapes and the quantization mix are those llama.cpp's
// convert_hf_to_gguf.py and llama-quantize write, so llama.cpp loads the same files.
//
// The writer streams: the header first (tensor offsets follow from the declared types and
// shapes), then each tensor in batches of rows generated and quantized on a ThreadPool, into a
// temporary file renamed over the target at the end. Peak memory is one batch, not one model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/format/ggml_types.h"

namespace sinkscope {

class ThreadPool;

// How the vocabulary is laid out (which tokenizer, where the specials sit).
enum class TestVocabKind {
  kLlama3,   // gpt2 BPE, pre "llama-bpe": bytes + merges, then 256 specials (<|begin_of_text|>...)
  kQwen2,    // gpt2 BPE, pre "qwen2": bytes + merges, 22 specials, [PADn] up to n_vocab
  kSmolLM,   // gpt2 BPE, pre "smollm": 17 specials first, then bytes + merges
  kMistral,  // llama SPM: <unk> <s> </s>, 768 control tokens, <0xNN> bytes, then pieces
};

struct TestShape {
  std::string id;            // the --shape name, e.g. "llama3-8b"
  std::string display_name;  // the real model, e.g. "Llama-3.1-8B-Instruct"
  std::string architecture;  // llama | qwen2
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int n_ff = 0;
  int n_vocab = 0;
  int n_ctx = 0;  // context_length (trained context)
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;  // no output.weight
  bool qkv_bias = false;         // attn_{q,k,v}.bias (qwen2)
  // Llama 3.1 RoPE scaling, written as the rope_freqs.weight tensor (llama.cpp's converter does
  // not write rope.scaling.* keys for it).
  bool llama3_rope = false;
  float rope_factor = 8.0f, rope_low_freq_factor = 1.0f, rope_high_freq_factor = 4.0f;
  int rope_orig_ctx = 8192;
  TestVocabKind vocab = TestVocabKind::kLlama3;

  int head_dim() const { return n_embd / n_head; }
};

// The shapes by --shape name, in the order documented; nullopt for an unknown name.
const std::vector<TestShape>& test_model_shapes();
std::optional<TestShape> find_test_model_shape(std::string_view id);
std::string test_model_shape_names();  // "llama3-8b, qwen2.5-7b, mistral-7b, smollm2-135m"

// The file types of `--type`: llama.cpp's file types of the same names.
enum class TestModelType { kQ4_K_M, kQ8_0, kBF16, kF32 };
std::optional<TestModelType> parse_test_model_type(std::string_view name);
const char* test_model_type_name(TestModelType t);  // "q4_k_m" ...
std::string test_model_type_names();                // "q4_k_m, q8_0, bf16, f32"
uint32_t test_model_file_type(TestModelType t);     // general.file_type (llama_ftype)

// The fewest tokens a vocabulary of this kind can have (bytes and specials).
int test_model_min_vocab(TestVocabKind kind);

// What initialises a tensor.
enum class TestTensorInit {
  kWeight,     // N(0, 0.02)
  kNorm,       // 1 + N(0, 0.02)
  kBias,       // N(0, 0.02)
  kRopeFreqs,  // llama3_rope_factors()
};

struct TestTensorPlan {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the row length
  GgmlType type = GgmlType::kF32;
  TestTensorInit init = TestTensorInit::kWeight;
};

// The tensors of a shape in file order with the type `type` gives each (llama.cpp's rules:
// 1-D tensors f32; for q4_k_m Q4_K, with Q6_K for output.weight (token_embd.weight when tied) and
// for attn_v / ffn_down in the layers use_more_bits picks, and llama.cpp's fallback Q4_K -> Q5_0,
// Q6_K -> Q8_0 for rows that are not a multiple of 256).
std::vector<TestTensorPlan> plan_test_model_tensors(const TestShape& shape,
                                                    TestModelType type);

// Llama 3's RoPE frequency factors, as llama.cpp's converter computes rope_freqs.weight:
// 1 for wavelengths below orig_ctx / high_freq_factor, `factor` above orig_ctx / low_freq_factor,
// a smooth blend between. head_dim / 2 values.
std::vector<float> llama3_rope_factors(int head_dim, float theta, float factor,
                                       float low_freq_factor, float high_freq_factor,
                                       int orig_ctx);

struct TestModelProgress {
  int tensor = 0;             // 1-based index of the tensor being written
  int n_tensors = 0;
  std::string name;           // its name
  bool tensor_done = false;   // its last batch of rows is written
  uint64_t bytes_written = 0;
  uint64_t total_bytes = 0;
};

// A designed attention sink on top of the random weights (TestModelOptions::sink_pattern): the
// BOS embedding holds kSinkBos in channel 0, every token's embedding kSinkCommon in channel 1;
// in every layer, row hd-1 of each head in attn_q reads channel 1 and row hd-1 of each KV head
// in attn_k reads channel 0, both with weight sink_qk_weight(). Every query then has a
// component along the slowest RoPE pair of its head (unrotated, whatever the position) that
// meets a large component of the first token's key, so every head of every layer puts a large
// score on token 0: dynamic-sparse attention skips tiles at shares that lambda sets, as on
// trained models, and sparse-prefill speed can be measured at a chosen share. Still noise
// otherwise.
inline constexpr float kSinkBos = 4096.0f;
inline constexpr float kSinkCommon = 64.0f;
// The sink's score grows with the width and shrinks with 1 / sqrt(head_dim); the weight,
// (576 / n_embd) * (head_dim / 64)^(1/4), keeps it near where SmolLM2's width puts it at weight 1
// (about half of each query's attention on token 0, more than half of the tiles skipped at
// lambda 0.01 over 1K tokens; tests/unit/test_testmodel.cpp measures SmolLM2 and Llama-3.1-8B).
float sink_qk_weight(int n_embd, int head_dim);

struct TestModelOptions {
  TestShape shape;   // n_layer, n_ctx and n_vocab may be changed from the real values
  TestModelType type = TestModelType::kQ4_K_M;
  uint64_t seed = 0;
  bool sink_pattern = false;  // the designed attention sink above
  ThreadPool* pool = nullptr;  // null: the calling thread only
  std::function<void(const TestModelProgress&)> progress;  // after each batch of rows
};

struct TestModelResult {
  uint64_t file_size = 0;
  int n_tensors = 0;
  uint64_t n_params = 0;
  double seconds = 0;
};

// Writes the model atomically to `out` (temp file + rename). Deterministic for a seed: each row's
// values come from its own generator, so the thread count does not change the file. Throws
// std::invalid_argument for an inconsistent shape (layers, vocabulary below the minimum, widths
// not multiples of 32) and std::system_error / std::runtime_error for I/O failures.
TestModelResult write_test_model(const TestModelOptions& options,
                                 const std::filesystem::path& out);

}  // namespace sinkscope
