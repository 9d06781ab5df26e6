#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""HF transformers end-to-end speed on the same GPU, model and shapes as tests/gpu/bench_e2e.cpp:
prefill tokens/s for the prompt (default 2048 tokens) and greedy decode tokens/s (default 256
new tokens). bf16 weights, SDPA attention; the model is loaded from the same GGUF file
(transformers dequantizes it). Decode runs with the static cache when available, and with the
default dynamic cache. Median of --reps runs after one warm-up.

    hf_e2e_bench.py [--model FILE.gguf] [--ids FILE] [--prompt N] [--decode N] [--reps N]
                    [--csv FILE]

--ids reads the prompt token ids written by `bench_e2e --ids` (so both engines see the same
prompt). Prints "SKIP: <reason>" and exits 0 without torch/CUDA/transformers/gguf or the model.
"""
import argparse
import os
import statistics
import sys
import time


def default_model():
    if os.environ.get("SINKSCOPE_MODEL"):
        return os.environ["SINKSCOPE_MODEL"]
    base = os.environ.get("SINKSCOPE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sinkscope")
    return os.path.join(base, "SmolLM2-135M-Instruct.Q4_1.gguf")


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--ids", default="")
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--decode", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--csv", default="")
    args = ap.parse_args()

    try:
        import torch
    except ImportError as e:
        skip(f"torch not importable ({e})")
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    try:
        import transformers
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        skip(f"transformers not importable ({e})")
    try:
        import gguf  # noqa: F401  (transformers needs it to read GGUF)
    except ImportError as e:
        skip(f"the 'gguf' package is missing, transformers cannot load GGUF ({e})")
    if not os.path.exists(args.model):
        skip(f"model not found at {args.model} (set SINKSCOPE_MODEL)")

    d, f = os.path.split(os.path.abspath(args.model))
    t0 = time.perf_counter()
    kw = dict(gguf_file=f)
    try:
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16,
                                                     attn_implementation="sdpa", **kw)
    except TypeError:  # older transformers: torch_dtype
        model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.bfloat16,
                                                     attn_implementation="sdpa", **kw)
    model = model.to(device="cuda", dtype=torch.bfloat16).eval()  # bf16 whatever the kwarg did
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}; loaded {f} in {time.perf_counter() - t0:.1f} s")

    if args.ids:
        with open(args.ids) as fh:
            ids = [int(x) for x in fh.read().split()]
        args.prompt = len(ids)
    else:
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(100, model.config.vocab_size - 100, (args.prompt,), generator=g).tolist()
    input_ids = torch.tensor([ids], device="cuda")
    mask = torch.ones_like(input_ids)

    def timed(fn):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t, out

    @torch.inference_mode()
    def prefill():
        try:
            return model(input_ids=input_ids, attention_mask=mask, use_cache=True, logits_to_keep=1)
        except TypeError:
            return model(input_ids=input_ids, attention_mask=mask, use_cache=True)

    @torch.inference_mode()
    def generate(n, cache):
        kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, attention_mask=mask,
                  pad_token_id=model.config.eos_token_id)
        if cache:
            kw["cache_implementation"] = cache
        return model.generate(input_ids, **kw)

    rows = []
    timed(prefill)  # warm-up
    ts = [timed(prefill)[0] for _ in range(args.reps)]
    t_pre = statistics.median(ts)
    rows.append(("hf prefill (forward)", args.prompt / t_pre, 1e3 * t_pre, float("nan"), float("nan")))

    for cache in ("static", None):
        name = f"hf generate ({cache or 'dynamic'} cache)"
        try:
            timed(lambda: generate(args.decode, cache))  # warm-up (and any compilation)
            t_first = statistics.median(timed(lambda: generate(1, cache))[0] for _ in range(args.reps))
            t_all = []
            for _ in range(args.reps):
                t, out = timed(lambda: generate(args.decode, cache))
                assert out.shape[1] == args.prompt + args.decode, out.shape
                t_all.append(t)
            t_dec = max(statistics.median(t_all) - t_first, 1e-9)
            tps = (args.decode - 1) / t_dec
            rows.append((name, float("nan"), 1e3 * t_first, tps, 1e3 / tps))
        except Exception as e:  # a cache kind this version lacks: say so, keep going
            print(f"{name}: not measured ({type(e).__name__}: {str(e)[:200]})")

    print(f"\nprompt {args.prompt} tokens, greedy decode {args.decode} tokens, median of {args.reps}")
    print("| engine                         | prefill tok/s | prefill ms | decode tok/s | decode ms/tok |")
    print("|--------------------------------|---------------|------------|--------------|---------------|")
    for name, p, pm, dtps, dms in rows:
        ps = f"{p:13.0f}" if p == p else f"{'-':>13}"
        ds = f"{dtps:12.1f}" if dtps == dtps else f"{'-':>12}"
        dm = f"{dms:13.3f}" if dms == dms else f"{'-':>13}"
        print(f"| {name:30} | {ps} | {pm:10.2f} | {ds} | {dm} |")
    print("(generate rows: 'prefill ms' = generate(1 token); decode = (generate(N) - generate(1)) / (N-1))")
    if args.csv:
        with open(args.csv, "w") as fh:
            fh.write("engine,prompt,decode,prefill_tok_s,decode_tok_s\n")
            for name, p, _, dtps, _ in rows:
                fh.write(f"{name},{args.prompt},{args.decode},{p},{dtps}\n")


if __name__ == "__main__":
    main()
