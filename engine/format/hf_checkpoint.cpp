// SPDX-License-Identifier: Apache-2.0
#include "engine/format/hf_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "engine/util/json_io.h"
#include "engine/util/sha256.h"
#include "engine/format/testmodel.h"
#include "engine/format/hf_config_reader.h"

namespace sinkscope {
using namespace hf_detail;
namespace {

namespace fs = std::filesystem;

std::string dims_str(const std::vector<int64_t>& d) {
  std::ostringstream s;
  s << '[';
  for (size_t i = 0; i < d.size(); ++i) s << (i ? ", " : "") << d[i];
  s << ']';
  return s.str();
}

// A file's text; "" with *found = false when it does not exist.
std::string read_text(const fs::path& p, bool required, bool* found = nullptr) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    if (found) *found = false;
    if (required) throw ModelError(p.string() + ": missing (a Hugging Face checkpoint needs it)");
    return {};
  }
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) throw ModelError(p.string() + ": cannot read the file");
  if (found) *found = true;
  return ss.str();
}

Json parse_object(const std::string& text, const std::string& file) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    throw ModelError(file + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw ModelError(file + ": not a JSON object");
  return j;
}


}  // namespace

fs::path hf_checkpoint_dir(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return path;
  if (path.filename() == "config.json") {
    const fs::path parent = path.parent_path();
    return parent.empty() ? fs::path(".") : parent;
  }
  return {};
}

