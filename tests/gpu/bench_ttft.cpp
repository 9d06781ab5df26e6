// SPDX-License-Identifier: Apache-2.0
// Time to first token, dense against dynamic-sparse prefill with lambda set for a target share
// of skipped tiles (the deployment guides' claim: >= 1.3x at 32K with 60-75 % of tiles
// skipped), with the quality of the same runs against the dense baseline.
//   bench_ttft [--lengths 8192,32768] [--targets 0.6,0.75] [--reps N] [--text FILE]
//              [--model FILE] [--weights native|bf16] [--speed-only] [--no-fit] [--csv FILE]
//              [--cpu]   (the CPU backend: a check of this program at small lengths)
// Per length L: the first L tokens of the text (SINKSCOPE_TEXT / the KJV of setup.sh --eval-data,
// else the built-in passage repeated); the dense TTFT once; then per target s two rows:
//   fit     `calibrate` (engine/eval/calibration.h) fits lambda * L = a exp(b s) over lengths
//           L/4, L/2, L and the default lambda grid (once per L); lambda = c / L, fixed. One
//           curve for every length: its share at L can miss the target by a wide margin.
//   solved  solve_fixed_lambda: the fixed lambda whose measured share at this L is the target
//           (+- 0.01), by bisection from the fit's c / L; "out of reach" where lambda -> 1
//           cannot skip that much (the row then runs at the probe nearest the target, which
//           skips about as much as lambda -> 1 does).
// TTFT: the median over --reps of a whole prefill of L tokens (last-row logits, synchronised),
// after a warm-up. Quality (not with --speed-only): one prefill with every row's logits, dense
// and sparse, compared row by row (mean KL(dense || sparse), top-1 agreement, perplexity
// change; engine/eval/quality.h). --speed-only is for random-weight files (sinkscope-cli
// make-test-model), where quality means nothing and (n, vocab) logits would not fit at 32K.
// --no-fit: solved rows only (the fit's grid of lambda <= 0.1 skips nothing on random weights).
// --model FILE: that GGUF file, else SINKSCOPE_MODEL, else the set-up script's model.
// Without a GPU or the model: "SKIP: <reason>", exit 0; bad arguments: exit 2.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/backend/backend_factory.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/eval/calibration.h"
#include "engine/eval/quality.h"
#include "engine/model/model.h"
#include "gpu_model.h"

using namespace sinkscope;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<double> parse_list(const std::string& s) {
  std::vector<double> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const double x = std::strtod(item.c_str(), &end);
    v.push_back(end != item.c_str() && *end == '\0' ? x : std::nan(""));  // NaN: not a number
  }
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Median wall time of a prefill of `ids` (last-row logits), after one warm-up.
double ttft_ms(Backend& be, const std::vector<TokenId>& ids, int reps) {
  std::vector<float> logits;
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    be.reset();
    const auto t0 = Clock::now();
    be.forward(ids, LogitsMode::kLast, logits);  // returns after the logits are on the host
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r > 0) t.push_back(ms);
  }
  return median(t);
}

AttentionSettings sparse_at(double lambda) {
  AttentionSettings s;
  s.type = AttentionType::kDynamicSparse;
  s.threshold_mode = ThresholdMode::kFixed;
  s.threshold_prefill = lambda;
  return s;
}

struct Args {
  std::vector<int> lengths = {8192, 32768};
  std::vector<double> targets = {0.60, 0.75};
  int reps = 5;
  std::string text, csv, model;
  GpuWeights weights = GpuWeights::kBf16;
  bool speed_only = false, fit = true;
  bool cpu = false;  // --cpu: the CPU backend, to check the bench itself at small lengths
};

int usage(const std::string& why) {
  std::fprintf(
      stderr,
      "bench_ttft: %s\nusage: bench_ttft [--lengths L,L] [--targets S,S] [--reps N] "
      "[--text FILE] [--model FILE] [--weights native|bf16] [--speed-only] [--no-fit] [--cpu] "
      "[--csv FILE]\n",
      why.c_str());
  return 2;
}

