"""The NTP geometry of a language model read as a linear decoder on its own features (docs/lm.md#what-is-measured).

A model state gives, for the m distinct contexts of NTP data, its last hidden states H (m, d) (what multiplies the
unembedding) and its unembedding W (V, d); its logits are L = W H^T (V, m), column j = ℓ_j. Softmax is blind to a
constant added to a column, so every measurement uses the **centred** unembedding W_c = (I - 11^T/V) W, whose logits
L_c = W_c H^T differ from L by a constant per column (the component 1 w̄^T of W lies in F^⊥ and never changes a
probability; GD keeps it fixed, eq. (3) of paper A, Adam and tied embeddings need not).

Two readings of the same state, each with the theory's prediction:

* **paper A** (H fixed, W trained): F, W* and W^mm of the data (m contexts, embeddings H), with P_F(W) -> W* and
  P_⊥(W) growing in the direction of W^mm (Thm 2 of paper A). The verdicts come from
  :func:`~ntpbias.geometry.separability.decide.decide` (structure first: where m > d the support graph usually decides
  *not separable* in a second; the certified LP where it fits; "undecided" otherwise), W* from the exact subspace
  method while it fits, W^mm from the NTP-SVM (a certificate that misses its tolerance nulls every W^mm-derived
  value); where the data are not separable, the longest separable prefix of the contexts by frequency and its own W^mm
  (``prefix_*``). :mod:`.paper_a`.
* **the log-bilinear model** (H and W both free, docs/ufm.md): the logits split into the finite in-support log-odds
  L* and a part growing in the direction of the nuclear-norm NTP-SVM L^mm; Gram matrices align with L^mm's SVD;
  contexts that share a support collapse. These are defined for every H, and each comes with its baselines (add-α
  smoothed counts, unigram log-frequencies, a random-feature model), measured by the same function, so that a number
  can be read. :mod:`.measures`.

:func:`model_geometry` (:mod:`.model`) measures one model state both ways. Nothing here forms an (m, m) matrix.
"""

from .measures import (
    BLOCK,
    NUCLEAR_MAX_SVD,
    SMOOTHING,
    Directions,
    LogitReference,
    baseline_logits,
    centred,
    gram_cosines,
    logit_reference,
    logit_values,
    nuclear_cost,
    support_collapse,
)
from .model import SPECTRUM, ModelGeometry, model_geometry
from .paper_a import EXACT_ROWS, PaperA, paper_a

__all__ = ["BLOCK", "EXACT_ROWS", "NUCLEAR_MAX_SVD", "SMOOTHING", "SPECTRUM", "Directions",
           "LogitReference", "ModelGeometry", "PaperA", "baseline_logits", "centred", "gram_cosines",
           "logit_reference", "logit_values", "model_geometry", "nuclear_cost", "paper_a", "support_collapse"]
