r"""Statements we derive, or take from the literature beyond the three papers, quoted from the docs page that states
them: key -> (where, quote); ``where`` starts with the page."""

CLAIMS = {
    "prop2-hall": (
        "docs/paper-c-transformer.md, errata C-E1 (our corrected Prop. 2)",
        r"the closed form's column q equals the solution of (3) exactly when a Hall-type condition holds for query q"),
}
