"""Paper B (attention with trained embeddings): presets, trainers and ``reproduce attention`` / ``attention-imdb``.

Figures of the group ``attention`` (docs/paper-b-attention.md#experiments-and-figures):

* ``attention-fig2``: Figure 2, the one-layer model (1) with every parameter trained by AdamW on the K-level data of
  eqs. (14)-(16): <E_s, p> and <E_s, v> against PD(s), coloured by importance level, with a per-token CSV.
* ``attention-lemma41``: Lemma 4.1 across d: the one-step error against the bound 11 η₀ d^{-1/4}, and
  <E¹_s - E⁰_s, v> against (η₀/2) α_s.
* ``attention-stage2``: stage 2 (the flow (9) with E fixed at E¹) on the Assumption-1 data, by normalized GD and by
  GD, over several seeds: cos with Lemma 4.5's max-margin direction, selection accuracy, ||p_t||, loss above its
  floor; plus the Lemma 4.4 case (one irrelevant token) and Lemma 4.5's margin-gap condition.

Trainers (``ntpbias train``): ``attention`` (:class:`AttentionConfig`: model (1) or (17) on K-level,
Assumption-1, IMDB or Yelp data; the real-data configs are at the end of :mod:`.config`) and ``attention-stage2``
(:class:`StageTwoConfig`: stage 1 + stage 2 on any labelled token data).

Decisions where the paper is silent (docs/paper-b-attention.md#decisions): the K-level law with δ~ in the
opposite-polarity case and level sizes 4 + 2^k; n = 4096 balanced sequences; v fixed at a random unit vector
(``train_v`` to train it); the theory initialisation N(0, I/d) for E and p; AdamW with torch's defaults (β = (0.9,
0.999), ε = 1e-8); the step decay per epoch. The quick scale of Figure 2 uses d = 256, lr = 1e-3 and 10 epochs (decay at
epoch 8) instead of d = 2048, lr = 1e-4 and 196 epochs; the stage-2 theory runs use η₀ = 200, d = 1024
(docs/paper-b-attention.md#theory-checks "A1-base"), far below the theorem's η₀ >= 4n²T² and d >= (88η₀² + 111η₀ + 2)^8
(reported as facts).
"""

from ..._lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: importing the package or its config imports
#: no torch)
_EXPORTS = {
    **dict.fromkeys(("SYNTHETIC_LEVELS", "lemma41_checks", "pattern_checks", "stage_two_checks"), ".checks"),
    **dict.fromkeys(("AttentionConfig", "AttentionModelConfig", "AttentionTrainConfig", "FIG2", "FIG2_QUICK",
                     "FIG2_SMOKE", "Lemma41Config", "STAGE2_GD", "STAGE2_LEMMA44", "STAGE2_NGD", "StageOneConfig",
                     "StageTwoConfig", "StageTwoModelConfig", "StageTwoTrainConfig"), ".config"),
    **dict.fromkeys(("TokenData", "TokenDataConfig"), ".data"),
    **dict.fromkeys(("FIGURES", "run_group", "selection_table", "train_attention", "train_stage2"), ".group"),
    **dict.fromkeys(("StageTwoRun", "correlations", "lemma41_sweep", "level_means", "read_token_table",
                     "run_stage_two", "token_table", "token_table_csv", "train_classifier"), ".runs"),
}
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
