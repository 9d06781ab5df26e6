// SPDX-License-Identifier: Apache-2.0
#include <iomanip>
#include <iostream>

#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "app/cli/kv_args.h"
#include "engine/util/json_io.h"
#include "engine/eval/sinks.h"

namespace sinkscope::cli {

int run_sinks(const SinksArgs& a, std::ostream& out, std::ostream& err) {
  if (a.help) {
    out << a.help_text;
    return 0;
  }
  const std::string text = a.file ? read_text_file(*a.file, "--file") : *a.prompt;
  const auto model = load_model(resolve_model_path(a.model), a.json ? nullptr : &err);
  std::vector<TokenId> tokens = model->tokenizer().encode(text);
  if (int(tokens.size()) > a.tokens) tokens.resize(size_t(a.tokens));
  if (tokens.size() < 2) throw UsageError("the input has fewer than 2 tokens");
  BackendOptions bo;
  bo.n_threads = a.threads;
  bo.max_context = std::max<int>(int(tokens.size()), model->config().n_ctx_train);
  auto backend = make_cpu_backend(model, bo);
  SinkCriteria crit;
  crit.epsilon = a.epsilon;
  const SinkReport r = detect_sinks(*backend, tokens, a.positions, crit);
  const Tokenizer& tok = model->tokenizer();
  auto piece = [&](int pos) { return tok.token_to_piece(tokens[size_t(pos)]); };

  if (a.json) {
    Json j;
    j["model"] = model->path().string();
    j["tokens"] = static_cast<long long>(tokens.size());
    j["layers"] = r.n_layer;
    j["heads"] = r.n_head;
    j["epsilon"] = r.criteria.epsilon;
    j["min_head_share"] = r.criteria.min_head_share;
    j["min_queries"] = static_cast<long long>(r.criteria.min_queries);
    Json& positions = j["positions"] = Json::array();
    for (int k = 0; k < r.n_pos; ++k) {
      Json pos;
      pos["position"] = k;
      pos["token"] = piece(k);
      pos["sink_heads"] = r.sink_heads[size_t(k)];
      pos["head_share"] = r.head_share[size_t(k)];
      if (!r.queries.empty()) pos["queries"] = static_cast<long long>(r.queries[size_t(k)]);
      pos["judged"] = r.judged(k);
      double mean = 0;
      for (int l = 0; l < r.n_layer; ++l)
        for (int h = 0; h < r.n_head; ++h) mean += r.alpha_at(l, h, k);
      pos["alpha_mean"] = mean / double(std::max(1, r.n_layer * r.n_head));
      positions.push_back(std::move(pos));
    }
    j["flagged"] = r.flagged;
    j["recommended_sink_keep_count"] = r.recommended_sink_keep;
    // Learned sinks (gpt-oss): mean probability per query of each head's sink logit, per layer.
    if (!r.learned_mass.empty()) {
      Json& ls = j["learned_sink_mass"] = Json::array();
      for (int l = 0; l < r.n_layer; ++l) {
        Json per = Json::array();
        for (int h = 0; h < r.n_head; ++h) per.push_back(r.learned_at(l, h));
        ls.push_back(per);
      }
    }
    out << dump_json(j) << "\n";
    return 0;
  }
  out << "sink detection over " << tokens.size() << " tokens, " << r.n_layer << " layers x "
      << r.n_head << " heads, epsilon " << r.criteria.epsilon << "\n";
  out << "position  sink heads  share    mean alpha  token\n";
  for (int k = 0; k < r.n_pos; ++k) {
    if (r.sink_heads[size_t(k)] == 0 && k >= 8) continue;  // quiet tail
    double mean = 0;
    for (int l = 0; l < r.n_layer; ++l)
      for (int h = 0; h < r.n_head; ++h) mean += r.alpha_at(l, h, k);
    mean /= double(std::max(1, r.n_layer * r.n_head));
    std::string p = piece(k);
    for (auto& ch : p)
      if (ch == '\n') ch = ' ';
    out << std::setw(8) << k << std::setw(12) << r.sink_heads[size_t(k)] << std::fixed
        << std::setprecision(3) << std::setw(8) << r.head_share[size_t(k)] << std::setw(12)
        << mean << "  '" << p << "'\n";
  }
  int shown = 0;
  for (int k = 0; k < r.n_pos; ++k) shown += r.sink_heads[size_t(k)] != 0 || k < 8;
  if (shown < r.n_pos)
    out << "(" << r.n_pos - shown << " positions past the first 8 with no sink head left out; "
        << "--json lists all " << r.n_pos << ")\n";
  if (const std::string note = unjudged_note(r); !note.empty())
    out << "(" << note << ": too few to average; a longer input judges them)\n";
  out << std::defaultfloat << "flagged positions (a sink in >= " << r.criteria.min_head_share * 100
      << " % of heads):";
  for (int k : r.flagged) out << " " << k;
  out << (r.flagged.empty() ? " none" : "") << "\nrecommended sink_keep_count: "
      << r.recommended_sink_keep << "\n";
  if (!r.learned_mass.empty()) {
    // Next to alpha_k of the keys: the mass each head's learned sink logit takes per query.
    out << learned_sink_summary(r) << "\nlearned sink mass per head:\n";
    for (int l = 0; l < r.n_layer; ++l) {
      out << "  layer " << std::setw(3) << l << ":";
      for (int h = 0; h < r.n_head; ++h)
        out << " " << std::fixed << std::setprecision(3) << r.learned_at(l, h);
      out << "\n";
    }
  }
  return 0;
}

}  // namespace sinkscope::cli
