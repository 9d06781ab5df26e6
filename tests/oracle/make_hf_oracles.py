#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Oracles for Hugging Face checkpoints: tiny random-weight llama / qwen2 / qwen3 models built by
HF transformers from a config (nothing downloaded), saved with save_pretrained as safetensors
checkpoints (config.json, model.safetensors or shards + index, generation_config.json) with a
byte-level BPE tokenizer trained here by the `tokenizers` library and saved by
PreTrainedTokenizerFast (tokenizer.json, tokenizer_config.json, chat template); transformers'
float32 logits for fixed text prompts; and each tokenizer's ids for a mixed corpus.

Exact command (the venv of make_family_oracles.py, plus safetensors and tokenizers):

    build/venv/bin/python tests/oracle/make_hf_oracles.py --out tests/data/hf

Read by tests/unit/test_hf_checkpoint.cpp.

Cases:
  llama_bf16_sharded  llama, BF16, two shards + index, untied, Llama 3 RoPE scaling, Llama 3
                      tokenizer (Split regex + ByteLevel, ignore_merges, bos by the
                      post-processor); also written as GGUF in llama.cpp's layout (Q/K rows
                      permuted for adjacent-pair RoPE, rope_freqs.weight) so the test can check
                      that both loaders give the same logits.
  qwen2_f16           qwen2 (Q/K/V biases), F16, one file, tied, config vocab_size above the
                      tokenizer's (padding rows), Qwen2 tokenizer with ChatML.
  qwen3_f32           qwen3 (Q/K norms, head_dim apart from the width), F32, tied.
  gpt_oss_bf16        gpt_oss (sinks, unpacked experts, YaRN, alternating windows), BF16.
  gpt_oss_mxfp4       the gpt_oss case with its experts MXFP4-packed as the released
                      checkpoints ship them (*_blocks / *_scales U8, quantization_config mxfp4):
                      the values come from gguf-py's MXFP4 quantizer, are packed in HF's nibble
                      order and checked against transformers' convert_moe_packed_tensors; the HF
                      model runs on those values (other weights BF16).
  phi3_bf16           Phi3ForCausalLM: fused qkv_proj and gate_up_proj, LongRoPE (long and
                      short factors, partial rotary 0.5, original context 64 of 256: every
                      prompt is shorter, so transformers runs the short factors; the attention
                      factor applies regardless), sliding_window 12 on every layer.
  mistral_f16_window  MistralForCausalLM with sliding_window 6 (every layer); also written as
                      GGUF (arch llama, llama.attention.sliding_window, Q/K rows permuted).
  qwen2_window_f32    Qwen2ForCausalLM with use_sliding_window, window 6, max_window_layers 1:
                      layer 0 full, layer 1 sliding (layer_types).
  gemma2_bf16         Gemma2ForCausalLM: window 6 on layers 0 and 2, soft-caps 5 / 10,
                      query_pre_attn_scalar 24 (not head_dim 16), norms stored as w (1 + w).
  gemma3_bf16         Gemma3ForCausalLM (model_type gemma3_text): 7 layers, 5 sliding (window
                      6, RoPE base 10000) to 1 full (base 1e6, linear scaling 4), Q/K norms.
Tokenizer-only kinds (tokenizers/<kind>/tokenizer.json): gpt2 (ByteLevel with its regex) and
smollm (Digits + ByteLevel); the llama3 and qwen2 kinds are the checkpoints' own. The
SentencePiece-style kinds (BPE with byte_fallback over U+2581 pieces, <0x00>..<0xFF> in the
vocabulary, <unk> <s> </s> added; merges trained here, then the vocabulary rebuilt in the order
Llama's files have): llama2_spm (normalizer Prepend + Replace, decoder Replace, ByteFallback,
Fuse, Strip), mistral_spm (Metaspace prepend_scheme first, split false), gemma_spm (Replace only,
no prefix, no Strip), metaspace_split (Metaspace always, split true).

The HF model runs float32 with exactly the values the checkpoint stores (rounded to its dtype).

Outputs (--out):
  <case>/...                the checkpoint
  <case>.logits.bin         float32 LE, for each prompt in turn (n_tokens, n_vocab) row-major
  llama_bf16_sharded.gguf   the llama case as GGUF
  tokenizers/<kind>/tokenizer.json
  manifest.json             cases, prompts (text and ids), argmax, rendered chat, corpus ids
