r"""Statements we derive, or take from the literature beyond the three papers, quoted from the docs page that states
them: key -> (where, quote); ``where`` starts with the page."""

CLAIMS = {
    "prop1-rate": (
        "docs/paper-a-linear-ntp.md, theory check A-C8 (our derivation: the margin of W^mm is exactly 1)",
        r"Prop. 1's rate: $\log(\mathrm{CE}(W^\star + \gamma W^{mm}) - \mathcal H)$ is linear in $\gamma$ with slope "
        r"within 0.02 of $-1$ on $\gamma \in [5, 20]$"),
    "ce-flat": (
        "docs/paper-a-linear-ntp.md, erratum A-E11 (the corrected statement; our derivation)",
        r"CE is strictly convex along every direction outside its flat space "
        r"$\{\mathbf 1 u^\top + N : N\bar H = 0\}$"),
    "ar-contexts-grow": (
        "docs/paper-a-linear-ntp.md, erratum A-E12 (the corrected statement; our derivation)",
        r"for sequences of equal length, $m_t \le m_{t+1}$"),
    "nsd": (
        "docs/optimizers.md (the known results, one-hot data: Gunasekar et al. 2018; Fan, Schmidt & Thrampoulidis "
        "2025)",
        r"normalized steepest descent with respect to a norm converges in direction to the max-margin solution *in "
        r"that norm*"),
    "sign-adam": (
        "docs/optimizers.md (the known results, one-hot data: Fan, Schmidt & Thrampoulidis 2025; Zhang, Zou & Cao "
        "2024)",
        r"so sign descent and Adam find the entrywise max-norm margin"),
    "spectral-muon": (
        "docs/optimizers.md (the known results, one-hot data: Fan, Schmidt & Thrampoulidis 2025)",
        r"spectral descent and Muon the spectral-norm margin"),
    "fbound": (
        "docs/optimizers.md, F-bound (our derivation)",
        r"So whatever the optimizer, $P_F(W_k)\to W^*$ once CE $\to$ H, with an explicit bound"),
    "ufm-sparse-low-rank": (
        "docs/ufm.md, predicted geometry 1 (U-2; Zhao, Behnia, Vakilian, Thrampoulidis 2024)",
        r"$P_{\mathcal F}(L_\lambda) \to L^\star$ and $P_\perp(L_\lambda)/\|P_\perp(L_\lambda)\| \to "
        r"L^{mm}/\|L^{mm}\|$ (U-2)."),
    "ufm-gram": (
        "docs/ufm.md, predicted geometry 2 (U-4)",
        r"$W_\lambda W_\lambda^\top \propto (L^{mm} L^{mm\top})^{1/2}$ and $H_\lambda H_\lambda^\top \propto "
        r"(L^{mm\top} L^{mm})^{1/2}$ in direction (U-4)"),
    "ufm-support": (
        "docs/ufm.md, predicted geometry 3 (U-3, our derivation)",
        r"When the polar factor of $\tilde S$ is $\le 0$ off the supports, $L^{mm} = \tilde S$, so the limit Grams "
        r"are $U_S \Sigma_S U_S^\top$ and $V_S \Sigma_S V_S^\top$ (U-3)."),
    "ufm-collapse": (
        "docs/ufm.md, predicted geometry 4 (U-5, our derivation)",
        r"Contexts with the same support set have the same column of $L^{mm}$, hence collapse to one direction in the "
        r"limit (U-5)."),
    "ufm-balance": (
        "docs/ufm.md, U-1 (our derivation)",
        r"At a stationary point, $G H = -\lambda W$ and $G^\top W = -\lambda H$, so $W^\top W = H^\top H$ (balance)"),
    "ufm-etf": (
        "docs/ufm.md, U-3 (the unconstrained-features model of neural collapse)",
        r"For one-hot balanced supports it gives the simplex equiangular tight frame of neural collapse (checked)."),
    "prop2-hall": (
        "docs/paper-c-transformer.md, errata C-E1 (our corrected Prop. 2)",
        r"the closed form's column q equals the solution of (3) exactly when a Hall-type condition holds for query q"),
    "counting-bound": (
        "docs/separability.md, Compatibility (our derivation)",
        r"Every generator $(e_{z} - e_{z'}) \bar{h}_{j}^\top$ of F has zero column sums, so $\dim F \le (V - 1) d$, "
        r"while compatibility with generic probabilities needs $\dim F = m (k - 1): d/m \ge (k - 1)/(V - 1)$, the "
        r"counting bound"),
    "support-count-bound": (
        "docs/separability.md, Compatibility at finite m: the support-count bound (our derivation)",
        r"so the kernel has dimension at least $\sum_{v} (n_{v} - d)_{+} - (m - d)$, and compatibility needs "
        r"$$\sum_v (n_v - d)_+ \le m - d.$$"),
    "kinematic-law": (
        "docs/separability.md, Supports of size V - 1: the exact finite-m law (our derivation)",
        r"$$P(\text{separable at } d) = 2 \sum_{k \ge 1 \text{ odd}} P(S = (V - 1) n + k) + (\text{the subspace terms "
        r"above}).$$"),
}
