#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws the Pareto plot of a `sinkscope-cli sweep --json-out` document as an SVG (no
dependencies beyond the standard library, so the README figure can be rebuilt anywhere).

Two panels: prefill sparsity vs mean KL to the dense baseline, and peak KV memory vs mean KL.
KL is on a log axis. Filled markers passed every gate, open ones failed one; the front of each
panel (as the sweep marked it) is connected and its points labelled.

Usage: plot_sweep.py SWEEP.json OUT.svg [--title TEXT]
"""
import argparse
import html
import json
import math
import sys

W, H = 1040, 430
PANEL_W, PANEL_H = 400, 300
MARGIN_L, MARGIN_T = 70, 60


def nice_ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    t = math.floor(lo / step) * step
    out = []
    while t <= hi + 1e-12:
        if t >= lo - 1e-12:
            out.append(round(t, 10))
        t += step
    return out


def panel(svg, x0, y0, pts, xkey, xlabel, xscale, front_key, title):
    xs = [p[xkey] for p in pts]
    ys = [p["kl"] for p in pts]
    xlo, xhi = min(xs), max(xs)
    pad = (xhi - xlo) * 0.08 or 1.0
    xlo, xhi = max(0.0, xlo - pad), xhi + pad
    ylo = math.floor(math.log10(min(ys)))
    yhi = math.ceil(math.log10(max(ys)))
    if yhi == ylo:
        yhi += 1

    def X(v):
        return x0 + (v - xlo) / (xhi - xlo) * PANEL_W

    def Y(v):
        return y0 + PANEL_H - (math.log10(v) - ylo) / (yhi - ylo) * PANEL_H

    svg.append(f'<text x="{x0 + PANEL_W / 2}" y="{y0 - 12}" text-anchor="middle" '
               f'font-size="14" font-weight="bold">{html.escape(title)}</text>')
    svg.append(f'<rect x="{x0}" y="{y0}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#444"/>')
    for t in nice_ticks(xlo, xhi):
        svg.append(f'<line x1="{X(t):.1f}" y1="{y0}" x2="{X(t):.1f}" y2="{y0 + PANEL_H}" stroke="#eee"/>')
        svg.append(f'<text x="{X(t):.1f}" y="{y0 + PANEL_H + 16}" text-anchor="middle" font-size="11">'
                   f'{t * xscale:g}</text>')
    for e in range(ylo, yhi + 1):
        svg.append(f'<line x1="{x0}" y1="{Y(10 ** e):.1f}" x2="{x0 + PANEL_W}" y2="{Y(10 ** e):.1f}" stroke="#eee"/>')
        svg.append(f'<text x="{x0 - 6}" y="{Y(10 ** e) + 4:.1f}" text-anchor="end" font-size="11">1e{e}</text>')
    svg.append(f'<text x="{x0 + PANEL_W / 2}" y="{y0 + PANEL_H + 36}" text-anchor="middle" font-size="12">'
               f'{html.escape(xlabel)}</text>')
    svg.append(f'<text x="{x0 - 50}" y="{y0 + PANEL_H / 2}" text-anchor="middle" font-size="12" '
               f'transform="rotate(-90 {x0 - 50} {y0 + PANEL_H / 2})">mean KL to dense (nats)</text>')
    front = sorted([p for p in pts if p[front_key]], key=lambda p: p[xkey])
    if len(front) > 1:
        path = " ".join(f"{X(p[xkey]):.1f},{Y(p['kl']):.1f}" for p in front)
        svg.append(f'<polyline points="{path}" fill="none" stroke="#d62728" stroke-width="1.5"/>')
    for p in pts:
        colour = "#1f77b4" if p["passed"] else "#ff7f0e"
        fill = colour if p["passed"] else "white"
        r = 5 if p[front_key] else 3.5
        svg.append(f'<circle cx="{X(p[xkey]):.1f}" cy="{Y(p["kl"]):.1f}" r="{r}" fill="{fill}" '
                   f'stroke="{colour}" stroke-width="1.5"><title>{html.escape(p["label"])}</title></circle>')
    for p in front:
        svg.append(f'<text x="{X(p[xkey]) + 7:.1f}" y="{Y(p["kl"]) - 6:.1f}" font-size="9" fill="#333">'
                   f'{html.escape(p["short"])}</text>')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep")
    ap.add_argument("out")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    with open(a.sweep, encoding="utf-8") as f:
        doc = json.load(f)
    pts = []
    for p in doc.get("points", []):
        r = p.get("results") or {}
        if not p.get("valid") or r.get("kl_mean") is None:
            continue
        s = p.get("settings", {})
        short = " ".join(f"{k[0]}{v}" if k != "kv" else v for k, v in s.items())
        pts.append({"label": p["label"], "short": short, "passed": bool(p.get("passed")),
                    "kl": max(float(r["kl_mean"]), 1e-7),
                    "sparsity": float(r.get("sparsity_prefill") or 0.0),
                    "mem": float(r.get("peak_kv_mib") or 0.0),
                    "front_s": bool(p.get("pareto_sparsity")), "front_m": bool(p.get("pareto_memory"))})
    if not pts:
        sys.exit("plot_sweep: no valid points with results in " + a.sweep)
    title = a.title or f"sweep: {len(pts)} points, {doc.get('dataset', '')}"
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif"><rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="15">{html.escape(title)}</text>']
    panel(svg, MARGIN_L, MARGIN_T, pts, "sparsity", "prefill sparsity (% of visible KV tiles skipped)", 100,
          "front_s", "sparsity vs quality")
    panel(svg, MARGIN_L + PANEL_W + 110, MARGIN_T, pts, "mem", "peak KV cache (MiB)", 1, "front_m",
          "KV memory vs quality")
    svg.append(f'<text x="{MARGIN_L}" y="{H - 10}" font-size="11" fill="#555">filled: passed every gate; '
               f'open: failed one; red line: Pareto front (labels: l=lambda, w=window, s=sinks, kv)</text>')
    svg.append("</svg>")
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(svg) + "\n")
    print(f"plot_sweep: {len(pts)} points -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
