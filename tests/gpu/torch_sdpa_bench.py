#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times torch SDPA (flash and cuDNN backends) on the shapes of bench_attention and prints the
joint table with our kernels' numbers (CSV from bench_attention) last.

GQA: each backend is first asked with enable_gqa=True; a backend that refuses it gets K/V
expanded with repeat_interleave (its variant name then ends in '+rep', and the extra copy is NOT
included in its time). Prefill is causal (is_causal=True); decode is one query against the whole
cache (is_causal=False). Times: CUDA events, median of several runs after a warm-up; decode
rotates over enough K/V copies to stream more than twice the 60 MB L2.
"""
import argparse
import csv
import math
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

SHAPES = [("d64_h9_kv3", 64, 9, 3), ("d128_h32_kv8", 128, 32, 8)]
LENS = [4096, 8192, 16384, 32768, 65536]
BACKENDS = [("torch_flash", SDPBackend.FLASH_ATTENTION), ("torch_cudnn", SDPBackend.CUDNN_ATTENTION)]


def time_us(fn, warmup, batches, per_batch):
    for _ in range(warmup):
        fn(0)
    torch.cuda.synchronize()
    ts, call = [], 0
    for _ in range(batches):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(per_batch):
            fn(call)
            call += 1
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0 / per_batch)
    ts.sort()
    return ts[len(ts) // 2]


def graph_time_us(fn, per_graph, batches, backend):
    """Device time per call: per_graph calls captured into one CUDA graph, the median over
    `batches` replays of replay time / per_graph (bench_attention's graph_time_us)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), sdpa_kernel(backend):
        for i in range(3):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with sdpa_kernel(backend), torch.cuda.graph(g):
        outs = [fn(i) for i in range(per_graph)]
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(batches):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0 / per_graph)
    del outs, g
    ts.sort()
    return ts[len(ts) // 2]


def sdpa_callable(backend, q, k, v, causal, hq, hkv):
    """Returns (fn(k, v), suffix). With suffix '' fn takes the hkv-head K/V (enable_gqa); with
    '+rep' the backend refused enable_gqa and fn takes K/V already expanded to hq heads."""
    def gqa(kk, vv):
        return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, enable_gqa=hq != hkv)

    def plain(kk, vv):
        return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal)

    with sdpa_kernel(backend):
        try:
            gqa(k, v)
            torch.cuda.synchronize()
            return gqa, ""
        except RuntimeError:
            if hq == hkv:
                raise
    r = hq // hkv
    with sdpa_kernel(backend):
        plain(k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1))
        torch.cuda.synchronize()
    return plain, "+rep"


