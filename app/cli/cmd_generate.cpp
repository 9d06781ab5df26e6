// SPDX-License-Identifier: Apache-2.0
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "engine/util/json_io.h"
#include "app/cli/attention_options.h"
#include "engine/model/session.h"

namespace sinkscope::cli {

namespace {

std::vector<TokenId> tokenize_prompt(const Tokenizer& tok, const GenerateArgs& a,
                                     const std::string& text) {
  if (!a.chat) return tok.encode(text);
  std::vector<ChatMessage> messages;
  if (a.system) messages.push_back({"system", *a.system});
  messages.push_back({"user", text});
  return tok.encode_chat(messages);
}

void write_json(std::ostream& out, const GenerateArgs& a, const Model& model,
                const Backend& backend, const GenerateResult& r) {
  Json j;
  Json& m = j["model"];
  m["path"] = model.path().string();
  m["name"] = model.config().name;
  m["architecture"] = model.config().architecture;
  if (a.hash) m["sha256"] = model.sha256();
  j["backend"] = backend.name();
  j["threads"] = resolved_threads(a.threads);
  j["context"] = backend.capacity();
  j["chat"] = a.chat;
  if (a.chat) j["chat_format"] = chat_format_name(model.tokenizer().chat_format());
  Json& s = j["sampler"];
  s["temperature"] = static_cast<double>(a.temperature);
  s["top_k"] = a.top_k;
  s["top_p"] = static_cast<double>(a.top_p);
  s["seed"] = static_cast<unsigned long long>(a.seed);
  j["max_tokens"] = a.max_tokens;
  j["prompt_tokens"] = static_cast<long long>(r.prompt_tokens.size());
  j["generated_tokens"] = static_cast<long long>(r.tokens.size());
  j["tokens"] = r.tokens;
  j["text"] = r.text;
  j["stop_reason"] = r.stop_reason;
  j["prefill_ms"] = r.prefill_ms;
  j["decode_ms"] = r.decode_ms;
  j["prefill_tokens_per_s"] = r.prefill_tokens_per_s();
  j["decode_tokens_per_s"] = r.decode_tokens_per_s();
  j["attention"] = attention_json(backend.attention(), backend.probes());
  j["decode_path"] = decode_path_json(backend.decode_path_stats());
  out << dump_json(j) << "\n";
  out.flush();
}

}  // namespace

int run_generate(const GenerateArgs& a, std::ostream& out, std::ostream& err) {
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  const std::string text = prompt_text(a.prompt, a.prompt_file);
  const auto model_path = resolve_model_path(a.model);
  auto model = load_model(model_path, a.json ? nullptr : &err);
  BackendOptions bopts = make_backend_options(model->config(), a.threads, a.ctx);
  bopts.attention = a.attention;
  std::string backend_note;
  auto backend = open_backend(model, bopts, a.backend, &backend_note);
  if (!backend_note.empty() && !a.json) err << "sinkscope-cli: " << backend_note << "\n";

  const Tokenizer& tok = model->tokenizer();
  if (a.chat && !a.json) {
    if (const std::string note = chat_fallback_note(tok); !note.empty())
      err << "sinkscope-cli: --chat: " << note << "\n";
  }
  const std::vector<TokenId> prompt = tokenize_prompt(tok, a, text);
  if (prompt.empty()) throw UsageError("the prompt is empty after tokenization");
  const int capacity = backend->capacity();
  if (static_cast<int64_t>(prompt.size()) > capacity)
    throw UsageError("the prompt is " + std::to_string(prompt.size()) +
                     " tokens, longer than the context (" + std::to_string(capacity) +
                     " tokens); shorten it or raise --ctx (up to the model's " +
                     std::to_string(model->config().n_ctx_train) + ")");
  if (static_cast<int64_t>(prompt.size()) == capacity)
    throw UsageError("the prompt is " + std::to_string(prompt.size()) +
                     " tokens and fills the context, leaving no room to generate; shorten it or "
                     "raise --ctx (up to the model's " +
                     std::to_string(model->config().n_ctx_train) + ")");
  if (a.max_tokens > capacity)
    throw UsageError("--max-tokens " + std::to_string(a.max_tokens) +
                     " is more than the context holds (" + std::to_string(capacity) + " tokens)");
  if (!a.json) {
    // Never the prompt itself: its size and a fingerprint are enough to tell runs apart.
    err << "sinkscope-cli: prompt " << text.size() << " bytes, " << prompt.size()
        << " tokens, fingerprint " << fingerprint(text) << "; backend " << backend->name() << ", "
        << threads_text(resolved_threads(a.threads)) << ", context " << capacity << "\n";
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
  if (const std::string line = decode_path_line(backend->decode_path_stats()); !line.empty())
    err << "sinkscope-cli: " << line << "\n";
  return 0;
}

}  // namespace sinkscope::cli
