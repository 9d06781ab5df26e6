// SPDX-License-Identifier: Apache-2.0
// A small GGUF writer for tests and tools: metadata of every type, tensors of every type we can
// dequantize (quantized from float with simple reference quantizers), v2 or v3, any alignment.
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/format/gguf.h"

namespace sinkscope {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3, size_t alignment = 32);

  void set_u8(const std::string& key, uint8_t v);
  void set_i8(const std::string& key, int8_t v);
  void set_u16(const std::string& key, uint16_t v);
  void set_i16(const std::string& key, int16_t v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_i64(const std::string& key, int64_t v);
  void set_f32(const std::string& key, float v);
  void set_f64(const std::string& key, double v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_u8_array(const std::string& key, const std::vector<uint8_t>& v);
  // Any value as the reader returns it, including arrays of every element type and arrays of
  // arrays (used by round-trip tests). Throws std::invalid_argument for an inconsistent value.
  void set_value(const std::string& key, const GgufValue& v);

  // Adds a tensor given as float values in ggml order (dims[0] fastest); it is quantized to
  // `type` (dims[0] must be a multiple of the block size).
  void add_tensor(const std::string& name, const std::vector<int64_t>& dims, GgmlType type,
                  const std::vector<float>& values);
  // Adds a tensor whose bytes are already encoded in `type`.
  void add_raw_tensor(const std::string& name, const std::vector<int64_t>& dims, GgmlType type,
                      std::vector<uint8_t> bytes);

  // Declares a tensor whose bytes the caller streams to disk itself, after header_bytes(), in
  // declaration order, each padded with zeros to the alignment (engine/format/testmodel.cpp). A writer
  // with declared tensors cannot produce to_bytes().
  void declare_tensor(const std::string& name, const std::vector<int64_t>& dims, GgmlType type);
  // The file up to the tensor data: header, metadata, tensor table, padding to the alignment.
  std::vector<uint8_t> header_bytes() const;
  size_t alignment() const { return m_alignment; }

  // Setting a key again replaces its value in place. The alignment is fixed at construction
  // (general.alignment is written when it differs from the default 32); setting
  // general.alignment directly throws std::invalid_argument.
  std::vector<uint8_t> to_bytes() const;
  // Writes atomically (temp file + rename). Throws std::runtime_error on I/O failure.
  void write(const std::filesystem::path& path) const;

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> encoded;  // type id + value, GGUF encoding
  };
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;
    GgmlType type;
    std::vector<uint8_t> bytes;
    bool declared_only = false;  // bytes streamed by the caller (declare_tensor)
  };
  void check_tensor(const std::string& name, const std::vector<int64_t>& dims, GgmlType type,
                    const uint64_t* n_bytes) const;
  void put_kv(const std::string& key, std::vector<uint8_t> encoded);
  uint32_t m_version;
  size_t m_alignment;
  std::vector<Kv> m_kv;
  std::vector<Tensor> m_tensors;
};

// Encodes float values into `type` blocks (reference quantizers, not optimised for quality).
std::vector<uint8_t> quantize_row(GgmlType t, const float* src, int64_t n);
// The same into caller-owned memory of ggml_row_bytes(t, n) bytes (no allocation: the streaming
// test-model writer quantizes row by row on many threads).
void quantize_row_into(GgmlType t, const float* src, int64_t n, uint8_t* dst);

// Shape of a Llama-family model for random-weight test models.
// The hyper-parameter keys every llama-family file carries, under the architecture's prefix `a`
// (block_count, context_length, embedding_length, feed_forward_length, head counts, RoPE base,
// RMS epsilon), as llama.cpp's converter writes them.
void set_llama_hparams(GgufWriter& w, const std::string& a, int n_layer, int n_ctx, int n_embd,
                       int n_ff, int n_head, int n_head_kv, float rope_theta, float rms_eps);

struct TestModelShape {
  std::string architecture = "llama";  // llama | qwen2 | qwen3 (per-head Q/K norms)
  int n_layer = 2;
  int n_embd = 64;
  int n_head = 4;
  int n_head_kv = 2;
  int n_ff = 128;
  int n_vocab = 300;
  int n_ctx = 512;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = true;
  GgmlType weight_type = GgmlType::kF32;  // for 2-D projection weights
  // Last, so that positional initialisers stay valid. 0: n_embd / n_head; else written as
  // {arch}.attention.key_length / value_length.
  int head_dim = 0;
};

// A random-weight model with a byte-level BPE vocabulary (256 byte tokens + merges + specials),
// loadable by the engine. Deterministic for a seed (own PRNG, not <random>'s distributions).
// Vocabulary rule: n_vocab >= 259; ids 0..255 are the GPT-2 byte tokens (bytes_to_unicode order),
// then n_vocab - 259 merges (a fixed list of common English merges first -- all present when
// n_vocab >= 259 + kRandomLlamaEnglishMerges -- then generated letter extensions), then the
// specials <|endoftext|>, <|im_start|> (bos), <|im_end|> (eos). n_embd, n_ff and the Q width
// must be multiples of weight_type's block size, n_embd of n_head (unless head_dim is given),
// n_head of n_head_kv.
// Throws std::invalid_argument when the shape breaks these rules.
GgufWriter make_random_llama(const TestModelShape& shape, uint64_t seed);
// GPT-2's bytes_to_unicode: the 256 byte tokens of a byte-level BPE vocabulary, in GPT-2's order
// (printable bytes as themselves first, then the other 68 bytes as U+0100 on).
std::vector<std::string> gpt2_byte_tokens();
// Number of fixed English merges make_random_llama uses first ("Ġ t", "h e", ..., "Ġwor ld").
inline constexpr int kRandomLlamaEnglishMerges = 40;

}  // namespace sinkscope
