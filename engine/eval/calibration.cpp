// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "profiler/spans.h"

namespace sinkscope {

double CalibrationFit::c_for(double target_sparsity) const {
  return a * std::exp(b * target_sparsity);
}

CalibrationFit fit_calibration(const std::vector<CalibrationPoint>& points, double s_lo,
                               double s_hi) {
  // Ordinary least squares of y = ln(lambda L) on x = s.
  double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  int n = 0;
  for (const auto& p : points) {
    if (!(p.sparsity > s_lo && p.sparsity < s_hi) || !(p.lambda > 0) || p.length <= 0) continue;
    const double x = p.sparsity, y = std::log(p.lambda * double(p.length));
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    syy += y * y;
    ++n;
  }
  if (n < 2)
    throw std::invalid_argument("calibration: " + std::to_string(n) +
                                " usable point(s) with sparsity in (" + std::to_string(s_lo) +
                                ", " + std::to_string(s_hi) +
                                "); widen the lambda grid or use longer texts");
  const double vx = sxx - sx * sx / n;
  if (vx <= 1e-12)
    throw std::invalid_argument("calibration: the measured sparsity does not vary with lambda");
  CalibrationFit f;
  f.b = (sxy - sx * sy / n) / vx;
  f.a = std::exp((sy - f.b * sx) / n);
  const double vy = syy - sy * sy / n;
  const double resid = vy - f.b * f.b * vx;
  f.r2 = vy > 0 ? 1.0 - resid / vy : 1.0;
  f.n_points = n;
  return f;
}

namespace {

double prefill_sparsity(Backend& be, const std::vector<TokenId>& tokens, int length) {
  std::vector<float> logits;
  be.reset();
  be.forward(std::span<const TokenId>(tokens.data(), size_t(length)), LogitsMode::kLast, logits);
  return be.probes().total(false).sparsity();
}

// Puts the backend's attention settings back (and empties its cache) when a run ends, also
// on an exception.
struct RestoreAttention {
  Backend& be;
  AttentionSettings s;
  ~RestoreAttention() {
    try {
      be.set_attention(s);
      be.reset();
    } catch (...) {
    }
  }
};

std::string fmt(double v, int digits = 4) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

double logit(double p) {
  return std::log(p) - std::log1p(-p);
}
double inv_logit(double u) {
  return 1.0 / (1.0 + std::exp(-u));
}

}  // namespace

CalibrationResult calibrate(Backend& backend, const std::vector<TokenId>& tokens,
                            const CalibrationOptions& o,
                            const std::function<void(const CalibrationProgress&)>& progress) {
  if (!(o.target_sparsity > 0 && o.target_sparsity < 1))
    throw BackendError("calibrate: target sparsity must be in (0, 1), got " +
                       std::to_string(o.target_sparsity));
  if (o.lengths.empty() || o.lambdas.empty())
    throw BackendError("calibrate: need at least one length and one lambda");
  for (double l : o.lambdas)
    if (!(l > 0 && l < 1))
      throw BackendError("calibrate: lambda " + std::to_string(l) + " is outside (0, 1)");
  for (int L : o.lengths) {
    if (L < 2 * o.block_size)
      throw BackendError("calibrate: length " + std::to_string(L) + " is shorter than two tiles (" +
                         std::to_string(2 * o.block_size) + " tokens)");
    if (size_t(L) > tokens.size())
      throw BackendError("calibrate: the text has " + std::to_string(tokens.size()) +
                         " tokens, fewer than the length " + std::to_string(L));
    if (L > backend.capacity())
      throw BackendError("calibrate: length " + std::to_string(L) + " exceeds the capacity of " +
                         std::to_string(backend.capacity()) + " tokens");
  }
  const RestoreAttention restore{backend, backend.attention()};

  AttentionSettings s;
  s.type = AttentionType::kDynamicSparse;
  s.block_size = o.block_size;
  CalibrationResult r;
  // Work is ~ L^2 for attention plus L for the rest; weigh progress by L to estimate time.
  double total_work = 0, done_work = 0;
  for (int L : o.lengths) total_work += double(L) * double(o.lambdas.size() + (o.verify ? 1 : 0));
  const int64_t t0 = prof::now_ns();
  int done = 0;
  const int total = int(o.lengths.size() * (o.lambdas.size() + (o.verify ? 1 : 0)));
  auto tick = [&](int L) {
    ++done;
    done_work += L;
    if (progress) {
      const double el = double(prof::now_ns() - t0) / 1e9;
      progress({done, total, el / done_work * (total_work - done_work)});
    }
  };
  for (int L : o.lengths) {
    for (double lam : o.lambdas) {
      s.threshold_mode = ThresholdMode::kFixed;
      s.threshold_prefill = lam;
      backend.set_attention(s);
      r.points.push_back({L, lam, prefill_sparsity(backend, tokens, L)});
      tick(L);
    }
  }
  r.fit = fit_calibration(r.points);
  r.c = r.fit.c_for(o.target_sparsity);
  if (o.verify) {
    s.threshold_mode = ThresholdMode::kLengthScaled;
    s.threshold_prefill = r.c;
    backend.set_attention(s);
    for (int L : o.lengths) {
      // Length-scaled lambda must stay below 1 to be a valid threshold.
      const double lam = r.c / double(L);
      r.verification.push_back(
          {L, lam, lam < 1 ? prefill_sparsity(backend, tokens, L) : std::nan("")});
      tick(L);
    }
  }
  return r;
}

LambdaSolveResult solve_fixed_lambda(
    Backend& backend, const std::vector<TokenId>& tokens, const LambdaSolveOptions& o,
    const std::function<void(const CalibrationProgress&)>& progress) {
  const double t = o.target_sparsity;
  if (!(t > 0 && t < 1))
    throw BackendError("solve lambda: target sparsity must be in (0, 1), got " + fmt(t));
  if (!(o.tolerance > 0 && o.tolerance < 0.5))
    throw BackendError("solve lambda: tolerance must be in (0, 0.5), got " + fmt(o.tolerance));
  if (o.max_iterations < 1)
    throw BackendError("solve lambda: max iterations must be >= 1, got " +
                       std::to_string(o.max_iterations));
  if (!(o.lambda_min > 0 && o.lambda_min < o.lambda_max && o.lambda_max < 1))
    throw BackendError("solve lambda: need 0 < lambda_min < lambda_max < 1, got " +
                       fmt(o.lambda_min) + " and " + fmt(o.lambda_max, 8));
  const int L = o.length;
  if (L < 2 * o.block_size)
    throw BackendError("solve lambda: length " + std::to_string(L) +
                       " is shorter than two tiles (" + std::to_string(2 * o.block_size) +
                       " tokens)");
  if (size_t(L) > tokens.size())
    throw BackendError("solve lambda: the text has " + std::to_string(tokens.size()) +
                       " tokens, fewer than the length " + std::to_string(L));
  if (L > backend.capacity())
    throw BackendError("solve lambda: length " + std::to_string(L) + " exceeds the capacity of " +
                       std::to_string(backend.capacity()) + " tokens");
  const RestoreAttention restore{backend, backend.attention()};

  AttentionSettings s;
  s.type = AttentionType::kDynamicSparse;
  s.block_size = o.block_size;
  s.threshold_mode = ThresholdMode::kFixed;
  LambdaSolveResult r;
  const int total = o.max_iterations + 1;  // the reach check at most once
  const int64_t t0 = prof::now_ns();
  auto measure = [&](double lambda) {
    s.threshold_prefill = lambda;
    backend.set_attention(s);
    const double sp = prefill_sparsity(backend, tokens, L);
    r.probes.push_back({L, lambda, sp});
    ++r.iterations;
    // Ties go to the later probe, which lies nearer the target's side of the bracket.
    if (r.probes.size() == 1 || std::abs(sp - t) <= std::abs(r.sparsity - t)) {
      r.lambda = lambda;
      r.sparsity = sp;
    }
    if (progress) {
      const double el = double(prof::now_ns() - t0) / 1e9;
      progress({r.iterations, total, el / r.iterations * std::max(0, total - r.iterations)});
    }
    return sp;
  };
  auto within = [&](double sp) { return std::abs(sp - t) <= o.tolerance; };

  // Bracket in logit space; s_lo / s_hi: measured shares at its ends (NaN: not measured).
  double u_lo = logit(o.lambda_min), u_hi = logit(o.lambda_max);
  double s_lo = std::nan(""), s_hi = std::nan("");
  const bool start_ok = o.start_lambda > o.lambda_min && o.start_lambda < o.lambda_max;
  double u = start_ok ? logit(o.start_lambda) : 0.5 * (u_lo + u_hi);
  // From a start probe, steps of 1, 2, 4, ... in logit towards the target until it is bracketed
  // (a good start, such as the fit's c / L, then costs a few probes, not a descent from the
  // bracket's middle); then halving.
  double step = 1.0;
  const double kNearOne = logit(0.999);
  for (int i = 0; i < o.max_iterations; ++i) {
    const double sp = measure(inv_logit(u));
    if (within(sp)) {
      r.reached = true;
      return r;
    }
    if (sp < t) {
      u_lo = u;
      s_lo = sp;
    } else {
      u_hi = u;
      s_hi = sp;
    }
    const double next = sp < t ? u + step : u - step;
    if (start_ok && (std::isnan(s_lo) || std::isnan(s_hi)) && next > u_lo && next < u_hi) {
      u = next;
      step *= 2;
    } else {
      u = 0.5 * (u_lo + u_hi);
    }
    // About to probe lambda > 0.999 with nothing measured above the target yet: measure
    // lambda_max first, so that an unreachable target costs a few prefills, not all of them.
    if (std::isnan(s_hi) && u > kNearOne && i + 1 < o.max_iterations) {
      const double top = measure(o.lambda_max);
      ++i;
      if (within(top)) {
        r.reached = true;
        return r;
      }
      if (top < t) {
        r.note =
            "out of reach: lambda -> 1 (" + fmt(o.lambda_max, 8) + ") gives s = " + fmt(top, 3);
        return r;
      }
      u_hi = logit(o.lambda_max);
      s_hi = top;
      u = 0.5 * (u_lo + u_hi);
    }
  }
  // Not reached. Where every probe fell on one side, the unmeasured end says whether the target
  // can be reached at all.
  if (std::isnan(s_hi)) {
    const double sp = measure(o.lambda_max);
    if (within(sp)) {
      r.reached = true;
      return r;
    }
    if (sp < t) {
      r.note = "out of reach: lambda -> 1 (" + fmt(o.lambda_max, 8) + ") gives s = " + fmt(sp, 3);
      return r;
    }
    s_hi = sp;
    u_hi = logit(o.lambda_max);
  } else if (std::isnan(s_lo)) {
    const double sp = measure(o.lambda_min);
    if (within(sp)) {
      r.reached = true;
      return r;
    }
    if (sp > t) {
      r.note =
          "out of reach: lambda -> 0 (" + fmt(o.lambda_min) + ") already gives s = " + fmt(sp, 3);
      return r;
    }
    s_lo = sp;
    u_lo = logit(o.lambda_min);
  }
  r.note = "not within " + fmt(o.tolerance, 3) + " after " + std::to_string(r.iterations) +
           " prefills: s = " + fmt(s_lo, 3) + " at lambda " + fmt(inv_logit(u_lo), 6) +
           ", s = " + fmt(s_hi, 3) + " at lambda " + fmt(inv_logit(u_hi), 6);
  return r;
}

}  // namespace sinkscope
