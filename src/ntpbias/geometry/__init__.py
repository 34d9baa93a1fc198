"""What the theory predicts: the subspace F, W*, separability, every max-margin program, the regularization path.

Foundations every program uses sit at the top (:mod:`.constraints`, :mod:`.norms`, :mod:`.scaling`), with
:mod:`.analysis` (everything for one dataset); the theory objects of each paper are subpackages (:mod:`.linear`,
:mod:`.attention`, :mod:`.transformer`, :mod:`.ufm`), as are the max-margin programs (:mod:`.margins`), their solvers
(:mod:`.solvers`) and NTP-separability (:mod:`.separability`).
"""

from .._lazy import lazy_exports

#: public name -> its module (imported on first use: the settings in :mod:`.config` load without torch)
_EXPORTS = {"Analysis": ".analysis", "analyze": ".analysis", "subspace": ".linear.subspace",
            "MarginProgram": ".margins.program", "ntp_margin": ".margins.program", "ntp_svm": ".margins.program",
            "Certificate": ".margins.result", "SVMResult": ".margins.result",
            "ntp_separability": ".separability.verdict"}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["Analysis", "analyze", "ntp_separability", "subspace", "MarginProgram", "SVMResult", "Certificate",
           "ntp_margin", "ntp_svm"]
