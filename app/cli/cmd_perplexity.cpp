// SPDX-License-Identifier: Apache-2.0
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/attention_options.h"
#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "engine/util/json_io.h"
#include "engine/model/session.h"

namespace sinkscope::cli {

int run_perplexity(const PerplexityArgs& a, std::ostream& out, std::ostream& err) {
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  const std::string text = read_text_file(a.file, "--file");
  if (text.empty()) throw UsageError("--file: the file is empty (" + a.file + ")");
  const auto model_path = resolve_model_path(a.model);
  auto model = load_model(model_path, a.json ? nullptr : &err);
  BackendOptions bopts = make_backend_options(model->config(), a.threads, a.ctx);
  bopts.attention = a.attention;
  std::string backend_note;
  auto backend = open_backend(model, bopts, a.backend, &backend_note);
  if (!backend_note.empty() && !a.json) err << "sinkscope-cli: " << backend_note << "\n";

  const std::vector<TokenId> tokens = model->tokenizer().encode(text);
  if (tokens.size() < 2)
    throw UsageError("--file: " + std::to_string(tokens.size()) +
                     " token(s) after tokenization; perplexity needs at least 2");
  err << "sinkscope-cli: scoring " << tokens.size() << " tokens in chunks of " << a.ctx << " ("
      << backend->name() << ", " << threads_text(resolved_threads(a.threads)) << ")\n";

  const bool tty = stderr_is_tty();
  Throttle throttle(tty ? 0.5 : 10.0);
  bool drew = false;
  const auto progress = [&](const PerplexityProgress& p) {
    const bool last = p.chunk >= p.n_chunks;
    if (!throttle.ready(last)) return;
    err << (tty ? "\r" : "") << "perplexity: chunk " << p.chunk << "/" << p.n_chunks;
    if (!last) err << ", about " << format_duration(p.eta_s) << " left";
    err << (tty ? "          " : "\n");
    err.flush();
    drew = true;
  };
  const PerplexityResult r = perplexity(*backend, tokens, a.ctx, progress);
  if (drew && tty) err << "\n";

  if (a.json) {
    Json j;
    j["model"] = model->path().string();
    j["file"] = a.file;
    j["backend"] = backend->name();
    j["threads"] = resolved_threads(a.threads);
    j["ctx"] = a.ctx;
    j["tokens"] = static_cast<long long>(tokens.size());
    j["predicted_tokens"] = static_cast<long long>(r.n_predicted);
    j["chunks"] = r.n_chunks;
    j["perplexity"] = r.perplexity;
    j["mean_nll"] = r.mean_nll;
    j["seconds"] = r.seconds;
    j["chunk_perplexity"] = r.chunk_ppl;
    j["attention"] = attention_json(backend->attention(), r.probes);
    out << dump_json(j) << "\n";
    return 0;
  }
  out << std::fixed << std::setprecision(4) << "perplexity: " << r.perplexity
      << "\nmean nll: " << r.mean_nll << " nats/token\n"
      << "tokens: " << tokens.size() << " (" << r.n_predicted << " scored"
      << (tokens.size() > size_t(r.n_chunks) * size_t(a.ctx)
              ? "; the last " + std::to_string(tokens.size() - size_t(r.n_chunks) * size_t(a.ctx)) +
                    " do not fill a chunk and are not scored"
              : std::string())
      << ")\n"
      << "chunks: " << r.n_chunks << " x " << a.ctx << "\n"
      << std::setprecision(2) << "seconds: " << r.seconds << "\n";
  if (a.attention.type == AttentionType::kDynamicSparse) {
    const TileCounts t = r.probes.total(false);
    out << std::setprecision(4) << "sparsity (prefill): " << t.sparsity() << " (" << t.skipped
        << " of " << t.visited << " tiles skipped)\n";
  }
  return 0;
}

}  // namespace sinkscope::cli
