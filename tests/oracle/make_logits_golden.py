#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Independent oracle for the default model: HF transformers logits -> tests/golden/logits.

Run with the oracle virtual environment (torch, transformers >= 5, gguf, accelerate):

    /opt/oracle-venv/bin/python tests/oracle/make_logits_golden.py [MODEL.gguf] [--out DIR]

The model defaults to the cache path used by scripts/setup.sh and engine/util/paths.h.
HF dequantizes the GGUF weights to float32 itself, so these logits are an independent
float32 reference for the C++ engine (which dequantizes with its own code).

Outputs (little-endian):
  manifest.json  ids, positions, argmax, greedy continuations, versions, the .bin layout
  logits.bin     float32 rows of n_vocab logits, concatenated in manifest order
"""
import argparse
import datetime
import hashlib
import json
import os
import pathlib
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CONTINUATION = 32
N_SPREAD_POSITIONS = 10

SHORT_PROMPT = "The old lighthouse keeper counted the passing ships every evening"

CHAT_MESSAGES = [
    {"role": "system",
     "content": "You are a concise assistant who answers questions about cooking and gardening."},
    {"role": "user",
     "content": "My basil plant keeps wilting on the windowsill even though I water it daily. "
                "What are the two most likely causes, and how should I check for each?"},
]

# Original text written for this oracle: prose, a list, C++ and Python code, numbers. Varied on
# purpose so the long prompt exercises many token kinds and attention over ~1k positions.
LONG_PROMPT = """Notes from a small workshop on keeping old machines alive

When the lab inherited the spectrometer, nobody had switched it on for nine years. The cabinet
smelled of dust and warm plastic, and the manual was a binder with coffee rings on every third
page. Marta, who had the steadiest hands, volunteered to open the power supply first. She found
two swollen capacitors, a fuse that had been replaced with a bent paper clip, and a note taped
inside the lid that said only: "Do not trust channel B."

We spent the first afternoon making an inventory. It is tempting to start repairing at once, but
an inventory tells you what you are actually dealing with:

1. Mains input, filtered, with a relay that clicks twice on start-up.
2. A linear supply for the detector, rated at plus and minus fifteen volts.
3. A switching supply for the stepper motors, probably added later by someone in a hurry.
4. The controller board, with an 8-bit microcontroller, 32 kilobytes of EEPROM and a serial port.
5. Channel A and channel B amplifiers, identical on paper and very different in practice.

By the evening we could power the controller alone. The serial port answered at 9600 baud with a
prompt that read "SPX v2.3 READY", and typing HELP returned a list of forty-one commands, most of
them undocumented. Jonas wrote a tiny logger so that we would never again lose a session:

```python
import serial, time

def log_session(port="/dev/ttyUSB0", path="spx.log"):
    with serial.Serial(port, 9600, timeout=0.5) as link, open(path, "a") as out:
        while True:
            line = link.readline().decode("ascii", errors="replace").rstrip()
            if line:
                stamp = time.strftime("%H:%M:%S")
                out.write(f"{stamp} {line}\\n")
                out.flush()
```

The second day belonged to channel B. Its amplifier drifted by almost two percent per hour, which
explained the note in the lid. We replaced the reference diode, re-seated the op-amps, and then
measured again with the cabinet closed, because the drift changed whenever we opened the door and
let cooler air reach the board. After the repair the drift fell to 0.04 percent per hour, which is
better than the original specification and good enough for every experiment we had planned.

A lesson worth repeating: measure before and after every change, and write the numbers down at the
moment you read them. Memory rounds numbers in flattering directions. We kept a table on the
whiteboard with the date, the channel, the temperature inside the cabinet, and the drift. Twelve
rows later the pattern was obvious, and the pattern was the thing we needed, not any single value.

The stepper motors were a different kind of problem. The grating turned smoothly in one direction
and stuttered in the other. We suspected the mechanics, then the driver chips, and finally found
that the firmware accelerated too aggressively when reversing. The fix was a small change to the
ramp table. Since the controller had no compiler we could trust, Marta rewrote the ramp generator
on a laptop and sent the new table over the serial port:

