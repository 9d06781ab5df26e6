// SPDX-License-Identifier: Apache-2.0
// A model loaded from GGUF or from a Hugging Face checkpoint (safetensors,
// engine/format/hf_checkpoint.h): hyper-parameters, tokenizer and the weights as the files store them
// (memory-mapped).
// Architectures: llama (SmolLM2, Llama 2/3, Mistral), qwen2 (QKV bias), qwen3 (per-head
// RMSNorm of Q and K before RoPE, head_dim given apart from the width), gemma2 and gemma3
// (scaled embeddings, norms after attention and FFN, GeGLU, local sliding-window layers of the
// model's own; gemma2 soft-caps attention scores and logits, gemma3 normalises Q and K and gives
// its local layers a RoPE base of their own), gpt-oss (learned attention sinks,
// mixture of experts, YaRN; GGUF or a checkpoint with unpacked experts), phi3 (fused QKV and
// gate/up projections, LongRoPE with long and short factors, a sliding window on every layer).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/backend/qgemv.h"
#include "engine/tokenizer/tokenizer.h"

namespace sinkscope {

class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class RopeScalingType { kNone, kLinear, kYarn, kLlama3 };

struct ModelConfig {
  // "llama" | "qwen2" | "qwen3" | "gemma2" | "gemma3" | "gpt-oss" | "phi3"
  std::string architecture;
  std::string name;          // general.name
  int n_layer = 0;
  int n_embd = 0;       // model width D
  int n_head = 0;       // query heads
  int n_head_kv = 0;    // key/value heads (GQA groups = n_head / n_head_kv)
  int head_dim = 0;     // {arch}.attention.key_length, else D / n_head (Qwen3: not D / n_head)
  int n_ff = 0;         // SwiGLU / GeGLU hidden width
  int n_vocab = 0;
  int n_ctx_train = 0;  // trained context length
  float rope_theta = 10000.0f;
  int rope_dim = 0;     // rotated dims per head (== head_dim for these models)
  bool rope_neox = false;  // pairs (i, i+d/2) when true (qwen2, qwen3); adjacent pairs (llama)
  RopeScalingType rope_scaling = RopeScalingType::kNone;
  float rope_scale_factor = 1.0f;
  int rope_orig_ctx = 0;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;  // attn_{q,k,v}.bias (qwen2)
  // attn_{q,k}_norm.weight: RMSNorm of each head's Q and K (qwen3, gemma3)
  bool qk_norm = false;
  bool tied_embeddings = false;

  // Gemma 2 / 3 (llama.cpp's llm_build_gemma2_iswa / llm_build_gemma3_iswa):
  // embeddings times sqrt(D), RMSNorm of the attention and FFN outputs before their residual adds
  // (attn_post_norm, ffn_post_norm), FFN gelu(gate) * up with the tanh approximation.
  bool gemma = false;
  // Query scaling: scores are q.k * query_scale (llama.cpp's f_attention_scale, derived as it
  // derives it: 1/sqrt(n_embd / n_head) for the 27B models, else 1/sqrt(head_dim)); 0 means
  // 1/sqrt(head_dim).
  float query_scale = 0.0f;
  // Soft-capping, 0 = none: scores become tanh(s / cap) * cap after the query scaling, logits
  // tanh(z / cap) * cap after the LM head.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  // The model's own sliding window (attention.sliding_window) on its local layers: a key k is
  // visible to the query at q only if k > q - sliding_window. 0: no local layers.
  int sliding_window = 0;
  // Which layers are local when sliding_window > 0: 0 = every layer (Mistral, Phi-3, a Llama /
  // Qwen2 checkpoint with one window for all layers), else l is local iff
  // l % swa_pattern < swa_pattern - 1 (llama.cpp's set_swa_pattern: gemma2 / gpt-oss 2 =
  // alternate, local first; gemma3 6 = five local then one global).
  int swa_pattern = 0;
  // Per layer, 1 = local, where the pattern above cannot say it (a Qwen2 checkpoint's
  // layer_types: full below max_window_layers, sliding from there); empty: the pattern decides.
  std::vector<char> local_layers;
  // RoPE of local layers (gemma3: base 10000, no scaling; the rope.scaling keys apply to the
  // global layers only). 0: local layers rotate like the global ones.
  float rope_theta_local = 0.0f;