// Parses argv into *a; 0, or 2 after a usage message naming what is wrong.
int parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    const bool takes_value = o == "--lengths" || o == "--targets" || o == "--reps" ||
                             o == "--text" || o == "--csv" || o == "--model" || o == "--weights";
    if (takes_value && i + 1 >= argc) return usage(o + " needs a value");
    if (o == "--lengths") {
      a->lengths.clear();
      for (double v : parse_list(argv[++i])) {
        if (!(v >= 128 && v <= (1 << 20) && v == std::floor(v)))
          return usage("--lengths: each length must be a whole number of tokens in [128, 1048576]");
        a->lengths.push_back(int(v));
      }
      if (a->lengths.empty()) return usage("--lengths: no length given");
    } else if (o == "--targets") {
      a->targets = parse_list(argv[++i]);
      if (a->targets.empty()) return usage("--targets: no target given");
      for (double t : a->targets)
        if (!(t > 0 && t < 1))
          return usage("--targets: a target share of skipped tiles must be in (0, 1)");
    } else if (o == "--reps") {
      a->reps = std::atoi(argv[++i]);
      if (a->reps < 1 || a->reps > 1000) return usage("--reps: expected 1..1000");
    } else if (o == "--text") {
      a->text = argv[++i];
    } else if (o == "--csv") {
      a->csv = argv[++i];
    } else if (o == "--model") {
      a->model = argv[++i];
      if (!std::filesystem::is_regular_file(a->model))
        return usage("--model: no such file: " + a->model);
    } else if (o == "--weights") {
      const auto w = parse_gpu_weights(argv[++i]);
      if (!w) return usage("--weights: expected native or bf16");
      a->weights = *w;
    } else if (o == "--speed-only") {
      a->speed_only = true;
    } else if (o == "--cpu") {
      a->cpu = true;
    } else if (o == "--no-fit") {
      a->fit = false;
    } else {
      return usage("unknown argument '" + o + "'");
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (const int rc = parse_args(argc, argv, &a)) return rc;
  int rc = 0;
  std::shared_ptr<const Model> model;
  if (a.cpu) {
    model = Model::load(a.model.empty() ? default_model_path() : std::filesystem::path(a.model));
  } else {
    model = gpu_test::load_gpu_model(&rc, a.model);
  }
  if (!model) return rc;
  try {
    const int max_len = *std::max_element(a.lengths.begin(), a.lengths.end());
    std::string from;
    const std::string text = gpu_test::load_eval_text(a.text, size_t(max_len) * 8, &from);
    std::vector<TokenId> all = model->tokenizer().encode(text);
    if (all.size() < size_t(max_len)) {
      // The fixed passage (or a short file) repeated: say so, the skip shares depend on it.
      const std::vector<TokenId> once = model->tokenizer().encode(text, false, false);
      if (once.empty()) throw std::runtime_error("the text encodes to no tokens");
      while (all.size() < size_t(max_len)) all.insert(all.end(), once.begin(), once.end());
      from += " (repeated to " + std::to_string(max_len) + " tokens)";
    }
    BackendOptions opt;
    opt.max_context = max_len;
    opt.gpu_weights = a.weights;
    auto be = a.cpu ? make_cpu_backend(model, opt) : make_cuda_backend(model, opt);
    std::printf("device: %s   model: %s (trained context %d)   weights: %s\ntext: %s\n",
                be->name().c_str(), model->path().filename().string().c_str(),
                model->config().n_ctx_train, gpu_weights_name(a.weights), from.c_str());
    std::printf(
        "TTFT = median of %d prefills (after a warm-up)%s\n"
        "rows: fit = calibrate's c / L (lengths L/4, L/2, L); solved = the fixed lambda "
        "whose measured share at L is the target +- 0.01\n\n",
        a.reps,
        a.speed_only ? "; speed only (no quality columns)"
                     : "; quality over every row of one prefill, sparse vs dense");
    if (a.speed_only) {
      std::printf(
          "| L | target skipped | row | lambda | skipped (measured) | TTFT dense ms | "
          "TTFT sparse ms | speed-up | note |\n|--:|--:|---|--:|--:|--:|--:|--:|---|\n");
    } else {
      std::printf(
          "| L | target skipped | row | lambda | skipped (measured) | TTFT dense ms | "
          "TTFT sparse ms | speed-up | KL mean | top-1 | ppl delta %% | note |\n"
          "|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
    }
    std::fflush(stdout);
    std::ofstream out;
    if (!a.csv.empty()) {
      out.open(a.csv);
      if (!out) throw std::runtime_error("cannot write --csv " + a.csv);
      out.precision(10);
      out << "L,target,row,lambda,skipped,reached,ttft_dense_ms,ttft_sparse_ms,speedup,kl_mean,"
             "top1,ppl_delta_pct\n";
    }
    const int V = model->config().n_vocab;
    for (const int L : a.lengths) {
      const std::vector<TokenId> ids(all.begin(), all.begin() + L);
      be->set_attention(AttentionSettings{});
      const double dense_ms = ttft_ms(*be, ids, a.reps);
      std::printf("L = %d: dense TTFT %.2f ms (%.0f tok/s)\n", L, dense_ms, L / dense_ms * 1e3);
      std::fflush(stdout);
      std::vector<float> dense_logits, sparse_logits;
      std::vector<TokenId> next_rows;
      if (!a.speed_only) {
        be->reset();
        be->forward(ids, LogitsMode::kAll, dense_logits);
        next_rows.assign(ids.begin() + 1, ids.end());
        next_rows.push_back(TokenId(-1));  // the last row's next token is unknown
      }
      // One calibration per length: the points do not depend on the target.
      CalibrationResult cr;
      std::string fit_error;
      if (a.fit) {
        CalibrationOptions co;
        co.lengths = {L / 4, L / 2, L};
        co.verify = false;
        co.target_sparsity = a.targets.front();
        try {
          cr = calibrate(*be, all, co);
        } catch (const std::exception& e) {  // too few usable points, L / 4 under two tiles
          fit_error = e.what();
        }
      }
      // One row: TTFT (and quality) at a fixed lambda; skipped share measured on the same run.
      auto row = [&](double target, const char* kind, double lambda, bool reached,
                     const std::string& note) {
        be->set_attention(sparse_at(lambda));
        be->reset();
        std::vector<float> last;
        be->forward(ids, a.speed_only ? LogitsMode::kLast : LogitsMode::kAll,
                    a.speed_only ? last : sparse_logits);
        const double skipped = be->probes().total(false).sparsity();
        LogitComparison q;
        if (!a.speed_only) q = compare_logits(dense_logits, sparse_logits, V, next_rows);
        const double sparse_ms = ttft_ms(*be, ids, a.reps);
        std::printf("| %d | %.2f | %s | %.*g | %.3f | %.2f | %.2f | %.2fx |", L, target, kind,
                    lambda > 0.99 ? 9 : 4, lambda, skipped, dense_ms, sparse_ms,
                    dense_ms / sparse_ms);
        if (!a.speed_only)
          std::printf(" %.4f | %.4f | %+.2f |", q.kl_mean(), q.top1_agreement(), q.ppl_delta_pct());
        std::printf(" %s |\n", note.c_str());
        std::fflush(stdout);
        if (out) {
          out << L << "," << target << "," << kind << "," << lambda << "," << skipped << ","
              << (reached ? 1 : 0) << "," << dense_ms << "," << sparse_ms << ","
              << dense_ms / sparse_ms << ",";
          if (a.speed_only)
            out << ",,\n";
          else
            out << q.kl_mean() << "," << q.top1_agreement() << "," << q.ppl_delta_pct() << "\n";
        }
        be->set_attention(AttentionSettings{});
      };
      auto empty_row = [&](double target, const char* kind, const std::string& note) {
        std::printf("| %d | %.2f | %s | | | %.2f | | |%s %s |\n", L, target, kind, dense_ms,
                    a.speed_only ? "" : " | | |", note.c_str());
        std::fflush(stdout);
      };
      for (const double target : a.targets) {
        double fit_lambda = 0;
        if (a.fit) {
          if (!fit_error.empty()) {
            empty_row(target, "fit", "fit failed: " + fit_error);
          } else {
            fit_lambda = cr.fit.c_for(target) / double(L);
            if (fit_lambda > 0 && fit_lambda < 1) {
              row(target, "fit", fit_lambda, false, "");
            } else {
              char n[96];
              std::snprintf(n, sizeof n, "out of reach (c / L = %.3g)", fit_lambda);
              empty_row(target, "fit", n);
            }
          }
        }
        LambdaSolveOptions so;
        so.target_sparsity = target;
        so.length = L;
        so.start_lambda = fit_lambda;  // outside (0, 1) or 0: the solver starts mid-bracket
        const LambdaSolveResult sr = solve_fixed_lambda(*be, all, so);
        char n[256];
        std::snprintf(n, sizeof n, "%d prefills to solve%s%s", sr.iterations,
                      sr.reached ? "" : "; ", sr.reached ? "" : sr.note.c_str());
        row(target, "solved", sr.lambda, sr.reached, n);
      }
    }
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return 0;
}
