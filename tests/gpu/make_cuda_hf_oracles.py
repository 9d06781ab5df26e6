#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Transformers oracles at the CUDA backend's head sizes: tiny random-weight HF models of every
family the CUDA backend runs, with head_dim 64 (llama also 128), built by transformers from a
config (nothing downloaded), saved as HF checkpoint directories (config.json, model.safetensors
in bfloat16, and the Qwen2-style byte-level BPE tokenizer of tests/data/hf/qwen2_f16 copied in:
prompts are token ids, so the `tokenizers` package is not needed here), with transformers'
float32 eager-attention logits at every position of fixed token-id prompts.

The committed oracles (tests/data/oracles, tests/data/hf) have heads of 8 to 32 dims, below the
64 / 128 the CUDA attention kernels take; these are the direct CUDA-vs-transformers check.
Needs torch, transformers and numpy (the GPU machine has them; no `gguf` module). Writes into
--out only (default build/hf_cuda_oracles); read by tests/gpu/test_cuda_hf_oracles.cpp:

    python3 tests/gpu/make_cuda_hf_oracles.py --out build/hf_cuda_oracles
    build-gpu/tests/gpu/test_cuda_hf_oracles build/hf_cuda_oracles

Without a GPU the CPU side runs alone (a venv with `pip install torch transformers numpy`; the
whole script takes ~10 s on 2 cores):

    build/venv-hf/bin/python tests/gpu/make_cuda_hf_oracles.py --out build/hf_cuda_oracles
    build/tests/gpu/test_cuda_hf_oracles build/hf_cuda_oracles --cpu-only

Cases (hidden 256, bfloat16 weights, which the HF model runs exactly, in float32):
  llama_hd64         LlamaForCausalLM, 4 heads of 64, 2 KV heads
  llama_hd128        LlamaForCausalLM, 2 heads of 128, 1 KV head
  mistral_hd64       MistralForCausalLM, sliding_window 48 on every layer
  qwen2_hd64         Qwen2ForCausalLM, Q/K/V biases, use_sliding_window (48) with
                     max_window_layers 1: layer 0 full, layer 1 sliding (layer_types)
  qwen3_hd64         Qwen3ForCausalLM, per-head Q/K RMSNorm
  gemma2_hd64        Gemma2ForCausalLM, window 48 on layers 0 and 2, soft-caps 5 / 10,
                     query_pre_attn_scalar 48 (not head_dim)
  gemma3_hd64        Gemma3ForCausalLM (gemma3_text), 6 layers: 5 sliding (48, base 10000) to
                     1 full (base 1e6, linear scaling 4), Q/K norms
  phi3_hd64          Phi3ForCausalLM, fused qkv_proj / gate_up_proj, partial rotary 0.75,
                     LongRoPE (original context 128 of 1024), sliding_window 48: the 90-token
                     prompt runs the short factors, the 300-token one the long ones
  gpt_oss_hd64       GptOssForCausalLM (learned sinks, 4 experts, 2 used, YaRN, windows 48
                     alternating) when this transformers has it; the C++ side accepts the CUDA
                     backend refusing it by name (gpt-oss on CUDA is another change)
