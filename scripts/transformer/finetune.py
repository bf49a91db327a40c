#!/usr/bin/env python3
"""Fine-tune all-MiniLM-L6-v2 end to end as an injection classifier (issue 23).

Reads the full corpus (`portcullis corpus build --harvest corpus/harvest --payloads
DIR --out FULL`), takes training windows from its **train split only**, and trains
the whole encoder plus a linear head on the L2-normalized mean-pooled embedding —
the exact form the embedding stage runs (mean pooling, normalization, a linear head),
so the fine-tuned encoder drops into `[embedding] models_dir` unchanged, and
`portcullis train-embedding` fits the stage's own head on its embeddings.

Windows (at most --max-tokens tokens with [CLS] and [SEP]):
- malicious: a record whose payload (the `parent_id`'s text: a payload of
  corpus/payloads*/ or an original corpus record) can be found in it; the window
  holds the payload's start at a seeded random offset, with the carrier's real text
  around it. For a tool, the string (description, a schema field) that holds it.
- benign: a seeded random window of a benign record (harvested real text, results,
  tool strings; benign look-alikes placed into real carriers; the project's own).
Classes are balanced by sampling. Everything is seeded; torch runs single-process.

Writes OUT/model.safetensors (the encoder, same tensor names as the input), the
tokenizer and config files copied, and OUT/finetune.json (data hash, counts,
parameters, loss curve, wall time).

  python finetune.py --corpus target/corpus/full-next.jsonl --base models/all-MiniLM-L6-v2 \
      --payloads corpus/payloads corpus/payloads-next --out target/minilm-ft
"""
import argparse
import glob
import json
import os
import random
import shutil
import time

import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import BertConfig, BertModel

from common import sha256


def strings_of(value):
    """Every string of a JSON value, keys included (a payload may sit in either)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_of(v)


def texts_of(record):
    if "text" in record:
        return [record["text"]]
    return [s for s in strings_of(record["tool"]) if len(s.strip()) >= 3]


def window(tok, text, start_char, rng, max_tokens):
    """Token window of `text` (content tokens only) holding `start_char` when it is
    given, else anywhere; returned as the window's text."""
    enc = tok.encode(text, add_special_tokens=False)
    offs = enc.offsets
    n = len(offs)
    room = max_tokens - 2
    if n <= room:
        return text
    if start_char is None:
        first = rng.randrange(0, n - room + 1)
    else:
        at = next((i for i, (s, e) in enumerate(offs) if e > start_char), n - 1)
        lo, hi = max(0, at - room + 16), min(at, n - room)
        first = rng.randint(lo, hi) if lo <= hi else max(0, min(at, n - room))
    last = min(n, first + room) - 1
    return text[offs[first][0] : offs[last][1]]


def load_examples(args, tok, rng):
    payload_text = {}
    for d in args.payloads:
        for f in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
            with open(f) as fh:
                for line in fh:
                    p = json.loads(line)
                    payload_text[p["id"]] = p["text"]
    mal, ben = [], []
    originals = {}
    with open(args.corpus) as fh:
        records = [json.loads(line) for line in fh]
    for r in records:
        if r.get("provenance") == "original" and "text" in r:
            originals[r["id"]] = r["text"]
    for r in records:
        if r.get("split") != "train":
            continue
        (mal if r["label"] == "malicious" else ben).append(r)
    rng.shuffle(mal)
    rng.shuffle(ben)
    out = []
    missing = 0
    for r in mal:
        if len([e for e in out if e[1] == 1]) >= args.per_class:
            break
        texts = texts_of(r)
        needle = payload_text.get(r.get("parent_id")) or originals.get(r.get("parent_id"))
        if r.get("provenance") in ("original", "transformed", "wrapped") or needle is None:
            # The record is the attack itself: a window of its longest text.
            t = max(texts, key=len)
            out.append((window(tok, t, None, rng, args.max_tokens), 1, r["channel"]))
            continue
        key = needle.strip()[:40]
        hit = next(((t, t.find(key)) for t in texts if key and t.find(key) >= 0), None)
        if hit is None:
            missing += 1
            continue
        t, at = hit
        out.append((window(tok, t, at, rng, args.max_tokens), 1, r["channel"]))
    for r in ben:
        if len([e for e in out if e[1] == 0]) >= args.per_class:
            break
        texts = texts_of(r)
        if not texts:
            continue
        t = rng.choice(texts)
        out.append((window(tok, t, None, rng, args.max_tokens), 0, r["channel"]))
    rng.shuffle(out)
    return out, missing, len(records)


