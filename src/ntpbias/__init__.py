"""ntpbias: the implicit optimization bias of next-token prediction and attention training, computed.

The Python API (``import ntpbias as nb``; see the README's "Python API" section):

* data: :class:`NTPData` (``NTPData.from_arrays(H, P)``, ``NTPData.from_samples(...)``, ``NTPData.load(path)``),
  :func:`from_sequences` (token sequences, a K-gram or autoregressive context rule), :func:`from_text` (real text),
  :func:`random_ntp` (paper A's generator);
* theory: :func:`analyze` (H, F, W*, the separability and compatibility verdicts, W^mm, certificates);
* the log-bilinear model with trained context embeddings (docs/ufm.md): :func:`planted_supports`, :func:`nuclear_svm`
  (the certified nuclear-norm NTP-SVM in logit space), :func:`support_svd`, :func:`ufm_regularization_path`;
* a language model read on its own features (docs/lm.md): :func:`model_geometry` (paper A's and the log-bilinear
  model's quantities of one model state), :func:`logit_reference` (what every checkpoint is compared with);
* training: :func:`train` (a preset, config file or config object into a run directory), :func:`reproduce`
  (figure groups), :func:`load_run` (a saved run: config, per-metric histories as arrays, checks), :data:`PRESETS`.

Every function checks its arguments as the command line does: a wrong one raises an ``ntpbias.errors.NTPBiasError``
(a ``ValueError``; also a ``TypeError`` for a wrong type or an unknown keyword) with the command line's one-line message
(docs/errors-and-limits.md); every result prints as a short line (and as a table in a notebook).

The layers of the package are listed in the README's "Development" section (each imports only the ones below it).
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from types import FunctionType

from .errors import ConfigError
from .threads import apply_threads

# the thread count, before numpy or torch is loaded (docs/errors-and-limits.md#threads); a bad NTPBIAS_THREADS is
# raised again by the first use of the API (the command line reports it as a user error)
try:
    apply_threads()
except ConfigError:
    pass

try:
    __version__ = version("ntpbias")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"

#: public name -> module that defines it (imported on first use, so ``import ntpbias`` stays fast for the CLI)
_API = {
    "NTPData": "ntpbias.data.ntp", "random_ntp": "ntpbias.data.synthetic",
    "from_sequences": "ntpbias.api", "from_text": "ntpbias.api", "analyze": "ntpbias.geometry.analysis",
    "train": "ntpbias.api", "reproduce": "ntpbias.api", "load_run": "ntpbias.api", "Run": "ntpbias.api",
    "PRESETS": "ntpbias.experiments",
    # the log-bilinear (unconstrained-features) model, docs/ufm.md
    "planted_supports": "ntpbias.data.planted", "nuclear_svm": "ntpbias.geometry.ufm.logit_svm",
    "support_svd": "ntpbias.geometry.ufm.logits", "ufm_regularization_path": "ntpbias.training.ufm_path",
    # a language model read on its own features, docs/lm.md
    "model_geometry": "ntpbias.geometry.lm", "logit_reference": "ntpbias.geometry.lm",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        apply_threads()  # (done at import unless NTPBIAS_THREADS was bad: then this raises its error)
        obj = getattr(import_module(_API[name]), name)
        if isinstance(obj, FunctionType):  # the boundary: a wrong keyword is ntpbias's TypeError naming the valid ones
            obj = import_module("ntpbias.config").checked_call(obj, name)
        globals()[name] = obj
        return obj
    raise AttributeError(f"module 'ntpbias' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
