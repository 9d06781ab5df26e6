// SPDX-License-Identifier: Apache-2.0
#include "engine/eval/calibration.h"

#include <algorithm>
#include <cmath>
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
  const AttentionSettings saved = backend.attention();
  struct Restore {
    Backend& be;
    AttentionSettings s;
    ~Restore() {
      try {
        be.set_attention(s);
        be.reset();
      } catch (...) {
      }
    }
  } restore{backend, saved};

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

}  // namespace sinkscope
