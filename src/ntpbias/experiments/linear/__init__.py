"""Paper A (linear NTP): every experiment and figure, as presets and the ``reproduce linear`` group.

Figures (App. A of paper A; docs/paper-a-linear-ntp.md#experiments-and-figures):

* ``linear-fig1``: the 2D example (d=2, m=3, V=5, |S_j|=3): contexts, rows of W^mm and their hyperplanes; GD panels.
* ``linear-fig2``: P as a heatmap (off-support black), rows of W^mm, rows of W*.
* ``linear-fig3``: eight random contexts of the overparameterized dataset and their next-token distributions.
* ``linear-fig4``: GD (η = 0.5) on m=50, d=60, V=10, |S_j|=6, 10^4 iterations.
* ``linear-fig5``: the same panels for normalized GD and Adam (η = 0.01, β = (0.9, 0.99)).
* ``linear-regpath``: the regularization path Ŵ_B (extra figure): cos with W^mm and F-part error against B.

Decisions where the paper is silent (docs/paper-a-linear-ntp.md#decisions): embeddings h̄_j ~ N(0, I_d); supports
uniform random; Dirichlet(1) probabilities; π̂ uniform; LeCun normal init N(0, 1/d); NGD divides by the gradient norm;
Adam with ε = 1e-8 and bias correction; log-scaled iteration axis; the lower-right panel shows ||P_F(W_k) - W*|| /
||W*||. The 2D example uses the support pattern A={2,3,4}, B={1,2,5}, C={1,4,5} at 90°, 210°, 330°
(docs/paper-a-linear-ntp.md#experiments-and-figures: the paper's captions are mutually inconsistent), Dirichlet(1)
probabilities, and GD with η = 0.5. ``--seeds N`` trains N initializations (seeds ``seed .. seed+N-1``) on the same
dataset (fixed by ``data.seed``), batched.
"""

from ..._lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: importing the package or its config imports
#: no torch)
_EXPORTS = {
    **dict.fromkeys(("run_checks",), ".checks"),
    **dict.fromkeys(("FIG4", "FIG5_ADAM", "FIG5_NGD", "LinearConfig", "LinearDataConfig", "LinearModelConfig",
                     "LinearTrainConfig", "TWO_D", "scaled"), ".config"),
    **dict.fromkeys(("FIGURES", "run_group"), ".group"),
    **dict.fromkeys(("reference", "train_linear", "train_run"), ".runs"),
}
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
