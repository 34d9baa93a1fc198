"""What the theory predicts: the subspace F, W*, separability, every max-margin program, the regularization path."""

from .analysis import Analysis, analyze
from .separability import ntp_separability
from .subspace import subspace
from .svm import MarginProgram, SVMResult, ntp_margin, ntp_svm

__all__ = ["Analysis", "analyze", "ntp_separability", "subspace", "MarginProgram", "SVMResult", "ntp_margin",
           "ntp_svm"]
