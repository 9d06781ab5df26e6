// SPDX-License-Identifier: Apache-2.0
// Family test models for the GPU checks. The transformers oracles of tests/data/oracles
// (tests/oracle/make_family_oracles.py) have heads of 16 or 32 dims, below the 64 / 128 the CUDA
// attention kernels support; widen_oracle() keeps an oracle file's architecture, metadata and
// tokenizer and replaces its tensors by random ones of a larger shape (head_dim 64 or 128), so the
// CUDA backend can run the family and be checked against the CPU backend on the same file (the
// CPU backend being the one checked against transformers, tests/unit/test_family_oracles.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/format/ggml_types.h"
#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"

namespace sinkscope::gpu_test {

struct WidenShape {
  int n_embd = 256;
  int head_dim = 64;
  int n_ff = 512;
  int n_ctx = 2048;
  float qk_gain_sd = 0.3f;  // spread of the per-head Q/K norm gains around 1
  float qk_gain_mul = 1.0f; // all Q/K norm gains times this (sensitivity checks)
  bool bf16 = false;        // every matrix but a router stored as BF16 (what the device rounds to)
  int sliding_window = 0;   // > 0: {arch}.attention.sliding_window set to it (local layers)
  float attn_softcap = 0;   // > 0: {arch}.attn_logit_softcapping set to it (gemma2)
  float q_weight_mul = 1;   // attn_q.weight (phi3: the Q rows of attn_qkv) times this
  // > 0: {arch}.rope.scaling.original_context_length set to it and rope.scaling.attn_factor to
  // the converter's sqrt(1 + ln(n_ctx / orig) / ln(orig)) (phi3 LongRoPE: the CPU runs the short
  // factors for a context <= orig, the long ones past it).
  int orig_ctx = 0;
  // Non-empty: the file becomes this architecture (metadata keys renamed; llama drops the Q/K
  // norms, qwen2 gets Q/K/V biases), e.g. Mistral's llama file as a qwen2 one.
  std::string arch;
  float sink_shift = 0;     // added to gpt-oss's learned sink logits (sensitivity checks)
  // > 0: these instead of the file's (benchmarks at a real model's widths).
  int n_head = 0, n_head_kv = 0;
  int n_expert = 0, n_expert_used = 0;  // gpt-oss
};

// Deterministic normal numbers (splitmix64 + Box-Muller): the same file on every machine.
class WidenRng {
 public:
  explicit WidenRng(uint64_t seed) : m_s(seed) {}
  uint64_t bits() {
    uint64_t z = (m_s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (double(bits() >> 11) + 0.5) / 9007199254740992.0; }  // (0, 1)
  double normal() {
    return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
  }

 private:
  uint64_t m_s;
};

// Writes `dst`: the oracle GGUF `src` with n_embd, head_dim and n_ff widened to `s` and every
// tensor drawn anew (projections N(0, 1/in), embeddings scaled for logits of a few units, norm
// gains 1 + N(0, 0.1^2), Q/K norm gains 1 + N(0, qk_gain_sd^2), biases N(0, 0.1^2); phi3's
// LongRoPE factors by a fixed rule, its fused QKV and gate|up widened as one tensor each; gpt-oss:
// the router N(0, 16/D), learned sink logits N(1, 1), experts like the dense FFN, MXFP4 experts
// as random E2M1 codes with a per-block E8M0 scale of the same spread). Each tensor keeps its
// stored type where the new row length allows it (else F32). Throws std::runtime_error for a
// tensor whose role it does not know.
inline void widen_oracle(const std::filesystem::path& src, const std::filesystem::path& dst,
                         const WidenShape& s, uint64_t seed) {
  const auto f = GgufFile::open(src);
  const std::string src_arch = f->get_string("general.architecture");
  const std::string sa = src_arch + ".";
  const std::string arch = s.arch.empty() ? src_arch : s.arch;
  const std::string a = arch + ".";
  const int64_t n_head = s.n_head > 0 ? s.n_head : f->get_int(sa + "attention.head_count");
  const int64_t n_kv = s.n_head_kv > 0 ? s.n_head_kv : f->get_int(sa + "attention.head_count_kv");
  const int64_t D = s.n_embd, hd = s.head_dim, F = s.n_ff, Q = n_head * hd, KV = n_kv * hd;
  const int64_t src_ff = f->get_int(sa + "feed_forward_length");
  const int64_t src_hd = f->has(sa + "attention.key_length")
                             ? f->get_int(sa + "attention.key_length")
                             : f->get_int(sa + "embedding_length") /
                                   f->get_int(sa + "attention.head_count");
  // Partial rotary (phi3) keeps its share of the head: rope_dim / head_dim as in the source.
  const int64_t rope_dim = f->has(sa + "rope.dimension_count")
                               ? hd * f->get_int(sa + "rope.dimension_count") / src_hd
                               : hd;
  GgufWriter w;
  for (const auto& [k, v] : f->metadata()) {
    if (k == "general.alignment") continue;
    if (k == "general.architecture")
      w.set_string(k, arch);
    else if (k.rfind(sa, 0) == 0)
      w.set_value(a + k.substr(sa.size()), v);
    else
      w.set_value(k, v);
  }
  w.set_u32(a + "embedding_length", uint32_t(D));
  w.set_u32(a + "feed_forward_length", uint32_t(F));
  if (f->has(sa + "expert_feed_forward_length"))  // gpt-oss: the experts' width
    w.set_u32(a + "expert_feed_forward_length", uint32_t(F));
  w.set_u32(a + "attention.head_count", uint32_t(n_head));
  w.set_u32(a + "attention.head_count_kv", uint32_t(n_kv));
  if (s.n_expert > 0) w.set_u32(a + "expert_count", uint32_t(s.n_expert));
  if (s.n_expert_used > 0) w.set_u32(a + "expert_used_count", uint32_t(s.n_expert_used));
  // The experts of a tensor whose last dimension counts them (gpt-oss).
  const auto experts = [&](int64_t in_file) { return s.n_expert > 0 ? int64_t(s.n_expert) : in_file; };
  w.set_u32(a + "context_length", uint32_t(s.n_ctx));
  w.set_u32(a + "attention.key_length", uint32_t(hd));
  w.set_u32(a + "attention.value_length", uint32_t(hd));
  if (f->has(sa + "rope.dimension_count")) w.set_u32(a + "rope.dimension_count", uint32_t(rope_dim));
  if (s.orig_ctx > 0) {
    w.set_u32(a + "rope.scaling.original_context_length", uint32_t(s.orig_ctx));
    const double sc = double(s.n_ctx) / s.orig_ctx;
    w.set_f32(a + "rope.scaling.attn_factor",
              sc <= 1 ? 1.0f : float(std::sqrt(1 + std::log(sc) / std::log(double(s.orig_ctx)))));
  }
  if (s.sliding_window > 0) w.set_u32(a + "attention.sliding_window", uint32_t(s.sliding_window));
  if (s.attn_softcap > 0) w.set_f32(a + "attn_logit_softcapping", s.attn_softcap);
  WidenRng rng(seed);
  const auto ends = [](const std::string& n, const std::string& suf) {
    return n.size() >= suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0;
  };
  std::vector<std::string> bias_layers;  // blk.N. prefixes that get Q/K/V biases (qwen2)
  for (const GgufTensorInfo& t : f->tensors()) {
    const std::string& n = t.name;
    std::vector<int64_t> dims;
    double mean = 0, sd = 0;
    std::vector<float> fixed;  // a tensor given by a rule, not drawn
    if (arch == "llama" && (ends(n, "attn_q_norm.weight") || ends(n, "attn_k_norm.weight")))
      continue;  // llama has no Q/K norms
    if (arch == "qwen2" && src_arch != "qwen2" && ends(n, "attn_q.weight"))
      bias_layers.push_back(n.substr(0, n.size() - std::string("attn_q.weight").size()));
    if (n == "rope_factors_short.weight" || n == "rope_factors_long.weight") {
      // LongRoPE factors per rotated pair, rising with the pair's wavelength: short 1 .. 1.5,
      // long 1 .. 8 (phi3's are of this kind; the long set moves low frequencies far more).
      const bool lng = n == "rope_factors_long.weight";
      dims = {rope_dim / 2};
      for (int64_t i = 0; i < rope_dim / 2; ++i) {
        const double x = rope_dim > 2 ? double(i) / double(rope_dim / 2 - 1) : 0.0;
        fixed.push_back(float(lng ? 1 + 7 * x : 1 + 0.5 * x));
      }
    } else if (n == "token_embd.weight" || n == "output.weight") {
      dims = {D, t.dims[1]};
      sd = 1.5 / std::sqrt(double(D));  // tied or not: logits of a few units
    } else if (ends(n, "attn_q_norm.weight") || ends(n, "attn_k_norm.weight")) {
      dims = {hd};
      mean = 1.0;
      sd = s.qk_gain_sd;
    } else if (ends(n, "norm.weight")) {  // attn / ffn / output / post norms
      dims = {D};
      mean = 1.0;
      sd = 0.1;
    } else if (ends(n, "attn_q.weight")) {
      dims = {D, Q};
      sd = 0.7 / std::sqrt(double(D));
    } else if (ends(n, "attn_qkv.weight")) {  // phi3's fused Q|K|V rows
      dims = {D, Q + 2 * KV};
      sd = 0.7 / std::sqrt(double(D));
    } else if (ends(n, "attn_k.weight") || ends(n, "attn_v.weight")) {
      dims = {D, KV};
      sd = 0.7 / std::sqrt(double(D));
    } else if (ends(n, "attn_output.weight")) {
      dims = {Q, D};
      sd = 1.0 / std::sqrt(double(Q));
    } else if (ends(n, "ffn_gate.weight") || ends(n, "ffn_up.weight")) {
      // phi3's fused gate|up: ffn_up of 2 n_ff rows.
      dims = {D, t.dims.size() == 2 && t.dims[1] == 2 * src_ff ? 2 * F : F};
      sd = 0.7 / std::sqrt(double(D));
    } else if (ends(n, "ffn_down.weight")) {
      dims = {F, D};
      sd = 1.0 / std::sqrt(double(F));
    } else if (ends(n, "attn_output.bias")) {  // gpt-oss
      dims = {D};
      sd = 0.1;
    } else if (ends(n, "attn_sinks.weight")) {
      dims = {n_head};
      mean = 1.0 + s.sink_shift;
      sd = 1.0;
    } else if (ends(n, "ffn_gate_inp.weight")) {  // the router
      dims = {D, experts(t.dims[1])};
      sd = 4.0 / std::sqrt(double(D));  // logits of N(0, 16): peaked weights over the top k
    } else if (ends(n, "ffn_gate_inp.bias")) {
      dims = {experts(t.dims[0])};
      sd = 0.1;
    } else if (ends(n, "ffn_gate_exps.weight") || ends(n, "ffn_up_exps.weight")) {
      dims = {D, F, experts(t.dims[2])};
      sd = 0.7 / std::sqrt(double(D));
    } else if (ends(n, "ffn_down_exps.weight")) {
      dims = {F, D, experts(t.dims[2])};
      sd = 1.0 / std::sqrt(double(F));
    } else if (ends(n, "ffn_gate_exps.bias") || ends(n, "ffn_up_exps.bias")) {
      dims = {F, experts(t.dims[1])};
      sd = 0.1;
    } else if (ends(n, "ffn_down_exps.bias")) {
      dims = {D, experts(t.dims[1])};
      sd = 0.1;
    } else if (ends(n, "attn_q.bias")) {
      dims = {Q};
      sd = 0.1;
    } else if (ends(n, "attn_k.bias") || ends(n, "attn_v.bias")) {
      dims = {KV};
      sd = 0.1;
    } else {
      throw std::runtime_error("widen_oracle: no rule for tensor " + n + " of " + src.string());
    }
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    if (t.type == GgmlType::kMXFP4 && dims[0] % 32 == 0) {
      // Blocks {u8 e; u8 qs[16]} (engine/format/dequant.cpp): value = doubled E2M1 code *
      // 2^(e - 128); the doubled codes have an RMS of sqrt(34.25), so e puts the spread at sd.
      const int e = 128 + int(std::lround(std::log2(sd / std::sqrt(34.25))));
      std::vector<uint8_t> bytes(size_t(count / 32) * 17);
      for (size_t b = 0; b < bytes.size(); b += 17) {
        bytes[b] = uint8_t(e);
        const uint64_t r0 = rng.bits(), r1 = rng.bits();
        for (int j = 0; j < 8; ++j) {
          bytes[b + 1 + size_t(j)] = uint8_t(r0 >> (8 * j));
          bytes[b + 9 + size_t(j)] = uint8_t(r1 >> (8 * j));
        }
      }
      w.add_raw_tensor(n, dims, GgmlType::kMXFP4, std::move(bytes));
      continue;
    }
    std::vector<float> v(static_cast<size_t>(count));
    for (float& e : v) e = float(mean + sd * rng.normal());
    if (!fixed.empty()) v = fixed;
    if (ends(n, "attn_q_norm.weight") || ends(n, "attn_k_norm.weight"))
      for (float& e : v) e *= s.qk_gain_mul;
    if (ends(n, "attn_q.weight"))
      for (float& e : v) e *= s.q_weight_mul;
    if (ends(n, "attn_qkv.weight"))  // ggml order [D, rows]: the Q rows are the first Q * D
      for (size_t i = 0; i < size_t(Q * D); ++i) v[i] *= s.q_weight_mul;
    const GgmlTypeTraits* tt = ggml_type_traits(uint32_t(t.type));
    const bool keep = tt && dims[0] % tt->block_elems == 0;
    const GgmlType type = keep ? t.type : GgmlType::kF32;
    // (The router stays: the CUDA backend keeps it in fp32.)
    const bool to_bf16 = s.bf16 && dims.size() == 2 && !ends(n, "ffn_gate_inp.weight");
    w.add_tensor(n, dims, to_bf16 ? GgmlType::kBF16 : type, v);
  }
  for (const std::string& p : bias_layers)
    for (const auto& [name, rows] : {std::pair<const char*, int64_t>{"attn_q.bias", Q},
                                     {"attn_k.bias", KV}, {"attn_v.bias", KV}}) {
      std::vector<float> v(static_cast<size_t>(rows));
      for (float& e : v) e = float(0.1 * rng.normal());
      w.add_tensor(p + name, {rows}, GgmlType::kF32, v);
    }
  w.write(dst);
}

}  // namespace sinkscope::gpu_test