namespace {


ModelConfig read_hf_config_json(const std::string& text, const std::string& file) {
  const Json j = parse_object(text, file);
  const ConfigReader r(j, file);
  ModelConfig c;
  const std::string type = r.get_string_or("model_type", "");
  if (type.empty()) r.fail("missing key 'model_type'");
  if (type == "llama" || type == "mistral") {
    c.architecture = "llama";
  } else if (type == "qwen2" || type == "qwen3") {
    c.architecture = type;
  } else if (type == "gpt_oss") {
    c.architecture = "gpt-oss";
  } else if (type == "phi3") {
    c.architecture = "phi3";
  } else if (type == "gemma2" || type == "gemma3_text") {
    c.architecture = type == "gemma2" ? "gemma2" : "gemma3";
  } else if (type == "gemma3") {
    r.fail("model_type 'gemma3' (Gemma3ForConditionalGeneration, text and vision) is not "
           "supported: SinkScope reads the text model, model_type 'gemma3_text' "
           "(Gemma3ForCausalLM)");
  } else {
    r.fail("model_type '" + type +
           "' is not supported (supported: llama, mistral, qwen2, qwen3, gpt_oss, phi3, gemma2, "
           "gemma3_text)");
  }
  const bool gpt_oss = c.architecture == "gpt-oss";
  c.name = r.get_string_or("_name_or_path", "");
  c.n_layer = r.get_int("num_hidden_layers");
  c.n_embd = r.get_int("hidden_size");
  c.n_ff = r.get_int("intermediate_size");
  c.n_head = r.get_int("num_attention_heads");
  c.n_head_kv = r.get_int_or("num_key_value_heads", c.n_head);
  c.n_vocab = r.get_int("vocab_size");
  c.n_ctx_train = r.get_int_or("max_position_embeddings", 2048);
  if (c.n_head % c.n_head_kv != 0)
    r.fail("num_attention_heads " + std::to_string(c.n_head) +
           " is not a multiple of num_key_value_heads " + std::to_string(c.n_head_kv));
  const bool own_head_dim = r.has("head_dim");
  c.head_dim = own_head_dim ? r.get_int("head_dim") : c.n_embd / c.n_head;
  if (c.head_dim % 2 != 0 || (!own_head_dim && c.n_embd % c.n_head != 0))
    r.fail("head dimension " + std::to_string(c.head_dim) +
           " is not usable (must be even and divide hidden_size)");
  c.rope_dim = c.head_dim;
  c.rms_eps = float(r.get_float_or("rms_norm_eps", 1e-6));
  // HF keeps Q/K in the half-split layout for every family here (its rotate_half), so RoPE
  // pairs i and i + d/2; llama.cpp's GGUF converter permutes Llama's rows to adjacent pairs.
  c.rope_neox = true;
  c.qkv_bias = c.architecture == "qwen2";
  c.qk_norm = c.architecture == "qwen3";
  c.tied_embeddings = r.get_bool_or("tie_word_embeddings", false);
  if (gpt_oss) {
    // GptOssForCausalLM: Q/K/V/O biases, learned sinks, experts, sliding and full layers.
    c.gpt_oss = c.attn_sinks = c.o_bias = c.qkv_bias = true;
    c.n_expert = r.get_int("num_local_experts");
    c.n_expert_used = r.get_int("num_experts_per_tok");
    if (c.n_expert_used > c.n_expert)
      r.fail("num_experts_per_tok " + std::to_string(c.n_expert_used) + " exceeds num_local_experts " +
             std::to_string(c.n_expert));
    c.swiglu_limit = float(r.get_float_or("swiglu_limit", 7.0));
    c.swiglu_alpha = float(r.get_float_or("swiglu_alpha", 1.702));
    c.sliding_window = r.get_int_or("sliding_window", 0);
    c.swa_pattern = c.sliding_window > 0 ? 2 : 0;
    // The engine's rule is llama.cpp's: sliding layers first, then alternating.
    auto lt = j.find("layer_types");
    if (lt != j.end() && lt->is_array()) {
      if (int(lt->size()) != c.n_layer) r.fail("layer_types has " + std::to_string(lt->size()) +
                                               " entries for " + std::to_string(c.n_layer) + " layers");
      for (int l = 0; l < c.n_layer; ++l) {
        const std::string want = c.layer_local(l) ? "sliding_attention" : "full_attention";
        if (!(*lt)[size_t(l)].is_string() || (*lt)[size_t(l)].get<std::string>() != want)
          r.fail("layer_types[" + std::to_string(l) + "] is not '" + want +
                 "' (supported: sliding and full layers alternating, sliding first)");
      }
    }
  }

  const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
  if (gemma) {
    read_hf_gemma(r, c);
  } else {
    const std::string act = r.get_string_or("hidden_act", "silu");
    if (act != "silu") r.fail("hidden_act '" + act + "' is not supported (silu)");
  }
  if (c.architecture != "qwen2" && !gpt_oss && r.get_bool_or("attention_bias", false))
    r.fail("attention_bias true (biases on q/k/v/o_proj) is not supported for " + type);
  if (r.get_bool_or("mlp_bias", false)) r.fail("mlp_bias true is not supported");
  read_hf_window(r, type, c);

  // RoPE: transformers 4 writes rope_theta and rope_scaling, transformers 5 rope_parameters
  // (Gemma: one entry per layer type; the full layers' is the model's RoPE).
  const Json* rope = nullptr;
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    auto it = j.find(key);
    if (it != j.end() && it->is_object()) {
      rope = &*it;
      break;
    }
  }
  if (rope && rope->contains("full_attention") && (*rope)["full_attention"].is_object()) {
    if (gemma) read_hf_gemma_local_rope(r, *rope, c);
    rope = &(*rope)["full_attention"];
  } else if (gemma && c.architecture == "gemma3" && c.sliding_window > 0) {
    // transformers 4: the local layers' base is rope_local_base_freq (default 10000).
    c.rope_theta_local = float(r.get_float_or("rope_local_base_freq", 10000.0));
  }
  double theta = 10000.0;
  if (rope && rope->contains("rope_theta") && (*rope)["rope_theta"].is_number())
    theta = (*rope)["rope_theta"].get<double>();
  theta = r.get_float_or("rope_theta", theta);
  if (!(theta > 0)) r.fail("rope_theta must be > 0");
  c.rope_theta = float(theta);
  // Partial rotary (Phi-4-mini's 0.75): only the first rope_dim values of each head rotate.
  double partial = r.get_float_or("partial_rotary_factor", 1.0);
  if (rope && rope->contains("partial_rotary_factor") &&
      (*rope)["partial_rotary_factor"].is_number())
    partial = (*rope)["partial_rotary_factor"].get<double>();
  if (!(partial > 0 && partial <= 1)) r.fail("partial_rotary_factor must be in (0, 1]");
  c.rope_dim = int(c.head_dim * partial);
  if (c.rope_dim < 2 || c.rope_dim % 2 != 0)
    r.fail("partial_rotary_factor " + std::to_string(partial) + " gives " +
           std::to_string(c.rope_dim) + " rotated dims per head (must be even and >= 2)");
  std::string scaling = "default";
  if (rope) {
    for (const char* key : {"rope_type", "type"}) {
      if (rope->contains(key) && (*rope)[key].is_string()) {
        scaling = (*rope)[key].get<std::string>();
        break;
      }
    }
  }
  auto rope_float = [&](const char* key) {
    if (!rope->contains(key) || !(*rope)[key].is_number())
      r.fail(std::string("rope scaling '") + scaling + "' needs the number '" + key + "'");
    const double v = (*rope)[key].get<double>();
    if (!(v > 0)) r.fail(std::string("rope scaling '") + key + "' must be > 0");
    return float(v);
  };
  if (scaling == "default") {
    c.rope_scaling = RopeScalingType::kNone;
  } else if (scaling == "linear") {
    c.rope_scaling = RopeScalingType::kLinear;
    c.rope_scale_factor = rope_float("factor");
  } else if (scaling == "llama3") {
    c.rope_scaling = RopeScalingType::kLlama3;
    c.rope_scale_factor = rope_float("factor");
    if (!rope->contains("original_max_position_embeddings"))
      r.fail("rope scaling 'llama3' needs 'original_max_position_embeddings'");
    c.rope_orig_ctx =
        r.positive("original_max_position_embeddings", (*rope)["original_max_position_embeddings"]);
    if (rope_float("high_freq_factor") <= rope_float("low_freq_factor"))
      r.fail("rope scaling 'llama3' needs high_freq_factor > low_freq_factor");
  } else if (scaling == "yarn") {
    c.rope_scaling = RopeScalingType::kYarn;
    c.rope_scale_factor = rope_float("factor");
    if (!rope->contains("original_max_position_embeddings"))
      r.fail("rope scaling 'yarn' needs 'original_max_position_embeddings'");
    c.rope_orig_ctx =
        r.positive("original_max_position_embeddings", (*rope)["original_max_position_embeddings"]);
    for (const char* key : {"attention_factor", "mscale", "mscale_all_dim"})
      if (rope->contains(key) && !(*rope)[key].is_null())
        r.fail(std::string("rope scaling 'yarn' with '") + key + "' is not supported");
    if (rope->contains("beta_fast") && !(*rope)["beta_fast"].is_null())
      c.yarn_beta_fast = rope_float("beta_fast");
    if (rope->contains("beta_slow") && !(*rope)["beta_slow"].is_null())
      c.yarn_beta_slow = rope_float("beta_slow");
    c.yarn_truncate = !(rope->contains("truncate") && (*rope)["truncate"].is_boolean())
                          ? true : (*rope)["truncate"].get<bool>();
  } else if (scaling == "longrope" || (type == "phi3" && scaling == "su")) {
    read_hf_longrope(r, *rope, c);
  } else {
    r.fail("rope scaling '" + scaling +
           "' is not supported (supported: default, linear, llama3, yarn, longrope)");
  }
  return c;
}

}  // namespace

