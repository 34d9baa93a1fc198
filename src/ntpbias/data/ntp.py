"""The NTP training set in distinct-context form (docs/paper-a-linear-ntp.md#objects).

A next-token-prediction training set of n (context, next token) samples is summarized by its m distinct
contexts: embeddings ``H`` (row j = h̄_j), context probabilities ``pi`` (π̂_j), and next-token distributions
``P`` (row j = p̂_j). Everything the linear-NTP theory says depends on the data only through these.

File format (``.npz``, read with ``allow_pickle=False``): ``H`` (m, d), ``P`` (m, V), optional ``pi`` (m,),
optional ``vocab`` (V,) and ``contexts`` (m,) fixed-width unicode arrays, optional ``context_lengths`` (m,)
and ``n_samples`` ().
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from .._repr import short_repr
from .._tensor import DEFAULT_DTYPE, floating_dtype, to_numpy
from ..errors import ArgumentTypeError, DataError, describe_value
from ..io import input_file, write_npz

#: Tolerance on ``sum(P[j]) == 1`` and ``sum(pi) == 1``; rows within it are renormalized exactly.
SUM_TOL = 1e-8


@short_repr
@dataclass(frozen=True, eq=False)
class NTPData:
    """Distinct contexts of an NTP training set: ``T_m = {(h̄_j, π̂_j, p̂_j)}`` (eq. (2) of paper A).

    Build it with :meth:`from_arrays`, :meth:`from_samples`, :meth:`load`, or the sequence readers of
    :mod:`ntpbias.data.sequences`; the constructors validate their input once, so every other function
    may assume a valid object.

    Attributes
    ----------
    H : Tensor (m, d)
        Context embeddings, row j = h̄_j.
    P : Tensor (m, V)
        Next-token distributions, row j = p̂_j (rows sum to 1, entries >= 0).
    pi : Tensor (m,)
        Context probabilities π̂_j (sum to 1).
    vocab, contexts : tuple of str or None
        Optional names of the V tokens and the m contexts.
    context_lengths : Tensor (m,) of int64, or None
        Length of each context (set for autoregressive data; enables :meth:`entropy_per_length`).
    n_samples : int or None
        Number n of raw samples when the data came from samples.

    Examples
    --------
    >>> import torch
    >>> data = NTPData.from_arrays(H=torch.eye(2), P=[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    >>> data.m, data.V, data.d
    (2, 3, 2)
    >>> round(data.entropy, 6)  # (1/2) log 2
    0.346574
    """

    H: torch.Tensor
    P: torch.Tensor
    pi: torch.Tensor
    vocab: tuple[str, ...] | None = None
    contexts: tuple[str, ...] | None = None
    context_lengths: torch.Tensor | None = None
    n_samples: int | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def _summary(self) -> dict:
        """What ``repr`` shows: sizes, entropy, support sizes, dtype, and the first tokens."""
        sizes = self.support_sizes
        out = {"m": self.m, "V": self.V, "d": self.d, "entropy": self.entropy,
               "support_sizes": f"{int(sizes.min())}..{int(sizes.max())}", "dtype": str(self.H.dtype).split(".")[-1]}
        if self.vocab is not None:
            out["vocab"] = self.vocab
        return out

    # ------------------------------------------------------------------ sizes and supports
    @property
    def m(self) -> int:
        """Number of distinct contexts."""
        return self.H.shape[0]

    @property
    def d(self) -> int:
        """Embedding dimension."""
        return self.H.shape[1]

    @property
    def V(self) -> int:
        """Vocabulary size."""
        return self.P.shape[1]

    @property
    def support(self) -> torch.Tensor:
        """Boolean (m, V) mask of the supports S_j = {z : p̂_{j,z} > 0}."""
        if "support" not in self._cache:
            self._cache["support"] = self.P > 0
        return self._cache["support"]

    @property
    def support_sizes(self) -> torch.Tensor:
        """(m,) support sizes |S_j|."""
        return self.support.sum(dim=1)

    @property
    def entropy(self) -> float:
        """Empirical entropy H = -Σ_j π̂_j Σ_{z∈S_j} p̂_{j,z} log p̂_{j,z} in nats (Sec. 2 of paper A): CE's
        lower bound, eq. (26)."""
        return float(-(self.pi * torch.special.xlogy(self.P, self.P).sum(dim=1)).sum()) + 0.0  # no -0.0

    def entropy_per_length(self) -> dict[int, float]:
        """Entropies H_t of the contexts of each length t (App. C of paper A, Remark 2).

        H_t = -Σ_{j: |x̄_j| = t} π̂_{t,j} Σ_z p̂_{j,z} log p̂_{j,z}, where π̂_{t,j} is the probability of
        context j among the contexts of length t (π̂ renormalized within each length).
        """
        if self.context_lengths is None:
            raise DataError("these data carry no context lengths; build them with autoregressive=True")
        lengths = self.context_lengths
        row_h = -torch.special.xlogy(self.P, self.P).sum(dim=1)
        ts = torch.unique(lengths)
        mass = torch.zeros(int(ts.max()) + 1, dtype=self.pi.dtype).index_add_(0, lengths, self.pi)
        weighted = torch.zeros_like(mass).index_add_(0, lengths, self.pi * row_h)
        return {int(t): float(weighted[t] / mass[t]) for t in ts}

    @property
    def embedding_bound(self) -> float:
        """M = √2 max_j ||h̄_j||, the constant of the paper's bounds (docs/paper-a-linear-ntp.md#setting)."""
        top = float(self.H.abs().max())  # scaled: no overflow or underflow of the squares at any scale of H
        return float(np.sqrt(2.0) * top * torch.linalg.vector_norm(self.H / top, dim=1).max()) if top > 0 else 0.0

    def to(self, device=None, dtype=None) -> NTPData:
        """Copy to another device or floating dtype."""
        dtype = dtype or self.H.dtype
        return replace(
            self,
            H=self.H.to(device=device, dtype=dtype),
            P=self.P.to(device=device, dtype=dtype),
            pi=self.pi.to(device=device, dtype=dtype),
            context_lengths=None if self.context_lengths is None else self.context_lengths.to(device),
            _cache={},
        )

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_arrays(
        cls,
        H,
        P,
        pi=None,
        *,
        vocab=None,
        contexts=None,
        context_lengths=None,
        n_samples: int | None = None,
        dtype: torch.dtype = DEFAULT_DTYPE,
        source: str = "arrays",
    ) -> NTPData:
        """Validate arrays and build the data (``pi`` defaults to uniform).

        Raises :class:`~ntpbias.errors.DataError` naming the offending array and row for: wrong
        dimensions or shapes, NaN/inf, negative probabilities, rows of P or pi not summing to 1, m = 0,
        V < 2, and names of the wrong length.
        """
        dtype = floating_dtype(source, dtype)
        H = _as_float(H, "H", source, dtype)
        P = _as_float(P, "P", source, dtype)
        if H.ndim != 2:
            raise DataError(f"{source}: H must be a 2-D array (m, d); got shape {tuple(H.shape)}")
        if P.ndim != 2:
            raise DataError(f"{source}: P must be a 2-D array (m, V); got shape {tuple(P.shape)}")
        m, V = P.shape
        if m == 0:
            raise DataError(f"{source}: the data hold no contexts (m = 0)")
        if V < 2:
            raise DataError(f"{source}: the vocabulary needs at least 2 tokens; P has V = {V} column(s)")
        if H.shape[0] != m:
            hint = " (did you store the transpose? H is (m, d), one row per context)" if H.shape[1] == m else ""
            raise DataError(
                f"{source}: H has {H.shape[0]} rows but P has {m}: H must be (m, d) and P (m, V){hint}"
            )
        if H.shape[1] == 0:
            raise DataError(f"{source}: H has zero columns (d = 0)")
        if (P < 0).any():
            j, z = (int(i) for i in torch.nonzero(P < 0)[0])
            raise DataError(f"{source}: P has a negative probability at row {j}, column {z}: {float(P[j, z]):g}")
        row_sums = P.sum(dim=1)
        bad = torch.nonzero((row_sums - 1).abs() > SUM_TOL).flatten()
        if len(bad):
            j = int(bad[0])
            raise DataError(
                f"{source}: row {j} of P sums to {float(row_sums[j]):.12g}, not 1 "
                f"({len(bad)} row(s) are off by more than {SUM_TOL:g}); normalize each row of P"
            )
        # renormalize only rows off by more than float round-off, so that saving and reloading is bit-exact
        roundoff = 4 * V * torch.finfo(dtype).eps
        P = torch.where(((row_sums - 1).abs() > roundoff)[:, None], P / row_sums[:, None], P)
        if pi is None:
            pi = torch.full((m,), 1.0 / m, dtype=dtype)
        else:
            pi = _as_float(pi, "pi", source, dtype).reshape(-1)
            if pi.shape[0] != m:
                raise DataError(f"{source}: pi has {pi.shape[0]} entries but there are m = {m} contexts")
            if (pi <= 0).any():
                j = int(torch.nonzero(pi <= 0)[0])
                raise DataError(
                    f"{source}: pi[{j}] = {float(pi[j]):g}; context probabilities must be positive "
                    "(drop contexts that never occur)"
                )
            if abs(float(pi.sum()) - 1) > SUM_TOL:
                raise DataError(f"{source}: pi sums to {float(pi.sum()):.12g}, not 1; normalize pi")
            if abs(float(pi.sum()) - 1) > 4 * m * torch.finfo(dtype).eps:
                pi = pi / pi.sum()
        vocab = _names(vocab, V, "vocab", source)
        contexts = _names(contexts, m, "contexts", source)
        if context_lengths is not None:
            lengths = _integers(context_lengths, "context_lengths", source)
            if lengths.shape != (m,) or (lengths < 1).any():
                raise DataError(f"{source}: context_lengths must hold m = {m} positive integers (shape ({m},)), got "
                                f"shape {lengths.shape}")
            context_lengths = torch.as_tensor(lengths)
        if n_samples is not None:
            count = _integers(n_samples, "n_samples", source)
            if count.shape != () or count < 1:
                raise DataError(f"{source}: n_samples must be one positive integer (the number of samples), got "
                                f"{'shape ' + str(count.shape) if count.shape else count}")
            n_samples = int(count)
        return cls(H=H, P=P, pi=pi, vocab=vocab, contexts=contexts, context_lengths=context_lengths,
                   n_samples=n_samples)

    @classmethod
    def from_samples(cls, context_ids, next_tokens, H, *, V: int | None = None, vocab=None, contexts=None,
                     context_lengths=None, dtype: torch.dtype = DEFAULT_DTYPE) -> NTPData:
        """Aggregate raw samples (x_i, z_i) into distinct-context form (eq. (2) of paper A;
        docs/paper-a-linear-ntp.md#setting), vectorized: ``n π̂_j`` counts the samples with context j and
        ``n π̂_j p̂_{j,z}`` those followed by z.

        Parameters
        ----------
        context_ids : int array (n,)
            Index of each sample's context in ``0..m-1`` (row of ``H``).
        next_tokens : int array (n,)
            Next-token id of each sample in ``0..V-1``.
        H : array (m, d)
            Embedding of each distinct context.
        V : int, optional
            Vocabulary size (default: ``len(vocab)`` or ``max(next_tokens) + 1``).
        vocab, contexts : sequence of str, optional
            Names of the tokens and of the contexts.
        context_lengths : int array (m,), optional
            Length of each context (autoregressive data).
        dtype : torch.dtype
            Floating type of the arrays (float64 by default).

        Returns
        -------
        NTPData

        Examples
        --------
        >>> d = NTPData.from_samples([0, 0, 1], [2, 1, 0], H=[[1.0], [2.0]], V=3)
        >>> d.pi.tolist(), d.P.tolist()
        ([0.6666666666666666, 0.3333333333333333], [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
        """
        ctx = np.asarray(to_numpy(context_ids)).reshape(-1)
        nxt = np.asarray(to_numpy(next_tokens)).reshape(-1)
        if ctx.shape != nxt.shape:
            raise DataError(f"samples: {ctx.size} context ids but {nxt.size} next tokens")
        if ctx.size == 0:
            raise DataError("samples: no samples were given (n = 0)")
        H = _as_float(H, "H", "samples", floating_dtype("samples", dtype))
        m = H.shape[0]
        if V is None:
            V = len(vocab) if vocab is not None else int(nxt.max()) + 1
        if ctx.min() < 0 or ctx.max() >= m:
            raise DataError(f"samples: context ids must lie in 0..{m - 1} (rows of H)")
        if nxt.min() < 0 or nxt.max() >= V:
            raise DataError(f"samples: next-token ids must lie in 0..{V - 1}")
        counts = np.bincount(ctx.astype(np.int64) * V + nxt.astype(np.int64), minlength=m * V).reshape(m, V)
        per_ctx = counts.sum(axis=1)
        if (per_ctx == 0).any():
            j = int(np.nonzero(per_ctx == 0)[0][0])
            raise DataError(f"samples: context {j} (row of H) has no sample; pass only contexts that occur")
        P = counts / per_ctx[:, None]
        pi = per_ctx / per_ctx.sum()
        return cls.from_arrays(H, P, pi, vocab=vocab, contexts=contexts, context_lengths=context_lengths,
                               n_samples=int(ctx.size), dtype=dtype, source="samples")

    # ------------------------------------------------------------------ file I/O
    @classmethod
    def load(cls, path: str | os.PathLike, *, dtype: torch.dtype = DEFAULT_DTYPE) -> NTPData:
        """Read an NTP dataset ``.npz`` (never unpickles: object arrays are refused)."""
        path = input_file(path)
        try:
            with np.load(path, allow_pickle=False) as f:
                arrays = {}
                for key in f.files:
                    try:
                        arrays[key] = f[key]
                    except ValueError as exc:
                        if "allow_pickle" in str(exc) or "pickle" in str(exc).lower():
                            raise DataError(
                                f"{path}: array '{key}' holds pickled Python objects, which ntpbias refuses to "
                                "load (a data file must not run code); store plain numeric/unicode arrays"
                            ) from None
                        raise
                    if not isinstance(arrays[key], np.ndarray):  # numpy returns non-.npy members as raw bytes
                        raise DataError(f"{path}: member '{key}' is not a numpy array; an NTP dataset .npz holds "
                                        "only arrays written by numpy.savez")
        except DataError:
            raise
        except Exception as exc:  # zipfile.BadZipFile, OSError, ValueError, ...
            raise DataError(f"{path}: not a readable .npz file ({type(exc).__name__}: {exc})") from None
        missing = [k for k in ("H", "P") if k not in arrays]
        if missing:
            raise DataError(
                f"{path}: missing array(s) {', '.join(missing)}; an NTP dataset .npz holds H (m, d) and P (m, V) "
                f"(found: {', '.join(sorted(arrays)) or 'nothing'})"
            )
        for key in ("H", "P", "pi"):
            if key in arrays and arrays[key].dtype.kind not in "fiub":
                raise DataError(f"{path}: array '{key}' must be numeric, found dtype {arrays[key].dtype}")
        return cls.from_arrays(
            arrays["H"], arrays["P"], arrays.get("pi"),
            vocab=arrays.get("vocab"), contexts=arrays.get("contexts"),
            context_lengths=arrays.get("context_lengths"), n_samples=arrays.get("n_samples"), dtype=dtype,
            source=str(path),
        )

    def save(self, path: str | os.PathLike, **extra) -> None:
        """Write the ``.npz`` format above, atomically (temporary name, then rename); ``extra`` arrays are stored
        beside (e.g. a model's unembedding ``W``; readers ignore what they do not know)."""
        arrays = {"H": to_numpy(self.H), "P": to_numpy(self.P), "pi": to_numpy(self.pi)}
        if self.vocab is not None:
            arrays["vocab"] = np.array(self.vocab, dtype=str)
        if self.contexts is not None:
            arrays["contexts"] = np.array(self.contexts, dtype=str)
        if self.context_lengths is not None:
            arrays["context_lengths"] = to_numpy(self.context_lengths)
        if self.n_samples is not None:
            arrays["n_samples"] = np.array(self.n_samples)
        write_npz(path, **arrays, **{k: to_numpy(v) for k, v in extra.items()})


def as_ntp_data(data, where: str) -> NTPData:
    """``data`` checked at the Python API's boundary: an :class:`NTPData`, or the path of an NTP dataset ``.npz``
    (read with :meth:`NTPData.load`); a sequences file or any other object is an error saying how to build NTP data.

    >>> as_ntp_data([[1.0]], "analyze")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ntpbias.errors.ArgumentTypeError: analyze: data = [[1.0]]: expected NTPData (nb.NTPData.from_arrays(H, P), ...
    """
    if isinstance(data, NTPData):
        return data
    if isinstance(data, (str, os.PathLike)) and not isinstance(data, bytes):
        if os.fspath(data).endswith(".npz"):
            return NTPData.load(data)
        raise DataError(f"{where}: {data}: not an NTP dataset .npz; for a sequences file build the data first: "
                        f"nb.from_sequences({os.fspath(data)!r}, context_length=K) (or autoregressive=True)")
    raise ArgumentTypeError(f"{where}: data = {describe_value(data)}: expected NTPData (nb.NTPData.from_arrays(H, P), "
                            "nb.from_sequences(...), nb.random_ntp(...)) or the path of an NTP dataset .npz")


def _as_float(x, name: str, source: str, dtype: torch.dtype) -> torch.Tensor:
    try:
        arr = np.asarray(to_numpy(x))
        if arr.dtype.kind not in "fiub":
            raise TypeError(f"dtype {arr.dtype}")
        t = torch.as_tensor(arr.astype(np.float64), dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{source}: {name} is not a numeric array ({exc})") from None
    if not torch.isfinite(t).all():
        idx = tuple(int(i) for i in torch.nonzero(~torch.isfinite(t))[0])
        raise DataError(f"{source}: {name} contains NaN or inf (first at index {idx})")
    return t


def _integers(x, name: str, source: str) -> np.ndarray:
    """``x`` (an int, or an array of integers or of integral floats) as an int64 array; else a DataError."""
    arr = np.asarray(to_numpy(x))
    if arr.dtype.kind == "f" and np.isfinite(arr).all() and (arr == np.round(arr)).all() and \
            (np.abs(arr) < 2.0**63).all():
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu" or (arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max):
        raise DataError(f"{source}: {name} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _names(names, n: int, what: str, source: str) -> tuple[str, ...] | None:
    if names is None:
        return None
    arr = np.asarray(names)
    if arr.ndim > 1:
        raise DataError(f"{source}: {what} must be a 1-D array of {n} names, got shape {arr.shape}")
    names = tuple(str(s) for s in arr.reshape(-1).tolist())
    if len(names) != n:
        raise DataError(f"{source}: {what} has {len(names)} entries, expected {n}")
    return names
