// SPDX-License-Identifier: Apache-2.0
// Rotary position embedding. Llama GGUF files store Q/K permuted so that rotation pairs are
// adjacent elements (2i, 2i+1); Qwen2 (NeoX style) pairs i and i + d/2.
// Frequencies: theta_i = base^(-2i/d), divided by an optional per-pair factor (Llama 3
// rope_freqs) and positions divided by the linear scaling factor.
#pragma once

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
  }

  // cos/sin of every rotation pair at absolute position pos (dim()/2 values each).
  void angles(int pos, float* cs, float* sn) const {
    for (size_t i = 0; i < m_inv_freq.size(); ++i) {
      const double ang = double(pos) * m_pos_scale * m_inv_freq[i];
      cs[i] = float(std::cos(ang));
      sn[i] = float(std::sin(ang));
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

 private:
  int m_dim = 0;
  bool m_neox = false;
  double m_pos_scale = 1.0;
  std::vector<double> m_inv_freq;
};

}  // namespace sinkscope
