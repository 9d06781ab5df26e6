// SPDX-License-Identifier: Apache-2.0
#include "app/cli/attention_options.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace sinkscope::cli {

void add_attention_options(ArgParser& p) {
  p.option("--attention", "TYPE", "dense (default) | dynamic_sparse")
      .option("--lambda-prefill", "L", "skip threshold for prefill; fixed mode: [0, 1)")
      .option("--lambda-decode", "L", "skip threshold for decode; fixed mode: [0, 1)")
      .option("--threshold-mode", "MODE",
              "fixed (default) | length_scaled (lambda = c / L_kv, the L options give c)")
      .option("--min-seq-len", "N", "hybrid mode: sparse only when L_kv >= N (default 0)")
      .option("--block-size", "N", "KV tile / page size: 64 (default) or 128")
      .flag("--keep-exp", "skipped tiles still add exp() to the row sum (only PV is skipped)");
}

AttentionSettings parse_attention_options(const ArgParser& p) {
  AttentionSettings s;
  if (auto t = p.get("--attention")) {
    if (*t == "dense") {
      s.type = AttentionType::kDense;
    } else if (*t == "dynamic_sparse" || *t == "sparse") {
      s.type = AttentionType::kDynamicSparse;
    } else {
      throw UsageError("--attention: expected dense or dynamic_sparse, got '" + *t + "'");
    }
  }
  if (auto m = p.get("--threshold-mode")) {
    if (*m == "fixed") {
      s.threshold_mode = ThresholdMode::kFixed;
    } else if (*m == "length_scaled") {
      s.threshold_mode = ThresholdMode::kLengthScaled;
    } else {
      throw UsageError("--threshold-mode: expected fixed or length_scaled, got '" + *m + "'");
    }
  }
  // Fixed lambda must stay below 1 (at 1 every later tile would be skipped); c is unbounded.
  const double hi = s.threshold_mode == ThresholdMode::kFixed ? 1.0 : 1e12;
  const bool any_lambda = p.has("--lambda-prefill") || p.has("--lambda-decode");
  s.threshold_prefill = p.get_double("--lambda-prefill", 0.0, 0.0, hi);
  s.threshold_decode = p.get_double("--lambda-decode", 0.0, 0.0, hi);
  if (s.threshold_mode == ThresholdMode::kFixed &&
      (s.threshold_prefill >= 1.0 || s.threshold_decode >= 1.0))
    throw UsageError("--lambda-prefill/--lambda-decode: fixed lambda must be < 1");
  s.min_sequence_length = int(p.get_int("--min-seq-len", 0, 0, 1 << 30));
  s.block_size = int(p.get_int("--block-size", 64, 64, 128));
  if (s.block_size != 64 && s.block_size != 128)
    throw UsageError("--block-size: expected 64 or 128, got " + std::to_string(s.block_size));
  s.skip_softmax_exp = !p.has("--keep-exp");
  if (any_lambda && s.type == AttentionType::kDense)
    throw UsageError("--lambda-prefill/--lambda-decode need --attention dynamic_sparse");
  return s;
}

void add_backend_option(ArgParser& p) {
  p.option("--backend", "KIND", "auto (default: CUDA when a GPU is usable, else CPU) | cpu | cuda");
  p.option("--gpu-weights", "MODE",
           "auto (default: bf16 where it fits the GPU with room for a second backend, else "
           "native) | bf16 (every matrix converted to bf16: fused decode kernels, faster "
           "prefill) | native (Q8_0/Q4_0/Q4_1/Q4_K/Q5_K/Q6_K projections stay quantized: about "
           "a third of the memory)");
  p.option("--gpu-activations", "PREC",
           "int8 (default: one plane, as llama.cpp's GEMV) | int16 (two int8 planes, about 15 "
           "bits: logits closer to the CPU's, slower decode); the single-token products of "
           "--gpu-weights native Q4_K/Q6_K/Q8_0 projections");
  p.option("--sparse-decode", "MODE",
           "auto (default: a dynamic-sparse decode step runs the dense attention kernels where "
           "the sparse ones are predicted slower, CUDA only) | always (the sparse kernels "
           "whenever lambda > 0)");
}

BackendChoice parse_backend_choice(const ArgParser& p) {
  BackendChoice c;
  if (const auto v = p.get("--backend")) {
    const auto k = parse_backend_kind(*v);
    if (!k) throw UsageError("--backend: expected auto, cpu or cuda, got '" + *v + "'");
    c.kind = *k;
  }
  if (const auto v = p.get("--gpu-weights")) {
    const auto w = parse_gpu_weights(*v);
    if (!w) throw UsageError("--gpu-weights: expected auto, native or bf16, got '" + *v + "'");
    c.gpu_weights = *w;
  }
  if (const auto v = p.get("--gpu-activations")) {
    const auto a = parse_gpu_activations(*v);
    if (!a) throw UsageError("--gpu-activations: expected int16 or int8, got '" + *v + "'");
    c.gpu_activations = *a;
  }
  if (const auto v = p.get("--sparse-decode")) {
    if (*v == "auto")
      c.sparse_decode = SparseDecodeKernels::kAuto;
    else if (*v == "always")
      c.sparse_decode = SparseDecodeKernels::kAlways;
    else
      throw UsageError("--sparse-decode: expected auto or always, got '" + *v + "'");
  }
  return c;
}

