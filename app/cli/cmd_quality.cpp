// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli quality: dynamic-sparse attention against the dense baseline on real text, per
// length and lambda: sparsity (prefill, decode), mean KL(dense || sparse), top-1 agreement and
// perplexity change over the scored positions.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/cli/args.h"
#include "app/cli/attention_options.h"
#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "base/atomic_file.h"
#include "engine/util/json_io.h"
#include "engine/eval/quality.h"
#include "profiler/spans.h"

namespace sinkscope::cli {

namespace {

struct Row {
  int length = 0;
  double lambda = 0;
  double sparsity_prefill = 0, sparsity_decode = 0;
  LogitComparison prefill, decode;
};

}  // namespace

int run_quality(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  ArgParser p("sinkscope-cli quality --file FILE [options]",
              "Dynamic-sparse attention vs the dense baseline on a text: for each length L the\n"
              "first L tokens are one prefill (positions L/2..L scored) followed by --decode\n"
              "teacher-forced decode steps; the same lambda is used for prefill and decode.");
  p.option("--model", "PATH",
           "GGUF file or Hugging Face checkpoint directory (default: $SINKSCOPE_MODEL, else the "
           "cached default model)")
      .option("--file", "FILE", "UTF-8 text; must hold max(--lengths) + --decode tokens")
      .option("--lengths", "L,L,...",
              "prompt lengths (default 2048,4096,8192, each at most the model's trained context "
              "minus --decode)")
      .option("--lambdas", "X,X,...", "lambdas in (0, 1) (default 0.001,0.005,0.01,0.02,0.05,0.1)")
      .option("--decode", "N", "teacher-forced decode steps after each prefill (default 32)")
      .option("--block-size", "N", "KV tile size: 64 (default) or 128")
      .option("--threads", "N", "CPU threads, 0 = all (default)")
      .option("--csv", "FILE", "also write the table as CSV (atomically)")
      .flag("--json", "print one JSON object");
  add_backend_option(p);
  p.epilog("Exit status: 0 success, 1 runtime error, 2 usage error.\n");
  p.parse(args);
  if (p.help_requested()) {
    out << p.help();
    return 0;
  }
  const auto file = p.get("--file");
  if (!file) throw UsageError("--file is required");
  std::vector<int> lengths = {2048, 4096, 8192};
  std::vector<double> lambdas = {0.001, 0.005, 0.01, 0.02, 0.05, 0.1};
  const auto given_lengths = p.get("--lengths");
  if (given_lengths) lengths = parse_list<int>("--lengths", *given_lengths, 4, 1 << 20);
  if (auto v = p.get("--lambdas")) lambdas = parse_list<double>("--lambdas", *v, 0.0, 0.999999, /*min_exclusive=*/true);
  const int n_decode = int(p.get_int("--decode", 32, 0, 4096));
  const int block = int(p.get_int("--block-size", 64, 64, 128));
  if (block != 64 && block != 128) throw UsageError("--block-size: expected 64 or 128");
  const bool json_out = p.has("--json");

  const std::string text = read_text_file(*file, "--file");
  auto model = load_model(resolve_model_path(p.get("--model")), json_out ? nullptr : &err);
  // The default lengths fit the model: those beyond its trained context minus the decoded
  // tokens become that length (SmolLM2's 8K: 2048, 4096, 8160); given lengths are checked below.
  if (const int cap = model->config().n_ctx_train - n_decode; !given_lengths && cap >= 4 &&
                                                               model->config().n_ctx_train > 0) {
    std::vector<int> fit;
    for (int L : lengths)
      if (const int l = std::min(L, cap); std::find(fit.begin(), fit.end(), l) == fit.end())
        fit.push_back(l);
    if (fit != lengths && !json_out) {
      std::string list;
      for (int l : fit) list += (list.empty() ? "" : ",") + std::to_string(l);
      err << "sinkscope-cli: default --lengths " << list << " (the trained context, "
          << model->config().n_ctx_train << " tokens, holds " << cap << " + --decode " << n_decode
          << ")\n";
    }
    lengths = std::move(fit);
  }
  const int longest = *std::max_element(lengths.begin(), lengths.end());
  BackendOptions bo = make_backend_options(model->config(), int(p.get_int("--threads", 0, 0, 1024)),
                                           std::min(longest + n_decode, model->config().n_ctx_train));
  if (longest + n_decode > bo.max_context && bo.max_context > 0)
    throw UsageError("--lengths/--decode: " + std::to_string(longest + n_decode) +
                     " tokens exceed the model's trained context of " +
                     std::to_string(model->config().n_ctx_train));
  std::string note;
  auto backend = open_backend(model, bo, parse_backend_choice(p), &note);
  if (!note.empty() && !json_out) err << "sinkscope-cli: " << note << "\n";
  const auto tokens = model->tokenizer().encode(text);
  if (int(tokens.size()) < longest + n_decode)
    throw UsageError("--file: the text has " + std::to_string(tokens.size()) + " tokens; " +
                     std::to_string(longest + n_decode) + " are needed");
  const int V = model->config().n_vocab;

  std::vector<Row> rows;
  const int64_t t0 = prof::now_ns();
  const int total_runs = int(lengths.size() * (lambdas.size() + 1));
  int runs = 0;
  auto progress = [&] {
    ++runs;
    const double el = double(prof::now_ns() - t0) / 1e9;
    err << "quality: run " << runs << "/" << total_runs << ", about "
        << format_duration(el / runs * (total_runs - runs)) << " left\n";
  };
  for (int L : lengths) {
    const std::span<const TokenId> seq(tokens.data(), size_t(L + n_decode));
    AttentionSettings dense;
    dense.block_size = block;
    backend->set_attention(dense);
    const std::vector<float> base = teacher_forced_logits(*backend, seq, L);
    progress();
    std::vector<TokenId> next(seq.begin() + 1, seq.end());
    next.push_back(-1);
    const size_t first = size_t(L / 2);
    for (double lam : lambdas) {
      AttentionSettings s = dense;
      s.type = AttentionType::kDynamicSparse;
      s.threshold_prefill = lam;
      s.threshold_decode = lam;
      backend->set_attention(s);
      const std::vector<float> var = teacher_forced_logits(*backend, seq, L);
      Row r;
      r.length = L;
      r.lambda = lam;
      r.sparsity_prefill = backend->probes().total(false).sparsity();
      r.sparsity_decode = backend->probes().total(true).sparsity();
      const size_t V_ = size_t(V);
      r.prefill = compare_logits(std::span(base).subspan(first * V_, (size_t(L) - first) * V_),
                                 std::span(var).subspan(first * V_, (size_t(L) - first) * V_), V,
                                 std::span(next).subspan(first, size_t(L) - first));
      if (n_decode > 0)
        r.decode = compare_logits(std::span(base).subspan(size_t(L) * V_),
                                  std::span(var).subspan(size_t(L) * V_), V,
                                  std::span(next).subspan(size_t(L)));
      rows.push_back(r);
      progress();
    }
  }

  std::ostringstream csv;
  csv << "length,lambda,sparsity_prefill,sparsity_decode,kl_prefill,top1_prefill,ppl_dense,"
         "ppl_sparse,ppl_delta_pct,kl_decode,top1_decode\n";
  for (const Row& r : rows)
    csv << r.length << "," << r.lambda << "," << r.sparsity_prefill << "," << r.sparsity_decode
        << "," << r.prefill.kl_mean() << "," << r.prefill.top1_agreement() << ","
        << r.prefill.ppl_dense() << "," << r.prefill.ppl_variant() << ","
        << r.prefill.ppl_delta_pct() << "," << r.decode.kl_mean() << ","
        << r.decode.top1_agreement() << "\n";
  if (auto path = p.get("--csv")) write_file_atomic(*path, csv.str());

  if (json_out) {
    Json j;
    j["model"] = model->path().string();
    j["backend"] = backend->name();
    j["block_size"] = block;
    j["decode_steps"] = n_decode;
    Json& rows_json = j["rows"] = Json::array();
    for (const Row& r : rows) {
      Json row;
      row["length"] = r.length;
      row["lambda"] = r.lambda;
      row["sparsity_prefill"] = r.sparsity_prefill;
      row["sparsity_decode"] = r.sparsity_decode;
      row["kl_prefill"] = r.prefill.kl_mean();
      row["top1_prefill"] = r.prefill.top1_agreement();
      row["ppl_dense"] = r.prefill.ppl_dense();
      row["ppl_sparse"] = r.prefill.ppl_variant();
      row["ppl_delta_pct"] = r.prefill.ppl_delta_pct();
      row["kl_decode"] = r.decode.kl_mean();
      row["top1_decode"] = r.decode.top1_agreement();
      rows_json.push_back(std::move(row));
    }
    out << dump_json(j) << "\n";
    return 0;
  }
  out << "|     L |  lambda | sparsity prefill | sparsity decode | KL prefill | top-1 | ppl dense "
         "| ppl sparse | ppl delta % | KL decode | top-1 decode |\n";
  out << "|------:|--------:|-----:|-----:|------:|------:|------:|------:|------:|------:|------:|\n";
  out << std::fixed;
  for (const Row& r : rows)
    out << "| " << r.length << " | " << std::setprecision(3) << r.lambda << " | "
        << std::setprecision(3) << r.sparsity_prefill << " | " << r.sparsity_decode << " | "
        << std::scientific << std::setprecision(2) << r.prefill.kl_mean() << std::fixed << " | "
        << std::setprecision(4) << r.prefill.top1_agreement() << " | " << std::setprecision(3)
        << r.prefill.ppl_dense() << " | " << r.prefill.ppl_variant() << " | "
        << std::setprecision(2) << r.prefill.ppl_delta_pct() << " | " << std::scientific
        << std::setprecision(2) << r.decode.kl_mean() << std::fixed << " | "
        << std::setprecision(4) << r.decode.top1_agreement() << " |\n";
  return 0;
}

}  // namespace sinkscope::cli