ModelConfig read_hf_config(const std::string& text, const std::string& file) {
  try {
    return read_hf_config_json(text, file);
  } catch (const Json::exception& e) {
    // A value of an unexpected JSON type that no check anticipated.
    throw ModelError(file + ": unexpected content: " + e.what());
  }
}

namespace {

// The per-pair frequency factors of Llama 3's RoPE scaling, as config.json gives it.
std::vector<float> hf_rope_freqs(const Json& j, const ModelConfig& c) {
  if (c.rope_scaling != RopeScalingType::kLlama3) return {};
  const Json& rope = j.contains("rope_scaling") && j["rope_scaling"].is_object()
                         ? j["rope_scaling"]
                         : j["rope_parameters"];
  return llama3_rope_factors(c.rope_dim, c.rope_theta, c.rope_scale_factor,
                             float(rope["low_freq_factor"].get<double>()),
                             float(rope["high_freq_factor"].get<double>()), c.rope_orig_ctx);
}

// LongRoPE's factor sets from config.json (checked by read_hf_longrope).
void hf_long_rope(const Json& j, ModelWeights& w) {
  const Json& rope = j.contains("rope_scaling") && j["rope_scaling"].is_object()
                         ? j["rope_scaling"]
                         : j["rope_parameters"];
  for (const double v : rope["long_factor"]) w.rope_factors_long.push_back(float(v));
  for (const double v : rope["short_factor"]) w.rope_factors_short.push_back(float(v));
  w.rope_freqs = w.rope_factors_short;
}

// Opens the shards: model.safetensors.index.json's, else model.safetensors.
void open_shards(HfCheckpoint& ck) {
  const fs::path index = ck.dir / "model.safetensors.index.json";
  const fs::path single = ck.dir / "model.safetensors";
  bool has_index = false;
  const std::string text = read_text(index, false, &has_index);
  std::vector<std::pair<std::string, std::string>> wanted;  // tensor -> shard file name
  std::vector<std::string> shard_names;
  if (has_index) {
    ck.files.push_back(index);
    const Json j = parse_object(text, index.string());
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object() || wm->empty())
      throw ModelError(index.string() + ": 'weight_map' is missing or empty");
    std::set<std::string> seen;
    for (const auto& [name, file] : wm->items()) {
      if (!file.is_string())
        throw ModelError(index.string() + ": weight_map['" + name + "'] is not a file name");
      const std::string f = file.get<std::string>();
      // Shards live in the checkpoint directory itself.
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        throw ModelError(index.string() + ": weight_map['" + name + "'] names '" + f +
                         "', not a file in the checkpoint directory");
      wanted.emplace_back(name, f);
      if (seen.insert(f).second) shard_names.push_back(f);
    }
  } else {
    std::error_code ec;
    if (!fs::is_regular_file(single, ec))
      throw ModelError(ck.dir.string() +
                       ": no model.safetensors or model.safetensors.index.json (a Hugging Face "
                       "checkpoint needs its weights as safetensors)");
    shard_names.push_back("model.safetensors");
  }
  std::unordered_map<std::string, const SafetensorsFile*> by_name;
  for (const std::string& name : shard_names) {
    const fs::path p = ck.dir / name;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec))
      throw ModelError(p.string() + ": missing (shard named by " +
                       (has_index ? index.filename().string() : std::string("the checkpoint")) +
                       ")");
    ck.shards.push_back(SafetensorsFile::open(p));
    ck.files.push_back(p);
    by_name[name] = ck.shards.back().get();
    for (const SafetensorsTensor& t : ck.shards.back()->tensors()) {
      if (!ck.tensors.emplace(t.name, &t).second)
        throw ModelError(p.string() + ": tensor '" + t.name + "' is also in another shard");
    }
  }
  for (const auto& [name, file] : wanted) {
    const SafetensorsFile* f = by_name[file];
    if (!f->find(name))
      throw ModelError(f->path() + ": tensor '" + name + "' is missing (" +
                       index.filename().string() + " places it in this shard)");
  }
}

}  // namespace