def bench(rows, quick, decode_only=False):
    dev = torch.device("cuda")
    for name, d, hq, hkv in SHAPES:
        for L in LENS:
            if (quick and L > 16384) or decode_only:
                continue
            q = torch.randn(1, hq, L, d, device=dev, dtype=torch.bfloat16)
            k = torch.randn(1, hkv, L, d, device=dev, dtype=torch.bfloat16)
            v = torch.randn(1, hkv, L, d, device=dev, dtype=torch.bfloat16)
            flops = 4.0 * L * L * d * hq / 2.0
            reps = 3 if L >= 32768 else (5 if L >= 16384 else 10)
            for bname, be in BACKENDS:
                try:
                    fn, suf = sdpa_callable(be, q, k, v, True, hq, hkv)
                    if suf:  # time on pre-expanded K/V: the expansion is not the kernel's cost
                        r = hq // hkv
                        k2, v2 = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)
                    else:
                        k2, v2 = k, v
                    with sdpa_kernel(be):
                        us = time_us(lambda i: fn(k2, v2), 1, reps, 1)
                    rows.append(("prefill", name, L, bname + suf, us, flops / us * 1e-6, 0.0))
                    print(f"prefill,{name},{L},{bname}{suf},{us:.1f},{flops / us * 1e-6:.1f}", flush=True)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"prefill,{name},{L},{bname},FAILED,{type(e).__name__}: {str(e)[:120]}", flush=True)
            del q, k, v
            torch.cuda.empty_cache()
    for name, d, hq, hkv in SHAPES:
        for L in LENS:
            kv_bytes = 2.0 * L * hkv * d * 2
            copies = max(1, math.ceil(240e6 / kv_bytes))
            q = torch.randn(1, hq, 1, d, device=dev, dtype=torch.bfloat16)
            ks = [torch.randn(1, hkv, L, d, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            vs = [torch.randn(1, hkv, L, d, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            for bname, be in BACKENDS:
                try:
                    fn, suf = sdpa_callable(be, q, ks[0], vs[0], False, hq, hkv)
                    if suf:
                        r = hq // hkv
                        ks2 = [x.repeat_interleave(r, dim=1) for x in ks]
                        vs2 = [x.repeat_interleave(r, dim=1) for x in vs]
                    else:
                        ks2, vs2 = ks, vs
                    with sdpa_kernel(be):
                        us = time_us(lambda i: fn(ks2[i % copies], vs2[i % copies]), copies, 7,
                                     max(20, copies))
                    rows.append(("decode", name, L, bname + suf, us, 0.0, kv_bytes / us * 1e-3))
                    print(f"decode,{name},{L},{bname}{suf},{us:.2f},{kv_bytes / us * 1e-3:.1f} GB/s", flush=True)
                    try:
                        gus = graph_time_us(lambda i: fn(ks2[i % copies], vs2[i % copies]),
                                            max(20, copies), 7, be)
                        rows.append(("decode_graph", name, L, bname + suf, gus, 0.0, kv_bytes / gus * 1e-3))
                        print(f"decode_graph,{name},{L},{bname}{suf},{gus:.2f},{kv_bytes / gus * 1e-3:.1f} GB/s",
                              flush=True)
                    except Exception as e:  # noqa: BLE001 - a backend that cannot be captured
                        print(f"decode_graph,{name},{L},{bname},FAILED,{type(e).__name__}: {str(e)[:120]}",
                              flush=True)
                    del ks2, vs2
                except Exception as e:  # noqa: BLE001
                    print(f"decode,{name},{L},{bname},FAILED,{type(e).__name__}: {str(e)[:120]}", flush=True)
            del q, ks, vs
            torch.cuda.empty_cache()


def load_ours(path):
    rows = []
    with open(path) as f:
        for r in csv.reader(f):
            if not r or r[0].startswith("#") or r[0] == "kind":
                continue
            rows.append(dict(kind=r[0], shape=r[1], L=int(r[2]), variant=r[3], us=float(r[4]),
                             tflops=float(r[5]), gbps=float(r[6]), skip=float(r[7]),
                             lam=float(r[8]), quiet=float(r[9])))
    return rows


def table(torch_rows, ours):
    def t_get(kind, shape, L, prefix):
        for r in torch_rows:
            if r[0] == kind and r[1] == shape and r[2] == L and r[3].startswith(prefix):
                return r
        return None

    def o_get(kind, shape, L, variant, quiet=None):
        for r in ours:
            if (r["kind"] == kind and r["shape"] == shape and r["L"] == L and r["variant"] == variant
                    and (quiet is None or abs(r["quiet"] - quiet) < 1e-9)):
                return r
        return None

    fmt = lambda x, f="{:.0f}": "-" if x is None else f.format(x)  # noqa: E731
    print("\n=== prefill, causal, bf16, batch 1 (TFLOP/s; ratio = ours / torch) ===")
    # Ours: the wgmma kernel (ours_dense_*), the warp-specialised one (ours_ws_*), mma.sync; the
    # ratios use the best of ours on the row, named in 'best'.
    print(f"{'shape':14} {'L':>6} {'ours b64':>9} {'ours b128':>9} {'ws b64':>7} {'ws b128':>8} {'mma.sync':>9} {'flash':>7} {'cudnn':>7} {'best':>9} {'/flash':>7} {'/cudnn':>7}")
    ours_cols = (("ours_dense_b64", "wgmma64"), ("ours_dense_b128", "wgmma128"),
                 ("ours_ws_b64", "ws64"), ("ours_ws_b128", "ws128"), ("ours_mmasync_b64", "mma64"))
    for name, *_ in SHAPES:
        for L in LENS:
            got = [(o_get("prefill", name, L, v), label) for v, label in ours_cols]
            tf = [r["tflops"] if r else None for r, _ in got]
            cand = [(t, label) for t, (_, label) in zip(tf, got) if t]
            of, best = max(cand) if cand else (None, "-")
            fl, cu = t_get("prefill", name, L, "torch_flash"), t_get("prefill", name, L, "torch_cudnn")
            ff, cf = (fl[5] if fl else None), (cu[5] if cu else None)
            print(f"{name:14} {L:>6} {fmt(tf[0]):>9} {fmt(tf[1]):>9} {fmt(tf[2]):>7} {fmt(tf[3]):>8} {fmt(tf[4]):>9} "
                  f"{fmt(ff):>7}{'' if not fl or not fl[3].endswith('+rep') else '*'} {fmt(cf):>7}"
                  f"{'' if not cu or not cu[3].endswith('+rep') else '*'} {best:>9} "
                  f"{fmt(of / ff if of and ff else None, '{:.2f}'):>7} {fmt(of / cf if of and cf else None, '{:.2f}'):>7}")
    print("(* = K/V expanded with repeat_interleave outside the timed region)")
    def decode_table(title, torch_kind, ours_variant):
        print(f"\n=== {title} ===")
        print(f"{'shape':14} {'L':>6} {'ours us':>8} {'ours GB/s':>9} {'flash us':>9} {'cudnn us':>9} {'/flash':>7} {'/cudnn':>7}")
        for name, *_ in SHAPES:
            for L in LENS:
                o = o_get("decode", name, L, ours_variant)
                fl, cu = t_get(torch_kind, name, L, "torch_flash"), t_get(torch_kind, name, L, "torch_cudnn")
                ou = o["us"] if o else None
                print(f"{name:14} {L:>6} {fmt(ou, '{:.1f}'):>8} {fmt(o['gbps'] if o else None):>9} "
                      f"{fmt(fl[4] if fl else None, '{:.1f}'):>9} {fmt(cu[4] if cu else None, '{:.1f}'):>9} "
                      f"{fmt(fl[4] / ou if fl and ou else None, '{:.2f}x'):>7} {fmt(cu[4] / ou if cu and ou else None, '{:.2f}x'):>7}")

    decode_table("decode, one query, bf16 (us; GB/s of K+V)", "decode", "ours_dense")
    print("(decode ratios: torch time / our time, > 1 = ours faster)")
    decode_table("decode, one query, bf16, replayed as CUDA graphs (device time per call; us; GB/s of K+V)",
                 "decode_graph", "ours_dense_graph")
    print("\n=== decode, graph-replayed, against the memory floor (us; floor = a kernel that only streams the K+V bytes) ===")
    print(f"{'shape':14} {'L':>6} {'ours us':>8} {'floor us':>9} {'floor GB/s':>10} {'ours GB/s':>9} {'ours/floor':>10}")
    for name, *_ in SHAPES:
        for L in LENS:
            o, f = (o_get("decode", name, L, v) for v in ("ours_dense_graph", "read_floor_graph"))
            if not (o and f):
                continue
            print(f"{name:14} {L:>6} {o['us']:>8.1f} {f['us']:>9.1f} {f['gbps']:>10.0f} "
                  f"{o['gbps']:>9.0f} {f['us'] / o['us']:>9.2f}x")
    print("(ours/floor: floor time / our time; 1.00x = our decode costs what reading its bytes costs)")
    print("\n=== sparse prefill, lambda=1e-2 (sink + quiet tiles; speedup vs our dense on the same input) ===")
    # dense: our default dense prefill (warp-specialised on sm_90); lazyV / eagerV: the wgmma
    # sparse kernels; ws sparse: the warp-specialised sparse kernel (the default sparse prefill on
    # sm_90), all on the same input. 'best dense' = the faster of our two dense kernels.
    print(f"{'shape':14} {'L':>6} {'quiet':>5} {'skip%':>6} {'dense':>7} {'lazyV':>7} {'eagerV':>7} {'x lazy':>7} {'x eager':>7} {'vs cudnn':>8}"
          f" {'ws skip%':>8} {'ws sparse':>9} {'x ws':>6} {'ws/cudnn':>8}")
    for name, *_ in SHAPES:
        for L in (8192, 16384, 32768, 65536):
            for qf in (0.5, 0.7, 0.9):
                dn = o_get("prefill_sparse", name, L, "ours_dense_same_input", qf)
                wd = o_get("prefill_sparse", name, L, "ours_wgmma_dense_same_input", qf)
                lz = o_get("prefill_sparse", name, L, "ours_sparse_lazyV", qf)
                eg = o_get("prefill_sparse", name, L, "ours_sparse_eagerV", qf)
                ws = o_get("prefill_sparse", name, L, "ours_ws_sparse", qf)
                cu = t_get("prefill", name, L, "torch_cudnn")
                if not (dn and lz and eg):
                    continue
                best = min(lz["us"], eg["us"])
                best_dense = min(dn["us"], wd["us"]) if wd else dn["us"]
                print(f"{name:14} {L:>6} {qf:>5.1f} {100 * lz['skip']:>6.1f} {dn['tflops']:>7.0f} "
                      f"{lz['tflops']:>7.0f} {eg['tflops']:>7.0f} {dn['us'] / lz['us']:>7.2f} "
                      f"{dn['us'] / eg['us']:>7.2f} {fmt(cu[4] / best if cu else None, '{:.2f}x'):>8} "
                      f"{fmt(100 * ws['skip'] if ws else None, '{:.1f}'):>8} {fmt(ws['tflops'] if ws else None):>9} "
                      f"{fmt(best_dense / ws['us'] if ws else None, '{:.2f}'):>6} "
                      f"{fmt(cu[4] / ws['us'] if cu and ws else None, '{:.2f}x'):>8}")
    print("(dense/lazyV/eagerV/ws sparse columns: effective TFLOP/s = dense causal FLOPs / time; "
          "'vs cudnn' = cuDNN dense time / our best wgmma sparse time; 'x ws' = our best dense time "
          "/ ws sparse time; 'ws/cudnn' = cuDNN dense time / ws sparse time)")
    sweep = [r for r in ours if r["kind"] == "skip_sweep"]
    if sweep:
        print("\n=== sparse prefill against the skipped fraction (lambda=1e-2, quiet 0..1, block 64; "
              "our dense and ws sparse alternating on one input, cuDNN dense at the same L) ===")
        print(f"{'shape':14} {'L':>6} {'quiet':>5} {'skip%':>6} {'dense us':>9} {'sparse us':>10} "
              f"{'x ours':>7} {'cudnn us':>9} {'x cudnn':>8}")
        for name, *_ in SHAPES:
            Ls = sorted({r["L"] for r in sweep if r["shape"] == name})
            for L in Ls:
                cu = t_get("prefill", name, L, "torch_cudnn")
                for qf in sorted({r["quiet"] for r in sweep if r["shape"] == name and r["L"] == L}):
                    dn = o_get("skip_sweep", name, L, "dense", qf)
                    sp = o_get("skip_sweep", name, L, "ws_sparse", qf)
                    if not (dn and sp):
                        continue
                    print(f"{name:14} {L:>6} {qf:>5.2f} {100 * sp['skip']:>6.1f} {dn['us']:>9.1f} "
                          f"{sp['us']:>10.1f} {dn['us'] / sp['us']:>6.2f}x {fmt(cu[4] if cu else None, '{:.1f}'):>9} "
                          f"{fmt(cu[4] / sp['us'] if cu else None, '{:.2f}x'):>8}")
        print("('x ours' = our dense time / sparse time; 'x cudnn' = cuDNN dense time / our sparse time)")
    print("\n=== sparse decode, lambda=1e-2 (speedup vs our dense decode on the same input) ===")
    print(f"{'shape':14} {'L':>6} {'quiet':>5} {'skip%':>6} {'dense us':>9} {'sparse us':>9} {'speedup':>8}")
    for name, *_ in SHAPES:
        for L in (16384, 65536):
            for qf in (0.5, 0.7, 0.9):
                dn = [r for r in ours if r["kind"] == "decode_sparse" and r["shape"] == name and r["L"] == L
                      and abs(r["quiet"] - qf) < 1e-9 and r["variant"] == "ours_dense"]
                sp = [r for r in ours if r["kind"] == "decode_sparse" and r["shape"] == name and r["L"] == L
                      and abs(r["quiet"] - qf) < 1e-9 and r["variant"] == "ours_sparse"]
                dg = [r for r in ours if r["kind"] == "decode_sparse" and r["shape"] == name and r["L"] == L
                      and abs(r["quiet"] - qf) < 1e-9 and r["variant"] == "ours_dense_graph"]
                sg = [r for r in ours if r["kind"] == "decode_sparse" and r["shape"] == name and r["L"] == L
                      and abs(r["quiet"] - qf) < 1e-9 and r["variant"] == "ours_sparse_graph"]
                if dn and sp:
                    graph = (f"   graph-replayed: {dg[0]['us']:.1f} / {sg[0]['us']:.1f} us = "
                             f"{dg[0]['us'] / sg[0]['us']:.2f}x" if dg and sg else "")
                    print(f"{name:14} {L:>6} {qf:>5.1f} {100 * sp[0]['skip']:>6.1f} {dn[0]['us']:>9.1f} "
                          f"{sp[0]['us']:>9.1f} {dn[0]['us'] / sp[0]['us']:>8.2f}{graph}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", help="CSV written by bench_attention")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--decode-only", action="store_true", help="the decode rows alone")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP: torch_sdpa_bench: no CUDA device")
        return 0
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    rows = []
    bench(rows, args.quick, args.decode_only)
    if args.ours:
        table(rows, load_ours(args.ours))
    return 0


if __name__ == "__main__":
    sys.exit(main())
