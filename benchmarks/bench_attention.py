"""Paper B at the paper's settings, one CPU thread: today's code path (autograd through the module, one padded batch,
the plain AdamW) beside the fast path (model (1): the closed-form rank-2 gradient; model (17): length groups; fused
in-place AdamW), in the same run, from the same initialisation on the same batches.

Sections (each prints a Markdown table):

* ``fig2``: Figure 2 (model (1), K-level data, |S| = 2048, n = 4096, T = 256, d = 2048, batch 128, 196 epochs = 6272
  AdamW steps), float64 and float32: seconds per step of each path (the fast one split into gradient and AdamW),
  the figure's time extrapolated from them, the agreement of the two paths after the timed steps, and with
  ``--full`` the measured wall time of the complete training through ``train_classifier`` (metrics and checkpoint
  included).
* ``imdb``: Figure 3 (model (1) on the 25,000 packaged IMDB reviews, 512-token cap, d = 2048, 500 epochs = 98,000
  steps, float32): the same columns, extrapolated.
* ``two``: model (17) on IMDB batches (float32): seconds per step at d = 2048 (and the ``--two-dims`` given), one
  padded batch against length groups; length groups as before (a dense (|S|, d) gradient of E per group, summed)
  against now (each group's gradient with respect to E_X added into one buffer), in the same run; length groups with
  the T x T products in bfloat16 (``mixed_precision``) and how far that moves a step's gradient (the checks of a
  whole training: docs/benchmarks.md); and the (d, epochs) that fit in 60 minutes at the measured rate.

Memory traffic: AdamW reads the parameter, gradient and both moments and writes three of them (7 |S| d numbers per
step); the fast gradient streams E twice and writes the gradient once (~4 |S| d). The "GB/s" columns are those
bytes over the measured times: the bound of the fast path is the machine's memory bandwidth.

Run: python benchmarks/bench_attention.py [fig2 imdb two] [--steps 12] [--full]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import torch
from _common import print_table

from ntpbias.experiments.attention.config import FIG2, IMDB_ONE_LAYER
from ntpbias.training.attention import ClassifierProblem, classifier_optimizer
from ntpbias.training.optimizers import Optimizer

DTYPES = {"float64": torch.float64, "float32": torch.float32}


def _paths(ds, cfg, dtype, *, model="one_layer", d=None, steps_per_epoch=None, mixed=()):
    """(today's problem and optimizer, the fast problem and optimizer), both initialised from seed 0; ``mixed``: also
    the fast path with ``mixed_precision`` (model (17))."""
    d = d or cfg.model.d
    out = []
    for fast, low in ((False, False), (True, False), *((True, True) for _ in mixed)):
        problem = ClassifierProblem(ds, model=model, d=d, train_v=cfg.model.train_v, batch_size=cfg.train.batch_size,
                                    dtype=dtype, gradient="auto" if fast else "autograd", group_lengths=fast,
                                    **({"mixed_precision": True} if low else {}))
        spe = steps_per_epoch or problem.steps_per_epoch
        opt = Optimizer(classifier_optimizer(cfg.optimizer, steps_per_epoch=spe, decay_epochs=cfg.train.decay_epochs),
                        fused=fast)
        out.append((problem, opt))
    return out


def _time_steps(problem, opt, params, steps: int, warmup: int = 2):
    """Per step, after ``warmup`` steps: (wall seconds, CPU seconds of this process, gradient CPU seconds, optimizer
    CPU seconds), each the median over ``steps``, and the parameters after warmup + steps steps. On a machine shared
    with other users the CPU time is the steadier number (it still pays for their use of the memory bus)."""
    gens = [torch.Generator().manual_seed(17)]
    wall, grad_t, opt_t = [], [], []
    for k in range(warmup + steps):
        t0, c0 = time.perf_counter(), time.process_time()
        loss, grads = problem.loss_and_grad(params, k, gens)
        c1 = time.process_time()
        params = opt.step(params, grads, loss)
        t2, c2 = time.perf_counter(), time.process_time()
        if k >= warmup:
            wall.append(t2 - t0)
            grad_t.append(c1 - c0)
            opt_t.append(c2 - c1)
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731  (median: robust to other users' load)
    cpu = med([g + o for g, o in zip(grad_t, opt_t, strict=True)])
    return (med(wall), cpu, med(grad_t), med(opt_t)), params


class DenseGroups:
    """The previous step of model (17), for the comparison: autograd through the module for each length group,
    which forms a dense (|S|, d) gradient of E per group, summed over the groups (a problem's ``loss_and_grad``)."""

    def __init__(self, problem):
        self.p = problem

    def loss_and_grad(self, params, step, generators):
        import torch.nn.functional as F

        p = self.p
        k = p._epoch(step, generators)
        leaves = {name: v[0].detach().requires_grad_(True) for name, v in params.items()}
        parts = p._groups(0, k)
        n = sum(len(y) for _, _, y in parts)
        total, acc = 0.0, None
        for X, mask, y in parts:
            with torch.enable_grad():
                part = F.softplus(-y * p._call(leaves, 0, X, mask)).sum() / n
                gs = torch.autograd.grad(part, list(leaves.values()))
            total = total + part.detach()
            acc = list(gs) if acc is None else [a + g for a, g in zip(acc, gs, strict=True)]
        return torch.stack([total]), {name: g[None] for name, g in zip(leaves, acc, strict=True)}


def _rel_diff(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max() / b[k].abs().max()) for k in b)


def _fmt_time(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


def one_layer_rows(name, ds, cfg, dtypes, total_steps, steps, *, today_steps=None):
    rows = []
    for dname in dtypes:
        dtype = DTYPES[dname]
        (slow, slow_opt), (fast, fast_opt) = _paths(ds, cfg, dtype)
        init = slow.init_params([0])
        fast.init_params([0])
        n_today = today_steps or steps
        (t_slow, c_slow, _, _), p_slow = _time_steps(slow, slow_opt, {k: v.clone() for k, v in init.items()}, n_today)
        (t_fast, c_fast, g_fast, o_fast), p_fast = _time_steps(fast, fast_opt, {k: v.clone() for k, v in init.items()},
                                                               n_today)
        diff = _rel_diff(p_fast, p_slow)
        if steps > n_today:  # more steps of the fast path only, for a steadier median
            (t_fast, c_fast, g_fast, o_fast), _ = _time_steps(fast, fast_opt, p_fast, steps, warmup=0)
        numel = sum(v[0].numel() for v in init.values())
        size = dtype.itemsize
        rows.append([name, dname, f"{numel / 1e6:.1f} M", f"{t_slow:.3f} ({c_slow:.3f})",
                     f"{_fmt_time(t_slow * total_steps)} ({_fmt_time(c_slow * total_steps)})",
                     f"{t_fast * 1e3:.1f} ({c_fast * 1e3:.1f})", f"{g_fast * 1e3:.1f}", f"{o_fast * 1e3:.1f}",
                     f"{7 * numel * size / o_fast / 1e9:.1f}",
                     f"{_fmt_time(t_fast * total_steps)} ({_fmt_time(c_fast * total_steps)})",
                     f"{t_slow / t_fast:.1f}x ({c_slow / c_fast:.1f}x)", f"{diff:.1e} ({n_today + 2} steps)"])
    return rows


ONE_LAYER_HEADER = ["figure", "dtype", "parameters", "today s/step (CPU)", "today: whole figure (CPU), extrapolated",
                    "fast ms/step (CPU)", "gradient CPU ms", "AdamW CPU ms", "AdamW GB/s (CPU)",
                    "fast: whole figure (CPU), extrapolated", "speed-up (CPU)", "max rel. diff of the parameters"]


def full_run(cfg, data, label: str, out: Path) -> list:
    """The complete training through ``train_classifier`` (the code ``reproduce`` runs), wall time measured."""
    from ntpbias.experiments.attention.runs import correlations, token_table, train_classifier
    from ntpbias.experiments.base import RunContext

    t0, c0 = time.perf_counter(), time.process_time()
    history, problem = train_classifier(cfg, data, RunContext(out=out), label)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    corr = next(iter(correlations(token_table(data, problem, history)).values()))
    return [label, cfg.dtype, f"{history.step}", f"{_fmt_time(wall)} ({_fmt_time(cpu)})",
            f"{max(history.at()['loss']):.3g}",
            f"{corr['pearson_v_pd']:.3f}", f"{corr['pearson_p_abs_pd']:.3f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sections", nargs="*", default=["fig2", "imdb", "two"], choices=["fig2", "imdb", "two"])
    parser.add_argument("--steps", type=int, default=12, help="timed steps per path (median reported)")
    parser.add_argument("--full", action="store_true", help="fig2: also run the complete trainings (minutes)")
    parser.add_argument("--two-dims", type=int, nargs="*", default=[2048, 256], help="two-layer: dimensions timed")
    parser.add_argument("--out", default="/tmp/bench_attention", help="where --full writes its run directories")
    args = parser.parse_args()
    imdb = None

    if "fig2" in args.sections:
        data = FIG2.data.build()
        spe = -(-data.ds.n // FIG2.train.batch_size)
        rows = one_layer_rows("Fig. 2", data.ds, FIG2, ["float64", "float32"], FIG2.train.epochs * spe, args.steps)
        print_table(f"Figure 2 at the paper's settings (|S| = {data.ds.num_tokens}, n = {data.ds.n}, T = {data.ds.T}, "
                    f"d = {FIG2.model.d}, batch 128, {FIG2.train.epochs} epochs = {FIG2.train.epochs * spe} steps)",
                    ONE_LAYER_HEADER, rows)
        if args.full:
            runs = [full_run(replace(FIG2, dtype=dt), data, f"fig2-{dt}", Path(args.out) / dt)
                    for dt in ("float64", "float32")]
            header = ["run", "dtype", "steps", "wall time (CPU)", "final loss", "Pearson(<E_s, v>, PD)",
                      "Pearson(<E_s, p>, |PD|)"]
            print_table("Figure 2, complete trainings (train_classifier: 6272 AdamW steps, whole-data metric logs, "
                        "checkpoint)", header, runs)

    if "imdb" in args.sections or "two" in args.sections:
        t0 = time.perf_counter()
        imdb = IMDB_ONE_LAYER.data.build()
        print(f"\nIMDB: {imdb.ds.n} reviews, |S| = {imdb.ds.num_tokens}, cap {imdb.ds.T} tokens, read and "
              f"preprocessed in {time.perf_counter() - t0:.1f} s")

    if "imdb" in args.sections:
        spe = -(-imdb.ds.n // IMDB_ONE_LAYER.train.batch_size)
        total = IMDB_ONE_LAYER.train.epochs * spe
        rows = one_layer_rows("Fig. 3 (IMDB)", imdb.ds, IMDB_ONE_LAYER, ["float32"], total, args.steps,
                              today_steps=max(3, args.steps // 3))
        print_table(f"Figure 3 (model (1)) at the paper's settings (IMDB, |S| = {imdb.ds.num_tokens}, d = 2048, "
                    f"{IMDB_ONE_LAYER.train.epochs} epochs = {total} steps)", ONE_LAYER_HEADER, rows)

    if "two" in args.sections:
        spe = -(-imdb.ds.n // IMDB_ONE_LAYER.train.batch_size)
        cfg = replace(IMDB_ONE_LAYER, model=replace(IMDB_ONE_LAYER.model, kind="two_layer"))
        rows = []
        for d in args.two_dims:
            (slow, slow_opt), (fast, fast_opt), (low, low_opt) = _paths(imdb.ds, cfg, torch.float32, model="two_layer",
                                                                        d=d, mixed=(True,))
            init = slow.init_params([0])
            fast.init_params([0])
            low.init_params([0])
            n = 2 if d >= 1024 else 4
            (t_slow, c_slow, _, _), _ = _time_steps(slow, slow_opt, {k: v.clone() for k, v in init.items()}, n,
                                                    warmup=1)
            _, dense_opt = _paths(imdb.ds, cfg, torch.float32, model="two_layer", d=d)[1]
            (t_dense, c_dense, _, _), _ = _time_steps(DenseGroups(fast), dense_opt,
                                                      {k: v.clone() for k, v in init.items()}, 2 * n, warmup=1)
            (t_fast, c_fast, _, _), _ = _time_steps(fast, fast_opt, {k: v.clone() for k, v in init.items()},
                                                    2 * n, warmup=1)
            (t_low, c_low, _, _), _ = _time_steps(low, low_opt, {k: v.clone() for k, v in init.items()}, 2 * n,
                                                  warmup=1)
            gens = [torch.Generator().manual_seed(17)]  # the first step's gradient, float32 against bfloat16 products
            g_fast = {k: v.clone() for k, v in fast.loss_and_grad(init, 0, gens)[1].items()}
            g_low = low.loss_and_grad(init, 0, gens)[1]
            epoch = c_fast * spe
            rows.append([d, f"{t_slow:.2f} ({c_slow:.2f})", f"{t_dense:.2f} ({c_dense:.2f})",
                         f"{t_fast:.2f} ({c_fast:.2f})", f"{c_dense / c_fast:.2f}x", f"{1 / c_fast:.2f}",
                         f"{c_slow / c_fast:.1f}x", _fmt_time(epoch), f"{3600 / epoch:.1f}",
                         f"{500 * epoch / 3600:.0f} h", f"{t_low:.2f} ({c_low:.2f})", f"{c_fast / c_low:.1f}x",
                         f"{_rel_diff(g_low, g_fast):.1e}"])
        print_table("Model (17) on IMDB (float32, batch 128, sequences up to 512 tokens); epochs from the CPU time",
                    ["d", "one padded batch, plain AdamW s/step (CPU)",
                     "length groups, a dense E gradient per group (before) s/step (CPU)",
                     "length groups, E_X gradients into one buffer (now) s/step (CPU)", "now vs before (CPU)",
                     "steps/s (CPU)", "speed-up (CPU)", "one epoch (CPU)", "epochs in 60 min", "500 epochs",
                     "+ bfloat16 T x T products s/step (CPU)", "speed-up of bfloat16 (CPU)",
                     "bfloat16: max rel. diff of a step's gradient"], rows)


if __name__ == "__main__":
    main()
