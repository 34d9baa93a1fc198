"""Paper C (one-layer transformer for NTP; Huang, Liang, Yang, NeurIPS 2024): Algorithm 1, Fig. 2, generalization.

Figures (docs/paper-c-transformer.md#experiments-and-figures):

* ``transformer-fig2``: the six panels of Fig. 2 on a random realizable dataset with |V| = 20 (d = |V|, one-hot
  embeddings, η₀ = 0.2/√d, η = 0.05/√d, 900 iterations per stage, zero initialization).
* ``transformer-stage2``: stage-2 diagnostics: L - L*, cos(W_kq, -∇L), attention on the optimal tokens against
  Lemma 5 and Theorem 2, the gradient's alignment with W_kq* against Lemma 6.
* ``transformer-example2``: Algorithm 1 on Example 1 (reference values of an independent implementation) and Example 2's
unseen inputs
  SP, OSP, VP (Sec. 6).
* ``transformer-generalization``: Theorem 3 on the Fig.-2 datasets: unseen inputs made of a non-comparable token
  with non-optimal tokens (-> n(x_0)) or with an optimal token (-> n(u)), predicted vs expected next tokens.
* ``transformer-ablation``: random unit-norm (non-orthonormal) embeddings and one-stage joint training, both
  outside the theory (docs/paper-c-transformer.md#experiments-and-figures).

Decisions where the paper is silent (docs/paper-c-transformer.md#decisions): the dataset generator (decision
C-D1: |V| = 20, input length <= 8, one sentence per start token, derangement collocation) with the run's seed;
one-hot embeddings; panel 4 of Fig. 2 shows the loss with its floor L* (decision C-D3; cos(W_kq, -∇L) is in
``transformer-stage2``); L_max is the longest input (decision C-D4); checks use the proven constants (decision C-D5).
``--seeds N`` trains N random datasets (seeds ``seed .. seed+N-1``), one after the other since datasets of different
sizes cannot be batched; figures show the mean and the min-max band. The quick and paper scales train the same runs;
the paper scale adds a 6000-step stage 2 on Example 1 for Lemma 7 (t_0 = 2080).
"""

from ..._lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: importing the package or its config imports
#: no torch)
_EXPORTS = {
    **dict.fromkeys(("KIND_NC", "KIND_OPT", "UnseenInputs", "theorem3_inputs"), "ntpbias.geometry.transformer.optimum"),
    **dict.fromkeys(("EXAMPLE1_COS", "EXAMPLE1_NORM_900", "example1_checks", "theory_checks"), ".checks"),
    **dict.fromkeys(("ALGORITHMS", "DATA_SOURCES", "EXAMPLE1", "FIG2", "FIG2_SAMPLES", "JOINT", "PROP2", "Stage2Config",
                     "StageConfig", "TransformerConfig", "TransformerDataConfig", "TransformerModelConfig",
                     "TransformerTrainConfig", "UNIT"), ".config"),
    **dict.fromkeys(("evaluate_unseen", "example2", "extended_order_gap", "generalization"), ".generalization"),
    **dict.fromkeys(("FIGURES", "run_group", "train_transformer"), ".group"),
    **dict.fromkeys(("SeedRun", "load_dataset", "run_config", "train_seed"), ".runs"),
}
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