std::unique_ptr<Backend> open_backend(std::shared_ptr<const Model> model, BackendOptions opt,
                                      const BackendChoice& choice, std::string* note) {
  opt.gpu_weights = choice.gpu_weights;
  opt.gpu_activations = choice.gpu_activations;
  opt.sparse_decode = choice.sparse_decode;
  return make_backend(std::move(model), opt, choice.kind, note);
}

namespace {

Json phase_json(const AttentionProbes& pr, bool decode) {
  const auto& cells = decode ? pr.decode : pr.prefill;
  const TileCounts t = pr.total(decode);
  Json j;
  j["tiles_visited"] = static_cast<long long>(t.visited);
  j["tiles_skipped"] = static_cast<long long>(t.skipped);
  j["sparsity"] = t.sparsity();
  double lo = 1.0, hi = 0.0;
  bool any = false;
  std::vector<double> per_layer(size_t(pr.n_layer), 0.0);
  for (int l = 0; l < pr.n_layer; ++l) {
    TileCounts lt;
    for (int h = 0; h < pr.n_head; ++h) {
      const TileCounts& c = cells[size_t(l) * pr.n_head + h];
      lt.add(c);
      if (c.visited == 0) continue;
      lo = std::min(lo, c.sparsity());
      hi = std::max(hi, c.sparsity());
      any = true;
    }
    per_layer[size_t(l)] = lt.sparsity();
  }
  j["sparsity_min_head"] = any ? lo : 0.0;
  j["sparsity_max_head"] = any ? hi : 0.0;
  j["sparsity_per_layer"] = per_layer;
  j["dropped_mass_bound_max"] = t.mass_bound_max;
  j["dropped_mass_bound_mean"] = t.mass_bound_mean();
  return j;
}

}  // namespace

Json attention_json(const AttentionSettings& s, const AttentionProbes& probes) {
  Json j;
  j["type"] = s.type == AttentionType::kDense ? "dense" : "dynamic_sparse";
  j["threshold_mode"] = s.threshold_mode == ThresholdMode::kFixed ? "fixed" : "length_scaled";
  j["threshold_prefill"] = s.threshold_prefill;
  j["threshold_decode"] = s.threshold_decode;
  j["min_sequence_length"] = s.min_sequence_length;
  j["block_size"] = s.block_size;
  j["skip_softmax_exp"] = s.skip_softmax_exp;
  j["prefill"] = phase_json(probes, false);
  j["decode"] = phase_json(probes, true);
  return j;
}

}  // namespace sinkscope::cli

namespace sinkscope::cli {

Json decode_path_json(const DecodePathStats& d) {
  if (!d.chooses) return Json();
  Json j;
  j["sparse_steps"] = static_cast<long long>(d.sparse_steps);
  j["dense_steps"] = static_cast<long long>(d.dense_steps);
  j["measuring_steps"] = static_cast<long long>(d.probe_steps);
  j["last_kernels"] = d.sparse_steps + d.dense_steps == 0 ? "none"
                      : d.last_sparse                     ? "sparse"
                                                          : "dense";
  j["last_kv_len"] = static_cast<long long>(d.last_kv_len);
  if (d.skipped_estimate >= 0) j["skipped_estimate"] = d.skipped_estimate;
  if (d.predicted_ratio > 0) j["predicted_sparse_over_dense"] = d.predicted_ratio;
  return j;
}

std::string decode_path_line(const DecodePathStats& d) {
  if (!d.chooses || d.sparse_steps + d.dense_steps == 0) return "";
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "sparse decode: %lld steps ran the sparse kernels (%lld to measure the skipped "
                "share), %lld the dense ones",
                static_cast<long long>(d.sparse_steps), static_cast<long long>(d.probe_steps),
                static_cast<long long>(d.dense_steps));
  std::string line = buf;
  if (d.dense_steps > 0 && d.predicted_ratio > 0) {
    std::snprintf(buf, sizeof buf,
                  " (sparse predicted %.2fx the dense time at %lld cached tokens, %.0f %% of "
                  "tiles skipped)",
                  d.predicted_ratio, static_cast<long long>(d.last_kv_len),
                  100.0 * d.skipped_estimate);
    line += buf;
  }
  return line;
}

}  // namespace sinkscope::cli
