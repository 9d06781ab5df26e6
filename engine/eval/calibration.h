// SPDX-License-Identifier: Apache-2.0
// Threshold calibration for dynamic-sparse attention, after TensorRT-LLM's skip-softmax
// calibration: measure prefill sparsity s over a grid of fixed lambdas at several lengths L,
// fit  lambda * L = a * exp(b * s)  by least squares on ln(lambda * L) = ln a + b s, and give
// c = a * exp(b * s_target) for `length_scaled` mode (lambda = c / L_kv). The global fit can
// miss a length by a wide margin (at 32K on SmolLM2 it undershoots a 0.75 target by 0.18), so
// solve_fixed_lambda() finds, for one token sequence of length L, the fixed lambda whose measured
// prefill sparsity is the target, by bisection on measurements.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/backend/backend.h"

namespace sinkscope {

struct CalibrationPoint {
  int length = 0;
  double lambda = 0;
  double sparsity = 0;  // prefill skipped / visited tiles, all layers and heads
};

struct CalibrationFit {
  double a = 0, b = 0;  // lambda * L = a * exp(b * s)
  double r2 = 0;        // of the linear fit in log space
  int n_points = 0;     // points used (0 < s < 1)
  double c_for(double target_sparsity) const;
};

// Least-squares fit over points with sparsity strictly inside (s_lo, s_hi); throws
// std::invalid_argument when fewer than 2 usable points or no spread in sparsity.
CalibrationFit fit_calibration(const std::vector<CalibrationPoint>& points, double s_lo = 0.01,
                               double s_hi = 0.99);

struct CalibrationOptions {
  std::vector<int> lengths = {1024, 2048, 4096};
  std::vector<double> lambdas = {1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1};
  double target_sparsity = 0.5;
  int block_size = 64;
  bool verify = true;  // rerun each length in length_scaled mode with the fitted c
};

struct CalibrationResult {
  std::vector<CalibrationPoint> points;
  CalibrationFit fit;
  double c = 0;
  // lambda = c / L per length and the sparsity measured with it; NaN where c / L >= 1 (the
  // target is out of reach at that length: every later tile would be skipped).
  std::vector<CalibrationPoint> verification;
};

struct CalibrationProgress {
  int done = 0, total = 0;
  double eta_s = 0;
};

// Runs the grid on `backend` (its attention settings are restored afterwards). The text must
// hold at least max(lengths) tokens; each length uses the first L tokens. Throws BackendError
// on bad options (target outside (0, 1), lambdas outside (0, 1), lengths < 2 * block_size).
CalibrationResult calibrate(Backend& backend, const std::vector<TokenId>& tokens,
                            const CalibrationOptions& options,
                            const std::function<void(const CalibrationProgress&)>& progress = {});

struct LambdaSolveOptions {
  double target_sparsity = 0.5;  // in (0, 1)
  int length = 0;                // the first `length` tokens are prefilled
  int block_size = 64;
  double tolerance = 0.01;  // stop at |measured - target| <= tolerance; in (0, 0.5)
  int max_iterations = 14;  // prefills (a reach check after the last one adds at most one)
  // First probe, e.g. the fit's c / L; 0 (or outside (lambda_min, lambda_max)): the bracket's
  // middle. The bracket is [lambda_min, lambda_max], lambda_max standing for "lambda -> 1".
  double start_lambda = 0;
  double lambda_min = 1e-6;
  double lambda_max = 1.0 - 1e-6;
};

struct LambdaSolveResult {
  double lambda = 0;     // the probe whose measured sparsity is nearest the target
  double sparsity = 0;   // measured with that lambda
  int iterations = 0;    // prefills run
  bool reached = false;  // |sparsity - target| <= tolerance
  // Why not reached, e.g. "out of reach: lambda -> 1 gives s = 0.712"; empty when reached.
  std::string note;
  std::vector<CalibrationPoint> probes;  // every prefill, in the order run
};

// The fixed prefill lambda (threshold_mode fixed) that gives `target_sparsity` skipped tiles on
// the first `length` tokens: bisection in logit(lambda) = ln(lambda / (1 - lambda)) on the
// measured prefill sparsity, which does not decrease with lambda (from start_lambda, steps of
// 1, 2, 4, ... in logit first bracket the target). logit is ln(lambda) for small lambda (trained
// models: lambda ~ 1e-3 .. 0.3) and resolves lambda -> 1 as finely (random-weight models, which
// skip tiles only there). Before a probe above 0.999, or when the probes end, with nothing
// measured above the target (below it), lambda_max (lambda_min) is measured once: a target
// beyond what it gives is reported as out of reach. The backend's attention settings are
// restored afterwards. Throws BackendError on bad options (target outside (0, 1), tolerance
// outside (0, 0.5), max_iterations < 1, a bad bracket, length shorter than two tiles, longer
// than the tokens or the backend's capacity).
LambdaSolveResult solve_fixed_lambda(
    Backend& backend, const std::vector<TokenId>& tokens, const LambdaSolveOptions& options,
    const std::function<void(const CalibrationProgress&)>& progress = {});

}  // namespace sinkscope
