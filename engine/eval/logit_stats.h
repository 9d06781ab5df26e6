// SPDX-License-Identifier: Apache-2.0
// Statistics of one row of logits, shared by everything that scores a model's output
// (perplexity, the comparison with the dense baseline, the workbench): the maximum, the argmax,
// the log-sum-exp in double, the probabilities, and a float dot product summed in double.
// Vectorised with AVX2 + FMA where the build has them; the scalar fallback gives the same
// values to a few ulp.
#pragma once

namespace sinkscope {

float row_max(const float* row, int n);
// The first index of the maximum.
int row_argmax(const float* row, int n);
// max + log(sum_v exp(row[v] - max)), the sum in double.
double log_sum_exp(const float* row, int n);
// out[v] = exp(row[v] - lse) as floats.
void row_probabilities(const float* row, int n, double lse, float* out);
// sum_v a[v] * b[v], products and sum in double.
double dot_f64(const float* a, const float* b, int n);
// KL(P || Q) = sum_v P_v (log P_v - log Q_v) of the softmaxes of two rows with log-sum-exps
// lse_p and lse_q, in double; never below 0 (rounding gives -1e-17 for equal rows).
double row_kl(const float* p, double lse_p, const float* q, double lse_q, int n);
// -log softmax(row)[target]: the negative log-likelihood of one token.
inline double token_nll_of(const float* row, int n, int target) {
  return log_sum_exp(row, n) - double(row[target]);
}

}  // namespace sinkscope
