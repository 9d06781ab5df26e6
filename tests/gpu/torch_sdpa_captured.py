#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times torch SDPA (flash and cuDNN) on the Q/K/V captured from SmolLM2 (capture_qkv, format in
tests/gpu/qkv_file.h) and prints one table with our kernels' numbers from bench_captured's CSV:
per capture, our dense, torch flash / cuDNN (dense, causal), and our sparse kernel per lambda
(measured skip fraction, speed-up over our dense and over cuDNN).

  torch_sdpa_captured.py --ours OURS.csv FILE...
"""
import argparse
import csv
import struct
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_sdpa_bench import sdpa_callable, time_us  # noqa: E402  (same timing and GQA handling)


def read_capture(path):
    with open(path, "rb") as f:
        if f.read(8) != b"SSQKV001":
            raise ValueError(f"{path}: not a Q/K/V capture")
        h = struct.unpack("<8if5i", f.read(56))
        _, layer, n_q, q_start, n_kv, hq, hkv, d = h[:8]
        data = f.read()
    t = torch.frombuffer(bytearray(data), dtype=torch.bfloat16)
    nq_el, nk_el = n_q * hq * d, n_kv * hkv * d
    q = t[:nq_el].view(n_q, hq, d)
    k = t[nq_el:nq_el + nk_el].view(n_kv, hkv, d)
    v = t[nq_el + nk_el:nq_el + 2 * nk_el].view(n_kv, hkv, d)
    # SDPA layout (batch, heads, L, d)
    return dict(layer=layer, n_q=n_q, q_start=q_start, n_kv=n_kv, hq=hq, hkv=hkv, d=d,
                q=q.permute(1, 0, 2).unsqueeze(0).contiguous().cuda(),
                k=k.permute(1, 0, 2).unsqueeze(0).contiguous().cuda(),
                v=v.permute(1, 0, 2).unsqueeze(0).contiguous().cuda())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", help="bench_captured --csv output")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    ours = list(csv.DictReader(open(a.ours))) if a.ours else []
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    rows = []
    for path in a.files:
        c = read_capture(path)
        if c["q_start"] != 0:
            print(f"{path}: chunked capture (q_start {c['q_start']}), skipped")
            continue
        shape, L = f"smollm2_layer{c['layer']}", c["n_q"]
        flops = 4.0 * L * L * c["d"] * c["hq"] / 2.0
        res = {}
        for name, be in [("torch_flash", SDPBackend.FLASH_ATTENTION), ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)]:
            try:
                fn, suf = sdpa_callable(be, c["q"], c["k"], c["v"], True, c["hq"], c["hkv"])
                kk, vv = c["k"], c["v"]
                if suf:
                    g = c["hq"] // c["hkv"]
                    kk, vv = kk.repeat_interleave(g, 1), vv.repeat_interleave(g, 1)
                with sdpa_kernel(be):
                    res[name] = time_us(lambda _: fn(kk, vv), 3, 15, 1)
            except RuntimeError as e:
                print(f"{name} failed on {path}: {str(e).splitlines()[0]}")
        mine = [r for r in ours if r["shape"] == shape and int(r["L"]) == L and r["variant"].endswith("_b64")]
        dense = next((float(r["time_us"]) for r in mine if r["variant"].startswith("ours_dense")), None)
        rows.append((shape, L, flops, dense, res, [r for r in mine if r["variant"].startswith("ours_sparse")]))
    print("=== prefill on captured SmolLM2 Q/K/V (causal, bf16, block 64; times in us) ===")
    print(f"{'capture':18} {'L':>5} {'ours dense':>10} {'flash':>8} {'cudnn':>8} {'lambda':>7} {'skip%':>6} {'sparse':>8} {'x dense':>8} {'x cudnn':>8}")
    for shape, L, flops, dense, res, sparse in rows:
        fl, cu = res.get("torch_flash"), res.get("torch_cudnn")
        fmt = lambda x: f"{x:8.1f}" if x else f"{'-':>8}"
        print(f"{shape:18} {L:5d} {fmt(dense):>10} {fmt(fl)} {fmt(cu)} {'dense':>7} {'-':>6} {'-':>8} {'1.00':>8} "
              f"{(cu / dense if cu and dense else float('nan')):8.2f}")
        for r in sparse:
            t = float(r["time_us"])
            print(f"{'':18} {'':5} {'':10} {'':8} {'':8} {float(r['lambda']):7g} {100 * float(r['skip_frac']):6.1f} "
                  f"{t:8.1f} {(dense / t if dense else float('nan')):8.2f} {(cu / t if cu else float('nan')):8.2f}")
    print("(x dense = our dense / our sparse; x cudnn = torch cuDNN dense / ours)")


if __name__ == "__main__":
    main()
