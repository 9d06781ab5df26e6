// SPDX-License-Identifier: Apache-2.0
#include "engine/model/model.h"

#include <cmath>
#include <sstream>

#include "engine/format/hf_checkpoint.h"
#include "engine/util/sha256.h"

namespace sinkscope {
namespace {

std::string dims_str(const std::vector<int64_t>& d) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < d.size(); ++i) s << (i ? ", " : "") << d[i];
  s << ']';
  return s.str();
}

int positive_int(const GgufFile& f, const std::string& key, int64_t v) {
  if (v <= 0 || v > (int64_t(1) << 30))
    throw ModelError(f.path() + ": metadata '" + key + "' = " + std::to_string(v) +
                     " is out of range (1 .. 2^30)");
  return int(v);
}

// The Gemma keys and the values llama.cpp derives (src/llama-model.cpp, load_hparams for
// LLM_ARCH_GEMMA2 / LLM_ARCH_GEMMA3).
void read_gemma_config(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const bool gemma2 = c.architecture == "gemma2";
  c.gemma = true;
  auto softcap = [&](const std::string& key, double dflt) {
    const double v = f.get_float_or(a + key, dflt);
    if (!(v >= 0) || !std::isfinite(v))
      throw ModelError(f.path() + ": metadata '" + a + key + "' = " + std::to_string(v) +
                       " is not a soft-cap (must be >= 0; 0 = none)");
    return float(v);
  };
  auto window = [&](int64_t dflt) {
    const std::string key = a + "attention.sliding_window";
    const int64_t v = f.has(key) ? f.get_int(key) : dflt;
    if (v < 0 || v > (int64_t(1) << 30))
      throw ModelError(f.path() + ": metadata '" + key + "' = " + std::to_string(v) +
                       " is out of range (0 .. 2^30)");
    return int(v);
  };
  if (gemma2) {
    // llama.cpp's defaults where the file has no key: window 4096, caps 50 and 30.
    c.sliding_window = window(4096);
    c.swa_pattern = 2;
    c.attn_softcap = softcap("attn_logit_softcapping", 50.0);
    c.final_softcap = softcap("final_logit_softcapping", 30.0);
  } else {
    // Gemma 3 without a window (or with 0) has no local layers; with one, five local layers to
    // one global, the local ones on RoPE base 10000 unscaled. Its attention is never capped.
    c.sliding_window = window(0);
    c.swa_pattern = c.sliding_window > 0 ? 6 : 0;
    if (c.sliding_window > 0) c.rope_theta_local = 10000.0f;
    c.final_softcap = softcap("final_logit_softcapping", 0.0);
  }
  if (c.sliding_window == 0) c.swa_pattern = 0;
  // query_pre_attn_scalar is not in the file: llama.cpp takes n_embd / n_head for the 27B
  // models (46 layers for Gemma 2, 62 for Gemma 3) and head_dim for every other size.
  const bool is_27b = c.n_layer == (gemma2 ? 46 : 62);
  c.query_scale = float(1.0 / std::sqrt(double(is_27b ? c.n_embd / c.n_head : c.head_dim)));
}

// gpt-oss (llama.cpp's LLM_ARCH_OPENAI_MOE hparams): experts, the sliding window of the local
// layers (alternating, local first), YaRN with HF's gpt-oss defaults (beta 32 / 1, range ends
// not truncated). The clamped SwiGLU's alpha 1.702 and limit 7 are fixed by the architecture and
// not in the file.
void read_gpt_oss_config(const GgufFile& f, const std::string& a, ModelConfig& c) {
  c.gpt_oss = true;
  c.attn_sinks = true;
  c.o_bias = true;
  c.qkv_bias = true;
  auto req = [&](const std::string& k) {
    if (!f.has(a + k)) throw ModelError(f.path() + ": missing metadata key '" + a + k + "'");
    return positive_int(f, a + k, f.get_int(a + k));
  };
  c.n_expert = req("expert_count");
  c.n_expert_used = req("expert_used_count");
  if (c.n_expert_used > c.n_expert)
    throw ModelError(f.path() + ": expert_used_count " + std::to_string(c.n_expert_used) +
                     " exceeds expert_count " + std::to_string(c.n_expert));
  if (f.has(a + "expert_feed_forward_length")) c.n_ff = req("expert_feed_forward_length");
  c.sliding_window = f.has(a + "attention.sliding_window") ? req("attention.sliding_window") : 0;
  c.swa_pattern = c.sliding_window > 0 ? 2 : 0;
  c.yarn_truncate = false;
}

