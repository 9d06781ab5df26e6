// SPDX-License-Identifier: Apache-2.0
// Time to first token, dense against dynamic-sparse prefill with lambda calibrated to a target
// share of skipped tiles, on the real model (the deployment guides' claim: >= 1.3x at 32K with
// 60-75 % of tiles skipped), with the quality of the same runs against the dense baseline.
//   bench_ttft [--lengths 8192,32768] [--targets 0.6,0.75] [--reps N] [--text FILE]
//              [--weights native|bf16] [--csv FILE]
// Per length L: the first L tokens of the text (SINKSCOPE_TEXT / the KJV of setup.sh --eval-data,
// else the built-in passage repeated); `calibrate` (engine/eval/calibration.h) fits lambda * L =
// a exp(b s) over lengths L/4, L/2, L and the default lambda grid; each target s gives a fixed
// prefill lambda = c / L, whose measured skip share is printed next to the target. TTFT: the
// median over --reps of a whole prefill of L tokens (last-row logits, synchronised), after a
// warm-up. Quality: one prefill with every row's logits, dense and sparse, compared row by row
// (mean KL(dense || sparse), top-1 agreement, perplexity change; engine/eval/quality.h).
// Without a GPU or the model: "SKIP: <reason>", exit 0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
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
  for (std::string item; std::getline(ss, item, ',');) v.push_back(std::atof(item.c_str()));
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<double> lengths = {8192, 32768}, targets = {0.60, 0.75};
  int reps = 5;
  std::string text_arg, csv;
  GpuWeights weights = GpuWeights::kBf16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--lengths") {
      lengths = parse_list(next());
    } else if (a == "--targets") {
      targets = parse_list(next());
    } else if (a == "--reps") {
      reps = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--text") {
      text_arg = next();
    } else if (a == "--csv") {
      csv = next();
    } else if (a == "--weights" && i + 1 < argc && parse_gpu_weights(argv[i + 1])) {
      weights = *parse_gpu_weights(next());
    } else {
      std::fprintf(stderr,
                   "usage: bench_ttft [--lengths L,L] [--targets S,S] [--reps N] [--text FILE] "
                   "[--weights native|bf16] [--csv FILE]\n");
      return 2;
    }
  }
  for (double t : targets)
    if (!(t > 0 && t < 1)) {
      std::fprintf(stderr, "bench_ttft: a target share of skipped tiles must be in (0, 1)\n");
      return 2;
    }
  int rc = 0;
  auto model = gpu_test::load_gpu_model(&rc);
  if (!model) return rc;
  try {
    const int max_len = int(*std::max_element(lengths.begin(), lengths.end()));
    std::string from;
    const std::string text = gpu_test::load_eval_text(text_arg, size_t(max_len) * 8, &from);
    std::vector<TokenId> all = model->tokenizer().encode(text);
    if (all.size() < size_t(max_len)) {
      // The fixed passage (or a short file) repeated: say so, the skip shares depend on it.
      const std::vector<TokenId> once = model->tokenizer().encode(text, false, false);
      while (all.size() < size_t(max_len)) all.insert(all.end(), once.begin(), once.end());
      from += " (repeated to " + std::to_string(max_len) + " tokens)";
    }
    BackendOptions opt;
    opt.max_context = max_len;
    opt.gpu_weights = weights;
    auto be = make_cuda_backend(model, opt);
    std::printf("device: %s   model: %s (trained context %d)   weights: %s\ntext: %s\n",
                be->name().c_str(), model->path().filename().string().c_str(),
                model->config().n_ctx_train, gpu_weights_name(weights), from.c_str());
    std::printf("TTFT = median of %d prefills (after a warm-up); quality over every row of one "
                "prefill, sparse vs dense\n\n",
                reps);
    std::printf("| L | target skipped | lambda | skipped (measured) | TTFT dense ms | TTFT sparse "
                "ms | speed-up | KL mean | top-1 | ppl delta %% |\n");
    std::printf("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    std::ofstream out;
    if (!csv.empty()) {
      out.open(csv);
      out << "L,target,lambda,skipped,ttft_dense_ms,ttft_sparse_ms,speedup,kl_mean,top1,"
             "ppl_delta_pct\n";
    }
    const int V = model->config().n_vocab;
    for (double Ld : lengths) {
      const int L = int(Ld);
      const std::vector<TokenId> ids(all.begin(), all.begin() + L);
      be->set_attention(AttentionSettings{});
      const double dense_ms = ttft_ms(*be, ids, reps);
      std::vector<float> dense_logits, sparse_logits;
      be->reset();
      be->forward(ids, LogitsMode::kAll, dense_logits);
      const std::vector<TokenId> next(ids.begin() + 1, ids.end());
      std::vector<TokenId> next_rows = next;
      next_rows.push_back(TokenId(-1));  // the last row's next token is unknown

      CalibrationOptions co;
      co.lengths = {L / 4, L / 2, L};
      co.verify = false;
      for (double target : targets) {
        co.target_sparsity = target;
        const CalibrationResult cr = calibrate(*be, all, co);
        const double lambda = cr.c / double(L);
        if (!(lambda > 0 && lambda < 1)) {
          std::printf("| %d | %.2f | out of reach (c / L = %.3g) | | | | | | | |\n", L, target,
                      lambda);
          continue;
        }
        be->set_attention(sparse_at(lambda));
        be->reset();
        be->forward(ids, LogitsMode::kAll, sparse_logits);
        const double skipped = be->probes().total(false).sparsity();
        const LogitComparison q = compare_logits(dense_logits, sparse_logits, V, next_rows);
        const double sparse_ms = ttft_ms(*be, ids, reps);
        std::printf("| %d | %.2f | %.3g | %.3f | %.2f | %.2f | %.2fx | %.4f | %.4f | %+.2f |\n", L,
                    target, lambda, skipped, dense_ms, sparse_ms, dense_ms / sparse_ms,
                    q.kl_mean(), q.top1_agreement(), q.ppl_delta_pct());
        std::fflush(stdout);
        if (out)
          out << L << "," << target << "," << lambda << "," << skipped << "," << dense_ms << ","
              << sparse_ms << "," << dense_ms / sparse_ms << "," << q.kl_mean() << ","
              << q.top1_agreement() << "," << q.ppl_delta_pct() << "\n";
        be->set_attention(AttentionSettings{});
      }
    }
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return 0;
}
