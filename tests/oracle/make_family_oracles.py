#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Oracles for the model families beyond llama/qwen2: tiny random-weight models built by HF
transformers from a config (nothing downloaded), their float32 logits for fixed token-id prompts,
and the same weights written as GGUF in llama.cpp's layout (convert_hf_to_gguf.py's names and
metadata keys) with the gguf package.

Exact command (the venv: python3 -m venv build/venv && build/venv/bin/pip install torch
transformers gguf numpy accelerate):

    build/venv/bin/python tests/oracle/make_family_oracles.py --out tests/data/oracles

The C++ test tests/unit/test_family_oracles.cpp loads each GGUF with the engine, runs the CPU
backend on the same prompts and compares its logits with these.

Adding a family: one FAMILIES entry naming its HF config class and model class, a function that
fills the HF config from the entry's sizes, one that gives each HF weight its GGUF name (or None
to leave it out), and the GGUF metadata keys it needs beyond the common ones (the `extra_kv`
hook); optionally how the converter changes a weight's values on the way (`to_gguf`, e.g.
Gemma's norm gains stored as 1 + w) and whether the converter writes rope.freq_base at all.

Gemma 2 / 3 (Gemma2Model / Gemma3Model in convert_hf_to_gguf.py): every *norm.weight is written
as 1 + w (HF's Gemma RMSNorm multiplies by 1 + w); gemma2 writes the soft-caps and the sliding
window but no RoPE base; gemma3 writes the global RoPE base, the window and linear rope scaling
(global layers only). query_pre_attn_scalar is not in the file: llama.cpp derives it (head_dim
for every size but the 27B models), so the HF configs here set it to head_dim. The windows are
smaller than the first prompt, so the local layers really window; the soft-caps are small enough
(5 on scores, 10 on logits) that leaving one out moves the logits far past the tolerance.

gpt-oss (GptOssModel in convert_hf_to_gguf.py): attn_{q,k,v,output}.bias, attn_sinks.weight,
post_attention_norm.weight as the FFN norm, the router as ffn_gate_inp (weight and bias), and the
experts split out of HF's gate_up_proj (x @ W, gate and up interleaved in the columns) into
ffn_gate_exps / ffn_up_exps (E, F, D) and ffn_down_exps (E, D, F) with their biases (the `expand`
hook). The expert weights are MXFP4 (gguf-py's quantizer; the HF model runs on its dequantized
values, so the logits also check SinkScope's MXFP4 dequantizer); YaRN and the sliding window are
in the metadata as llama.cpp writes them. transformers' GGUF loader has no gpt-oss, so that case
has no round-trip self-check. `--case NAME` rewrites one case and keeps the manifest's others.

phi3 (Phi3MiniModel in convert_hf_to_gguf.py): the fused qkv_proj and gate_up_proj are written
as they are, attn_qkv.weight and ffn_up.weight (2F rows, the gate's first); LongRoPE's factor
lists as the F32 tensors rope_factors_long.weight / rope_factors_short.weight (the `extra_tensors`
hook), with context_length = max_position_embeddings, rope.scaling.original_context_length,
rope.scaling.attn_factor (sqrt(1 + ln s / ln orig), s their ratio) and rope.dimension_count
(partial rotary), no rope.scaling.type; sliding_window as the config has it (every layer). The
original context (16) lies between the two prompts' lengths, so transformers runs the long
prompt on the long factors and the short one on the short factors.

Tokenizer: the engine needs tokenizer metadata it can load, so each GGUF carries a minimal GPT-2
byte-level BPE vocabulary made here: the 256 byte tokens, merges learnt from a fixed sentence,
then <|endoftext|>, <|im_start|>, <|im_end|>. The prompts are token ids; nothing is tokenized.

Self-check: transformers' own GGUF loader reads each file back (with head_dim set by hand:
transformers 5.x does not map {arch}.attention.key_length to head_dim) and must give the same
logits, which checks the tensor names, layouts and metadata against an implementation other than
this script's writer.

Outputs (--out, little-endian):
  <case>.gguf         the model
  <case>.logits.bin   float32, for each prompt in turn its (n_tokens, n_vocab) logits, row-major
  manifest.json       cases, sizes, prompts, argmax per position, versions, sha256 of each file
"""
import argparse
import hashlib
import importlib.metadata
import json
import math
import pathlib
import sys

import numpy as np
import torch
import transformers
import gguf
from gguf import GGMLQuantizationType as QT

# The fixed prompts (token ids < 256 are byte tokens, so every vocabulary below has them). The
# first repeats a span, which gives attention something to find.
PROMPTS = [
    [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 32, 84, 104, 101, 32, 113, 117,
     72, 101, 108, 108, 111, 44, 32, 119, 111, 114],
    [256, 300, 7, 199, 42, 42, 42, 310, 12],
]

# Learnt merges come from this text (deterministic; it only shapes the vocabulary).
MERGE_TEXT = ("the quick brown fox jumps over the lazy dog while the other brown dogs sleep in the "
              "warm sun and the quick fox runs over the hill to the river where the water is cold")


def gpt2_bytes_to_unicode() -> list:
    """GPT-2's bytes_to_unicode as (byte, character) pairs in its order: the printable bytes as
    themselves first, then the other 68 bytes as U+0100 on. That order is the byte tokens' ids."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [(b, chr(c)) for b, c in zip(bs, cs)]


def tiny_vocab(n_vocab: int) -> dict:
    """256 byte tokens, n_vocab - 259 merges learnt greedily from MERGE_TEXT, 3 specials."""
    pairs = gpt2_bytes_to_unicode()
    tokens = [ch for _, ch in pairs]
    char_of = dict(pairs)
    # Words as GPT-2 pre-splits them: the space stays with the word after it ("Ġ" is byte 32).
    words = [[char_of[b] for b in ((" " if i else "") + w).encode("utf-8")]
             for i, w in enumerate(MERGE_TEXT.split(" "))]
    merges = []
    while len(tokens) < n_vocab - 3:
        counts = {}
        for w in words:
            for a, b in zip(w, w[1:]):
                counts[(a, b)] = counts.get((a, b), 0) + 1
        if not counts:
            raise SystemExit(f"merge text too short for a vocabulary of {n_vocab}")
        (a, b), _ = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(f"{a} {b}")
        tokens.append(a + b)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [a + b]
                i += 1
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    first = len(tokens)
    tokens += specials
    types = [1] * first + [3] * len(specials)  # normal, control (llama_token_type)
    return dict(tokens=tokens, types=types, merges=merges, pre="qwen2",
                eos=first + 2, pad=first, bos=first)


# ---- families ------------------------------------------------------------------------------

def qwen3_hf_config(c: dict):
    cfg = transformers.Qwen3Config(
        vocab_size=c["n_vocab"], hidden_size=c["d"], intermediate_size=c["n_ff"],
        num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
        num_key_value_heads=c["n_head_kv"], head_dim=c["head_dim"],
        max_position_embeddings=c["n_ctx"], rms_norm_eps=c["eps"],
        tie_word_embeddings=c["tied"], attention_bias=False, use_sliding_window=False)
    # transformers 5 keeps the base in rope_parameters, 4.x in rope_theta.
    if hasattr(cfg, "rope_parameters") and cfg.rope_parameters is not None:
        cfg.rope_parameters = {"rope_type": "default", "rope_theta": c["theta"]}
    else:
        cfg.rope_theta = c["theta"]
    return cfg


def gemma_rope(cfg, global_: dict, local: dict | None) -> None:
    """RoPE of a Gemma config: transformers 5 keeps one rope_parameters entry per layer type,
    4.x rope_theta (+ rope_scaling, rope_local_base_freq)."""
    if hasattr(cfg, "rope_parameters") and cfg.rope_parameters is not None:
        if local is None:
            cfg.rope_parameters = {"rope_type": "default", **global_} \
                if "full_attention" not in cfg.rope_parameters else \
                {"full_attention": {"rope_type": "default", **global_},
                 "sliding_attention": {"rope_type": "default", **global_}}
        else:
            cfg.rope_parameters = {"full_attention": dict(global_),
                                   "sliding_attention": {"rope_type": "default", **local}}
    else:
        cfg.rope_theta = global_["rope_theta"]
        if global_.get("rope_type", "default") != "default":
            cfg.rope_scaling = {k: v for k, v in global_.items() if k != "rope_theta"}
        if local is not None:
            cfg.rope_local_base_freq = local["rope_theta"]


def gemma2_hf_config(c: dict):
    cfg = transformers.Gemma2Config(
        vocab_size=c["n_vocab"], hidden_size=c["d"], intermediate_size=c["n_ff"],
        num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
        num_key_value_heads=c["n_head_kv"], head_dim=c["head_dim"],
        max_position_embeddings=c["n_ctx"], rms_norm_eps=c["eps"],
        tie_word_embeddings=c["tied"], query_pre_attn_scalar=c["head_dim"],
        sliding_window=c["window"], attn_logit_softcapping=c["attn_cap"],
        final_logit_softcapping=c["final_cap"], hidden_activation="gelu_pytorch_tanh",
        attn_implementation="eager")
    gemma_rope(cfg, {"rope_theta": c["theta"]}, None)
    return cfg


def gemma3_hf_config(c: dict):
    cfg = transformers.Gemma3TextConfig(
        vocab_size=c["n_vocab"], hidden_size=c["d"], intermediate_size=c["n_ff"],
        num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
        num_key_value_heads=c["n_head_kv"], head_dim=c["head_dim"],
        max_position_embeddings=c["n_ctx"], rms_norm_eps=c["eps"],
        tie_word_embeddings=c["tied"], query_pre_attn_scalar=c["head_dim"],
        sliding_window=c["window"], hidden_activation="gelu_pytorch_tanh",
        attn_implementation="eager")
    glob = {"rope_type": "default", "rope_theta": c["theta"]}
    if c.get("rope_linear"):
        glob = {"rope_type": "linear", "factor": c["rope_linear"], "rope_theta": c["theta"]}
    gemma_rope(cfg, glob, {"rope_theta": 10000.0})
    assert cfg.layer_types == ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                               for i in range(c["n_layer"])], cfg.layer_types
    return cfg


# HF name suffix -> llama.cpp name (convert_hf_to_gguf.py / gguf-py tensor_mapping).
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def llama_style_gguf_name(hf: str) -> str | None:
    """llama.cpp's name for an HF weight of a Llama-style decoder (None: not written)."""
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    parts = hf.split(".")
    if parts[:2] == ["model", "layers"]:
        suffix = ".".join(parts[3:])
        if suffix in LAYER_NAMES:
            return f"blk.{parts[2]}.{LAYER_NAMES[suffix]}"
    raise SystemExit(f"no GGUF name for {hf}")


GEMMA_LAYER_NAMES = dict(LAYER_NAMES)
GEMMA_LAYER_NAMES.update({
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
})


def gemma_gguf_name(hf: str) -> str | None:
    parts = hf.split(".")
    if parts[:2] == ["model", "layers"]:
        suffix = ".".join(parts[3:])
        if suffix in GEMMA_LAYER_NAMES:
            return f"blk.{parts[2]}.{GEMMA_LAYER_NAMES[suffix]}"
        raise SystemExit(f"no GGUF name for {hf}")
    return llama_style_gguf_name(hf)


def gemma_to_gguf(gg: str, a: np.ndarray) -> np.ndarray:
    """Gemma2Model / Gemma3Model.modify_tensors: norm gains are written as 1 + w."""
    return (a + 1.0).astype(np.float32) if gg.endswith("norm.weight") else a


def gemma2_extra_kv(wr, c: dict) -> None:
    wr.add_key_length(c["head_dim"])
    wr.add_value_length(c["head_dim"])
    wr.add_attn_logit_softcapping(c["attn_cap"])
    wr.add_final_logit_softcapping(c["final_cap"])
    wr.add_sliding_window(c["window"])


def gemma3_extra_kv(wr, c: dict) -> None:
    wr.add_key_length(c["head_dim"])
    wr.add_value_length(c["head_dim"])
    wr.add_sliding_window(c["window"])
    if c.get("rope_linear"):
        wr.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        wr.add_rope_scaling_factor(c["rope_linear"])


def qwen3_extra_kv(wr, c: dict) -> None:
    # convert_hf_to_gguf.py writes key/value length whenever the config has head_dim (Qwen3's
    # head_dim is not hidden_size / num_attention_heads).
    wr.add_key_length(c["head_dim"])
    wr.add_value_length(c["head_dim"])


def gpt_oss_hf_config(c: dict):
    cfg = transformers.GptOssConfig(
        vocab_size=c["n_vocab"], hidden_size=c["d"], intermediate_size=c["n_ff"],
        num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
        num_key_value_heads=c["n_head_kv"], head_dim=c["head_dim"],
        num_local_experts=c["n_expert"], num_experts_per_tok=c["n_expert_used"],
        max_position_embeddings=c["n_ctx"], rms_norm_eps=c["eps"], sliding_window=c["window"],
        tie_word_embeddings=c["tied"], attn_implementation="eager")
    cfg.rope_parameters = {"rope_type": "yarn", "rope_theta": c["theta"], "factor": c["yarn_factor"],
                           "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                           "original_max_position_embeddings": c["yarn_orig_ctx"]}
    assert cfg.layer_types == ["sliding_attention" if i % 2 == 0 else "full_attention"
                               for i in range(c["n_layer"])], cfg.layer_types
    return cfg


GPT_OSS_LAYER_NAMES = dict(LAYER_NAMES)
GPT_OSS_LAYER_NAMES.update({
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.sinks": "attn_sinks.weight",
    "mlp.router.weight": "ffn_gate_inp.weight",
    "mlp.router.bias": "ffn_gate_inp.bias",
})


def gpt_oss_gguf_name(hf: str) -> str | None:
    parts = hf.split(".")
    if parts[:2] == ["model", "layers"]:
        suffix = ".".join(parts[3:])
        if suffix in GPT_OSS_LAYER_NAMES:
            return f"blk.{parts[2]}.{GPT_OSS_LAYER_NAMES[suffix]}"
        if suffix.startswith("mlp.experts."):
            return f"blk.{parts[2]}.{suffix}"  # expanded by gpt_oss_expand
        raise SystemExit(f"no GGUF name for {hf}")
    return llama_style_gguf_name(hf)


def gpt_oss_expand(gg: str, a: np.ndarray):
    """GptOssModel.modify_tensors: HF's experts hold x @ W with gate and up interleaved in the
    columns of gate_up_proj (E, D, 2F); GGUF holds per expert W^T split into gate and up,
    ffn_{gate,up}_exps (E, F, D) and ffn_down_exps (E, D, F), biases (E, F) / (E, D).
    Returns [(gguf name, array)] and the function that rebuilds HF's tensor from their values."""
    blk = gg.rsplit(".mlp.experts.", 1)[0]
    kind = gg.rsplit(".", 1)[1]
    if kind == "gate_up_proj":
        parts = [(f"{blk}.ffn_gate_exps.weight", np.ascontiguousarray(a[:, :, ::2].transpose(0, 2, 1))),
                 (f"{blk}.ffn_up_exps.weight", np.ascontiguousarray(a[:, :, 1::2].transpose(0, 2, 1)))]

        def back(v):
            out = np.empty(a.shape, np.float32)
            out[:, :, ::2] = v[0].transpose(0, 2, 1)
            out[:, :, 1::2] = v[1].transpose(0, 2, 1)
            return out
    elif kind == "gate_up_proj_bias":
        parts = [(f"{blk}.ffn_gate_exps.bias", np.ascontiguousarray(a[:, ::2])),
                 (f"{blk}.ffn_up_exps.bias", np.ascontiguousarray(a[:, 1::2]))]

        def back(v):
            out = np.empty(a.shape, np.float32)
            out[:, ::2], out[:, 1::2] = v[0], v[1]
            return out
    elif kind == "down_proj":
        parts = [(f"{blk}.ffn_down_exps.weight", np.ascontiguousarray(a.transpose(0, 2, 1)))]

        def back(v):
            return np.ascontiguousarray(v[0].transpose(0, 2, 1))
    elif kind == "down_proj_bias":
        parts = [(f"{blk}.ffn_down_exps.bias", a)]

        def back(v):
            return v[0]
    else:
        raise SystemExit(f"no GGUF name for expert tensor {gg}")
    return parts, back


def gpt_oss_extra_kv(wr, c: dict) -> None:
    wr.add_key_length(c["head_dim"])
    wr.add_value_length(c["head_dim"])
    wr.add_sliding_window(c["window"])
    wr.add_expert_count(c["n_expert"])
    wr.add_expert_used_count(c["n_expert_used"])
    wr.add_expert_feed_forward_length(c["n_ff"])
    wr.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    wr.add_rope_scaling_factor(c["yarn_factor"])
    wr.add_rope_scaling_orig_ctx_len(c["yarn_orig_ctx"])


def phi3_factors(n: int, top: float) -> list:
    """LongRoPE factors rising from 1 to `top` over the rotated pairs (as the released ones do)."""
    return [round(1.0 + (top - 1.0) * i / max(n - 1, 1), 4) for i in range(n)]


def phi3_rope(c: dict) -> dict:
    n = int(c["head_dim"] * c["partial"]) // 2
    return {"rope_type": "longrope", "rope_theta": c["theta"], "partial_rotary_factor": c["partial"],
            "long_factor": phi3_factors(n, 6.0), "short_factor": phi3_factors(n, 1.5),
            "original_max_position_embeddings": c["orig_ctx"]}


def phi3_hf_config(c: dict):
    cfg = transformers.Phi3Config(
        vocab_size=c["n_vocab"], hidden_size=c["d"], intermediate_size=c["n_ff"],
        num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
        num_key_value_heads=c["n_head_kv"], max_position_embeddings=c["n_ctx"],
        original_max_position_embeddings=c["orig_ctx"], rms_norm_eps=c["eps"],
        tie_word_embeddings=c["tied"], sliding_window=c.get("window"),
        rope_parameters=phi3_rope(c), pad_token_id=0, bos_token_id=1, eos_token_id=2,
        attn_implementation="eager")
    assert cfg.rope_parameters["rope_type"] == "longrope", cfg.rope_parameters
    return cfg


PHI3_LAYER_NAMES = dict(LAYER_NAMES)
PHI3_LAYER_NAMES.update({"self_attn.qkv_proj.weight": "attn_qkv.weight",
                         "mlp.gate_up_proj.weight": "ffn_up.weight"})


def phi3_gguf_name(hf: str) -> str | None:
    parts = hf.split(".")
    if parts[:2] == ["model", "layers"]:
        suffix = ".".join(parts[3:])
        if suffix in PHI3_LAYER_NAMES:
            return f"blk.{parts[2]}.{PHI3_LAYER_NAMES[suffix]}"
        raise SystemExit(f"no GGUF name for {hf}")
    return llama_style_gguf_name(hf)


def phi3_extra_kv(wr, c: dict) -> None:
    n_rot = int(c["head_dim"] * c["partial"])
    scale = c["n_ctx"] / c["orig_ctx"]
    wr.add_rope_dimension_count(n_rot)
    wr.add_rope_scaling_orig_ctx_len(c["orig_ctx"])
    wr.add_rope_scaling_attn_factors(
        math.sqrt(1 + math.log(scale) / math.log(c["orig_ctx"])) if scale > 1 else 1.0)
    wr.add_sliding_window(c.get("window") or 0)


def phi3_extra_tensors(c: dict) -> list:
    r = phi3_rope(c)
    return [("rope_factors_long.weight", np.array(r["long_factor"], np.float32)),
            ("rope_factors_short.weight", np.array(r["short_factor"], np.float32))]


FAMILIES = {
    "qwen3": dict(arch="qwen3", hf_config=qwen3_hf_config, model_class="Qwen3ForCausalLM",
                  gguf_name=llama_style_gguf_name, extra_kv=qwen3_extra_kv),
    "gemma2": dict(arch="gemma2", hf_config=gemma2_hf_config, model_class="Gemma2ForCausalLM",
                   gguf_name=gemma_gguf_name, extra_kv=gemma2_extra_kv, to_gguf=gemma_to_gguf,
                   norm_offset=1.0, writes_theta=False),
    "gemma3": dict(arch="gemma3", hf_config=gemma3_hf_config, model_class="Gemma3ForCausalLM",
                   gguf_name=gemma_gguf_name, extra_kv=gemma3_extra_kv, to_gguf=gemma_to_gguf,
                   norm_offset=1.0),
    "gpt-oss": dict(arch="gpt-oss", hf_config=gpt_oss_hf_config, model_class="GptOssForCausalLM",
                    gguf_name=gpt_oss_gguf_name, extra_kv=gpt_oss_extra_kv, expand=gpt_oss_expand),
    "phi3": dict(arch="phi3", hf_config=phi3_hf_config, model_class="Phi3ForCausalLM",
                 gguf_name=phi3_gguf_name, extra_kv=phi3_extra_kv, extra_tensors=phi3_extra_tensors),
}

# Each case: a family, sizes and encodings. proj: encoding of the 2-D weights other than
# token_embd (whose encoding is embd).
CASES = [
    dict(name="qwen3_tied_f32", family="qwen3", n_vocab=320, d=64, n_head=4, n_head_kv=2,
         head_dim=32, n_ff=128, n_layer=2, n_ctx=256, theta=1e6, eps=1e-6, tied=True,
         proj="F32", embd="F32", seed=31),
    dict(name="qwen3_untied_q8_0", family="qwen3", n_vocab=320, d=64, n_head=4, n_head_kv=2,
         head_dim=32, n_ff=128, n_layer=2, n_ctx=256, theta=1e6, eps=1e-6, tied=False,
         proj="Q8_0", embd="F16", seed=32),
    # Layers local, global, local; head_dim 16 against 32 / 4 = 8.
    dict(name="gemma2_tied_f32", family="gemma2", n_vocab=320, d=32, n_head=4, n_head_kv=1,
         head_dim=16, n_ff=48, n_layer=3, n_ctx=256, theta=10000.0, eps=1e-6, tied=True,
         window=8, attn_cap=5.0, final_cap=10.0, proj="F32", embd="F16", seed=41),
    # Layers 0-4 local (window 6, RoPE base 10000), 5 global (base 1e6, linear scaling 4), 6 local.
    dict(name="gemma3_tied_q8_0", family="gemma3", n_vocab=320, d=32, n_head=4, n_head_kv=2,
         head_dim=16, n_ff=64, n_layer=7, n_ctx=256, theta=1e6, eps=1e-6, tied=True,
         window=6, rope_linear=4.0, proj="Q8_0", embd="F16", seed=42),
    # Layers local (window 8), global; 4 experts, 2 used, in MXFP4 (the other weights float32);
    # YaRN factor 32 over an original context of 64; learned sinks of magnitude ~2.
    dict(name="gpt_oss_mxfp4", family="gpt-oss", n_vocab=320, d=32, n_head=4, n_head_kv=2,
         head_dim=16, n_ff=32, n_layer=2, n_ctx=2048, theta=150000.0, eps=1e-5, tied=False,
         window=8, n_expert=4, n_expert_used=2, yarn_factor=32.0, yarn_orig_ctx=64,
         proj="F32", embd="F16", exps="MXFP4", seed=51),
    # Fused QKV and gate/up in Q8_0, untied; LongRoPE over 12 of 16 dims per head (partial
    # 0.75), original context 16 of 256 (attention factor sqrt(2)); a window of 20 on every layer.
    dict(name="phi3_longrope_q8_0", family="phi3", n_vocab=320, d=32, n_head=2, n_head_kv=1,
         head_dim=16, n_ff=64, n_layer=2, n_ctx=256, orig_ctx=16, partial=0.75, theta=10000.0,
         eps=1e-5, tied=False, window=20, proj="Q8_0", embd="F16", seed=61),
]


def sha256_file(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def random_state(model, seed: int, norm_offset: float = 0.0) -> dict:
    """Weights of the HF model's own names and shapes, scaled so activations stay O(1),
    attention is far from uniform and logits spread over several units (HF's 0.02 init gives
    near-zero logits, which would make any tolerance meaningless)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, p in model.state_dict().items():
        shape = tuple(p.shape)
        if name.endswith("sinks"):
            a = 1.5 * rng.standard_normal(shape)
        elif name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
            a = rng.standard_normal(shape) / math.sqrt(shape[1])
        elif name.endswith("embed_tokens.weight"):
            a = 0.5 * rng.standard_normal(shape)
        elif "norm" in name:
            # Gains near 1: w itself, or w where the model multiplies by 1 + w (Gemma).
            a = 1.0 - norm_offset + 0.2 * rng.standard_normal(shape)
        elif len(shape) == 2:
            gain = 2.0 if ("q_proj" in name or "k_proj" in name) else \
                3.0 if name == "lm_head.weight" else 1.0
            a = gain * rng.standard_normal(shape) / math.sqrt(shape[1])
        else:
            a = 0.3 * rng.standard_normal(shape)
        out[name] = a.astype(np.float32)
    return out


def encode(a: np.ndarray, enc: str) -> tuple:
    """(array to write, raw ggml type or None, the float32 values the file now holds)."""
    if enc == "F32" or a.ndim == 1 or (a.ndim == 2 and enc == "MXFP4"):
        return a.astype(np.float32), None, a.astype(np.float32)
    if enc == "F16":
        h = a.astype(np.float16)
        return h, None, h.astype(np.float32)
    qt = QT[enc]
    q = gguf.quants.quantize(a, qt)
    return q, qt, gguf.quants.dequantize(q, qt).reshape(a.shape).astype(np.float32)


def check_mxfp4(a: np.ndarray, q: np.ndarray) -> float:
    """The gguf package's MXFP4 round trip of a weight (its quantize_blocks, then its
    dequantize_blocks): the worst error of a block relative to the block's largest magnitude.
    Its scale 2^(floor(log2 max) - 3) with codes up to 12 clips values above 1.5 *
    2^floor(log2 max), so the error stays at most a quarter of the block max; more means the
    layout is not what this script assumes. The C++ dequantizer is checked against the
    same bytes through the logits (the HF model runs on these dequantized values)."""
    deq = gguf.quants.dequantize(q, QT.MXFP4).reshape(a.shape)
    blocks = a.reshape(-1, 32)
    err = np.abs(deq.reshape(-1, 32) - blocks).max(-1)
    amax = np.abs(blocks).max(-1)
    rel = float((err / np.maximum(amax, 1e-30)).max())
    if rel > 0.25 + 1e-6:
        raise SystemExit(f"MXFP4 round trip error {rel} of the block max is too large")
    return rel


def logits_from_gguf(path: pathlib.Path, c: dict, ref_cfg) -> np.ndarray:
    """The prompts' logits of the model transformers' GGUF loader builds from the file."""
    cfg = transformers.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    if "head_dim" in c:
        cfg.head_dim = c["head_dim"]
    # Not in the file (llama.cpp derives it) or not read by transformers' GGUF loader: taken
    # from the reference config by hand.
    for k in ("query_pre_attn_scalar", "rope_parameters", "rope_scaling", "rope_local_base_freq",
              "layer_types", "attn_implementation", "attn_logit_softcapping",
              "final_logit_softcapping"):
        if c["family"].startswith(("gemma", "phi3")) and hasattr(ref_cfg, k):
            setattr(cfg, k, getattr(ref_cfg, k))
    # transformers' GGUF loader reads neither LongRoPE (factors, partial rotary, original
    # context) nor phi3's window: the self-check then covers the tensors' names and layouts.
    for k in ("original_max_position_embeddings", "sliding_window"):
        if c["family"] == "phi3":
            setattr(cfg, k, getattr(ref_cfg, k))
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, config=cfg, dtype=torch.float32).eval()
    assert cfg.model_type in (c["family"], c["family"] + "_text"), cfg.model_type
    assert cfg.tie_word_embeddings == c["tied"], cfg.tie_word_embeddings
    with torch.no_grad():
        return np.concatenate([model(input_ids=torch.tensor([ids])).logits[0].numpy()
                               for ids in PROMPTS], 0)


def write_case(c: dict, out: pathlib.Path) -> dict:
    fam = FAMILIES[c["family"]]
    cfg = fam["hf_config"](c)
    torch.manual_seed(c["seed"])
    model = getattr(transformers, fam["model_class"])(cfg).to(torch.float32).eval()
    state = random_state(model, c["seed"], fam.get("norm_offset", 0.0))
    if c["tied"]:
        state.pop("lm_head.weight", None)
    vocab = tiny_vocab(c["n_vocab"])
    assert len(vocab["tokens"]) == c["n_vocab"]

    path = out / f"{c['name']}.gguf"
    arch = fam["arch"]
    wr = gguf.GGUFWriter(str(path), arch)
    wr.add_type("model")
    wr.add_name(f"sinkscope-oracle {c['name']}")
    wr.add_context_length(c["n_ctx"])
    wr.add_embedding_length(c["d"])
    wr.add_block_count(c["n_layer"])
    wr.add_feed_forward_length(c["n_ff"])
    wr.add_head_count(c["n_head"])
    wr.add_head_count_kv(c["n_head_kv"])
    if fam.get("writes_theta", True):
        wr.add_rope_freq_base(c["theta"])
    wr.add_layer_norm_rms_eps(c["eps"])
    fam["extra_kv"](wr, c)
    wr.add_file_type({"F32": gguf.LlamaFileType.ALL_F32 if "exps" not in c else
                      gguf.LlamaFileType.MOSTLY_MXFP4_MOE,
                      "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[c["proj"]])
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre(vocab["pre"])
    wr.add_token_list(vocab["tokens"])
    wr.add_token_types(vocab["types"])
    wr.add_token_merges(vocab["merges"])
    wr.add_bos_token_id(vocab["bos"])
    wr.add_eos_token_id(vocab["eos"])
    wr.add_pad_token_id(vocab["pad"])
    wr.add_add_bos_token(False)

    # The HF model gets the values the file holds (quantized weights dequantized), so the
    # logits compared are those of the same function.
    held = {}
    mxfp4_checks = []
    for hf_name, a in state.items():
        gg = fam["gguf_name"](hf_name)
        if gg is None:
            continue
        if ".mlp.experts." in gg:
            parts, back = fam["expand"](gg, a)
            vals = []
            for pg, pa in parts:
                enc = c["exps"] if pg.endswith(".weight") else "F32"
                data, raw, values = encode(pa, enc)
                if raw is None:
                    wr.add_tensor(pg, data)
                else:
                    wr.add_tensor(pg, data, raw_dtype=raw)
                    mxfp4_checks.append(check_mxfp4(pa, data) if raw == QT.MXFP4 else None)
                vals.append(values.reshape(pa.shape))
            held[hf_name] = torch.from_numpy(back(vals))
            continue
        enc = c["embd"] if gg == "token_embd.weight" else c["proj"]
        to_gguf = fam.get("to_gguf")
        stored = to_gguf(gg, a) if to_gguf else a
        data, raw, values = encode(stored, enc)
        if stored is not a:  # the HF model gets the value the file's stored value stands for
            values = a if enc == "F32" or a.ndim == 1 else None
            assert values is not None, "a converted weight must be 1-D or float32"
        if raw is None:
            wr.add_tensor(gg, data)
        else:
            wr.add_tensor(gg, data, raw_dtype=raw)
        held[hf_name] = torch.from_numpy(values)
    for name, a in fam.get("extra_tensors", lambda _: [])(c):
        wr.add_tensor(name, a)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()

    if c["tied"]:
        held["lm_head.weight"] = held["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(held, strict=False)
    missing = [k for k in missing if "rotary_emb" not in k]
    if c["tied"] is False and "lm_head.weight" in missing:
        raise SystemExit("untied model without lm_head")
    assert not missing and not unexpected, (missing, unexpected)

    logits = []
    for ids in PROMPTS:
        assert max(ids) < c["n_vocab"]
        with torch.no_grad():
            lg = model(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0]
        logits.append(lg.to(torch.float32).numpy())
    bin_path = out / f"{c['name']}.logits.bin"
    np.concatenate(logits, 0).astype("<f4").tofile(bin_path)
    allv = np.concatenate(logits, 0)
    try:
        round_trip = float(np.abs(logits_from_gguf(path, c, cfg) - allv).max())
    except Exception as e:  # noqa: BLE001 - a loader without this architecture
        print(f"{c['name']}: transformers' GGUF loader cannot read it ({type(e).__name__}: {e})",
              file=sys.stderr)
        round_trip = None
    if round_trip is not None and round_trip > 1e-5:
        raise SystemExit(f"{c['name']}: transformers reading the GGUF differs by {round_trip}")
    srt = np.sort(allv, -1)
    print(f"{c['name']}: {path.stat().st_size} B gguf, logits std {allv.std():.2f}, "
          f"min top-2 gap {(srt[:, -1] - srt[:, -2]).min():.2e}", file=sys.stderr)
    return {
        "name": c["name"],
        "family": c["family"],
        "architecture": arch,
        "params": {k: v for k, v in c.items() if k != "name"},
        "gguf": path.name,
        "gguf_sha256": sha256_file(path),
        "logits_file": bin_path.name,
        "logits_sha256": sha256_file(bin_path),
        "n_vocab": c["n_vocab"],
        "prompts": PROMPTS,
        "argmax": [[int(x) for x in lg.argmax(-1)] for lg in logits],
        "min_top2_gap": float((srt[:, -1] - srt[:, -2]).min()),
        "logits_std": float(allv.std()),
        "hf_model_class": fam["model_class"],
        "self_checks": {"max_abs_diff_vs_transformers_gguf_loader": round_trip,
                        **({"mxfp4_max_rel_err": max(mxfp4_checks)} if mxfp4_checks else {})},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[1] / "data" / "oracles"))
    ap.add_argument("--case", action="append", default=[],
                    help="write only this case (repeatable); the manifest keeps the others")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_grad_enabled(False)
    if args.case:
        unknown = set(args.case) - {c["name"] for c in CASES}
        if unknown:
            raise SystemExit(f"unknown case(s): {sorted(unknown)}")
        old = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["cases"]
        fresh = {c["name"]: write_case(c, out) for c in CASES if c["name"] in args.case}
        kept = {e["name"]: e for e in old}
        kept.update(fresh)
        entries = [kept[c["name"]] for c in CASES if c["name"] in kept]
    else:
        entries = [write_case(c, out) for c in CASES]
    manifest = {
        "format_version": 1,
        "generator": "tests/oracle/make_family_oracles.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__, "gguf": importlib.metadata.version("gguf")},
        "notes": ["logits files: float32 little-endian; for each prompt in turn, (n_tokens, n_vocab) "
                  "row-major, every position",
                  "HF ran float32 with the exact values the GGUF holds (quantized weights "
                  "dequantized by gguf-py)"],
        "cases": entries,
    }
    with open(out / "manifest.json", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"wrote {len(entries)} cases to {out} ({total} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
