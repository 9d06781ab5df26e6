// SPDX-License-Identifier: Apache-2.0
#include <iomanip>
#include <iostream>
#include <map>
#include <string>

#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "engine/gguf.h"
#include "engine/json.h"
#include "engine/model.h"
#include "engine/tokenizer.h"

namespace sinkscope::cli {

namespace {

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::kNone:
      return "none";
    case ChatFormat::kChatML:
      return "chatml";
    case ChatFormat::kLlama3:
      return "llama3";
  }
  return "?";
}

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

}  // namespace

int run_info(const InfoArgs& a, std::ostream& out, std::ostream& err) {
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  // Header, config and tokenizer only: no need to dequantize the weights.
  const auto path = resolve_model_path(a.model);
  const auto file = GgufFile::open(path);
  const ModelConfig c = read_model_config(*file);
  const auto tok = Tokenizer::from_gguf(*file);

  std::map<std::string, int> by_type;
  int64_t n_params = 0;
  for (const GgufTensorInfo& t : file->tensors()) {
    ++by_type[ggml_type_name(t.type)];
    n_params += t.n_elements;
  }

  if (a.json) {
    json::Writer w;
    w.begin_object();
    w.field("path", path.string());
    w.field("file_size", static_cast<unsigned long long>(file->file_size()));
    w.field("gguf_version", static_cast<unsigned>(file->version()));
    w.field("metadata_keys", static_cast<unsigned long long>(file->metadata().size()));
    w.key("config").begin_object();
    w.field("architecture", c.architecture);
    w.field("name", c.name);
    w.field("n_layer", c.n_layer);
    w.field("n_embd", c.n_embd);
    w.field("n_head", c.n_head);
    w.field("n_head_kv", c.n_head_kv);
    w.field("head_dim", c.head_dim);
    w.field("n_ff", c.n_ff);
    w.field("n_vocab", c.n_vocab);
    w.field("n_ctx_train", c.n_ctx_train);
    w.field("rope_theta", static_cast<double>(c.rope_theta));
    w.field("rope_dim", c.rope_dim);
    w.field("rope_neox", c.rope_neox);
    w.field("rope_scaling", rope_scaling_name(c.rope_scaling));
    w.field("rms_eps", static_cast<double>(c.rms_eps));
    w.field("qkv_bias", c.qkv_bias);
    w.field("tied_embeddings", c.tied_embeddings);
    w.end_object();
    w.key("tensors").begin_object();
    w.field("count", static_cast<unsigned long long>(file->tensors().size()));
    w.field("parameters", static_cast<long long>(n_params));
    w.key("by_type").begin_object();
    for (const auto& [type, n] : by_type) w.field(type, n);
    w.end_object();
    w.end_object();
    w.key("tokenizer").begin_object();
    w.field("kind", tok->model_name());
    w.field("vocab_size", tok->vocab_size());
    w.field("bos", tok->bos());
    w.field("eos", tok->eos());
    w.field("chat_format", chat_format_name(tok->chat_format()));
    w.end_object();
    w.end_object();
    out << w.str() << "\n";
    return 0;
  }

  const auto row = [&](const char* k) -> std::ostream& {
    return out << "  " << std::left << std::setw(18) << k << std::right;
  };
  out << "file: " << path.string() << "\n";
  row("size") << std::fixed << std::setprecision(1) << file->file_size() / (1024.0 * 1024.0)
              << " MiB, GGUF v" << file->version() << ", " << file->metadata().size()
              << " metadata keys\n";
  out << "config:\n";
  row("name") << (c.name.empty() ? "-" : c.name) << "\n";
  row("architecture") << c.architecture << "\n";
  row("layers") << c.n_layer << "\n";
  row("width") << c.n_embd << "\n";
  row("heads (q / kv)") << c.n_head << " / " << c.n_head_kv << ", head dim " << c.head_dim << "\n";
  row("ffn width") << c.n_ff << "\n";
  row("vocabulary") << c.n_vocab << "\n";
  row("trained context") << c.n_ctx_train << "\n";
  row("rope") << std::defaultfloat << "theta " << c.rope_theta << ", " << c.rope_dim << " dims, "
              << (c.rope_neox ? "neox pairs" : "adjacent pairs") << ", scaling "
              << rope_scaling_name(c.rope_scaling) << "\n";
  row("rms eps") << c.rms_eps << "\n";
  row("qkv bias") << (c.qkv_bias ? "yes" : "no") << "\n";
  row("tied embeddings") << (c.tied_embeddings ? "yes" : "no") << "\n";
  out << "tensors: " << file->tensors().size() << " (" << std::fixed << std::setprecision(1)
      << n_params / 1e6 << " M parameters)\n";
  for (const auto& [type, n] : by_type) row(type.c_str()) << n << "\n";
  out << "tokenizer:\n";
  row("kind") << tok->model_name() << "\n";
  row("vocabulary") << tok->vocab_size() << "\n";
  row("bos / eos") << tok->bos() << " / " << tok->eos() << "\n";
  row("chat format") << chat_format_name(tok->chat_format()) << "\n";
  (void)err;
  return 0;
}

}  // namespace sinkscope::cli
