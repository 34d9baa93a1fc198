"""What the theory predicts: the subspace F, W*, separability, every max-margin program, the regularization path.

Foundations every program uses sit at the top (:mod:`.constraints`, :mod:`.norms`, :mod:`.scaling`), with
:mod:`.analysis` (everything for one dataset); the theory objects of each paper are subpackages (:mod:`.linear`,
:mod:`.attention`, :mod:`.transformer`, :mod:`.ufm`), as are the max-margin programs (:mod:`.margins`), their solvers
(:mod:`.solvers`) and NTP-separability (:mod:`.separability`).
"""

from .analysis import Analysis, analyze
from .linear.subspace import subspace
from .margins.program import MarginProgram, ntp_margin, ntp_svm
from .margins.result import Certificate, SVMResult
from .separability.verdict import ntp_separability

__all__ = ["Analysis", "analyze", "ntp_separability", "subspace", "MarginProgram", "SVMResult", "Certificate",
           "ntp_margin", "ntp_svm"]
