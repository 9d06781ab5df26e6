// SPDX-License-Identifier: Apache-2.0
// Rotary position embedding. Llama GGUF files store Q/K permuted so that rotation pairs are
// adjacent elements (2i, 2i+1); Qwen2 (NeoX style) pairs i and i + d/2.
// Frequencies: theta_i = base^(-2i/d), divided by an optional per-pair factor (Llama 3
// rope_freqs, LongRoPE's long or short factors) and positions divided by the linear scaling
// factor; cos and sin carry YaRN's and LongRoPE's attention factors.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/model/model.h"

namespace sinkscope {

class RopeTable {
 public:
  RopeTable() = default;
  RopeTable(const ModelConfig& c, const std::vector<float>& freq_factors) {
    m_dim = c.rope_dim;
    m_neox = c.rope_neox;
    m_pos_scale = c.rope_scaling == RopeScalingType::kLinear ? 1.0 / c.rope_scale_factor : 1.0;
    m_inv_freq.resize(size_t(m_dim / 2));
    for (int i = 0; i < m_dim / 2; ++i) {
      double f = std::pow(double(c.rope_theta), -2.0 * i / double(m_dim));
      if (!freq_factors.empty()) f /= double(freq_factors[size_t(i)]);
      m_inv_freq[size_t(i)] = f;
    }
    if (c.rope_scaling == RopeScalingType::kYarn) yarn(c);
    m_mscale *= double(c.rope_attn_factor);
  }

  // cos/sin of every rotation pair at absolute position pos (dim()/2 values each).
  void angles(int pos, float* cs, float* sn) const {
    for (size_t i = 0; i < m_inv_freq.size(); ++i) {
      const double ang = double(pos) * m_pos_scale * m_inv_freq[i];
      cs[i] = float(std::cos(ang) * m_mscale);
      sn[i] = float(std::sin(ang) * m_mscale);
    }
  }

  // Rotates one head vector in place with angles from angles().
  void rotate(float* x, const float* cs, const float* sn) const {
    const int half = m_dim / 2;
    for (int i = 0; i < half; ++i) {
      const int a = m_neox ? i : 2 * i;
      const int b = m_neox ? i + half : 2 * i + 1;
      const float x0 = x[a], x1 = x[b];
      x[a] = x0 * cs[i] - x1 * sn[i];
      x[b] = x0 * sn[i] + x1 * cs[i];
    }
  }

  int dim() const { return m_dim; }
  double attention_factor() const { return m_mscale; }

 private:
  // YaRN as HF transformers computes it (_compute_yarn_parameters): pair i keeps its frequency
  // where it turns more than beta_fast times in the original context, is divided by the factor
  // where it turns fewer than beta_slow times, and is blended linearly in between; cos and sin
  // carry the attention factor 0.1 ln(factor) + 1 (so scores scale by its square).
  void yarn(const ModelConfig& c) {
    const double factor = c.rope_scale_factor, base = c.rope_theta, dim = m_dim;
    const double orig = c.rope_orig_ctx;
    auto corr_dim = [&](double rotations) {
      return dim * std::log(orig / (rotations * 2.0 * M_PI)) / (2.0 * std::log(base));
    };
    double lo = corr_dim(c.yarn_beta_fast), hi = corr_dim(c.yarn_beta_slow);
    if (c.yarn_truncate) {
      lo = std::floor(lo);
      hi = std::ceil(hi);
    }
    lo = std::max(lo, 0.0);
    hi = std::min(hi, dim - 1);
    if (lo == hi) hi += 0.001;
    for (int i = 0; i < m_dim / 2; ++i) {
      const double ramp = std::clamp((i - lo) / (hi - lo), 0.0, 1.0);
      const double extrap = 1.0 - ramp;  // weight of the unscaled frequency
      const double f = m_inv_freq[size_t(i)];
      m_inv_freq[size_t(i)] = f / factor * (1.0 - extrap) + f * extrap;
    }
    m_mscale = factor > 1 ? 0.1 * std::log(factor) + 1.0 : 1.0;
  }

  int m_dim = 0;
  bool m_neox = false;
  double m_pos_scale = 1.0;
  double m_mscale = 1.0;  // YaRN attention factor on cos and sin
  std::vector<double> m_inv_freq;
};

}  // namespace sinkscope
