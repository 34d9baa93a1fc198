"""What the theory predicts: the subspace F, W*, separability, every max-margin program, the regularization path."""

from .._lazy import lazy_exports

#: public name -> its module (imported on first use: the settings in :mod:`.config` load without torch)
_EXPORTS = {"Analysis": ".analysis", "analyze": ".analysis", "ntp_separability": ".separability",
            "subspace": ".subspace", "MarginProgram": ".svm", "SVMResult": ".svm", "ntp_margin": ".svm",
            "ntp_svm": ".svm"}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["Analysis", "analyze", "ntp_separability", "subspace", "MarginProgram", "SVMResult", "ntp_margin",
           "ntp_svm"]
