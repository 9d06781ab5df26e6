// SPDX-License-Identifier: Apache-2.0
// sinkscope-cli calibrate: fits lambda * L = a * exp(b * s) over a lambda grid at several
// lengths and prints c for `length_scaled` mode, with the sparsity it gives per length; with
// --solve-at, also the fixed lambda that reaches the target at each given length (bisection on
// measured sparsity, engine/eval/calibration.h solve_fixed_lambda).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "app/cli/args.h"
#include "app/cli/attention_options.h"
#include "app/cli/commands.h"
#include "app/cli/common.h"
#include "engine/eval/calibration.h"
#include "engine/util/json_io.h"

namespace sinkscope::cli {

int run_calibrate(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  ArgParser p("sinkscope-cli calibrate --file FILE --target-sparsity S [options]",
              "Calibrates the dynamic-sparse threshold: measures prefill sparsity over a grid of\n"
              "fixed lambdas at several lengths, fits lambda*L = a*exp(b*s) (TensorRT-LLM's\n"
              "skip-softmax calibration) and prints c for threshold_mode length_scaled.\n"
              "--solve-at also finds, per length, the fixed lambda that reaches the target\n"
              "there (the fit is one curve for all lengths and can miss one by a wide margin).");
  p.option("--model", "PATH",
           "GGUF file or Hugging Face checkpoint directory (default: $SINKSCOPE_MODEL, else the "
           "cached default model)")
      .option("--file", "FILE",
              "calibration text (UTF-8); must hold max(--lengths, --solve-at) tokens")
      .option("--target-sparsity", "S", "wanted fraction of skipped tiles, in (0, 1)")
      .option("--lengths", "L,L,...", "prompt lengths in tokens (default 1024,2048,4096)")
      .option("--lambdas", "X,X,...",
              "fixed lambdas to measure, in (0, 1) "
              "(default 1e-4,1e-3,3e-3,1e-2,3e-2,1e-1)")
      .option("--block-size", "N", "KV tile size: 64 (default) or 128")
      .option("--threads", "N", "CPU threads, 0 = all (default)")
      .flag("--no-verify", "skip the check run of each length with lambda = c / L")
      .option("--solve-at", "L,L,...",
              "also solve the fixed lambda (threshold_mode fixed) giving "
              "the target at each of these lengths, starting from the fit's c / L")
      .option("--solve-tol", "T", "stop solving at |sparsity - target| <= T (default 0.01)")
      .option("--solve-max-iter", "N",
              "prefills per solved length, 1-64 (default 14; one more "
              "to check reach at lambda -> 1)")
      .flag("--json", "print one JSON object");
  add_backend_option(p);
  p.epilog(
      "Examples:\n  sinkscope-cli calibrate --file book.txt --target-sparsity 0.7\n"
      "  sinkscope-cli calibrate --file book.txt --target-sparsity 0.75 --lengths 2048,4096,8192 "
      "--solve-at 8192\n\n"
      "Exit status: 0 success, 1 runtime error, 2 usage error.\n");
  p.parse(args);
  if (p.help_requested()) {
    out << p.help();
    return 0;
  }
  const auto file = p.get("--file");
  if (!file) throw UsageError("--file is required");
  if (!p.has("--target-sparsity")) throw UsageError("--target-sparsity is required");
  CalibrationOptions o;
  o.target_sparsity = p.get_double("--target-sparsity", 0.5, 0.0, 1.0, /*min_exclusive=*/true);
  if (o.target_sparsity >= 1.0) throw UsageError("--target-sparsity: must be < 1");
  if (auto v = p.get("--lengths")) o.lengths = parse_list<int>("--lengths", *v, 2, 1 << 20);
  if (auto v = p.get("--lambdas")) {
    o.lambdas = parse_list<double>("--lambdas", *v, 0.0, 1.0, /*min_exclusive=*/true);
    for (double l : o.lambdas)
      if (l >= 1.0) throw UsageError("--lambdas: every lambda must be < 1");
  }
  o.block_size = int(p.get_int("--block-size", 64, 64, 128));
  if (o.block_size != 64 && o.block_size != 128)
    throw UsageError("--block-size: expected 64 or 128");
  o.verify = !p.has("--no-verify");
  std::vector<int> solve_at;
  if (auto v = p.get("--solve-at")) solve_at = parse_list<int>("--solve-at", *v, 2, 1 << 20);
  LambdaSolveOptions so;
  so.target_sparsity = o.target_sparsity;
  so.block_size = o.block_size;
  so.tolerance = p.get_double("--solve-tol", 0.01, 0.0, 0.5, /*min_exclusive=*/true);
  if (so.tolerance >= 0.5) throw UsageError("--solve-tol: must be < 0.5");
  so.max_iterations = int(p.get_int("--solve-max-iter", 14, 1, 64));
  for (int L : solve_at)
    if (L < 2 * o.block_size)
      throw UsageError("--solve-at: length " + std::to_string(L) + " is shorter than two tiles (" +
                       std::to_string(2 * o.block_size) + " tokens)");
  const bool json_out = p.has("--json");
  const int threads = int(p.get_int("--threads", 0, 0, 1024));

  const std::string text = read_text_file(*file, "--file");
  auto model = load_model(resolve_model_path(p.get("--model")), json_out ? nullptr : &err);
  int max_len = *std::max_element(o.lengths.begin(), o.lengths.end());
  for (int L : solve_at) max_len = std::max(max_len, L);
  BackendOptions bopts = make_backend_options(model->config(), threads, max_len);
  std::string note;
  auto backend = open_backend(model, bopts, parse_backend_choice(p), &note);
  if (!note.empty() && !json_out) err << "sinkscope-cli: " << note << "\n";
  const auto tokens = model->tokenizer().encode(text);
  if (int(tokens.size()) < max_len)
    throw UsageError("--file: the text has " + std::to_string(tokens.size()) +
                     " tokens, fewer than the longest length " + std::to_string(max_len) +
                     (solve_at.empty() ? "" : " (--lengths and --solve-at)"));

  Throttle throttle(stderr_is_tty() ? 0.5 : 10.0);
  const auto progress = [&](const CalibrationProgress& pr) {
    if (!throttle.ready(pr.done == pr.total)) return;
    err << "calibrate: run " << pr.done << "/" << pr.total;
    if (pr.done < pr.total) err << ", about " << format_duration(pr.eta_s) << " left";
    err << "\n";
  };
  const CalibrationResult r = calibrate(*backend, tokens, o, progress);
  struct Solved {
    int length;
    double fit_lambda;
    LambdaSolveResult r;
  };
  std::vector<Solved> solved;
  for (int L : solve_at) {
    so.length = L;
    so.start_lambda = r.c / double(L);  // outside (0, 1): the solver starts mid-bracket
    const auto solve_progress = [&](const CalibrationProgress& pr) {
      if (!throttle.ready(false)) return;
      err << "calibrate: solving at L = " << L << ", prefill " << pr.done << "\n";
    };
    solved.push_back(
        {L, r.c / double(L), solve_fixed_lambda(*backend, tokens, so, solve_progress)});
  }

  if (json_out) {
    Json j;
    j["model"] = model->path().string();
    j["backend"] = backend->name();
    j["target_sparsity"] = o.target_sparsity;
    j["block_size"] = o.block_size;
    Json& fit = j["fit"];
    fit["a"] = r.fit.a;
    fit["b"] = r.fit.b;
    fit["r2"] = r.fit.r2;
    fit["points_used"] = r.fit.n_points;
    j["c"] = r.c;
    auto points = [](const std::vector<CalibrationPoint>& v) {
      Json arr = Json::array();
      for (const auto& pt : v)
        arr.push_back(
            Json{{"length", pt.length}, {"lambda", pt.lambda}, {"sparsity", pt.sparsity}});
      return arr;
    };
    j["points"] = points(r.points);
    j["verification"] = points(r.verification);
    if (!solve_at.empty()) {
      Json arr = Json::array();
      for (const auto& sv : solved) {
        Json e{{"length", sv.length},
               {"fit_lambda", sv.fit_lambda},  // c / L; >= 1: the fit cannot reach the target
               {"lambda", sv.r.lambda},
               {"sparsity", sv.r.sparsity},
               {"reached", sv.r.reached},
               {"iterations", sv.r.iterations},
               {"probes", points(sv.r.probes)}};
        if (!sv.r.note.empty()) e["note"] = sv.r.note;
        arr.push_back(std::move(e));
      }
      j["solved"] = Json{
          {"tolerance", so.tolerance}, {"threshold_mode", "fixed"}, {"lengths", std::move(arr)}};
    }
    out << dump_json(j) << "\n";
    return 0;
  }
  out << "measured prefill sparsity (block " << o.block_size << ", " << backend->name() << ")\n";
  out << std::setw(8) << "length" << std::setw(12) << "lambda" << std::setw(10) << "sparsity\n";
  for (const auto& pt : r.points)
    out << std::setw(8) << pt.length << std::setw(12) << std::setprecision(4) << pt.lambda
        << std::setw(10) << std::fixed << std::setprecision(3) << pt.sparsity << "\n"
        << std::defaultfloat;
  out << "fit: lambda*L = " << std::setprecision(5) << r.fit.a << " * exp(" << r.fit.b
      << " * s), R^2 = " << std::setprecision(3) << r.fit.r2 << " over " << r.fit.n_points
      << " points\n";
  if (r.fit.n_points < int(r.points.size()))
    out << "  (" << r.points.size() - size_t(r.fit.n_points) << " of " << r.points.size()
        << " points left out: their sparsity is outside (0.01, 0.99), too close to 0 or 1 to "
        << "shape the fit)\n";
  out << "c = " << std::setprecision(6) << r.c << "  (threshold_mode: length_scaled, "
      << "threshold_prefill: c; target sparsity " << o.target_sparsity << ")\n";
  // Warnings a user should not miss in a result that exits 0.
  std::vector<std::string> warnings;
  if (r.fit.r2 < 0.9)
    warnings.push_back("the fit is poor (R^2 " + std::to_string(r.fit.r2).substr(0, 5) +
                       " < 0.9): widen --lambdas or use more --lengths");
  if (!r.verification.empty() &&
      std::all_of(r.verification.begin(), r.verification.end(),
                  [](const CalibrationPoint& pt) { return std::isnan(pt.sparsity); }))
    warnings.push_back("c / L is >= 1 at every checked length: the target is out of reach at "
                       "these lengths (use longer inputs or a lower target)");
  if (!r.verification.empty()) {
    out << "check with lambda = c / L:\n";
    for (const auto& pt : r.verification) {
      out << "  L = " << pt.length << ": lambda " << std::setprecision(4) << pt.lambda;
      if (std::isnan(pt.sparsity)) {
        out << ", out of reach (lambda must be < 1; use longer inputs or a lower target)\n";
      } else {
        out << ", sparsity " << std::fixed << std::setprecision(3) << pt.sparsity << "\n"
            << std::defaultfloat;
      }
    }
  }
  if (!solved.empty()) {
    out << "solved fixed lambda (threshold_mode: fixed, threshold_prefill: lambda; target "
        << o.target_sparsity << " +- " << so.tolerance << "):\n";
    for (const auto& sv : solved) {
      out << "  L = " << sv.length << ": fit c / L = " << std::setprecision(4) << sv.fit_lambda
          << ", solved lambda = " << std::setprecision(6) << sv.r.lambda << ", sparsity "
          << std::fixed << std::setprecision(3) << sv.r.sparsity << std::defaultfloat << " ("
          << sv.r.iterations << " prefills)";
      if (!sv.r.reached) out << "; not reached: " << sv.r.note;
      out << "\n";
    }
  }
  for (const std::string& w : warnings) err << "calibrate: warning: " << w << "\n";
  return 0;
}

}  // namespace sinkscope::cli
