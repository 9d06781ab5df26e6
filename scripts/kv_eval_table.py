#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tables (Markdown) and a plot (SVG, standard library only) from tests/gpu/run_kv_eval.sh's
JSON files: streaming perplexity per segment for every cache policy against the sliding window
with re-computation, int8/int4 KV against unquantized KV, passkey accuracy vs window and sinks.

  python3 scripts/kv_eval_table.py OUT_DIR [--svg FILE]
"""
import argparse
import json
import math
import os
import sys


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def stream_rows(d):
    rows = []
    dense = load(os.path.join(d, "dense.json"))
    if dense:
        rows.append(("dense (full cache)", "-", dense))
    for w in (256, 1024):
        ref = load(os.path.join(d, f"w{w}_recompute.json"))
        if ref:
            rows.append((f"W={w} recompute (reference)", str(w), ref))
        for s in (0, 1, 2, 4, 8):
            r = load(os.path.join(d, f"w{w}_s{s}.json"))
            if r:
                rows.append((f"W={w} window + {s} sinks" if s else f"W={w} window only", str(w), r))
    return rows


def reference_for(rows, w):
    for name, ww, r in rows:
        if ww == w and "recompute" in name:
            return r
    return None


def print_stream(rows):
    if not rows:
        print("no streaming results")
        return
    first = rows[0][2]
    print(f"Streaming perplexity, {first['tokens']} tokens, every {first.get('stride', 1)}th token "
          f"scored ({first['scored']} tokens); per-segment columns start at the token shown")
    print()
    segs = [s["begin"] for s in first["segments"]]
    head = "| setting | backend | ppl | vs reference | " + " | ".join(f"{b // 1024}K" if b % 1024 == 0 else str(b) for b in segs) + " |"
    print(head)
    print("|" + "---|" * (4 + len(segs)))
    for name, w, r in rows:
        ref = reference_for(rows, w) if w != "-" else None
        rel = f"{(r['perplexity'] / ref['perplexity'] - 1) * 100:+.1f} %" if ref and ref is not r else "-"
        cells = " | ".join(f"{s['perplexity']:.2f}" for s in r["segments"])
        be = "CPU f32" if r.get("backend") == "cpu" else "GPU bf16"
        print(f"| {name} | {be} | {r['perplexity']:.3f} | {rel} | {cells} |")
    print()


def print_quant(d):
    rows = []
    for kv in ("int8", "int4"):
        for prot in ("off", "on"):
            r = load(os.path.join(d, f"quant_{kv}_protect_{prot}.json"))
            if r:
                rows.append((kv, prot, r))
    if not rows:
        print("no KV quantization results")
        return
    r0 = rows[0][2]
    print(f"KV quantization vs unquantized KV under the same policy ({r0['settings'].split(',')[0]}), "
          f"{r0['tokens']} tokens, {r0['scored']} scored")
    print()
    print("| KV | sinks protected | backend | ppl | ppl unquantized | ppl change | mean KL | top-1 | bytes/token |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for kv, prot, r in rows:
        print(f"| {kv} | {prot} | {r['backend']} | {r['perplexity']:.3f} | {r['perplexity_unquantized']:.3f} | "
              f"{r['ppl_delta_pct']:+.2f} % | {r['kl_mean']:.2e} | {100 * r['top1_agreement']:.2f} % | "
              f"{r['cache']['bytes_per_token']} (vs {r['cache_unquantized']['bytes_per_token']}) |")
    print()


def print_passkey(d):
    names = [("dense", "passkey_dense")] + [
        (f"W={w} S={s}", f"passkey_w{w}_s{s}") for w, s in ((256, 0), (256, 4), (1024, 0), (1024, 4), (2048, 4))]
    got = [(n, load(os.path.join(d, f + ".json"))) for n, f in names]
    got = [(n, r) for n, r in got if r]
    if not got:
        print("no passkey results")
        return
    lengths = sorted({c["length"] for _, r in got for c in r["cells"]})
    print("Passkey retrieval (correct / tasks per filler length; depths 0, 0.25, 0.5, 0.75, 1)")
    print()
    print("| cache | " + " | ".join(f"{l}" for l in lengths) + " | all |")
    print("|---|" + "---:|" * (len(lengths) + 1))
    for n, r in got:
        cells = []
        for l in lengths:
            c = [x for x in r["cells"] if x["length"] == l]
            cells.append(f"{sum(x['correct'] for x in c)}/{sum(x['total'] for x in c)}")
        print(f"| {n} | " + " | ".join(cells) + f" | {round(r['accuracy'] * r['tasks'])}/{r['tasks']} |")
    print()


def svg_plot(rows, path):
    series = [(n, [(s["begin"] + s["end"]) / 2 for s in r["segments"]], [s["perplexity"] for s in r["segments"]])
              for n, _, r in rows]
    if not series:
        return
    W, H, L, R, T, B = 900, 520, 70, 290, 40, 50
    xs = [x for _, xx, _ in series for x in xx]
    ys = [y for _, _, yy in series for y in yy if y > 0]
    x0, x1 = 0, max(xs) * 1.02
    y0, y1 = math.log10(min(ys) * 0.9), math.log10(max(ys) * 1.1)

    def px(x):
        return L + (x - x0) / (x1 - x0) * (W - L - R)

    def py(y):
        return T + (1 - (math.log10(y) - y0) / (y1 - y0)) * (H - T - B)

    colors = ["#000000", "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a",
              "#d62728", "#ff9896", "#9467bd", "#c5b0d5", "#8c564b", "#c49c94"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="22" font-size="14">SmolLM2-135M streaming perplexity per segment (log scale)</text>']
    step = 16384 if x1 > 65536 else 4096 if x1 > 8192 else max(64, int(x1) // 8)
    for k in range(0, int(x1) + 1, step):
        out.append(f'<line x1="{px(k):.1f}" y1="{T}" x2="{px(k):.1f}" y2="{H - B}" stroke="#eee"/>')
        out.append(f'<text x="{px(k):.1f}" y="{H - B + 16}" text-anchor="middle">{k // 1024 if k % 1024 == 0 else k}{"K" if k % 1024 == 0 and k else ""}</text>')
    for v in (2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000):
        if y0 <= math.log10(v) <= y1:
            out.append(f'<line x1="{L}" y1="{py(v):.1f}" x2="{W - R}" y2="{py(v):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{L - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v}</text>')
    out.append(f'<line x1="{px(8192):.1f}" y1="{T}" x2="{px(8192):.1f}" y2="{H - B}" stroke="#999" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{px(8192) + 4:.1f}" y="{T + 12}" fill="#666">trained context 8K</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">token position in the stream</text>')
    for i, (n, xx, yy) in enumerate(series):
        c = colors[i % len(colors)]
        dash = ' stroke-dasharray="6 3"' if "recompute" in n else ""
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xx, yy) if y > 0)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="1.8"{dash}/>')
        ly = T + 14 + i * 18
        out.append(f'<line x1="{W - R + 12}" y1="{ly - 4}" x2="{W - R + 36}" y2="{ly - 4}" stroke="{c}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{W - R + 42}" y="{ly}">{n}</text>')
    out.append("</svg>")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)
    print(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--svg")
    a = ap.parse_args()
    if not os.path.isdir(a.dir):
        sys.exit(f"{a.dir}: not a directory")
    rows = stream_rows(a.dir)
    print_stream(rows)
    print_quant(a.dir)
    print_passkey(a.dir)
    if a.svg and rows:
        svg_plot(rows, a.svg)


if __name__ == "__main__":
    main()
