"""The sentences the checks grade: every ``theorem``, ``paper-number`` and ``erratum`` check quotes one.

A :class:`Claim` is a sentence copied verbatim from a paper (or, for a statement we derive or take from the literature
beyond the three papers, from the docs page that states it), with where it stands. Checks take theirs with
:func:`cite`; ``docs/claims.md`` lists every claim with the checks that grade it (``python -m ntpbias.report.claims``),
and ``calibration/check_quotes.py`` finds every quote in the paper texts (or the docs page).

>>> from ntpbias.experiments.claims import cite
>>> cite("A:thm2")["where"]
'Thm 2 of paper A (Sec. 4)'
"""

from __future__ import annotations

from dataclasses import dataclass

from . import beyond, paper_a, paper_b, paper_c


@dataclass(frozen=True)
class Claim:
    """One sentence a check grades.

    Attributes
    ----------
    key : "A:thm2", "C:thm1-rate", "docs:ufm-U5", ...; the part before the colon names the paper (A, B, C) or "docs"
    where : paper and section, equation, figure or caption (a docs page and section for "docs" claims)
    quote : the sentence, verbatim (search it in the paper's text, whitespace aside)
    """

    key: str
    where: str
    quote: str

    @property
    def paper(self) -> str:
        """"A", "B", "C", or the docs page ("docs/ufm.md") a "docs" claim quotes."""
        head = self.key.split(":", 1)[0]
        return self.where.split(",", 1)[0].split(" ", 1)[0] if head == "docs" else head


#: the papers, by letter (the docs call them paper A, B, C)
PAPERS = {
    "A": "Thrampoulidis, Implicit Optimization Bias of Next-token Prediction in Linear Models, NeurIPS 2024",
    "B": "Wu, Shevchenko, Oymak, Mondelli, Attention with Trained Embeddings Provably Selects Important Tokens, 2025",
    "C": "Huang, Liang, Yang, Non-asymptotic Convergence of Training Transformers for Next-token Prediction, "
         "NeurIPS 2024",
}
#: a few words of each paper's title, to recognise its text file (``calibration/check_quotes.py``)
TITLES = {"A": "Implicit Optimization Bias of Next-token Prediction in Linear Models",
          "B": "Attention with Trained Embeddings Provably Selects Important Tokens",
          "C": "Non-asymptotic Convergence of Training Transformers for Next-token Prediction"}

#: every claim by key, in the order of the papers
CLAIMS: dict[str, Claim] = {
    f"{prefix}:{key}": Claim(f"{prefix}:{key}", where, quote)
    for prefix, module in (("A", paper_a), ("B", paper_b), ("C", paper_c), ("docs", beyond))
    for key, (where, quote) in module.CLAIMS.items()
}


def cite(key: str) -> dict[str, str]:
    """``quote`` and ``where`` of the claim ``key``, as keyword arguments of a :class:`~ntpbias.results.Check`."""
    claim = CLAIMS[key]
    return {"quote": claim.quote, "where": claim.where}


__all__ = ["CLAIMS", "PAPERS", "TITLES", "Claim", "cite"]