class Classifier(torch.nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(encoder.config.hidden_size, 1)
        self.scale = torch.nn.Parameter(torch.tensor(10.0))

    def embed(self, ids, mask):
        hidden = self.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

    def forward(self, ids, mask):
        return self.scale * self.head(self.embed(ids, mask)).squeeze(-1)


def batches(tok, examples, size, max_tokens):
    for i in range(0, len(examples), size):
        part = examples[i : i + size]
        encs = [tok.encode(t) for t, _, _ in part]
        ids = [e.ids[: max_tokens - 1] + ([e.ids[-1]] if len(e.ids) > max_tokens else []) for e in encs]
        width = max(len(x) for x in ids)
        input_ids = torch.zeros((len(ids), width), dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for j, x in enumerate(ids):
            input_ids[j, : len(x)] = torch.tensor(x)
            mask[j, : len(x)] = 1
        labels = torch.tensor([float(y) for _, y, _ in part])
        yield input_ids, mask, labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--base", default="models/all-MiniLM-L6-v2")
    ap.add_argument("--payloads", nargs="+", default=["corpus/payloads", "corpus/payloads-next"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-class", type=int, default=6000)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=4e-5)
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0 = all)")
    args = ap.parse_args()

    t0 = time.time()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    rng = random.Random(args.seed)
    tok = Tokenizer.from_file(os.path.join(args.base, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    examples, missing, n_records = load_examples(args, tok, rng)
    by = {}
    for _, y, ch in examples:
        by[f"{y}:{ch}"] = by.get(f"{y}:{ch}", 0) + 1
    print(f"{len(examples)} windows ({missing} malicious records whose payload was not found); {by}", flush=True)

    config = BertConfig.from_pretrained(args.base)
    encoder = BertModel(config, add_pooling_layer=False)
    base_tensors = load_file(os.path.join(args.base, "model.safetensors"))
    missing_keys, unexpected = encoder.load_state_dict(base_tensors, strict=False)
    unexpected = [k for k in unexpected if not k.startswith("pooler.") and "position_ids" not in k]
    assert not unexpected, f"unexpected tensors: {unexpected}"
    assert all("position_ids" in k for k in missing_keys), f"missing tensors: {missing_keys}"
    model = Classifier(encoder)
    model.train()
    head_params = list(model.head.parameters()) + [model.scale]
    opt = torch.optim.AdamW(
        [
            {"params": model.encoder.parameters(), "lr": args.lr},
            {"params": head_params, "lr": 1e-3},
        ],
        weight_decay=0.01,
    )
    steps = args.epochs * ((len(examples) + args.batch - 1) // args.batch)
    if args.max_steps:
        steps = min(steps, args.max_steps)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / max(1, steps - warm))
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    curve, step, seen, running = [], 0, 0, 0.0
    for epoch in range(args.epochs):
        order = examples[:]
        random.Random(args.seed + epoch).shuffle(order)
        for ids, mask, labels in batches(tok, order, args.batch, args.max_tokens):
            logits = model(ids, mask)
            loss = loss_fn(logits, labels)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            seen += len(labels)
            running += loss.item()
            if step % 25 == 0:
                curve.append({"step": step, "loss": round(running / 25, 4), "seconds": round(time.time() - t0, 1)})
                print(f"step {step}/{steps} loss {running / 25:.4f} {seen / (time.time() - t0):.1f} windows/s", flush=True)
                running = 0.0
            if step >= steps:
                break
        if step >= steps:
            break

    os.makedirs(args.out, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.encoder.state_dict().items() if k in base_tensors}
    trained = {k for k in base_tensors if not k.startswith("pooler.") and "position_ids" not in k}
    assert set(state) == trained, f"tensor names changed: {sorted(trained ^ set(state))}"
    for k in base_tensors:  # keep every tensor the exporter and candle read, pooler included
        state.setdefault(k, base_tensors[k])
    save_file(state, os.path.join(args.out, "model.safetensors"))
    for f in os.listdir(args.base):
        src = os.path.join(args.base, f)
        if f not in ("model.safetensors", "model.onnx") and os.path.isfile(src):
            shutil.copy(src, os.path.join(args.out, f))
    if os.path.isdir(os.path.join(args.base, "1_Pooling")):
        shutil.copytree(os.path.join(args.base, "1_Pooling"), os.path.join(args.out, "1_Pooling"), dirs_exist_ok=True)
    manifest = {
        "base_model_sha256": sha256(os.path.join(args.base, "model.safetensors")),
        "corpus": args.corpus,
        "corpus_sha256": sha256(args.corpus),
        "corpus_records": n_records,
        "split": "train",
        "windows": len(examples),
        "windows_by_label_channel": by,
        "payload_not_found": missing,
        "params": {k: v for k, v in vars(args).items() if k not in ("corpus", "out", "base")},
        "steps": step,
        "torch": torch.__version__,
        "loss_curve": curve,
        "seconds": round(time.time() - t0, 1),
        "model_sha256": sha256(os.path.join(args.out, "model.safetensors")),
    }
    # The stage's head: the fine-tuned linear layer on the normalized embedding, in
    # the format `portcullis-embed` reads; `portcullis train-embedding --head-from`
    # keeps its weights and fits only its Platt scaling on the dev split.
    w = (model.scale * model.head.weight).detach().reshape(-1).tolist()
    b = float((model.scale * model.head.bias).detach().reshape(-1)[0])
    head = {
        "format": "portcullis-embedding-head/1",
        "model": "all-MiniLM-L6-v2, fine-tuned (scripts/transformer/finetune.py)",
        "window": args.max_tokens - 2,
        "params": {"steps": step, "learning_rate": args.lr, "momentum": 0.9, "l2": 0.01},
        "provenance": {
            "corpus_sha256": manifest["corpus_sha256"],
            "model_sha256": manifest["model_sha256"],
            "train_split": "train",
            "train_records": len(examples),
            "train_chunks": len(examples),
            "calibration_split": "dev",
            "calibration_records": 0,
        },
        "platt": {"a": 1.0, "b": 0.0},
        "bias": b,
        "weights": w,
    }
    with open(os.path.join(args.out, "head.json"), "w") as fh:
        json.dump(head, fh, indent=2)
    with open(os.path.join(args.out, "finetune.json"), "w") as fh:
        json.dump(manifest, fh, indent=2)
    print(f"wrote {args.out} in {manifest['seconds']} s", flush=True)


if __name__ == "__main__":
    main()
