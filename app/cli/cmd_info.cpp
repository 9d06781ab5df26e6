// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "engine/format/gguf.h"
#include "engine/util/json_io.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"

namespace sinkscope::cli {

namespace {

// The shortest decimal that reads back as the float f ("1e-05", "500000"), as text and as the
// double JSON prints: a float widened to double would print as 9.999999747e-06.
std::string float_text(float f) {
  if (std::isfinite(f) && f == std::trunc(f) && std::fabs(f) < 1e15f)
    return std::to_string(static_cast<long long>(f));
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::string(buf, r.ptr);
}
double float_json(float f) { return std::strtod(float_text(f).c_str(), nullptr); }

const char* rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kLlama3:
      return "llama3";
  }
  return "?";
}

// Layers [0, n) with the given window as a compact list: "0, 2, 4" or "0-4, 6-10".
std::string layer_list(const ModelConfig& c, bool local) {
  std::string s;
  for (int l = 0; l < c.n_layer;) {
    if (c.layer_local(l) != local) {
      ++l;
      continue;
    }
    int e = l;
    while (e + 1 < c.n_layer && c.layer_local(e + 1) == local) ++e;
    if (!s.empty()) s += ", ";
    s += std::to_string(l);
    if (e > l) s += (e == l + 1 ? ", " : "-") + std::to_string(e);
    l = e + 1;
  }
  return s.empty() ? "none" : s;
}

// The CUDA backend's weight bytes per --gpu-weights mode, estimated from a GGUF's tensors:
// vectors stay fp32; bf16 converts every matrix to bf16; native keeps a projection (Q, K, V,
// fused QKV, O, gate, up, fused gate|up, down, gpt-oss's experts) and an untied LM head
// (output.weight) in its file blocks when its type has a device decode and its rows fit the
// GEMV (the backend decides per projection, all parts together; this per tensor).
struct GpuWeightEstimate {
  uint64_t bf16 = 0, native = 0;
};
GpuWeightEstimate estimate_gpu_weights(const std::vector<GgufTensorInfo>& tensors) {
  static const char* const kProjections[] = {
      ".attn_q.weight",  ".attn_k.weight",    ".attn_v.weight",        ".attn_qkv.weight",
      ".attn_output.weight", ".ffn_gate.weight", ".ffn_up.weight", ".ffn_gate_up.weight",
      ".ffn_down.weight", "_exps.weight"};
  const auto is_projection = [](const std::string& name) {
    for (const char* suffix : kProjections) {
      const size_t n = std::char_traits<char>::length(suffix);
      if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return true;
    }
    return false;
  };
  GpuWeightEstimate e;
  for (const GgufTensorInfo& t : tensors) {
    const uint64_t n = uint64_t(t.n_elements);
    if (t.dims.size() < 2) {
      e.bf16 += 4 * n;
      e.native += 4 * n;
      continue;
    }
    e.bf16 += 2 * n;
    bool keep = false;
    if (is_projection(t.name) || t.name == "output.weight") {
      const bool experts = t.name.size() > 12 && t.name.find("_exps.") != std::string::npos;
      switch (t.type) {
        case GgmlType::kQ8_0: case GgmlType::kQ4_0: case GgmlType::kQ4_1:
        case GgmlType::kQ4_K: case GgmlType::kQ5_K: case GgmlType::kQ6_K:
          keep = !experts && t.dims[0] <= 58112;  // the GEMV's fp32 activation stage
          break;
        case GgmlType::kMXFP4:
          keep = experts;
          break;
        default:
          break;
      }
    }
    e.native += keep ? t.n_bytes : 2 * n;
  }
  return e;
}

}  // namespace

