// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "engine/json.h"
#include "app/cli/attention_options.h"
#include "engine/session.h"

namespace sinkscope::cli {

namespace {

std::string prompt_text(const GenerateArgs& a) {
  if (a.prompt) return *a.prompt;
  std::string text = read_text_file(*a.prompt_file, "--prompt-file");
  // Editors end files with a newline; it is not part of the prompt.
  while (!text.empty() &&
         (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
    text.pop_back();
  if (text.empty()) throw UsageError("--prompt-file: the prompt is empty (" + *a.prompt_file + ")");
  return text;
}

std::vector<TokenId> tokenize_prompt(const Tokenizer& tok, const GenerateArgs& a,
                                     const std::string& text) {
  if (!a.chat) return tok.encode(text);
  std::vector<ChatMessage> messages;
  if (a.system) messages.push_back({"system", *a.system});
  messages.push_back({"user", text});
  return tok.encode(tok.apply_chat_template(messages), /*parse_special=*/true);
}

void write_json(std::ostream& out, const GenerateArgs& a, const Model& model,
                const Backend& backend, const GenerateResult& r) {
  json::Writer w;
  w.begin_object();
  w.key("model").begin_object();
  w.field("path", model.path().string());
  w.field("name", model.config().name);
  w.field("architecture", model.config().architecture);
  if (a.hash) w.field("sha256", model.sha256());
  w.end_object();
  w.field("backend", backend.name());
  w.field("threads", resolved_threads(a.threads));
  w.field("context", backend.capacity());
  w.field("chat", a.chat);
  w.key("sampler").begin_object();
  w.field("temperature", static_cast<double>(a.temperature));
  w.field("top_k", a.top_k);
  w.field("top_p", static_cast<double>(a.top_p));
  w.field("seed", static_cast<unsigned long long>(a.seed));
  w.end_object();
  w.field("max_tokens", a.max_tokens);
  w.field("prompt_tokens", static_cast<long long>(r.prompt_tokens.size()));
  w.field("generated_tokens", static_cast<long long>(r.tokens.size()));
  w.field("tokens", r.tokens);
  w.field("text", r.text);
  w.field("stop_reason", r.stop_reason);
  w.field("prefill_ms", r.prefill_ms);
  w.field("decode_ms", r.decode_ms);
  w.field("prefill_tokens_per_s", r.prefill_tokens_per_s());
  w.field("decode_tokens_per_s", r.decode_tokens_per_s());
  write_attention_json(w, backend.attention(), backend.probes());
  w.end_object();
  out << w.str() << "\n";
  out.flush();
}

}  // namespace

int run_generate(const GenerateArgs& a, std::ostream& out, std::ostream& err) {
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  const std::string text = prompt_text(a);
  const auto model_path = resolve_model_path(a.model);
  auto model = load_model(model_path, a.json ? nullptr : &err);
  BackendOptions bopts = make_backend_options(model->config(), a.threads, a.ctx);
  bopts.attention = a.attention;
  std::string backend_note;
  auto backend = make_backend(model, bopts, a.backend, &backend_note);
  if (!backend_note.empty() && !a.json) err << "sinkscope-cli: " << backend_note << "\n";

  const Tokenizer& tok = model->tokenizer();
  const std::vector<TokenId> prompt = tokenize_prompt(tok, a, text);
  if (prompt.empty()) throw UsageError("the prompt is empty after tokenization");
  const int capacity = backend->capacity();
  if (static_cast<int64_t>(prompt.size()) > capacity)
    throw UsageError("the prompt is " + std::to_string(prompt.size()) +
                     " tokens, longer than the context (" + std::to_string(capacity) +
                     " tokens); shorten it or raise --ctx (up to the model's " +
                     std::to_string(model->config().n_ctx_train) + ")");
  if (a.max_tokens > capacity)
    throw UsageError("--max-tokens " + std::to_string(a.max_tokens) +
                     " is more than the context holds (" + std::to_string(capacity) + " tokens)");
  if (!a.json) {
    // Never the prompt itself: its size and a fingerprint are enough to tell runs apart.
    err << "sinkscope-cli: prompt " << text.size() << " bytes, " << prompt.size()
        << " tokens, fingerprint " << fingerprint(text) << "; backend " << backend->name() << ", "
        << resolved_threads(a.threads) << " threads, context " << capacity << "\n";
    err.flush();
  }

  GenerateOptions g;
  g.max_tokens = a.max_tokens;
  g.sampler.temperature = a.temperature;
  g.sampler.top_k = a.top_k;
  g.sampler.top_p = a.top_p;
  g.sampler.seed = a.seed;
  bool ends_with_newline = true;
  const auto on_token = [&](TokenId id) {
    if (a.json || tok.is_eog(id)) return;
    const std::string piece = tok.token_to_piece(id);
    if (piece.empty()) return;
    out << piece;
    out.flush();
    ends_with_newline = piece.back() == '\n';
  };
  const GenerateResult r = generate(*backend, prompt, g, on_token);

  if (a.json) {
    write_json(out, a, *model, *backend, r);
    return 0;
  }
  if (!ends_with_newline) out << "\n";
  out.flush();
  err << "sinkscope-cli: " << r.tokens.size() << " tokens, stop: " << r.stop_reason << "; prefill "
      << format_duration(r.prefill_ms / 1000.0) << " ("
      << static_cast<int>(r.prefill_tokens_per_s() + 0.5) << " tok/s), decode "
      << format_duration(r.decode_ms / 1000.0) << " ("
      << static_cast<int>(r.decode_tokens_per_s() + 0.5) << " tok/s)\n";
  return 0;
}

}  // namespace sinkscope::cli
