"""A Hugging Face causal language model from a local directory, read as a decoder on its own features
(docs/lm.md#hugging-face-models).

Loaded with ``transformers`` (the optional extra ``hf``) from local files only: ``local_files_only=True``, with
``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` set before ``transformers`` is imported, so nothing is ever downloaded.
The features of a context are the last entry of ``hidden_states`` (the output of the model's final norm, what
multiplies the unembedding in GPT-2, Llama and their kin) at its last position; the unembedding is the output
embedding W (V, d). When the output layer has a bias b, the features get a constant 1 appended and W the column b
(logits W h + b = [W b] [h; 1]), so the geometry is that of a linear decoder without bias. :meth:`HFCausalLM.features`
also returns how far W h is from the model's own logits (a model whose logits are not W h, e.g. with a logit soft-cap,
shows it there).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ..errors import DataError


def _transformers():
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import transformers
    except ImportError:
        raise DataError("--hf needs the transformers package: pip install 'ntpbias[hf]'") from None
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return transformers


class HFCausalLM:
    """A causal LM and its tokenizer, loaded from ``path`` (a folder written by ``save_pretrained``).

    Attributes
    ----------
    model, tokenizer : the ``transformers`` objects
    vocab : tuple of the V token strings of the output layer (``<id k>`` where the tokenizer has no token k)
    context : the longest input (the model's position limit, or None)
    """

    def __init__(self, path: str | Path, *, device=None, dtype: torch.dtype = torch.float64):
        path = Path(path)
        if not (path / "config.json").is_file():
            raise DataError(f"--hf {path}: not a saved Hugging Face model (no config.json in the folder); pass a "
                            "local folder written by save_pretrained (nothing is downloaded)")
        tf = _transformers()
        try:
            self.tokenizer = tf.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            self.model = tf.AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)
        except (OSError, ValueError, KeyError) as exc:
            raise DataError(f"--hf {path}: cannot load the model or its tokenizer ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:300]})") from None
        self.model.to(device=device, dtype=dtype).eval()
        self.path = path
        head = self.model.get_output_embeddings()
        self._bias = getattr(head, "bias", None)
        V = head.weight.shape[0]
        known = min(V, len(self.tokenizer))
        names = self.tokenizer.convert_ids_to_tokens(list(range(known)))
        self.vocab = tuple(str(t) for t in names) + tuple(f"<id {k}>" for k in range(known, V))
        config = self.model.config
        self.context = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)

    @property
    def unembedding(self) -> torch.Tensor:
        """W (V, d), with the output bias as a last column when there is one."""
        W = self.model.get_output_embeddings().weight.detach()
        return W if self._bias is None else torch.cat([W, self._bias.detach()[:, None]], dim=1)

    def encode(self, lines: list[str], *, source: str = "text") -> tuple[np.ndarray, np.ndarray]:
        """Token ids of every line (no special tokens), concatenated (N,), and tokens per line (L,), empty lines
        dropped."""
        encoded = self.tokenizer(list(lines), add_special_tokens=False)["input_ids"]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        ids = np.fromiter((t for row in encoded for t in row), dtype=np.int64, count=int(lengths.sum()))
        if not ids.size:
            raise DataError(f"{source}: the tokenizer of {self.path} gives no token for this text")
        if ids.max() >= len(self.vocab):
            raise DataError(f"{source}: the tokenizer gives id {int(ids.max())}, beyond the model's {len(self.vocab)} "
                            "output tokens")
        return ids, lengths[lengths > 0]

    @torch.no_grad()
    def features(self, idx: torch.Tensor) -> tuple[torch.Tensor, float]:
        """Features (B, d) of the contexts ``idx`` (B, T) at their last position, and max |W h - logits| over them
        relative to max |logits|."""
        out = self.model(input_ids=idx.to(self.model.device), output_hidden_states=True)
        h = out.hidden_states[-1][:, -1]
        if self._bias is not None:
            h = torch.cat([h, torch.ones_like(h[:, :1])], dim=1)
        logits = out.logits[:, -1]
        err = float((h @ self.unembedding.mT - logits).abs().max() / logits.abs().max().clamp_min(1e-300))
        return h, err