// The window of a family whose every layer is local when it has one (llama / Mistral, qwen2,
// phi3: attention.sliding_window, as transformers applies config.sliding_window to every layer;
// 0 or absent: none). llama.cpp ignores the key for these architectures (for phi3 it warns and
// disables it); SinkScope follows the HF model the file was converted from.
void read_uniform_window(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const std::string key = a + "attention.sliding_window";
  if (!f.has(key)) return;
  const int64_t v = f.get_int(key);
  if (v < 0 || v > (int64_t(1) << 30))
    throw ModelError(f.path() + ": metadata '" + key + "' = " + std::to_string(v) +
                     " is out of range (0 .. 2^30)");
  c.sliding_window = int(v);
  c.swa_pattern = 0;  // every layer
}

}  // namespace

const char* model_format_name(ModelFormat f) {
  return f == ModelFormat::kGguf ? "GGUF" : "safetensors";
}

bool is_hf_checkpoint_path(const std::filesystem::path& path) {
  return !hf_checkpoint_dir(path).empty();
}

std::string architecture_family(const std::string& architecture) {
  if (architecture == "llama") return "Llama";
  if (architecture == "qwen2") return "Qwen2";
  if (architecture == "qwen3") return "Qwen3";
  if (architecture == "gemma2") return "Gemma 2";
  if (architecture == "gemma3") return "Gemma 3";
  if (architecture == "gpt-oss") return "gpt-oss";
  if (architecture == "phi3") return "Phi-3";
  return architecture;
}