int run_info(const InfoArgs& a, std::ostream& out, std::ostream& err) {
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  const auto path = resolve_model_path(a.model);
  // GGUF: header, config and tokenizer only, the weights are not read. A checkpoint is loaded
  // (its shards are mapped, not read) so that every name, dtype and shape is checked.
  std::unique_ptr<GgufFile> file;
  std::shared_ptr<const Model> hf;
  std::unique_ptr<Tokenizer> gguf_tok;
  ModelConfig c;
  WeightSummary ws;
  uint64_t file_size = 0;
  std::string format_line;
  if (is_hf_checkpoint_path(path)) {
    hf = Model::load(path);
    c = hf->config();
    ws = hf->weight_summary();
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(hf->path(), ec))
      if (e.is_regular_file(ec)) file_size += e.file_size(ec);
  } else {
    file = GgufFile::open(path);
    c = read_model_config(*file);
    gguf_tok = Tokenizer::from_gguf(*file);
    file_size = file->file_size();
    for (const GgufTensorInfo& t : file->tensors()) {
      ++ws.by_type[ggml_type_name(t.type)];
      ws.n_params += t.n_elements;
      ws.bytes += t.n_bytes;
      ++ws.n_tensors;
    }
  }
  const Tokenizer* tok = hf ? &hf->tokenizer() : gguf_tok.get();
  // Llama 3.1's RoPE scaling reaches a GGUF file as per-pair frequency factors
  // (rope_freqs.weight, computed by llama.cpp's converter) with no scaling key; a checkpoint
  // names it in config.json. Either way the model runs with the factors: say so.
  const bool freq_factors = hf ? !hf->weights().rope_freqs.empty()
                               : file->find_tensor("rope_freqs.weight") != nullptr;
  const bool llama3_factors = freq_factors && c.rope_scaling == RopeScalingType::kNone;
  const ModelFormat format = hf ? ModelFormat::kSafetensors : ModelFormat::kGguf;
  // The stored dtype(s) of the weights, e.g. "BF16" or "Q4_1, F32".
  std::string dtypes;
  for (const auto& [type, n] : ws.by_type) dtypes += (dtypes.empty() ? "" : ", ") + type;
  const std::map<std::string, int>& by_type = ws.by_type;
  const int64_t n_params = ws.n_params;
  const uint64_t weight_bytes = ws.bytes;
  // The engine maps the weights as stored (no copies) and keeps a float32 KV cache on the CPU
  // (K and V of every layer per token), allocated page by page as the context grows.
  const uint64_t kv_per_token = 2ull * uint64_t(c.n_layer) * uint64_t(c.kv_dim()) * sizeof(float);
  const uint64_t kv_trained = kv_per_token * uint64_t(std::max(0, c.n_ctx_train));
  // On the GPU (GGUF only): the weights per --gpu-weights mode and a bf16 KV cache sized to the
  // context when the backend is made.
  const GpuWeightEstimate gpu = file ? estimate_gpu_weights(file->tensors()) : GpuWeightEstimate{};
  const uint64_t gpu_kv_per_token = kv_per_token / 2;

  // gpt-oss's learned sink logits, per layer (n_head each): read from the file (a few floats
  // per layer) or the loaded checkpoint.
  std::vector<std::vector<float>> sinks;
  if (c.attn_sinks) {
    for (int l = 0; l < c.n_layer; ++l) {
      if (hf) {
        sinks.push_back(hf->weights().layers[size_t(l)].sinks);
        continue;
      }
      const std::string name = "blk." + std::to_string(l) + ".attn_sinks.weight";
      const GgufTensorInfo* t = file->find_tensor(name);
      if (!t || t->n_elements != c.n_head)
        throw ModelError(path.string() + ": tensor '" + name + "' is missing or not " +
                         std::to_string(c.n_head) + " values");
      sinks.push_back(file->dequantize(*t));
    }
  }

  if (a.json) {
    Json j;
    j["path"] = path.string();
    j["format"] = model_format_name(format);
    j["dtype"] = dtypes;
    j["file_size"] = static_cast<unsigned long long>(file_size);
    if (file) {
      j["gguf_version"] = static_cast<unsigned>(file->version());
      j["metadata_keys"] = static_cast<unsigned long long>(file->metadata().size());
    }
    Json& cfg = j["config"];
    cfg["architecture"] = c.architecture;
    cfg["family"] = architecture_family(c.architecture);
    cfg["name"] = c.name;
    cfg["n_layer"] = c.n_layer;
    cfg["n_embd"] = c.n_embd;
    cfg["n_head"] = c.n_head;
    cfg["n_head_kv"] = c.n_head_kv;
    cfg["head_dim"] = c.head_dim;
    cfg["n_ff"] = c.n_ff;
    cfg["n_vocab"] = c.n_vocab;
    cfg["n_ctx_train"] = c.n_ctx_train;
    cfg["rope_theta"] = float_json(c.rope_theta);
    cfg["rope_dim"] = c.rope_dim;
    cfg["rope_neox"] = c.rope_neox;
    cfg["rope_scaling"] = llama3_factors ? "llama3" : rope_scaling_name(c.rope_scaling);
    cfg["rope_freq_factors"] = freq_factors;
    cfg["rms_eps"] = float_json(c.rms_eps);
    cfg["qkv_bias"] = c.qkv_bias;
    cfg["qk_norm"] = c.qk_norm;
    cfg["tied_embeddings"] = c.tied_embeddings;
    // The model's own attention: its per-layer windows (0 = global), the query scale and
    // soft-caps (0 = none).
    cfg["sliding_window"] = c.sliding_window;
    Json& lw = cfg["layer_windows"] = Json::array();
    for (int l = 0; l < c.n_layer; ++l) lw.push_back(c.layer_window(l));
    cfg["query_scale"] = float_json(c.attention_scale());
    cfg["attn_softcap"] = float_json(c.attn_softcap);
    cfg["final_softcap"] = float_json(c.final_softcap);
    cfg["rope_theta_local"] = float_json(c.rope_theta_local);
    if (c.rope_scaling == RopeScalingType::kYarn || c.long_rope) {
      cfg["rope_scale_factor"] = float_json(c.rope_scale_factor);
      cfg["rope_orig_ctx"] = c.rope_orig_ctx;
    }
    // phi3's LongRoPE: short / long per-pair factors chosen by the context, cos/sin factor.
    cfg["long_rope"] = c.long_rope;
    cfg["rope_attn_factor"] = float_json(c.rope_attn_factor);
    // gpt-oss: learned sink logits per layer and head (score units), experts.
    cfg["attn_sinks"] = c.attn_sinks;
    if (c.attn_sinks) {
      Json& ls = cfg["learned_sinks"] = Json::array();
      for (const std::vector<float>& layer : sinks) {
        Json per = Json::array();
        for (float v : layer) per.push_back(static_cast<double>(v));
        ls.push_back(per);
      }
    }
    cfg["n_expert"] = c.n_expert;
    cfg["n_expert_used"] = c.n_expert_used;
    Json& tensors = j["tensors"];
    tensors["count"] = static_cast<unsigned long long>(ws.n_tensors);
    tensors["parameters"] = static_cast<long long>(n_params);
    Json& types = tensors["by_type"] = Json::object();
    for (const auto& [type, n] : by_type) types[type] = n;
    Json& mem = j["memory"];
    mem["weights_bytes"] = static_cast<unsigned long long>(weight_bytes);
    mem["kv_bytes_per_token"] = static_cast<unsigned long long>(kv_per_token);
    mem["kv_bytes_trained_context"] = static_cast<unsigned long long>(kv_trained);
    if (file) {
      Json& g = mem["cuda"];
      g["weights_bf16_bytes"] = static_cast<unsigned long long>(gpu.bf16);
      g["weights_native_bytes"] = static_cast<unsigned long long>(gpu.native);
      g["kv_bytes_per_token"] = static_cast<unsigned long long>(gpu_kv_per_token);
    }
    Json& t = j["tokenizer"];
    t["kind"] = tok->model_name();
    t["vocab_size"] = tok->vocab_size();
    t["bos"] = tok->bos();
    t["eos"] = tok->eos();
    t["chat_format"] = chat_format_name(tok->chat_format());
    out << dump_json(j) << "\n";
    return 0;
  }

  const auto row = [&](const char* k) -> std::ostream& {
    return out << "  " << std::left << std::setw(18) << k << std::right;
  };
  out << (file ? "file: " : "checkpoint: ") << path.string() << "\n";
  row("format") << model_format_name(format) << ", " << dtypes << "\n";
  row("size") << std::fixed << std::setprecision(1) << file_size / (1024.0 * 1024.0) << " MiB";
  if (file) {
    out << ", GGUF v" << file->version() << ", " << file->metadata().size() << " metadata keys";
  }
  out << "\n";
  out << "config:\n";
  row("name") << (c.name.empty() ? "-" : c.name) << "\n";
  row("architecture") << c.architecture << " (" << architecture_family(c.architecture)
                      << " family)\n";
  row("layers") << c.n_layer << "\n";
  row("width") << c.n_embd << "\n";
  row("heads (q / kv)") << c.n_head << " / " << c.n_head_kv << ", head dim " << c.head_dim << "\n";
  row("ffn width") << c.n_ff << "\n";
  row("vocabulary") << c.n_vocab << "\n";
  row("trained context") << c.n_ctx_train << "\n";
  row("rope") << std::defaultfloat << std::setprecision(6) << "theta " << float_text(c.rope_theta) << ", "
              << c.rope_dim << " dims, " << (c.rope_neox ? "neox pairs" : "adjacent pairs")
              << ", scaling "
              << (llama3_factors ? "llama3 (frequency factors, rope_freqs.weight)"
                                 : rope_scaling_name(c.rope_scaling));
  if (c.rope_scaling == RopeScalingType::kLinear) out << " x" << float_text(c.rope_scale_factor);
  if (c.rope_scaling == RopeScalingType::kYarn)
    out << " x" << float_text(c.rope_scale_factor) << " from " << c.rope_orig_ctx << " positions";
  out << (c.rope_theta_local > 0 ? " (global layers)\n" : "\n");
  row("rms eps") << float_text(c.rms_eps) << "\n";
  row("qkv bias") << (c.qkv_bias ? "yes" : "no") << "\n";
  row("q/k norm") << (c.qk_norm ? "yes (per head, before rope)" : "no") << "\n";
  row("tied embeddings") << (c.tied_embeddings ? "yes" : "no") << "\n";
  if (c.long_rope)
    row("rope (LongRoPE)") << "short factors up to " << c.rope_orig_ctx
                           << " positions of context, long beyond; attention factor "
                           << c.rope_attn_factor << "\n";
  // The model's own windows and sinks, whatever the family (none is said as such).
  if (c.sliding_window > 0) {
    row("layer windows") << "local " << c.sliding_window << " tokens on layers "
                         << layer_list(c, true) << "; global on " << layer_list(c, false)
                         << "\n";
  } else {
    row("layer windows") << "none (every layer global)\n";
  }
  if (!c.attn_sinks) row("learned sinks") << "none\n";
  if (c.gemma) {
    if (c.rope_theta_local > 0)
      row("rope (local)") << std::defaultfloat << "theta " << float_text(c.rope_theta_local)
                          << ", no scaling\n";
    const double qs = c.attention_scale();
    row("query scale") << qs << " (1/sqrt(" << std::lround(1.0 / (qs * qs))
                       << "), llama.cpp's choice for this size)\n";
    auto cap = [](float v) {
      std::ostringstream o;
      if (v > 0) o << v; else o << "none";
      return o.str();
    };
    row("soft-caps") << "attention " << cap(c.attn_softcap) << ", final " << cap(c.final_softcap)
                     << "\n";
  }
  if (c.gpt_oss) {
    row("experts") << c.n_expert << ", " << c.n_expert_used << " used per token (clamped SwiGLU, "
                   << "alpha " << c.swiglu_alpha << ", limit " << c.swiglu_limit << ")\n";
  }
  if (c.attn_sinks) {
    // The learned sink logits: a per-head logit in every softmax's denominator, no key.
    float lo = INFINITY, hi = -INFINITY;
    for (const std::vector<float>& layer : sinks)
      for (float v : layer) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    row("learned sinks") << "yes, one logit per head and layer (" << c.n_layer << " x "
                         << c.n_head << "), from " << std::defaultfloat << std::setprecision(4)
                         << lo << " to " << hi << "\n";
  }
  out << "tensors: " << ws.n_tensors << " (" << std::fixed << std::setprecision(1)
      << n_params / 1e6 << " M parameters)\n";
  for (const auto& [type, n] : by_type) row(type.c_str()) << n << "\n";
  out << "memory (CPU):\n";
  row("weights") << std::fixed << std::setprecision(1) << weight_bytes / (1024.0 * 1024.0)
                 << " MiB, mapped from the " << (file ? "file" : "shards") << " as stored\n";
  row("KV cache") << kv_per_token / 1024.0 << " KiB per token (float32), "
                  << kv_trained / (1024.0 * 1024.0) << " MiB at the trained context\n";
  if (file) {
    const auto gib = [](uint64_t b) { return double(b) / double(1ull << 30); };
    out << "memory (CUDA, estimate; scratch not included):\n";
    row("weights") << std::setprecision(2) << gib(gpu.bf16) << " GiB with --gpu-weights bf16, "
                   << gib(gpu.native) << " GiB native\n";
    row("KV cache") << std::setprecision(1) << gpu_kv_per_token / 1024.0
                    << " KiB per token (bf16); " << std::setprecision(2)
                    << gib(gpu_kv_per_token * 8192) << " / " << gib(gpu_kv_per_token * 32768)
                    << " / " << gib(gpu_kv_per_token * 131072) << " GiB at 8K / 32K / 128K";
    // Lengths past the trained context: the model may not hold up there.
    if (c.n_ctx_train > 0 && c.n_ctx_train < 131072)
      out << " (" << (c.n_ctx_train < 32768 ? "32K and 128K are" : "128K is")
          << " past the trained context)";
    out << "\n";
  }
  out << "tokenizer:\n";
  row("kind") << tok->model_name() << "\n";
  row("vocabulary") << tok->vocab_size() << "\n";
  row("bos / eos") << tok->bos() << " / " << tok->eos() << "\n";
  row("chat format") << chat_format_name(tok->chat_format());
  if (const std::string note = chat_fallback_note(*tok); !note.empty()) out << " (" << note << ")";
  out << "\n";
  (void)err;
  return 0;
}

}  // namespace sinkscope::cli
