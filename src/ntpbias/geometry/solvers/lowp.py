"""Low-precision increments: matrix products in bfloat16 whose rounding error scales with a *change*, not a value.

The accelerated gradient of :mod:`ntpbias.geometry.solvers.apg` spends its time in two matrix products per step,
W = Λ H (the scatter side) and L = W H^T (the logits). In bfloat16 they run faster than in float32 on CPUs
with native bfloat16 dot products (AVX512-BF16; at every one-hot benchmark size: 3.5-4.5x on the machine of the first
measurements, 2.0-2.3x on an AMD EPYC whose float32 products already reach 70-80% of their peak) and on GPUs, but
a bfloat16 product has a relative error of about 2^-9 ≈ 2e-3 of its result: gaps computed that way are off by 1e-2,
two orders above the accuracy the face identification needs.

The error is relative to what is multiplied, so the products here multiply increments. With an *anchor*
(Λ_a, W_a = Λ_a H, L_a = W_a H^T) computed in the working precision,

    W = W_a + (Λ - Λ_a) H_bf16,      L = L_a + (W - W_a) H_bf16^T,

err by about 2^-9 of ||Λ - Λ_a|| ||H|| and ||W - W_a|| ||H||: small when the iterate is close to its anchor. The
accelerated gradient re-anchors in the working precision at every residual check (every few steps), so the
residuals it stops on are exact in the working precision, and between checks the gradient errs by a few
percent of the change since the last anchor, far below the residual itself (the steps shrink with the residual).
Nothing is certified from these products: the caller's certificate is recomputed in float64 on every row.

:func:`increments_dtype` decides whether bfloat16 pays on a device, by timing one product of a representative
shape in both precisions (once per device type; a CPU without native bfloat16 runs it several times slower).
"""

from __future__ import annotations

import time

import torch

#: bfloat16 is used for increments when it is at least this many times faster than float32 on the device.
MIN_SPEEDUP = 1.8
#: The choices of ``increments`` in :func:`ntpbias.geometry.solvers.apg.apg` and the workset solver.
CHOICES = ("auto", "bfloat16", "none")

_measured: dict[str, bool] = {}


def increments_dtype(choice: str | None, device, dtype: torch.dtype, *, left=None) -> torch.dtype | None:
    """The dtype of the increments for ``choice`` ("auto", "bfloat16", "none" or None) on ``device`` when the
    working precision is ``dtype``: bfloat16 or None (every product in ``dtype``).

    "auto" takes bfloat16 only for float32 work without a left factor, on a device where :func:`bf16_is_fast`.
    """
    choice = "none" if choice is None else choice
    if choice not in CHOICES:
        raise ValueError(f"unknown increments {choice!r}; choose one of {', '.join(CHOICES)}")
    if choice == "none" or left is not None:
        return None
    if choice == "bfloat16":
        return torch.bfloat16
    return torch.bfloat16 if dtype == torch.float32 and bf16_is_fast(device) else None


def bf16_is_fast(device) -> bool:
    """Whether a bfloat16 matrix product of a (64, 1024) x (1024, 1024) shape runs at least :data:`MIN_SPEEDUP`
    times faster than float32 on ``device`` (measured once per device type, best of several repetitions: a few
    milliseconds on a CPU)."""
    kind = torch.device(device).type
    if kind not in _measured:
        _measured[kind] = _time(kind, torch.float32) >= MIN_SPEEDUP * _time(kind, torch.bfloat16)
    return _measured[kind]


def _time(kind: str, dtype: torch.dtype, reps: int = 4) -> float:
    g = torch.Generator().manual_seed(0)
    A = torch.randn(64, 1024, generator=g).to(device=kind, dtype=dtype)
    B = torch.randn(1024, 1024, generator=g).to(device=kind, dtype=dtype)
    sync = torch.cuda.synchronize if kind == "cuda" else (lambda: None)
    best = float("inf")
    for _ in range(reps + 1):
        sync()
        t0 = time.perf_counter()
        A @ B
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


class Increments:
    """The two products of the accelerated gradient as anchor + low-precision increment (module doc).

    Parameters
    ----------
    H : Tensor (m, c), the working-precision right factor.  dtype : the increments' dtype (bfloat16).
    """

    def __init__(self, H: torch.Tensor, dtype: torch.dtype):
        self.work = H.dtype
        self.dtype = dtype
        self.H = H.to(dtype)
        self.Xa = self.Wa = self.La = None

    def anchor(self, X: torch.Tensor, W: torch.Tensor, L: torch.Tensor) -> None:
        """Exact (working-precision) multipliers, W and logits to take increments from."""
        self.Xa, self.Wa, self.La = X, W, L

    def primal_w(self, Lam_of, X: torch.Tensor) -> torch.Tensor:
        """W(X) = W_a + scatter(X - X_a) H in the increments' precision; ``Lam_of`` scatters multipliers into the
        flat (p * m,) cell vector."""
        Lam = Lam_of((X - self.Xa).to(self.dtype)).view(-1, self.H.shape[0])
        return self.Wa + Lam @ self.H  # the sum promotes to the working precision in one pass

    def logits(self, W: torch.Tensor) -> torch.Tensor:
        """L(W) = L_a + (W - W_a) H^T in the increments' precision."""
        return self.La + (W - self.Wa).to(self.dtype) @ self.H.T