```cpp
#include <array>
#include <cmath>
#include <cstdint>

// Builds a smooth start ramp: delays between steps shrink along a raised cosine.
std::array<uint16_t, 64> make_ramp(uint16_t slow_us, uint16_t fast_us) {
  std::array<uint16_t, 64> ramp{};
  for (std::size_t i = 0; i < ramp.size(); ++i) {
    const double t = static_cast<double>(i) / (ramp.size() - 1);
    const double w = 0.5 - 0.5 * std::cos(t * 3.14159265358979);
    ramp[i] = static_cast<uint16_t>(slow_us + (fast_us - slow_us) * w);
  }
  return ramp;
}
```

With the new ramp the grating reversed without a single missed step across five hundred trials.
We celebrated with terrible vending-machine tea and then, being careful people, ran another five
hundred trials the next morning with the room three degrees colder. Still nothing missed.

What surprised the students most was how much of the work was not repair at all. It was reading:
the binder, the schematics, the forty-one commands, the faint pencil marks in the margins where a
previous owner had corrected a resistor value. It was also patience, the willingness to change one
thing at a time even when five things looked suspicious. When two changes are made together and
the fault disappears, you have learned almost nothing; when one change is made and the fault
disappears, you have learned where the fault lived.

By the end of the week the spectrometer produced a clean sodium doublet at 589.0 and 589.6
nanometres, separated as sharply as the datasheet promised. We printed the trace, pinned it above
the bench, and added one line to the note in the lid: "Channel B is fine now. Measure anyway."

Questions for the next workshop:
- Which of the undocumented commands change persistent settings in the EEPROM?
- Can the logger detect a dropped character and ask the controller to repeat a line?
- How long do the new capacitors need to age before the supply stops drifting?
- Should the ramp table depend on temperature, or is one table enough for the whole year?

