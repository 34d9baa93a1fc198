"""Beyond paper A: the log-bilinear (unconstrained-features) model, its presets and the ``reproduce ufm`` group
(docs/ufm.md).

Paper A fixes the context embeddings; its future work proposes training them jointly with the word embeddings. Here
every distinct context j has its own embedding h_j, the logits are L = W H^T, and the loss is the NTP cross-entropy
plus the ridge (λ/2)(||W||² + ||H||²). The group checks the geometry the follow-up theory predicts (Zhao, Behnia,
Vakilian, Thrampoulidis 2024) on planted support patterns and on Shakespeare:

* ``ufm-path``: along the regularization path λ -> 0 (every point certified), the logits split into the finite
  in-support log-odds L* and a part growing in the direction of the nuclear-norm NTP-SVM L^mm; Gram matrices align
  with L^mm's SVD; contexts sharing a support set collapse in the support-pattern subspace;
* ``ufm-training``: GD, Adam and normalized GD at a fixed λ reach the certified optimum at that λ;
* ``ufm-modes``: the order in which singular directions are learned from a small initialisation;
* ``ufm-geometry``, ``ufm-support``: the centred support matrix S̃ against L^mm (equal on planted disjoint sets, not on
  overlapping ones);
* ``ufm-shakespeare``: the same measurements on real text.
"""

from .checks import geometry_checks, order_checks, path_checks, training_checks
from .config import OVERLAP, PLANTED_ADAM, PLANTED_GD, PLANTED_NGD, SHAKESPEARE, UFMConfig, UFMDataConfig, scaled
from .group import FIGURES, run_group, train_ufm
from .runs import half_times, order_statistics, reference, run_path, train_run

__all__ = ["FIGURES", "OVERLAP", "PLANTED_ADAM", "PLANTED_GD", "PLANTED_NGD", "SHAKESPEARE", "UFMConfig",
           "UFMDataConfig", "geometry_checks", "half_times", "order_checks", "order_statistics", "path_checks",
           "reference", "run_group", "run_path", "scaled", "train_run", "train_ufm", "training_checks"]