ModelConfig read_model_config(const GgufFile& f) {
  ModelConfig c;
  c.architecture = f.get_string_or("general.architecture", "");
  if (c.architecture.empty())
    throw ModelError(f.path() + ": missing metadata key 'general.architecture'");
  if (c.architecture != "llama" && c.architecture != "qwen2" && c.architecture != "qwen3" &&
      c.architecture != "gemma2" && c.architecture != "gemma3" && c.architecture != "gpt-oss" &&
      c.architecture != "phi3")
    throw ModelError(f.path() + ": architecture '" + c.architecture +
                     "' is not supported (supported: llama, qwen2, qwen3, gemma2, gemma3, "
                     "gpt-oss, phi3)");
  const std::string a = c.architecture + ".";
  auto req = [&](const std::string& k) {
    if (!f.has(a + k)) throw ModelError(f.path() + ": missing metadata key '" + a + k + "'");
    return positive_int(f, a + k, f.get_int(a + k));
  };
  c.name = f.get_string_or("general.name", "");
  c.n_layer = req("block_count");
  c.n_embd = req("embedding_length");
  c.n_ff = req("feed_forward_length");
  c.n_head = req("attention.head_count");
  c.n_head_kv = f.has(a + "attention.head_count_kv") ? req("attention.head_count_kv") : c.n_head;
  c.n_ctx_train = f.has(a + "context_length") ? req("context_length") : 2048;
  if (c.n_head % c.n_head_kv != 0)
    throw ModelError(f.path() + ": head_count " + std::to_string(c.n_head) +
                     " is not a multiple of head_count_kv " + std::to_string(c.n_head_kv));
  c.head_dim = f.has(a + "attention.key_length") ? req("attention.key_length")
                                                  : c.n_embd / c.n_head;
  if (c.head_dim % 2 != 0 || (!f.has(a + "attention.key_length") && c.n_embd % c.n_head != 0))
    throw ModelError(f.path() + ": head dimension " + std::to_string(c.head_dim) +
                     " is not usable (must be even and divide the width)");
  // K and V heads share one width here: a file whose value heads differ cannot be read.
  if (f.has(a + "attention.value_length") && req("attention.value_length") != c.head_dim)
    throw ModelError(f.path() + ": attention.value_length " +
                     std::to_string(f.get_int(a + "attention.value_length")) +
                     " differs from the key length " + std::to_string(c.head_dim) +
                     " (not supported)");
  c.rope_dim = f.has(a + "rope.dimension_count") ? req("rope.dimension_count") : c.head_dim;
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    throw ModelError(f.path() + ": rope.dimension_count " + std::to_string(c.rope_dim) +
                     " must be even and <= head dim " + std::to_string(c.head_dim));
  c.rope_theta = float(f.get_float_or(a + "rope.freq_base", 10000.0));
  c.rms_eps = float(f.get_float_or(a + "attention.layer_norm_rms_epsilon", 1e-5));
  const bool gemma2 = c.architecture == "gemma2", gemma3 = c.architecture == "gemma3";
  // llama.cpp writes Llama Q/K weights permuted for adjacent-pair RoPE; Qwen2, Qwen3 and Gemma
  // keep HF's half-split (NeoX) layout.
  c.rope_neox = c.architecture != "llama";
  c.qkv_bias = c.architecture == "qwen2";
  c.qk_norm = c.architecture == "qwen3" || gemma3;
  if (gemma2 || gemma3) read_gemma_config(f, a, c);
  if (c.architecture == "gpt-oss") read_gpt_oss_config(f, a, c);
  if (!c.gemma && !c.gpt_oss && c.architecture != "qwen3") read_uniform_window(f, a, c);
  // LongRoPE (phi3): cos and sin times rope.scaling.attn_factor (the converter's
  // sqrt(1 + ln(s) / ln(orig)), s = context_length / original_context_length).
  c.rope_attn_factor = float(f.get_float_or(a + "rope.scaling.attn_factor", 1.0));
  if (!(c.rope_attn_factor > 0) || !std::isfinite(c.rope_attn_factor))
    throw ModelError(f.path() + ": metadata '" + a + "rope.scaling.attn_factor' = " +
                     std::to_string(c.rope_attn_factor) + " must be > 0");
  c.long_rope = f.find_tensor("rope_factors_long.weight") != nullptr ||
                f.find_tensor("rope_factors_short.weight") != nullptr;

  const std::string scaling = f.get_string_or(a + "rope.scaling.type", "none");
  if (scaling == "none" || scaling.empty()) {
    c.rope_scaling = RopeScalingType::kNone;
  } else if (scaling == "linear") {
    c.rope_scaling = RopeScalingType::kLinear;
    c.rope_scale_factor = float(f.get_float_or(a + "rope.scaling.factor", 1.0));
    if (!(c.rope_scale_factor > 0))
      throw ModelError(f.path() + ": rope.scaling.factor must be > 0");
  } else if (scaling == "yarn") {
    c.rope_scaling = RopeScalingType::kYarn;
    c.rope_scale_factor = float(f.get_float_or(a + "rope.scaling.factor", 1.0));
    if (!(c.rope_scale_factor >= 1) || !std::isfinite(c.rope_scale_factor))
      throw ModelError(f.path() + ": rope.scaling.factor must be >= 1 for YaRN");
    if (!f.has(a + "rope.scaling.original_context_length"))
      throw ModelError(f.path() + ": YaRN needs metadata key '" + a +
                       "rope.scaling.original_context_length'");
  } else {
    throw ModelError(f.path() + ": rope scaling '" + scaling +
                     "' is not supported (supported: none, linear, yarn, llama3 rope_freqs)");
  }
  c.rope_orig_ctx = int(f.get_int_or(a + "rope.scaling.original_context_length", 0));
  if (c.rope_scaling == RopeScalingType::kYarn && c.rope_orig_ctx <= 0)
    throw ModelError(f.path() + ": rope.scaling.original_context_length must be > 0 for YaRN");

  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) throw ModelError(f.path() + ": missing tensor 'token_embd.weight'");
  if (embd->dims.size() != 2 || embd->dims[0] != c.n_embd)
    throw ModelError(f.path() + ": tensor 'token_embd.weight' has shape " + dims_str(embd->dims) +
                     ", expected [" + std::to_string(c.n_embd) + ", n_vocab]");
  c.n_vocab = int(embd->dims[1]);
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  return c;
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path,
                                         const std::function<void(LoadProgress)>& progress) {
  std::shared_ptr<Model> m(new Model());
  if (const std::filesystem::path dir = hf_checkpoint_dir(path); !dir.empty()) {
    HfModelParts parts = load_hf_checkpoint(dir, progress);
    m->m_path = dir;
    m->m_config = std::move(parts.config);
    m->m_weights = std::move(parts.weights);
    m->m_tokenizer = std::move(parts.tokenizer);
    m->m_checkpoint = std::move(parts.checkpoint);
    return m;
  }
  m->m_path = path;
  m->m_file = GgufFile::open(path);
  const GgufFile& f = *m->m_file;
  m->m_config = read_model_config(f);
  const ModelConfig& c = m->m_config;
  m->m_tokenizer = Tokenizer::from_gguf(f);
  if (m->m_tokenizer->vocab_size() > c.n_vocab)
    throw ModelError(f.path() + ": tokenizer has " +
                     std::to_string(m->m_tokenizer->vocab_size()) +
                     " tokens but token_embd.weight has only " + std::to_string(c.n_vocab) +
                     " rows");

  const int total = 3 + c.n_layer;
  int done = 0;
  auto tick = [&] {
    ++done;
    if (progress) progress({done, total});
  };

  // Loads a tensor, checking its shape against the expectation (ggml order: [in, out]).
  auto load = [&](const std::string& name, std::vector<int64_t> want,
                  bool optional = false) -> std::vector<float> {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) {
      if (optional) return {};
      throw ModelError(f.path() + ": missing tensor '" + name + "'");
    }
    if (t->dims != want)
      throw ModelError(f.path() + ": tensor '" + name + "' has shape " + dims_str(t->dims) +
                       ", expected " + dims_str(want));
    return f.dequantize(*t);
  };

  // A projection in its GGUF encoding, its shape checked like load()'s; its type must have a
  // CPU dequantizer (every product reads it through one).
  auto quant = [&](const std::string& name, std::vector<int64_t> want,
                   bool optional = false) -> QuantMatrix {
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) {
      if (optional) return {};
      throw ModelError(f.path() + ": missing tensor '" + name + "'");
    }
    if (t->dims != want)
      throw ModelError(f.path() + ": tensor '" + name + "' has shape " + dims_str(t->dims) +
                       ", expected " + dims_str(want));
    const GgmlTypeTraits* tr = ggml_type_traits(uint32_t(t->type));
    if (!tr || !tr->can_dequantize)
      throw ModelError(f.path() + ": tensor '" + name + "' has type " +
                       ggml_type_name(t->type) + ", which SinkScope cannot read");
    QuantMatrix q;
    q.type = t->type;
    q.data = t->data;
    q.cols = t->dims[0];
    q.rows = t->rows();
    q.row_bytes = ggml_row_bytes(t->type, t->dims[0]);
    return q;
  };

  // Rows [first, first + n) of a projection, as a view (fused tensors split without copies).
  auto rows_of = [](const QuantMatrix& all, int64_t first, int64_t n) {
    QuantMatrix q = all;
    q.rows = n;
    q.data = all.data + uint64_t(first) * all.row_bytes;
    return q;
  };

  ModelWeights& w = m->m_weights;
  const int64_t D = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  w.tok_embd = quant("token_embd.weight", {D, V});
  tick();
  w.output_norm = load("output_norm.weight", {D});
  w.output = quant("output.weight", {D, V}, /*optional=*/true);
  tick();
  w.rope_freqs = load("rope_freqs.weight", {c.rope_dim / 2}, /*optional=*/true);
  if (c.long_rope) {
    // phi3 LongRoPE: both sets are needed (which one runs depends on the backend's context).
    if (!w.rope_freqs.empty())
      throw ModelError(f.path() + ": has both rope_freqs.weight and rope_factors_* (one of them)");
    w.rope_factors_long = load("rope_factors_long.weight", {c.rope_dim / 2});
    w.rope_factors_short = load("rope_factors_short.weight", {c.rope_dim / 2});
    if (c.rope_orig_ctx <= 0)
      throw ModelError(f.path() + ": rope_factors_long/short need metadata key '" + c.architecture +
                       ".rope.scaling.original_context_length'");
    for (const auto* v : {&w.rope_factors_long, &w.rope_factors_short})
      for (float x : *v)
        if (!(x > 0) || !std::isfinite(x))
          throw ModelError(f.path() + ": rope_factors_* hold a factor " + std::to_string(x) +
                           " (each must be > 0)");
    w.rope_freqs = w.rope_factors_short;
  }
  tick();
  w.layers.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[size_t(l)];
    L.attn_norm = load(p + "attn_norm.weight", {D});
    if (f.find_tensor(p + "attn_qkv.weight")) {
      // phi3's fused QKV: rows [0, Q) are Q, then K, then V; three row views of one tensor.
      const QuantMatrix qkv = quant(p + "attn_qkv.weight", {D, Q + 2 * KV});
      L.wq = rows_of(qkv, 0, Q);
      L.wk = rows_of(qkv, Q, KV);
      L.wv = rows_of(qkv, Q + KV, KV);
    } else {
      L.wq = quant(p + "attn_q.weight", {D, Q});
      L.wk = quant(p + "attn_k.weight", {D, KV});
      L.wv = quant(p + "attn_v.weight", {D, KV});
    }
    if (c.qkv_bias) {
      L.bq = load(p + "attn_q.bias", {Q});
      L.bk = load(p + "attn_k.bias", {KV});
      L.bv = load(p + "attn_v.bias", {KV});
    }
    if (c.qk_norm) {
      L.q_norm = load(p + "attn_q_norm.weight", {c.head_dim});
      L.k_norm = load(p + "attn_k_norm.weight", {c.head_dim});
    }
    L.wo = quant(p + "attn_output.weight", {Q, D});
    if (c.o_bias) L.bo = load(p + "attn_output.bias", {D});
    if (c.attn_sinks) L.sinks = load(p + "attn_sinks.weight", {c.n_head});
    if (c.gemma) L.attn_post_norm = load(p + "post_attention_norm.weight", {D});
    if (c.n_expert > 0) {
      // gpt-oss names the FFN's input norm post_attention_norm (llama.cpp's ATTN_POST_NORM).
      const int64_t E = c.n_expert;
      L.ffn_norm = load(p + "post_attention_norm.weight", {D});
      L.router = quant(p + "ffn_gate_inp.weight", {D, E});
      L.router_bias = load(p + "ffn_gate_inp.bias", {E});
      const QuantMatrix g = quant(p + "ffn_gate_exps.weight", {D, F, E});
      const QuantMatrix u = quant(p + "ffn_up_exps.weight", {D, F, E});
      const QuantMatrix dn = quant(p + "ffn_down_exps.weight", {F, D, E});
      // quant() counted rows over every expert; each expert is a block of rows.
      auto split = [&](const QuantMatrix& all, int64_t rows) {
        std::vector<QuantMatrix> out(size_t(E), all);
        for (int64_t e = 0; e < E; ++e) {
          out[size_t(e)].rows = rows;
          out[size_t(e)].data = all.data + uint64_t(e) * uint64_t(rows) * all.row_bytes;
        }
        return out;
      };
      L.exp_gate = split(g, F);
      L.exp_up = split(u, F);
      L.exp_down = split(dn, D);
      L.exp_gate_b = load(p + "ffn_gate_exps.bias", {F, E});
      L.exp_up_b = load(p + "ffn_up_exps.bias", {F, E});
      L.exp_down_b = load(p + "ffn_down_exps.bias", {D, E});
      tick();
      continue;
    }
    L.ffn_norm = load(p + "ffn_norm.weight", {D});
    if (c.architecture == "phi3" && !f.find_tensor(p + "ffn_gate.weight")) {
      // phi3's fused gate_up: ffn_up holds 2F rows, the gate's first (HF's chunk(2) order).
      const QuantMatrix gu = quant(p + "ffn_up.weight", {D, 2 * F});
      L.w_gate = rows_of(gu, 0, F);
      L.w_up = rows_of(gu, F, F);
    } else {
      L.w_gate = quant(p + "ffn_gate.weight", {D, F});
      L.w_up = quant(p + "ffn_up.weight", {D, F});
    }
    L.w_down = quant(p + "ffn_down.weight", {F, D});
    if (c.gemma) L.ffn_post_norm = load(p + "post_ffw_norm.weight", {D});
    tick();
  }
  return m;
}

Model::~Model() = default;

const GgufFile& Model::gguf() const {
  if (!m_file) throw ModelError(m_path.string() + ": not a GGUF model (loaded from safetensors)");
  return *m_file;
}

WeightSummary Model::weight_summary() const {
  WeightSummary s;
  if (m_file) {
    for (const GgufTensorInfo& t : m_file->tensors()) {
      ++s.by_type[ggml_type_name(t.type)];
      s.n_params += t.n_elements;
      s.bytes += t.n_bytes;
      ++s.n_tensors;
    }
  } else if (m_checkpoint) {
    for (const auto& shard : m_checkpoint->shards) {
      for (const SafetensorsTensor& t : shard->tensors()) {
        ++s.by_type[t.dtype];
        s.n_params += t.n_elements;
        s.bytes += t.n_bytes;
        ++s.n_tensors;
      }
    }
  }
  return s;
}

std::string Model::sha256() const {
  std::call_once(m_sha256_once, [this] {
    m_sha256 = m_checkpoint ? hf_checkpoint_sha256(*m_checkpoint) : sha256_file(m_path);
  });
  return m_sha256;
}

}  // namespace sinkscope
