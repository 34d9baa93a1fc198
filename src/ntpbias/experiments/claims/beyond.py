r"""Statements we derive, or take from the literature beyond the three papers, quoted from the docs page that states
them: key -> (where, quote); ``where`` starts with the page."""

CLAIMS = {
    "prop1-rate": (
        "docs/paper-a-linear-ntp.md, theory check A-C8 (our derivation: the margin of W^mm is exactly 1)",
        r"Prop. 1's rate: $\log(\mathrm{CE}(W^\star + \gamma W^{mm}) - \mathcal H)$ is linear in $\gamma$ with slope "
        r"within 0.02 of $-1$ on $\gamma \in [5, 20]$"),
    "prop2-hall": (
        "docs/paper-c-transformer.md, errata C-E1 (our corrected Prop. 2)",
        r"the closed form's column q equals the solution of (3) exactly when a Hall-type condition holds for query q"),
}
