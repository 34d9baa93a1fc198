"""Beyond paper A: which max-margin direction each optimizer finds (Adam, sign descent, Muon, ...), in every norm.

Paper A's future work asks for the NTP implicit bias of adaptive algorithms such as Adam. ``reproduce optimizers``
trains gradient descent, normalized steepest descent in the l2, linf (sign descent), l1, spectral and nuclear norms,
Muon, Adam (β1 < β2 and β1 = β2) and Adagrad on one-hot multiclass data (where the max-margin results of Gunasekar et
al. 2018 and Fan, Schmidt & Thrampoulidis 2025 apply: theorem checks), on paper A's Fig. 4 data and on Shakespeare
(NTP data: findings, stated as conjectures), and measures every iterate in every norm against the NTP-SVM of that
norm (:mod:`ntpbias.geometry.margins.norm_svm`). See docs/optimizers.md.

Figures: ``optimizers-onehot``, ``optimizers-fig4``, ``optimizers-shakespeare`` (margin ratio against steps, one panel
per norm, one curve per optimizer). Decisions (docs/optimizers.md#decisions): decaying steps η_t = η0 (t+1)^-1/2
with η0 matching the Frobenius length of a step across norms, Adam's and Adagrad's ε -> 1e-300, Muon with β = 0.9
and Muon's quintic Newton-Schulz, the cancellation-free gradient of :mod:`ntpbias.geometry.linear.excess`.
"""

from ..._lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: importing the package or its config imports
#: no torch)
_EXPORTS = {
    **dict.fromkeys(("approach", "approach_table", "f_bound_check", "findings", "mismatches", "onehot_checks",
                      "sanity_checks"), ".checks"),
    **dict.fromkeys(("DATASETS", "MEMBERS", "NormsConfig", "ROSTER", "optimizer_for", "run_config"), ".config"),
    **dict.fromkeys(("FIGURES", "run_group"), ".group"),
    **dict.fromkeys(("NormsProblem", "NormsReference", "norm_references", "train_norms", "train_run"), ".runs"),
}
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