  // gpt-oss (HF GptOssForCausalLM, llama.cpp arch "gpt-oss"): Q/K/V/O biases, a learned sink
  // logit per query head (attn_sinks), a mixture-of-experts FFN (router with bias, softmax over
  // the n_expert_used largest router logits, each expert a clamped SwiGLU with biases:
  // g = min(gate, limit), u = clamp(up, -limit, limit), h = (u + 1) * g * sigmoid(alpha * g)),
  // YaRN RoPE, local (sliding_window) and global layers alternating, local first.
  bool gpt_oss = false;
  bool attn_sinks = false;     // blk.N.attn_sinks.weight: learned per-head sink logits
  bool o_bias = false;         // attn_output.bias
  int n_expert = 0;            // 0: a dense FFN
  int n_expert_used = 0;
  float swiglu_alpha = 1.702f;
  float swiglu_limit = 7.0f;
  // YaRN (rope_scaling kYarn): frequencies blended between interpolated (/ factor) and
  // extrapolated by a linear ramp over the correction range of beta_fast .. beta_slow rotations
  // in rope_orig_ctx; cos and sin times the attention factor 0.1 ln(factor) + 1. truncate
  // floors/ceils the range ends (HF's default; gpt-oss sets it false).
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  bool yarn_truncate = true;

  // RoPE attention factor (phi3's LongRoPE: rope.scaling.attn_factor, HF's attention_factor):
  // cos and sin are multiplied by it, so every score scales by its square. 1 = none.
  float rope_attn_factor = 1.0f;
  // phi3: the weights hold rope_factors_long / _short (ModelWeights::rope_factors_for).
  bool long_rope = false;

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
  bool layer_local(int layer) const {
    if (sliding_window <= 0) return false;
    if (!local_layers.empty())
      return layer >= 0 && size_t(layer) < local_layers.size() && local_layers[size_t(layer)];
    return swa_pattern <= 0 || layer % swa_pattern < swa_pattern - 1;
  }
  // The layer's own window in positions; 0 on a global layer (sees every cached key).
  int layer_window(int layer) const { return layer_local(layer) ? sliding_window : 0; }
  float attention_scale() const {
    return query_scale > 0 ? query_scale : float(1.0 / std::sqrt(double(head_dim)));
  }
};

// The projections stay in their GGUF encoding, pointing into the mapped file (no float copies:
// decode reads them with qgemv, prefill with linear_q, engine/backend/qgemv.h). A projection W has shape
// (out, in): y = W x. Norm gains, biases and RoPE factors are small and held as float32.
struct LayerWeights {
  std::vector<float> attn_norm;   // (D)
  QuantMatrix wq;                 // (q_dim, D)
  QuantMatrix wk;                 // (kv_dim, D)
  QuantMatrix wv;                 // (kv_dim, D)
  std::vector<float> bq, bk, bv;  // (q_dim), (kv_dim), (kv_dim); empty without QKV bias
  std::vector<float> q_norm;      // (head_dim) gain of each Q head's RMSNorm; empty without
  std::vector<float> k_norm;      // (head_dim) ... of each K head's; qk_norm (before RoPE)
  QuantMatrix wo;                 // (D, q_dim)
  std::vector<float> attn_post_norm;  // (D) gemma: RMSNorm of the attention output; else empty
  std::vector<float> ffn_norm;    // (D)
  QuantMatrix w_gate;             // (n_ff, D)
  QuantMatrix w_up;               // (n_ff, D)
  QuantMatrix w_down;             // (D, n_ff)
  std::vector<float> ffn_post_norm;   // (D) gemma: RMSNorm of the FFN output; else empty
  // gpt-oss
  std::vector<float> bo;          // (D) attn_output.bias; empty without
  std::vector<float> sinks;       // (n_head) learned sink logits (score units); empty without
  QuantMatrix router;             // (n_expert, D) ffn_gate_inp
  std::vector<float> router_bias; // (n_expert)
  // One (n_ff, D) gate / up and (D, n_ff) down matrix per expert: views into the 3-D GGUF
  // tensors ffn_{gate,up,down}_exps (any ggml type, MXFP4 included).
  std::vector<QuantMatrix> exp_gate, exp_up, exp_down;
  std::vector<float> exp_gate_b, exp_up_b;  // (n_expert, n_ff)
  std::vector<float> exp_down_b;            // (n_expert, D)
};

struct ModelWeights {
  QuantMatrix tok_embd;            // (n_vocab, D)
  std::vector<float> output_norm;  // (D)
  QuantMatrix output;              // (n_vocab, D); empty when tied to tok_embd
  std::vector<float> rope_freqs;   // (rope_dim/2) optional per-pair frequency factors (llama3)
  // LongRoPE (phi3, rope_dim/2 each): frequency i is divided by factor i, as rope_freqs. The
  // short factors serve a context up to rope_orig_ctx, the long ones a longer one; rope_freqs
  // holds the short ones (what a backend that does not ask gets).
  std::vector<float> rope_factors_long, rope_factors_short;
  std::vector<LayerWeights> layers;
  // Float32 copies the views above may point into, where the stored layout is not the engine's
  // (a Hugging Face gpt-oss checkpoint's experts: x @ W with gate and up interleaved).
  std::vector<std::vector<float>> owned;
  // Bytes the views may point into: a checkpoint's MXFP4-packed experts, repacked into GGUF's
  // block layout.
  std::vector<std::vector<uint8_t>> owned_bytes;
  const QuantMatrix& lm_head() const { return output.empty() ? tok_embd : output; }
  // The per-pair factors for a backend holding up to `context` positions: LongRoPE's long
  // factors when the context exceeds the original one (llama.cpp's rule: n_ctx > n_ctx_orig),
  // else rope_freqs.
  const std::vector<float>& rope_factors_for(int context, int orig_ctx) const {
    return !rope_factors_long.empty() && orig_ctx > 0 && context > orig_ctx ? rope_factors_long
                                                                             : rope_freqs;
  }
};

enum class ModelFormat { kGguf, kSafetensors };
const char* model_format_name(ModelFormat f);  // "GGUF" | "safetensors"

// The stored weights at a glance (sinkscope-cli info, the workbench's memory figure).
struct WeightSummary {
  size_t n_tensors = 0;
  int64_t n_params = 0;
  uint64_t bytes = 0;
  std::map<std::string, int> by_type;  // tensors per stored type ("Q4_1", "BF16", ...)
};

struct HfCheckpoint;

struct LoadProgress {
  int done = 0;
  int total = 0;
};

class Model {
 public:
  // Maps the file and checks every weight's shape and type. `path` is a GGUF file, or a
  // Hugging Face checkpoint: its directory or its config.json. Throws ModelError / GgufError /
  // TokenizerError with a message naming the file and the problem.
  static std::shared_ptr<const Model> load(const std::filesystem::path& path,
                                           const std::function<void(LoadProgress)>& progress = {});
  ~Model();

