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

from ..._lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: importing the package or its config imports
#: no torch)
_EXPORTS = {
    **dict.fromkeys(("geometry_checks", "order_checks", "path_checks", "training_checks"), ".checks"),
    **dict.fromkeys(("OVERLAP", "PLANTED_ADAM", "PLANTED_GD", "PLANTED_NGD", "SHAKESPEARE", "UFMConfig",
                     "UFMDataConfig", "scaled"), ".config"),
    **dict.fromkeys(("FIGURES", "run_group", "train_ufm"), ".group"),
    **dict.fromkeys(("half_times", "order_statistics", "reference", "run_path", "train_run"), ".runs"),
}
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