Prompts: token ids, lengths 90 and 300, random spans each repeated (attention has something to
find), the same for every case (seed 7). Weights as tests/oracle/make_hf_oracles.py draws them,
except the Q/K projections at gain 1 (not 2: with peaked attention bf16 roundings alone moved
phi3's logits by a max KL of 6e-2) and gpt-oss's router at gain 20 (wide top-k gaps).
Also recorded per case: bf16_emulation, transformers with every value the CUDA path keeps in
bf16 rounded to bf16 (the scale of the CUDA gates' margin), and window_effect, the logits' move
with the model's window set to 4096 (the sensitivity of the gates to a window applied wrong).
"""
import argparse
import copy
import json
import math
import pathlib
import shutil
import sys

import numpy as np
import torch
import transformers

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER_SRC = ROOT / "tests" / "data" / "hf" / "qwen2_f16"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
N_VOCAB = 403          # the tokenizer's 400 tokens + 3 specials (tests/data/hf/manifest.json)
BOS, EOS = 400, 402
WINDOW = 48            # not a multiple of the 64 / 128-token tiles: windows end mid-tile
PROMPT_LENGTHS = (90, 300)
PHI3_ORIG = 128
QK_GAIN = 1.0  # Q/K projections (phi3: all of qkv_proj) times this over N(0, 1/in)
ROUTER_GAIN = 20.0  # gpt-oss router: wide top-k gaps, so bf16 rounding flips few experts

CASES = [
    dict(name="llama_hd64", family="llama", n_head=4, n_head_kv=2, head_dim=64, n_layer=2),
    dict(name="llama_hd128", family="llama", n_head=2, n_head_kv=1, head_dim=128, n_layer=2),
    dict(name="mistral_hd64", family="mistral", n_head=4, n_head_kv=2, head_dim=64, n_layer=2),
    dict(name="qwen2_hd64", family="qwen2", n_head=4, n_head_kv=2, head_dim=64, n_layer=2),
    dict(name="qwen3_hd64", family="qwen3", n_head=4, n_head_kv=2, head_dim=64, n_layer=2),
    dict(name="gemma2_hd64", family="gemma2", n_head=4, n_head_kv=2, head_dim=64, n_layer=3),
    dict(name="gemma3_hd64", family="gemma3", n_head=4, n_head_kv=2, head_dim=64, n_layer=6),
    dict(name="phi3_hd64", family="phi3", n_head=4, n_head_kv=2, head_dim=64, n_layer=2),
    dict(name="gpt_oss_hd64", family="gpt_oss", n_head=4, n_head_kv=2, head_dim=64, n_layer=2),
]
D, N_FF, N_CTX = 256, 512, 1024
CLASSES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
           "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
           "gemma2": "Gemma2ForCausalLM", "gemma3": "Gemma3ForCausalLM",
           "phi3": "Phi3ForCausalLM", "gpt_oss": "GptOssForCausalLM"}


def set_rope(cfg, params: dict) -> None:
    """RoPE parameters in the form this transformers reads: rope_parameters (5.x) or rope_theta
    + rope_scaling (4.x)."""
    if getattr(cfg, "rope_parameters", None) is not None or "rope_parameters" in vars(cfg):
        cfg.rope_parameters = dict(params)
    else:
        cfg.rope_theta = params["rope_theta"]
        rest = {k: v for k, v in params.items() if k != "rope_theta"}
        if rest.get("rope_type", "default") != "default":
            rest["type"] = rest["rope_type"]
            cfg.rope_scaling = rest


def gemma_rope(cfg, global_: dict, local: dict | None) -> None:
    """As tests/oracle/make_family_oracles.py: one entry per layer type (5.x), or rope_theta,
    rope_scaling and rope_local_base_freq (4.x)."""
    if getattr(cfg, "rope_parameters", None) is not None:
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


def phi3_factors(n: int, top: float) -> list:
    """LongRoPE factors rising from 1 to `top` over the rotated pairs (as the released ones)."""
    return [round(1.0 + (top - 1.0) * i / max(n - 1, 1), 4) for i in range(n)]


def hf_config(c: dict):
    common = dict(vocab_size=N_VOCAB, hidden_size=D, intermediate_size=N_FF,
                  num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
                  num_key_value_heads=c["n_head_kv"], head_dim=c["head_dim"],
                  max_position_embeddings=N_CTX, rms_norm_eps=1e-6, tie_word_embeddings=False,
                  bos_token_id=BOS, eos_token_id=EOS, attn_implementation="eager")
    f = c["family"]
    if f == "llama":
        cfg = transformers.LlamaConfig(**common, attention_bias=False, mlp_bias=False)
        set_rope(cfg, {"rope_type": "default", "rope_theta": 500000.0})
    elif f == "mistral":
        cfg = transformers.MistralConfig(**common, sliding_window=WINDOW)
        set_rope(cfg, {"rope_type": "default", "rope_theta": 1e6})
    elif f == "qwen2":
        cfg = transformers.Qwen2Config(**common, use_sliding_window=True, sliding_window=WINDOW,
                                       max_window_layers=1)
        set_rope(cfg, {"rope_type": "default", "rope_theta": 1e6})
        lt = getattr(cfg, "layer_types", None)
        assert lt is None or lt == ["full_attention", "sliding_attention"], lt
    elif f == "qwen3":
        cfg = transformers.Qwen3Config(**common, attention_bias=False, use_sliding_window=False)
        set_rope(cfg, {"rope_type": "default", "rope_theta": 1e6})
    elif f in ("gemma2", "gemma3"):
        kw = dict(common, query_pre_attn_scalar=48, sliding_window=WINDOW,
                  hidden_activation="gelu_pytorch_tanh", pad_token_id=EOS)
        if f == "gemma2":
            cfg = transformers.Gemma2Config(**kw, attn_logit_softcapping=5.0,
                                            final_logit_softcapping=10.0)
            gemma_rope(cfg, {"rope_theta": 10000.0}, None)
        else:
            cfg = transformers.Gemma3TextConfig(**kw)
            gemma_rope(cfg, {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6},
                       {"rope_theta": 10000.0})
    elif f == "phi3":
        n = int(c["head_dim"] * 0.75) // 2
        rope = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                "long_factor": phi3_factors(n, 6.0), "short_factor": phi3_factors(n, 1.5),
                "original_max_position_embeddings": PHI3_ORIG}
        kw = {k: v for k, v in common.items() if k != "head_dim"}  # Phi3: hidden / heads
        cfg = transformers.Phi3Config(**kw, sliding_window=WINDOW, pad_token_id=EOS,
                                      original_max_position_embeddings=PHI3_ORIG,
                                      partial_rotary_factor=0.75)
        set_rope(cfg, rope)
        assert D // c["n_head"] == c["head_dim"]
    elif f == "gpt_oss":
        cfg = transformers.GptOssConfig(**common, num_local_experts=4, num_experts_per_tok=2,
                                        sliding_window=WINDOW)
        set_rope(cfg, {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                       "truncate": False, "original_max_position_embeddings": 32,
                       "rope_theta": 150000.0})
    else:
        raise ValueError(f)
    cfg._attn_implementation = "eager"
    return cfg


def random_state(model, seed: int, norm_offset: float) -> dict:
    """As tests/oracle/make_hf_oracles.py: weights scaled so logits spread over several units;
    Q/K twice as large, so attention is peaked enough for windows and tiles to matter."""
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
            a = 1.0 - norm_offset + 0.2 * rng.standard_normal(shape)
        elif len(shape) == 2:
            gain = QK_GAIN if ("q_proj" in name or "k_proj" in name or "qkv_proj" in name) else \
                3.0 if name == "lm_head.weight" else ROUTER_GAIN if "router" in name else 1.0
            a = gain * rng.standard_normal(shape) / math.sqrt(shape[1])
        else:
            a = 0.3 * rng.standard_normal(shape)
        out[name] = torch.from_numpy(a.astype(np.float32))
    return out


def prompts() -> list:
    rng = np.random.default_rng(7)
    out = []
    for n in PROMPT_LENGTHS:
        ids = []
        while len(ids) < n:
            span = [int(x) for x in rng.integers(0, 400, size=int(rng.integers(8, 32)))]
            ids += span + span
        out.append(ids[:n])
    return out


def agreement(ref: list, test: list) -> dict:
    """KL(ref || test) per row (float64 log-softmax), as tests/gpu/gpu_agreement.h."""
    p = torch.log_softmax(torch.tensor(np.concatenate(ref, 0), dtype=torch.float64), -1)
    q = torch.log_softmax(torch.tensor(np.concatenate(test, 0), dtype=torch.float64), -1)
    kl = (p.exp() * (p - q)).sum(-1)
    return {"mean_kl": float(kl.mean()), "max_kl": float(kl.max()),
            "max_abs": float(max(np.abs(a - b).max() for a, b in zip(ref, test)))}


def bf16_emulation(model, ids: list) -> list:
    """The logits with every value the CUDA backend keeps in bf16 rounded to bf16 (normed layer
    inputs, the Q/K/V projections, the attention output, the FFN activation, the final norm's
    output; the residual stream and the rest float32): an estimate of the CUDA-vs-transformers
    difference that the gates of test_cuda_hf_oracles must leave room for."""
    rb = lambda t: t.to(torch.bfloat16).to(torch.float32)  # noqa: E731
    hooks = []
    for name, mod in model.named_modules():
        leaf = name.split(".")[-1]
        rounded_out = leaf in ("input_layernorm", "pre_feedforward_layernorm", "q_proj", "k_proj",
                               "v_proj", "qkv_proj") or name == "model.norm" or \
            (leaf == "post_attention_layernorm" and "Gemma" not in type(model).__name__)
        if rounded_out:
            hooks.append(mod.register_forward_hook(lambda m, i, o: rb(o)))
        if leaf in ("o_proj", "down_proj"):
            hooks.append(mod.register_forward_pre_hook(lambda m, a: (rb(a[0]),) + tuple(a[1:])))
    try:
        return [model(input_ids=torch.tensor([p])).logits[0].float().numpy() for p in ids]
    finally:
        for h in hooks:
            h.remove()


def write_case(c: dict, out: pathlib.Path, seed: int) -> dict:
    cls = getattr(transformers, CLASSES[c["family"]], None)
    if cls is None:
        raise RuntimeError(f"transformers {transformers.__version__} has no {CLASSES[c['family']]}")
    cfg = hf_config(c)
    torch.manual_seed(seed)
    model = cls(cfg).eval()
    state = random_state(model, seed, 1.0 if c["family"].startswith("gemma") else 0.0)
    # bfloat16 storage; the HF model runs those very values in float32.
    state = {k: v.to(torch.bfloat16).to(torch.float32) for k, v in state.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not [k for k in missing if "rotary_emb" not in k] and not unexpected, (missing, unexpected)
    ids = prompts()
    with torch.no_grad():  # before model.to(bf16), which also rounds the RoPE buffers
        logits = [model(input_ids=torch.tensor([p])).logits[0].to(torch.float32).numpy()
                  for p in ids]
        emulated = agreement(logits, bf16_emulation(model, ids))
        window_effect = None
        if getattr(cfg, "sliding_window", None):
            # The same weights with the window past every prompt: how far the model's own window
            # moves the logits (the tests' gates must be far tighter than this).
            cfg2 = copy.deepcopy(cfg)
            cfg2.sliding_window = 4096
            wide = cls(cfg2).eval()
            wide.load_state_dict(state, strict=False)
            window_effect = agreement(logits, [wide(input_ids=torch.tensor([p])).logits[0]
                                               .float().numpy() for p in ids])
    ck = out / c["name"]
    shutil.rmtree(ck, ignore_errors=True)
    model.to(torch.bfloat16).save_pretrained(ck)
    for f in TOKENIZER_FILES:
        if (TOKENIZER_SRC / f).exists():
            shutil.copy(TOKENIZER_SRC / f, ck / f)
    allv = np.concatenate(logits, 0).astype("<f4")
    allv.tofile(out / f"{c['name']}.logits.bin")
    srt = np.sort(allv, -1)
    entry = {
        "name": c["name"], "family": c["family"], "dir": c["name"], "n_vocab": N_VOCAB,
        "head_dim": c["head_dim"], "logits_file": f"{c['name']}.logits.bin",
        "prompts": [{"ids": p} for p in ids],
        "argmax": [[int(x) for x in lg.argmax(-1)] for lg in logits],
        "logits_std": float(allv.std()),
        "min_top2_gap": float((srt[:, -1] - srt[:, -2]).min()),
        # gpt-oss on the CUDA backend is another change: a refusal naming it is accepted.
        "cuda": "optional" if c["family"] == "gpt_oss" else "required",
        "bf16_emulation": emulated,
        "window_effect": window_effect,
    }
    print(f"{c['name']}: logits std {allv.std():.2f}, min top-2 gap {entry['min_top2_gap']:.2e}, "
          f"bf16 emulation mean KL {emulated['mean_kl']:.2e} max KL {emulated['max_kl']:.2e} "
          f"max |dlogit| {emulated['max_abs']:.3f}" +
          (f"; window 4096 instead: mean KL {window_effect['mean_kl']:.3f}" if window_effect else ""),
          file=sys.stderr)
    return entry


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "build" / "hf_cuda_oracles"))
    ap.add_argument("--case", action="append", default=[], help="only this case (repeatable)")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_grad_enabled(False)
    cases, skipped = [], []
    for i, c in enumerate(CASES):
        if a.case and c["name"] not in a.case:
            continue
        try:
            cases.append(write_case(c, out, 100 + i))
        except Exception as e:  # noqa: BLE001 -- only gpt-oss may be missing from transformers
            if c["family"] != "gpt_oss":
                raise
            skipped.append({"name": c["name"], "reason": f"{type(e).__name__}: {e}"})
            print(f"{c['name']}: skipped ({type(e).__name__}: {e})", file=sys.stderr)
    manifest = {"generator": "tests/gpu/make_cuda_hf_oracles.py",
                "transformers": transformers.__version__, "torch": torch.__version__,
                "cases": cases, "skipped": skipped}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    print(f"wrote {len(cases)} cases to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