"""
import argparse
import hashlib
import importlib.metadata
import json
import math
import pathlib
import shutil
import sys
import unicodedata

import numpy as np
import torch
import transformers
import gguf
import tokenizers
from tokenizers import Regex, decoders, models, pre_tokenizers, processors, trainers
from gguf import GGMLQuantizationType as QT

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
            r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
             r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# Training text for the tokenizers (it only shapes the merges) and the corpus they are checked
# on: prose, code, digits, CJK, emoji, odd whitespace, contractions in both cases.
TRAIN_TEXT = [
    "The quick brown fox jumps over the lazy dog while the other brown dogs sleep in the sun.",
    "def forward(self, x):\n    return self.linear(x) + 1\n\nfor i in range(10):\n    print(i)",
    "In 2024 the model had 135000000 parameters and 30 layers; 3.14159 is pi.",
    "注意力汇聚点是语言模型中的一个现象。東京は日本の首都です。",
    "Emoji 🙂🚀🎉 and symbols ©®™ — dashes – and “quotes”.",
    "I'm sure you're right, they've said we'll see; IT'S DONE, WE'LL GO.",
    "system\nuser\nassistant\n\nBe brief. Hi there, the system and the user and the assistant.",
] * 3
CORPUS = [
    "Hello, world! The quick brown fox.",
    "  leading spaces and trailing spaces   ",
    "Line one\nLine two\r\nLine three\n\n\nEnd",
    "int main(void) { return 0; }  // C code\n\tindented();",
    "x = [1, 22, 333, 4444, 55555]; y = 3.14159e-10",
    "Numbers: 1234567890 and ١٢٣ (Arabic-Indic) and ½",
    "中文文本，日本語のテキスト、한국어 텍스트。",
    "Emoji: 🙂 🚀🎉 👩‍👩‍👧 and flags 🇯🇵",
    "I'M here, you'RE there; don't won't can't SHE'LL",
    "Tabs\tand\u00a0non-breaking\u2003spaces",
    "Ünïcödé àccents and ß, Ωμέγα, Кириллица",
    "",
    "!!!???...,,,;;;",
    # Decomposed text (NFC composes it: Qwen2's normalizer), Hangul jamo, a singleton.
    "Cafe\u0301 nai\u0308ve A\u030a \u212b \u1100\u1161\u11a8 q\u0323\u0307 \u0915\u093c",
]
# Unicode NFC (unicodedata) of these strings: an oracle for unicode::nfc beyond the corpus.
NFC_CASES = [
    "e\u0301", "A\u0308\u0304", "\u1e9b\u0323", "\u0071\u0307\u0323", "\u212b\u2126",
    "\u0958\u095f", "\u1100\u1161\u11a8\u1100", "\uac00\u11a8", "a\u0328\u0301\u0323",
    "\u00c5\u030a", "\u0f73\u0f75\u0f81", "\u05b8\u05b9\u05b1\u0591\u05c3\u05b0\u05ac",
    "\u1026\u102e", "\ud55c\uad6d\uc5b4 \u1112\u1161\u11ab", "\u0301a", "x\u0300\u0301y",
    "\U0001d15e\U0001d165", "\u3099\u304b\u3099", "plain ASCII", "\u00e9\u00e8",
]

PROMPTS = [
    "The quick brown fox. In 2024, 注意!",
    "def f(x):\n  return x+1 🙂",
]
CHAT = [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi 🙂"}]

LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}")


def train_tokenizer(kind: str, n_merges_vocab: int, specials: list) -> tokenizers.Tokenizer:
    tok = tokenizers.Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif kind == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        regex = {"qwen2": QWEN2_RE, "llama3": LLAMA3_RE}[kind]
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                     use_regex=False)])
    if kind == "qwen2":
        tok.normalizer = tokenizers.normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=n_merges_vocab, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(TRAIN_TEXT, trainer=trainer)
    tok.add_special_tokens(specials)
    if kind == "llama3":
        bos = specials[0]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
            special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


SPM_SPECIALS = ["<unk>", "<s>", "</s>"]
SPM_KINDS = ("llama2_spm", "mistral_spm", "gemma_spm", "metaspace_split")


def train_spm_tokenizer(kind: str, n_merges_vocab: int) -> tokenizers.Tokenizer:
    """A SentencePiece-style BPE tokenizer.json as Llama 2 / Mistral / Gemma ship it."""
    from tokenizers import normalizers
    mark = "\u2581"

    def pipeline(tok):
        dec = [decoders.Replace(mark, " "), decoders.ByteFallback(), decoders.Fuse()]
        if kind == "llama2_spm":
            tok.normalizer = normalizers.Sequence([normalizers.Prepend(mark),
                                                   normalizers.Replace(" ", mark)])
            dec.append(decoders.Strip(" ", 1, 0))
        elif kind == "mistral_spm":
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=mark, prepend_scheme="first",
                                                         split=False)
            dec.append(decoders.Strip(" ", 1, 0))
        elif kind == "gemma_spm":
            tok.normalizer = normalizers.Replace(" ", mark)
        else:
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=mark, prepend_scheme="always",
                                                         split=True)
            dec = [decoders.Metaspace(replacement=mark, prepend_scheme="always", split=True),
                   decoders.ByteFallback(), decoders.Fuse()]
        tok.decoder = decoders.Sequence(dec)

    draft = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    pipeline(draft)
    draft.train_from_iterator(TRAIN_TEXT, trainer=trainers.BpeTrainer(
        vocab_size=n_merges_vocab, show_progress=False, special_tokens=SPM_SPECIALS))
    trained = json.loads(draft.to_str())["model"]
    vocab = {t: i for i, t in enumerate(SPM_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for t, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]):
        if t not in vocab:
            vocab[t] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in trained["merges"]]
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>",
                                          byte_fallback=True, fuse_unk=True))
    pipeline(tok)
    tok.add_special_tokens(SPM_SPECIALS)
    return tok


LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]
CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CASES = [
    dict(name="llama_bf16_sharded", family="llama", tokenizer="llama3", dtype="bfloat16",
         shard="40KB", d=32, n_head=4, n_head_kv=2, n_ff=64, n_layer=2, n_ctx=256,
         theta=500000.0, eps=1e-5, tied=False, pad_vocab=0, seed=41,
         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
    dict(name="qwen2_f16", family="qwen2", tokenizer="qwen2", dtype="float16", shard=None,
         d=32, n_head=4, n_head_kv=2, n_ff=64, n_layer=2, n_ctx=256, theta=1e6, eps=1e-6,
         tied=True, pad_vocab=8, seed=42),
    dict(name="qwen3_f32", family="qwen3", tokenizer="qwen2", dtype="float32", shard=None,
         d=32, n_head=4, n_head_kv=2, head_dim=16, n_ff=64, n_layer=2, n_ctx=256, theta=1e6,
         eps=1e-6, tied=True, pad_vocab=0, seed=43),
    # gpt-oss: learned sinks, 4 experts (2 used) stored unpacked in bfloat16 (x @ W, gate and up
    # interleaved), YaRN, a sliding layer (window 8) then a full one.
    dict(name="gpt_oss_bf16", family="gpt_oss", tokenizer="qwen2", dtype="bfloat16", shard=None,
         d=32, n_head=4, n_head_kv=2, head_dim=16, n_ff=32, n_layer=2, n_ctx=2048,
         theta=150000.0, eps=1e-5, tied=False, pad_vocab=0, seed=44, window=8, n_expert=4,
         n_expert_used=2,
         rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                       "truncate": False, "original_max_position_embeddings": 64}),
    dict(name="gpt_oss_mxfp4", family="gpt_oss", tokenizer="qwen2", dtype="bfloat16", shard=None,
         d=32, n_head=4, n_head_kv=2, head_dim=16, n_ff=32, n_layer=2, n_ctx=2048,
         theta=150000.0, eps=1e-5, tied=False, pad_vocab=0, seed=50, window=8, n_expert=4,
         n_expert_used=2, mxfp4=True,
         rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                       "truncate": False, "original_max_position_embeddings": 64}),
    dict(name="phi3_bf16", family="phi3", tokenizer="qwen2", dtype="bfloat16", shard=None,
         d=48, n_head=3, n_head_kv=1, n_ff=64, n_layer=2, n_ctx=256, theta=10000.0, eps=1e-5,
         tied=False, pad_vocab=0, seed=45, window=12,
         rope_scaling={"rope_type": "longrope", "partial_rotary_factor": 0.5,
                       "long_factor": [1.0, 2.5, 4.0, 8.0], "short_factor": [1.0, 1.1, 1.3, 1.6],
                       "original_max_position_embeddings": 64}),
    dict(name="mistral_f16_window", family="mistral", tokenizer="llama3", dtype="float16",
         shard=None, d=32, n_head=4, n_head_kv=2, n_ff=64, n_layer=2, n_ctx=256, theta=1e6,
         eps=1e-5, tied=False, pad_vocab=0, seed=46, window=6),
    dict(name="gemma2_bf16", family="gemma2", tokenizer="qwen2", dtype="bfloat16", shard=None,
         d=32, n_head=4, n_head_kv=2, head_dim=16, n_ff=48, n_layer=3, n_ctx=256,
         theta=10000.0, eps=1e-6, tied=True, pad_vocab=0, seed=48, window=6, qpas=24,
         attn_cap=5.0, final_cap=10.0),
    dict(name="gemma3_bf16", family="gemma3", tokenizer="qwen2", dtype="bfloat16", shard=None,
         d=32, n_head=4, n_head_kv=2, head_dim=16, n_ff=48, n_layer=7, n_ctx=256, theta=1e6,
         eps=1e-6, tied=True, pad_vocab=0, seed=49, window=6, qpas=24, rope_linear=4.0),
    dict(name="qwen2_window_f32", family="qwen2", tokenizer="qwen2", dtype="float32", shard=None,
         d=32, n_head=4, n_head_kv=2, n_ff=64, n_layer=2, n_ctx=256, theta=1e6, eps=1e-6,
         tied=True, pad_vocab=0, seed=47, window=6, max_window_layers=1),
]
TOKENIZER_VOCAB = 400  # bytes + merges, before the specials


def hf_config(c: dict, n_vocab: int, bos: int, eos: int):
    common = dict(vocab_size=n_vocab, hidden_size=c["d"], intermediate_size=c["n_ff"],
                  num_hidden_layers=c["n_layer"], num_attention_heads=c["n_head"],
                  num_key_value_heads=c["n_head_kv"], max_position_embeddings=c["n_ctx"],
                  rms_norm_eps=c["eps"], tie_word_embeddings=c["tied"], bos_token_id=bos,
                  eos_token_id=eos)
    if c["family"] == "llama":
        cfg = transformers.LlamaConfig(**common, attention_bias=False, mlp_bias=False)
    elif c["family"] == "qwen2" and c.get("window"):
        cfg = transformers.Qwen2Config(**common, use_sliding_window=True,
                                       sliding_window=c["window"],
                                       max_window_layers=c["max_window_layers"],
                                       attn_implementation="eager")
        assert cfg.layer_types == ["full_attention" if i < c["max_window_layers"] else
                                   "sliding_attention" for i in range(c["n_layer"])]
    elif c["family"] == "qwen2":
        cfg = transformers.Qwen2Config(**common, use_sliding_window=False)
    elif c["family"] == "phi3":
        orig = c["rope_scaling"]["original_max_position_embeddings"]
        cfg = transformers.Phi3Config(**common, sliding_window=c["window"], pad_token_id=eos,
                                      original_max_position_embeddings=orig,
                                      rope_parameters=dict(c["rope_scaling"], rope_theta=c["theta"]),
                                      attn_implementation="eager")
    elif c["family"] in ("gemma2", "gemma3"):
        sys.path.insert(0, str(pathlib.Path(__file__).parent))
        from make_family_oracles import gemma_rope
        kw = dict(common, head_dim=c["head_dim"], query_pre_attn_scalar=c["qpas"],
                  sliding_window=c["window"], hidden_activation="gelu_pytorch_tanh",
                  attn_implementation="eager", pad_token_id=eos)
        if c["family"] == "gemma2":
            cfg = transformers.Gemma2Config(**kw, attn_logit_softcapping=c["attn_cap"],
                                            final_logit_softcapping=c["final_cap"])
            gemma_rope(cfg, {"rope_theta": c["theta"]}, None)
        else:
            cfg = transformers.Gemma3TextConfig(**kw)
            gemma_rope(cfg, {"rope_type": "linear", "factor": c["rope_linear"],
                             "rope_theta": c["theta"]}, {"rope_theta": 10000.0})
        return cfg
    elif c["family"] == "mistral":
        cfg = transformers.MistralConfig(**common, sliding_window=c["window"],
                                         attn_implementation="eager")
    elif c["family"] == "gpt_oss":
        cfg = transformers.GptOssConfig(**common, head_dim=c["head_dim"],
                                        num_local_experts=c["n_expert"],
                                        num_experts_per_tok=c["n_expert_used"],
                                        sliding_window=c["window"], attn_implementation="eager")
    else:
        cfg = transformers.Qwen3Config(**common, head_dim=c["head_dim"], attention_bias=False,
                                       use_sliding_window=False)
    rope = {"rope_type": "default", "rope_theta": c["theta"]}
    if "rope_scaling" in c:
        rope = dict(c["rope_scaling"], rope_theta=c["theta"])
    if hasattr(cfg, "rope_parameters"):
        cfg.rope_parameters = rope
        if c["family"] == "phi3":
            assert cfg.original_max_position_embeddings == rope["original_max_position_embeddings"]
    else:
        cfg.rope_theta = c["theta"]
        if "rope_scaling" in c:
            cfg.rope_scaling = c["rope_scaling"]
    return cfg


def random_state(model, seed: int, norm_offset: float = 0.0) -> dict:
    """As make_family_oracles.py: weights scaled so logits spread over several units."""
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
        out[name] = torch.from_numpy(a.astype(np.float32))
    return out


def mxfp4_pack(w: torch.Tensor):
    """An expert tensor in HF's x @ W layout (E, in, out) as MXFP4: gguf-py quantizes each output
    row's inputs in blocks of 32; the blocks are rewritten in HF's packing (element 2j in the low
    nibble of byte j, 2j + 1 in the high one; scales apart) and checked against transformers'
    own unpacker. Returns ({"_blocks": .., "_scales": ..}, the values, (E, in, out) float32)."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    rows = w.transpose(1, 2).contiguous().numpy()  # (E, out, in)
    E, R, C = rows.shape
    q = gguf.quants.quantize(rows.reshape(E * R, C), QT.MXFP4).reshape(E, R, C // 32, 17)
    scales = q[..., 0].copy()
    qs = q[..., 1:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], -1)  # GGUF: element j low, j + 16 high
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    values = gguf.quants.dequantize(q.reshape(E * R, -1), QT.MXFP4).reshape(E, R, C)
    mine = torch.from_numpy(values.astype(np.float32)).transpose(1, 2).contiguous()
    theirs = convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales),
                                        dtype=torch.float32)
    assert torch.equal(theirs, mine), "HF's unpacker reads other values"
    return {"_blocks": torch.from_numpy(blocks), "_scales": torch.from_numpy(scales)}, mine