namespace {

HfModelParts load_parts(const fs::path& dir, const std::function<void(LoadProgress)>& progress) {
  HfModelParts parts;
  parts.checkpoint = std::make_unique<HfCheckpoint>();
  HfCheckpoint& ck = *parts.checkpoint;
  ck.dir = dir;

  const fs::path config_path = dir / "config.json";
  const std::string config_text = read_text(config_path, true);
  ck.files.push_back(config_path);
  parts.config = read_hf_config(config_text, config_path.string());
  ModelConfig& c = parts.config;
  const Json config = parse_object(config_text, config_path.string());
  for (const char* key : {"torch_dtype", "dtype"})
    if (config.contains(key) && config[key].is_string()) ck.dtype = config[key].get<std::string>();
  if (c.name.empty()) c.name = fs::absolute(dir).lexically_normal().filename().string();
  if (c.name.empty())
    c.name = fs::absolute(dir).lexically_normal().parent_path().filename().string();

  HfTokenizerFiles tf;
  tf.source = dir.string();
  tf.tokenizer_json = read_text(dir / "tokenizer.json", true);
  ck.files.push_back(dir / "tokenizer.json");
  bool found = false;
  for (const char* name :
       {"tokenizer_config.json", "chat_template.jinja", "generation_config.json"}) {
    std::string text = read_text(dir / name, false, &found);
    if (!found) continue;
    ck.files.push_back(dir / name);
    if (std::string(name) == "tokenizer_config.json") tf.tokenizer_config_json = std::move(text);
    if (std::string(name) == "chat_template.jinja") tf.chat_template = std::move(text);
    if (std::string(name) == "generation_config.json") tf.generation_config_json = std::move(text);
  }
  tf.config_json = config_text;
  parts.tokenizer = Tokenizer::from_hf(tf);
  if (parts.tokenizer->vocab_size() > c.n_vocab)
    throw ModelError((dir / "tokenizer.json").string() + ": tokenizer has " +
                     std::to_string(parts.tokenizer->vocab_size()) +
                     " tokens but config.json's vocab_size is only " + std::to_string(c.n_vocab));

  open_shards(ck);

  const int total = 3 + c.n_layer;
  int done = 0;
  auto tick = [&] {
    ++done;
    if (progress) progress({done, total});
  };
  auto find = [&](const std::string& name, bool optional) -> const SafetensorsTensor* {
    auto it = ck.tensors.find(name);
    if (it != ck.tensors.end()) return it->second;
    if (optional) return nullptr;
    throw ModelError(dir.string() + ": missing tensor '" + name + "'");
  };
  auto where = [&](const SafetensorsTensor& t) {
    for (const auto& s : ck.shards)
      if (&t >= s->tensors().data() && &t < s->tensors().data() + s->tensors().size())
        return s->path();
    return dir.string();
  };
  auto checked = [&](const std::string& name, const std::vector<int64_t>& want,
                     bool optional) -> const SafetensorsTensor* {
    const SafetensorsTensor* t = find(name, optional);
    if (!t) return nullptr;
    if (t->shape != want)
      throw ModelError(where(*t) + ": tensor '" + name + "' has shape " + dims_str(t->shape) +
                       ", expected " + dims_str(want));
    if (!t->ggml_type())
      throw ModelError(where(*t) + ": tensor '" + name + "' has dtype " + t->dtype +
                       ", which SinkScope cannot read (F32, F16, BF16)");
    const size_t elem = t->dtype == "F32" ? 4 : 2;
    if (reinterpret_cast<uintptr_t>(t->data) % elem != 0)
      throw ModelError(where(*t) + ": tensor '" + name + "' data is not aligned to its " +
                       std::to_string(elem) + "-byte elements");
    return t;
  };
  // Small vectors: converted to float32.
  auto vec = [&](const std::string& name, int64_t n, bool optional = false) -> std::vector<float> {
    const SafetensorsTensor* t = checked(name, {n}, optional);
    if (!t) return {};
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(*t->ggml_type(), t->data, out.data(), n);
    return out;
  };
  // Projections: views into the mapping ([out, in] row-major is the engine's (rows, cols)).
  auto mat = [&](const std::string& name, int64_t rows, int64_t cols,
                 bool optional = false) -> QuantMatrix {
    const SafetensorsTensor* t = checked(name, {rows, cols}, optional);
    if (!t) return {};
    QuantMatrix q;
    q.type = *t->ggml_type();
    q.data = t->data;
    q.rows = rows;
    q.cols = cols;
    q.row_bytes = ggml_row_bytes(q.type, cols);
    return q;
  };

  // Rows [first, first + n) of a projection, as a view (fused tensors split without copies).
  auto rows_of = [](const QuantMatrix& all, int64_t first, int64_t n) {
    QuantMatrix q = all;
    q.rows = n;
    q.data = all.data + uint64_t(first) * all.row_bytes;
    return q;
  };

  ModelWeights& w = parts.weights;
  const int64_t D = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
  // A whole tensor as float32.
  auto floats = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const SafetensorsTensor* t = checked(name, shape, false);
    std::vector<float> out(static_cast<size_t>(t->n_elements));
    dequantize_row(*t->ggml_type(), t->data, out.data(), t->n_elements);
    return out;
  };
  // gpt-oss experts as transformers stores them: gate_up_proj (E, D, 2F) multiplied as x @ W
  // with gate and up in the even and odd columns, down_proj (E, F, D), biases (E, 2F) / (E, D).
  // Rewritten once into the engine's (out, in) rows per expert, float32, held by the weights.
  // MXFP4-packed experts as the released gpt-oss checkpoints store them: *_blocks (E, rows,
  // cols/32, 16) U8 and *_scales (E, rows, cols/32) U8, row r the output feature (gate_up: gate
  // on even rows, up on odd), each block 32 inputs with element 2j in the low nibble of byte j
  // and 2j+1 in the high one, value E2M1(code) * 2^(scale - 127) (transformers'
  // convert_moe_packed_tensors). Repacked once into GGUF's MXFP4 blocks ({e, qs[16]}, element j
  // low and j + 16 high nibble of qs[j]) so the GGUF path's decoder and products read them.
  auto packed = [&](const std::string& base, int64_t rows, int64_t cols) {
    const SafetensorsTensor* b = find(base + "_blocks", false);
    const SafetensorsTensor* s = find(base + "_scales", false);
    const int64_t E = c.n_expert, G = cols / 32;
    if (cols % 32 != 0)
      throw ModelError(dir.string() + ": tensor '" + base + "_blocks': " + std::to_string(cols) +
                       " inputs are not whole MXFP4 blocks of 32");
    const std::vector<int64_t> want_b = {E, rows, G, 16}, want_s = {E, rows, G};
    for (const auto& [t, want] : {std::make_pair(b, want_b), std::make_pair(s, want_s)}) {
      if (t->dtype != "U8")
        throw ModelError(where(*t) + ": tensor '" + t->name + "' has dtype " + t->dtype +
                         ", expected U8 (packed MXFP4)");
      if (t->shape != want)
        throw ModelError(where(*t) + ": tensor '" + t->name + "' has shape " +
                         dims_str(t->shape) + ", expected " + dims_str(want));
    }
    std::vector<uint8_t> out(size_t(E * rows * G * 17));
    for (int64_t blk = 0; blk < E * rows * G; ++blk) {
      const uint8_t* in = b->data + blk * 16;
      uint8_t* o = out.data() + blk * 17;
      o[0] = s->data[blk];
      auto code = [&](int k) { return (k & 1) ? in[k >> 1] >> 4 : in[k >> 1] & 0x0F; };
      for (int j = 0; j < 16; ++j) o[1 + j] = uint8_t(code(j) | (code(j + 16) << 4));
    }
    return out;
  };
  // One (rows_all, cols) MXFP4 view per expert into an (E, rows_all, cols) block tensor.
  auto mxfp4_views = [&](const std::vector<uint8_t>& all, int64_t rows_all, int64_t cols) {
    std::vector<QuantMatrix> out(static_cast<size_t>(c.n_expert));
    for (int64_t e = 0; e < c.n_expert; ++e) {
      QuantMatrix& q = out[size_t(e)];
      q.type = GgmlType::kMXFP4;
      q.cols = cols;
      q.rows = rows_all;
      q.row_bytes = ggml_row_bytes(GgmlType::kMXFP4, cols);
      q.data = all.data() + uint64_t(e) * uint64_t(rows_all) * q.row_bytes;
    }
    return out;
  };
  auto load_experts = [&](const std::string& p, LayerWeights& L) {
    const int64_t E = c.n_expert;
    const std::string x = p + "mlp.experts.";
    L.router = mat(p + "mlp.router.weight", E, D);
    L.router_bias = vec(p + "mlp.router.bias", E);
    if (find(x + "gate_up_proj_blocks", true) || find(x + "down_proj_blocks", true)) {
      const std::vector<float> gub = floats(x + "gate_up_proj_bias", {E, 2 * F});
      L.exp_down_b = floats(x + "down_proj_bias", {E, D});
      const std::vector<uint8_t> gu = packed(x + "gate_up_proj", 2 * F, D);
      // Gate rows (even) and up rows (odd) into two tensors of F rows per expert.
      const uint64_t rb = ggml_row_bytes(GgmlType::kMXFP4, D);
      const size_t base = w.owned_bytes.size();
      w.owned_bytes.emplace_back(size_t(E * F) * rb);
      w.owned_bytes.emplace_back(size_t(E * F) * rb);
      w.owned_bytes.push_back(packed(x + "down_proj", D, F));
      std::vector<uint8_t>& g = w.owned_bytes[base];
      std::vector<uint8_t>& u = w.owned_bytes[base + 1];
      L.exp_gate_b.resize(size_t(E * F));
      L.exp_up_b.resize(size_t(E * F));
      for (int64_t e = 0; e < E; ++e)
        for (int64_t f = 0; f < F; ++f) {
          std::copy_n(gu.data() + ((e * 2 * F) + 2 * f) * rb, rb, g.data() + (e * F + f) * rb);
          std::copy_n(gu.data() + ((e * 2 * F) + 2 * f + 1) * rb, rb, u.data() + (e * F + f) * rb);
          L.exp_gate_b[size_t(e * F + f)] = gub[size_t(e * 2 * F + 2 * f)];
          L.exp_up_b[size_t(e * F + f)] = gub[size_t(e * 2 * F + 2 * f + 1)];
        }
      L.exp_gate = mxfp4_views(g, F, D);
      L.exp_up = mxfp4_views(u, F, D);
      L.exp_down = mxfp4_views(w.owned_bytes[base + 2], D, F);
      return;
    }
    const std::vector<float> gu = floats(x + "gate_up_proj", {E, D, 2 * F});
    const std::vector<float> gub = floats(x + "gate_up_proj_bias", {E, 2 * F});
    const std::vector<float> dn = floats(x + "down_proj", {E, F, D});
    L.exp_down_b = floats(x + "down_proj_bias", {E, D});
    // Emplaced first, referenced after: a later emplace may move the outer vector (the buffers
    // themselves never move).
    const size_t base = w.owned.size();
    for (int i = 0; i < 3; ++i) w.owned.emplace_back(size_t(E * F * D));
    std::vector<float>& g = w.owned[base];
    std::vector<float>& u = w.owned[base + 1];
    std::vector<float>& d = w.owned[base + 2];
    L.exp_gate_b.resize(size_t(E * F));
    L.exp_up_b.resize(size_t(E * F));
    for (int64_t e = 0; e < E; ++e) {
      for (int64_t i = 0; i < D; ++i)
        for (int64_t f = 0; f < F; ++f) {
          g[size_t((e * F + f) * D + i)] = gu[size_t((e * D + i) * 2 * F + 2 * f)];
          u[size_t((e * F + f) * D + i)] = gu[size_t((e * D + i) * 2 * F + 2 * f + 1)];
        }
      for (int64_t f = 0; f < F; ++f) {
        L.exp_gate_b[size_t(e * F + f)] = gub[size_t(e * 2 * F + 2 * f)];
        L.exp_up_b[size_t(e * F + f)] = gub[size_t(e * 2 * F + 2 * f + 1)];
        for (int64_t i = 0; i < D; ++i) d[size_t((e * D + i) * F + f)] = dn[size_t((e * F + f) * D + i)];
      }
    }
    auto views = [&](const std::vector<float>& all, int64_t rows, int64_t cols) {
      std::vector<QuantMatrix> out(static_cast<size_t>(E));
      for (int64_t e = 0; e < E; ++e) {
        QuantMatrix& q = out[size_t(e)];
        q.type = GgmlType::kF32;
        q.data = reinterpret_cast<const uint8_t*>(all.data() + e * rows * cols);
        q.rows = rows;
        q.cols = cols;
        q.row_bytes = uint64_t(cols) * sizeof(float);
      }
      return out;
    };
    L.exp_gate = views(g, F, D);
    L.exp_up = views(u, F, D);
    L.exp_down = views(d, D, F);
  };
  // Gemma's RMSNorm multiplies by 1 + w: its gains are read as 1 + w (as llama.cpp's converter
  // writes them), the engine's ordinary gain.
  auto gain = [&](const std::string& name, int64_t n) {
    std::vector<float> g = vec(name, n);
    if (c.gemma)
      for (float& x : g) x += 1.0f;
    return g;
  };
  w.tok_embd = mat("model.embed_tokens.weight", V, D);
  tick();
  w.output_norm = gain("model.norm.weight", D);
  // Tied models may still store lm_head.weight (a copy); the embedding stands in either way.
  if (!c.tied_embeddings) w.output = mat("lm_head.weight", V, D);
  tick();
  w.rope_freqs = hf_rope_freqs(config, c);
  if (c.long_rope) hf_long_rope(config, w);
  tick();
  w.layers.resize(size_t(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[size_t(l)];
    L.attn_norm = gain(p + "input_layernorm.weight", D);
    if (c.architecture == "phi3") {
      // Phi3's fused qkv_proj (Q, then K, then V rows): three row views of one tensor.
      const QuantMatrix qkv = mat(p + "self_attn.qkv_proj.weight", Q + 2 * KV, D);
      L.wq = rows_of(qkv, 0, Q);
      L.wk = rows_of(qkv, Q, KV);
      L.wv = rows_of(qkv, Q + KV, KV);
    } else {
      L.wq = mat(p + "self_attn.q_proj.weight", Q, D);
      L.wk = mat(p + "self_attn.k_proj.weight", KV, D);
      L.wv = mat(p + "self_attn.v_proj.weight", KV, D);
    }
    if (c.qkv_bias) {
      L.bq = vec(p + "self_attn.q_proj.bias", Q);
      L.bk = vec(p + "self_attn.k_proj.bias", KV);
      L.bv = vec(p + "self_attn.v_proj.bias", KV);
    }
    if (c.qk_norm) {
      L.q_norm = gain(p + "self_attn.q_norm.weight", c.head_dim);
      L.k_norm = gain(p + "self_attn.k_norm.weight", c.head_dim);
    }
    L.wo = mat(p + "self_attn.o_proj.weight", D, Q);
    if (c.gemma) {
      // Gemma: post_attention_layernorm normalises the attention's output; the FFN has a pre-
      // and a post-norm.
      L.attn_post_norm = gain(p + "post_attention_layernorm.weight", D);
      L.ffn_norm = gain(p + "pre_feedforward_layernorm.weight", D);
      L.ffn_post_norm = gain(p + "post_feedforward_layernorm.weight", D);
    } else {
      L.ffn_norm = vec(p + "post_attention_layernorm.weight", D);
    }
    if (c.gpt_oss) {
      L.bo = vec(p + "self_attn.o_proj.bias", D);
      L.sinks = vec(p + "self_attn.sinks", c.n_head);
      load_experts(p, L);
      tick();
      continue;
    }
    if (c.architecture == "phi3") {
      // Phi3MLP's gate_up_proj: the gate's F rows, then the up projection's (chunk(2) order).
      const QuantMatrix gu = mat(p + "mlp.gate_up_proj.weight", 2 * F, D);
      L.w_gate = rows_of(gu, 0, F);
      L.w_up = rows_of(gu, F, F);
    } else {
      L.w_gate = mat(p + "mlp.gate_proj.weight", F, D);
      L.w_up = mat(p + "mlp.up_proj.weight", F, D);
    }
    L.w_down = mat(p + "mlp.down_proj.weight", D, F);
    tick();
  }
  return parts;
}

}  // namespace

HfModelParts load_hf_checkpoint(const fs::path& dir,
                                const std::function<void(LoadProgress)>& progress) {
  try {
    return load_parts(dir, progress);
  } catch (const Json::exception& e) {
    // A value of an unexpected JSON type (config.json, the index) that no check anticipated.
    throw ModelError(dir.string() + ": unexpected content: " + e.what());
  }
}

std::string hf_checkpoint_sha256(const HfCheckpoint& c) {
  std::vector<std::pair<std::string, fs::path>> files;
  for (const fs::path& p : c.files) files.emplace_back(p.filename().string(), p);
  std::sort(files.begin(), files.end());
  Sha256 h;
  for (const auto& [name, path] : files) {
    const std::string line = name + " " + sha256_file(path) + "\n";
    h.update(line.data(), line.size());
  }
  return h.hex_digest();
}

}  // namespace sinkscope