  const ModelConfig& config() const { return m_config; }
  const ModelWeights& weights() const { return m_weights; }
  const Tokenizer& tokenizer() const { return *m_tokenizer; }
  ModelFormat format() const { return m_file ? ModelFormat::kGguf : ModelFormat::kSafetensors; }
  // The GGUF file; throws ModelError for a model loaded from safetensors.
  const GgufFile& gguf() const;
  WeightSummary weight_summary() const;
  // The GGUF file, or the checkpoint directory.
  const std::filesystem::path& path() const { return m_path; }
  // sha256 of the file, hex; for a checkpoint, of its files' names and sha256 (config,
  // tokenizer files, index, shards). Computed on first call.
  std::string sha256() const;

 private:
  Model() = default;
  std::filesystem::path m_path;
  std::unique_ptr<GgufFile> m_file;           // a GGUF model
  std::unique_ptr<HfCheckpoint> m_checkpoint;  // a safetensors checkpoint
  std::unique_ptr<Tokenizer> m_tokenizer;
  ModelConfig m_config;
  ModelWeights m_weights;
  mutable std::once_flag m_sha256_once;
  mutable std::string m_sha256;
};

// The model family an architecture name stands for, for people: "Llama", "Qwen2", "Qwen3",
// "Gemma 2", "Gemma 3", "gpt-oss", "Phi-3".
std::string architecture_family(const std::string& architecture);

// Whether `path` names a Hugging Face checkpoint (a directory, or a file named config.json)
// rather than a GGUF file.
bool is_hf_checkpoint_path(const std::filesystem::path& path);

// Reads the hyper-parameters only (no weights). Throws ModelError naming a missing key.
ModelConfig read_model_config(const GgufFile& file);

}  // namespace sinkscope
