"""Beyond paper A: the NTP geometry of a transformer language model trained on real text (docs/lm.md).

A small GPT-style decoder (:mod:`ntpbias.models.gpt`) is trained on a text with checkpoints at log-spaced steps
(:mod:`.runs`, ``ntpbias lm train``); at every checkpoint its last hidden states on the text's contexts and its
unembedding are read as paper A's linear decoder on fixed features and as the log-bilinear model of docs/ufm.md
(:mod:`.analysis`, ``ntpbias lm analyze``; Hugging Face models from a local folder too). The ``lm`` reproduce group
runs the planted control (a Markov chain whose next-token supports are known) with its graded checks, and Shakespeare
with its findings.
"""

from .config import PLANTED, LMConfig, LMDataConfig, LMModelConfig, LMTrainConfig, scaled
from .group import FIGURES, planted_control, run_group
from .runs import train_lm, train_model

__all__ = ["FIGURES", "PLANTED", "LMConfig", "LMDataConfig", "LMModelConfig", "LMTrainConfig", "planted_control",
           "run_group", "scaled", "train_lm", "train_model"]