The machine is not new, and it will never be fast, but it is understood now, and an understood
machine is worth more than a mysterious one that happens to work on good days."""


def default_model_path() -> pathlib.Path:
    if os.environ.get("SINKSCOPE_MODEL"):
        return pathlib.Path(os.environ["SINKSCOPE_MODEL"])
    if os.environ.get("SINKSCOPE_CACHE_DIR"):
        base = pathlib.Path(os.environ["SINKSCOPE_CACHE_DIR"])
    elif os.environ.get("XDG_CACHE_HOME"):
        base = pathlib.Path(os.environ["XDG_CACHE_HOME"]) / "sinkscope"
    else:
        base = pathlib.Path.home() / ".cache" / "sinkscope"
    return base / MODEL_FILE


def sha256_file(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def spread_positions(n: int, k: int) -> list:
    """k distinct positions spread evenly over [0, n), always including 0 and n - 1."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default=str(default_model_path()), help="GGUF model file")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).resolve().parents[1] / "golden" / "logits"),
                    help="output folder (default: tests/golden/logits)")
    args = ap.parse_args()

    model_path = pathlib.Path(args.model).resolve()
    if not model_path.is_file():
        print(f"error: model not found: {model_path} (run scripts/setup.sh)", file=sys.stderr)
        return 1
    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    torch.set_grad_enabled(False)
    tok = AutoTokenizer.from_pretrained(str(model_path.parent), gguf_file=model_path.name)
    model = AutoModelForCausalLM.from_pretrained(str(model_path.parent), gguf_file=model_path.name,
                                                 dtype=torch.float32)
    model.eval()
    n_vocab = model.config.vocab_size

    chat_text = tok.apply_chat_template(CHAT_MESSAGES, tokenize=False, add_generation_prompt=True)
    cases = [
        ("short", SHORT_PROMPT, None),
        ("chat", chat_text, CHAT_MESSAGES),
        ("long", LONG_PROMPT, None),
    ]

    rows = []
    prompts = []
    row_offset = 0
    for name, text, messages in cases:
        ids = tok(text, add_special_tokens=True)["input_ids"]
        if name == "long" and len(ids) < 1000:
            print(f"error: long prompt has only {len(ids)} tokens", file=sys.stderr)
            return 1
        input_ids = torch.tensor([ids], dtype=torch.long)
        logits = model(input_ids=input_ids).logits[0].to(torch.float32)  # (n, n_vocab)
        argmax = logits.argmax(dim=-1).tolist()
        positions = list(range(len(ids))) if name == "short" else spread_positions(len(ids), N_SPREAD_POSITIONS)
        for p in positions:
            rows.append(logits[p].numpy().astype("<f4"))

        gen_cfg = GenerationConfig(do_sample=False, max_new_tokens=N_CONTINUATION,
                                   min_new_tokens=N_CONTINUATION, eos_token_id=None,
                                   pad_token_id=tok.eos_token_id if tok.eos_token_id is not None else 0)
        out = model.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                             generation_config=gen_cfg)
        continuation = out[0, len(ids):].tolist()
        if len(continuation) != N_CONTINUATION:
            print(f"error: {name}: generate returned {len(continuation)} tokens", file=sys.stderr)
            return 1
        # Self-check: a full forward over prompt + continuation must pick every continuation token
        # as its argmax (greedy decoding is just argmax, with no EOS suppression in play).
        full = torch.tensor([ids + continuation], dtype=torch.long)
        full_argmax = model(input_ids=full).logits[0].argmax(dim=-1).tolist()
        consistent = full_argmax[len(ids) - 1:len(ids) + N_CONTINUATION - 1] == continuation

        last = logits[-1]
        prompts.append({
            "name": name,
            "text": text,
            "messages": messages,
            "n_tokens": len(ids),
            "ids": ids,
            "argmax": argmax,
            "logits_positions": positions,
            "logits_row_offset": row_offset,
            "continuation": continuation,
            "continuation_text": tok.decode(continuation),
            "continuation_consistent_with_full_forward": bool(consistent),
            "hf_last_max_logit": float(last.max()),
            "hf_last_argmax": int(last.argmax()),
            "hf_max_logit_over_stored_rows": float(max(float(logits[p].max()) for p in positions)),
        })
        row_offset += len(positions)
        print(f"{name}: {len(ids)} tokens, {len(positions)} logits rows, "
              f"continuation {tok.decode(continuation)!r}, consistent={consistent}", file=sys.stderr)

    data = np.stack(rows).astype("<f4")
    bin_path = out_dir / "logits.bin"
    data.tofile(bin_path)

    manifest = {
        "format_version": 1,
        "description": "HF transformers float32 reference logits for the default SmolLM2 GGUF model",
        "generator": "tests/oracle/make_logits_golden.py",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "model": {
            "file": model_path.name,
            "sha256": sha256_file(model_path),
            "architecture": model.config.model_type,
            "n_vocab": n_vocab,
            "n_layer": model.config.num_hidden_layers,
        },
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "numpy": np.__version__,
        },
        "settings": {
            "dtype": "float32",
            "tokenization": "HF tokenizer from the GGUF, add_special_tokens=True; the C++ test feeds these ids",
            "continuation": f"{N_CONTINUATION} greedy tokens (HF generate, do_sample=False, EOS never stops it)",
        },
        "logits_file": {
            "path": bin_path.name,
            "dtype": "float32",
            "byte_order": "little",
            "layout": "rows of n_vocab float32; prompts in manifest order; within a prompt one row per "
                      "entry of logits_positions in that order; prompt p's rows start at row "
                      "logits_row_offset, i.e. byte (logits_row_offset + i) * n_vocab * 4 for its i-th position",
            "shape": [int(data.shape[0]), int(data.shape[1])],
            "sha256": sha256_file(bin_path),
        },
        "prompts": prompts,
    }
    with open(out_dir / "manifest.json", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {bin_path} ({bin_path.stat().st_size} bytes) and manifest.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
