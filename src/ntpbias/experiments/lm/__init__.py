"""Beyond paper A: the NTP geometry of a transformer language model trained on real text (docs/lm.md).

A small GPT-style decoder (:mod:`ntpbias.models.gpt`) is trained on a text with checkpoints at log-spaced steps
(:mod:`.runs`, ``ntpbias lm train``); at every checkpoint its last hidden states on the text's contexts and its
unembedding are read as paper A's linear decoder on fixed features and as the log-bilinear model of docs/ufm.md
(:mod:`.analysis`, ``ntpbias lm analyze``; Hugging Face models from a local folder too). The ``lm`` reproduce group
runs the planted control (a Markov chain whose next-token supports are known) with its graded checks, and Shakespeare
with its findings.
"""

from ..._lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: importing the package or its config imports
#: no torch)
_EXPORTS = {
    **dict.fromkeys(("PLANTED", "PLANTED_CHAIN", "SHAKESPEARE", "SHAKESPEARE_1K", "LMConfig", "LMDataConfig",
                     "LMModelConfig", "LMTrainConfig", "scaled"), ".config"),
    **dict.fromkeys(("FIGURES", "planted_control", "run_group"), ".group"),
    **dict.fromkeys(("train_lm", "train_model"), ".runs"),
}
__all__ = [*_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