def write_packed_experts(ck: pathlib.Path, packed: dict) -> None:
    """model.safetensors with the experts replaced by *_blocks / *_scales (the unpacked
    checkpoint is kept in unpacked/ for transformers' read-back) and config.json's
    quantization_config as the released checkpoints have it."""
    from safetensors.torch import load_file, save_file
    un = ck / "unpacked"
    un.mkdir()
    for f in ("config.json", "model.safetensors", "generation_config.json"):
        shutil.copy(ck / f, un / f)
    for f in ck.glob("tokenizer*"):
        shutil.copy(f, un / f.name)
    t = load_file(ck / "model.safetensors")
    for name, parts in packed.items():
        del t[name]
        for suffix, a in parts.items():
            t[name + suffix] = a.contiguous()
    save_file(t, ck / "model.safetensors", metadata={"format": "pt"})
    cfg = json.loads((ck / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4",
                                  "modules_to_not_convert": ["model.layers.*.self_attn",
                                                             "model.layers.*.mlp.router",
                                                             "model.embed_tokens", "lm_head"]}
    (ck / "config.json").write_text(json.dumps(cfg, indent=2))


def sha256_file(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute: half-split rows to adjacent pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def write_llama_gguf(c: dict, state: dict, tok: tokenizers.Tokenizer, fast, path: pathlib.Path,
                     n_vocab: int) -> None:
    """The llama case in llama.cpp's layout, every weight with the checkpoint's bf16 bytes."""
    wr = gguf.GGUFWriter(str(path), "llama")  # Mistral too, as convert_hf_to_gguf.py writes it
    wr.add_type("model")
    wr.add_name(f"sinkscope-hf-oracle {c['name']}")
    wr.add_context_length(c["n_ctx"])
    wr.add_embedding_length(c["d"])
    wr.add_block_count(c["n_layer"])
    wr.add_feed_forward_length(c["n_ff"])
    wr.add_head_count(c["n_head"])
    wr.add_head_count_kv(c["n_head_kv"])
    wr.add_rope_freq_base(c["theta"])
    wr.add_layer_norm_rms_eps(c["eps"])
    wr.add_rope_dimension_count(c["d"] // c["n_head"])
    if c.get("window"):
        wr.add_sliding_window(c["window"])
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if c["dtype"] == "bfloat16" else
                     gguf.LlamaFileType.MOSTLY_F16)
    vocab = tok.get_vocab(with_added_tokens=True)
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    specials = {a.content for a in tok.get_added_tokens_decoder().values()}
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("llama-bpe")
    wr.add_token_list(tokens)
    wr.add_token_types([3 if t in specials else 1 for t in tokens])
    merges = json.loads(tok.to_str())["model"]["merges"]
    wr.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    wr.add_bos_token_id(fast.bos_token_id)
    wr.add_eos_token_id(fast.eos_token_id)
    wr.add_add_bos_token(True)
    wr.add_chat_template(LLAMA3_TEMPLATE)
    # rope_freqs.weight as convert_hf_to_gguf.py computes it for Llama 3 scaling.
    rs, hd = c.get("rope_scaling", {}), c["d"] // c["n_head"]
    freqs = 1.0 / (c["theta"] ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    low_wl = rs["original_max_position_embeddings"] / rs["low_freq_factor"] if rs else 0
    high_wl = rs["original_max_position_embeddings"] / rs["high_freq_factor"] if rs else 0
    factors = []
    for f in freqs.tolist() if rs else []:
        wl = 2 * math.pi / f
        if wl < high_wl:
            factors.append(1.0)
        elif wl > low_wl:
            factors.append(rs["factor"])
        else:
            sm = (rs["original_max_position_embeddings"] / wl - rs["low_freq_factor"]) / \
                (rs["high_freq_factor"] - rs["low_freq_factor"])
            factors.append(1 / ((1 - sm) / rs["factor"] + sm))
    if factors:
        wr.add_tensor("rope_freqs.weight", np.array(factors, dtype=np.float32))
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    from make_family_oracles import llama_style_gguf_name
    for name, t in state.items():
        if "rotary_emb" in name or (c["tied"] and name == "lm_head.weight"):
            continue
        a = t.to(torch.float32).numpy()
        if name.endswith("q_proj.weight"):
            a = llama_permute(a, c["n_head"])
        elif name.endswith("k_proj.weight"):
            a = llama_permute(a, c["n_head_kv"])
        gg = llama_style_gguf_name(name)
        if a.ndim == 1:
            wr.add_tensor(gg, a.astype(np.float32))
        elif c["dtype"] == "bfloat16":
            wr.add_tensor(gg, gguf.quants.quantize(a, QT.BF16), raw_dtype=QT.BF16)
        else:
            wr.add_tensor(gg, a.astype(np.float16))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def write_case(c: dict, out: pathlib.Path, toks: dict) -> dict:
    tok = toks[c["tokenizer"]]
    specials = LLAMA3_SPECIALS if c["tokenizer"] == "llama3" else CHATML_SPECIALS
    if c["tokenizer"] == "llama3":
        bos, eos, template = specials[0], specials[4], LLAMA3_TEMPLATE
    else:
        bos, eos, template = None, specials[2], CHATML_TEMPLATE
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok.__class__.from_str(tok.to_str()), bos_token=bos, eos_token=eos,
        chat_template=template, add_bos_token=(c["tokenizer"] == "llama3"))
    n_tok = tok.get_vocab_size(with_added_tokens=True)
    n_vocab = n_tok + c["pad_vocab"]
    cfg = hf_config(c, n_vocab, fast.convert_tokens_to_ids(specials[0]),
                    fast.convert_tokens_to_ids(eos))
    torch.manual_seed(c["seed"])
    model = getattr(transformers, {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                                   "qwen3": "Qwen3ForCausalLM", "gpt_oss": "GptOssForCausalLM",
                                   "phi3": "Phi3ForCausalLM", "mistral": "MistralForCausalLM",
                                   "gemma2": "Gemma2ForCausalLM",
                                   "gemma3": "Gemma3ForCausalLM"}[c["family"]])(cfg).eval()
    state = random_state(model, c["seed"], 1.0 if c["family"].startswith("gemma") else 0.0)
    if c["tied"]:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    dtype = getattr(torch, c["dtype"])
    # The stored values, back in float32: what the HF model runs with.
    state = {k: v.to(dtype).to(torch.float32) for k, v in state.items()}
    packed = {}
    if c.get("mxfp4"):
        for k in [k for k in state if k.endswith("experts.gate_up_proj") or
                  k.endswith("experts.down_proj")]:
            packed[k], state[k] = mxfp4_pack(state[k])
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not [k for k in missing if "rotary_emb" not in k] and not unexpected
    if c["tied"]:
        model.tie_weights()

    # Reference logits before saving (model.to(dtype) below also rounds the RoPE buffers).
    ref_ids = [fast(text)["input_ids"] for text in PROMPTS]
    with torch.no_grad():
        ref = [model(input_ids=torch.tensor([ids])).logits[0].numpy() for ids in ref_ids]
    gguf_state = {k: v.clone() for k, v in model.state_dict().items()}

    ck = out / c["name"]
    shutil.rmtree(ck, ignore_errors=True)
    save_kw = {"max_shard_size": c["shard"]} if c["shard"] else {}
    model.to(dtype).save_pretrained(ck, **save_kw)
    fast.save_pretrained(ck)
    if packed:
        write_packed_experts(ck, packed)
    if c["shard"]:
        assert (ck / "model.safetensors.index.json").exists(), "expected shards"
    else:
        assert (ck / "model.safetensors").exists()

    # Read back by transformers itself (its loader, its config keys); the packed experts have
    # their own check (mxfp4_pack), so that model reads the unpacked copy kept aside.
    back = transformers.AutoModelForCausalLM.from_pretrained(
        ck if not packed else ck / "unpacked", dtype=torch.float32).eval()
    shutil.rmtree(ck / "unpacked", ignore_errors=True)
    back_tok = transformers.AutoTokenizer.from_pretrained(ck)
    prompts, logits = [], []
    for text, ids0, lg0 in zip(PROMPTS, ref_ids, ref):
        ids = back_tok(text)["input_ids"]
        assert ids == ids0, "the saved tokenizer encodes differently"
        with torch.no_grad():
            lg = back(input_ids=torch.tensor([ids])).logits[0].to(torch.float32).numpy()
        assert np.abs(lg - lg0).max() < 1e-5, "save/load round trip changed the logits"
        prompts.append({"text": text, "ids": ids})
        logits.append(lg)
    chat_text = back_tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    chat_ids = back_tok.apply_chat_template(CHAT, tokenize=True, add_generation_prompt=True)
    if isinstance(chat_ids, dict) or hasattr(chat_ids, "keys"):
        chat_ids = chat_ids["input_ids"]
    with torch.no_grad():
        logits.append(back(input_ids=torch.tensor([chat_ids])).logits[0].numpy())
    prompts.append({"chat": CHAT, "ids": list(chat_ids)})

    allv = np.concatenate(logits, 0).astype("<f4")
    bin_path = out / f"{c['name']}.logits.bin"
    allv.tofile(bin_path)
    entry = {
        "name": c["name"], "family": c["family"], "dir": c["name"],
        "params": {k: v for k, v in c.items() if k != "name"},
        "n_vocab": n_vocab, "tokenizer_vocab": n_tok, "dtype": c["dtype"],
        "shards": sorted(p.name for p in ck.glob("*.safetensors")),
        "files": {p.name: sha256_file(p) for p in sorted(ck.iterdir()) if p.is_file()},
        "logits_file": bin_path.name, "logits_sha256": sha256_file(bin_path),
        "prompts": prompts, "chat_text": chat_text,
        "argmax": [[int(x) for x in lg.argmax(-1)] for lg in logits],
        "bos": fast.bos_token_id, "eos": fast.eos_token_id,
        "logits_std": float(allv.std()),
    }
    if c["family"] in ("llama", "mistral"):
        gpath = out / f"{c['name']}.gguf"
        write_llama_gguf(c, gguf_state, tok, fast, gpath, n_vocab)
        entry["gguf"] = gpath.name
        entry["gguf_sha256"] = sha256_file(gpath)
    srt = np.sort(allv, -1)
    entry["min_top2_gap"] = float((srt[:, -1] - srt[:, -2]).min())
    print(f"{c['name']}: {sum(p.stat().st_size for p in ck.iterdir())} B checkpoint, "
          f"logits std {allv.std():.2f}, min top-2 gap {entry['min_top2_gap']:.2e}",
          file=sys.stderr)
    return entry


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[1] / "data" / "hf"))
    ap.add_argument("--case", action="append", default=[],
                    help="write only this case (repeatable); the manifest keeps the others")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_grad_enabled(False)
    toks = {
        "llama3": train_tokenizer("llama3", TOKENIZER_VOCAB, LLAMA3_SPECIALS),
        "qwen2": train_tokenizer("qwen2", TOKENIZER_VOCAB, CHATML_SPECIALS),
        "gpt2": train_tokenizer("gpt2", TOKENIZER_VOCAB, CHATML_SPECIALS),
        "smollm": train_tokenizer("smollm", TOKENIZER_VOCAB, CHATML_SPECIALS),
    }
    for kind in SPM_KINDS:
        toks[kind] = train_spm_tokenizer(kind, 300)
    corpus = {}
    for kind, tok in toks.items():
        # llama3 and qwen2 are read from the checkpoints that use them.
        if kind in ("gpt2", "smollm") or kind in SPM_KINDS:
            d = out / "tokenizers" / kind
            d.mkdir(parents=True, exist_ok=True)
            tok.save(str(d / "tokenizer.json"))
        enc = [tok.encode(line, add_special_tokens=False).ids for line in CORPUS]
        corpus[kind] = {
            "ids": enc,
            "decoded": [tok.decode(ids) for ids in enc],
            "with_special": tok.encode("<|im_start|>user\nhi<|im_end|>x<|eot_id|>",
                                       add_special_tokens=False).ids,
        }
        if kind in SPM_KINDS:
            # Added tokens split the text: each fragment gets the prefix its scheme gives it.
            corpus[kind]["with_spm_special"] = tok.encode("<s>hi there</s> and<s> x",
                                                          add_special_tokens=False).ids
    if args.case:
        old = {e["name"]: e for e in json.loads((out / "manifest.json").read_text("utf-8"))["cases"]}
        old.update({c["name"]: write_case(c, out, toks) for c in CASES if c["name"] in args.case})
        entries = [old[c["name"]] for c in CASES if c["name"] in old]
    else:
        entries = [write_case(c, out, toks) for c in CASES]
    manifest = {
        "format_version": 1,
        "generator": "tests/oracle/make_hf_oracles.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "numpy": np.__version__,
                     "gguf": importlib.metadata.version("gguf"),
                     "safetensors": importlib.metadata.version("safetensors")},
        "notes": ["logits files: float32 little-endian; for each prompt in turn (the text "
                  "prompts, then the chat), (n_tokens, n_vocab) row-major, every position",
                  "HF ran float32 with the exact values the checkpoint stores"],
        "corpus": CORPUS,
        "tokenizer_corpus": corpus,
        "nfc": [[t, unicodedata.normalize("NFC", t)] for t in NFC_CASES],
        "cases": entries,
    }
    with open(out / "manifest.json", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {len(entries)} cases to {out} ({total} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
