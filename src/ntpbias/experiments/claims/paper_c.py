r"""Paper C's sentences (Huang, Liang, Yang, NeurIPS 2024), verbatim: key -> (where, quote)."""

CLAIMS = {
    "prop1-norm": (
        "Prop. 1 of paper C (Sec. 5.1)",
        r"Then, for any $t \ge 2$, we have $\frac{t\eta_0}{2||W_{v}^*||} \le ||W_{ov}^{(t)}|| \le t\eta_0$ and the "
        r"following bound holds:"),
    "prop1-cos": (
        "Prop. 1 of paper C (Sec. 5.1)",
        r"$$\left\langle \frac{W_{\rm ov}^{(t)}}{\|W_{\rm ov}^{(t)}\|}, \frac{W_{\rm ov}^*}{\|W_{\rm ov}^*\|} "
        r"\right\rangle \ge 1 - \frac{5\|W_{\rm ov}^*\|^3 \log(2|\mathcal{V}|) \log t}{t\eta_0}.$$"),
    "prop1-loss": (
        "Prop. 1 of paper C (Sec. 5.1)",
        r"Moreover, the loss function \mathcal{L}_0 satisfies that $\mathcal{L}_0(W_{ov}^{(t)}) \leq "
        r"O(\exp(-\eta_0 t/(4\|W_{ov}^*\|))).$"),
    "lemma3": (
        "Lemma 3 of paper C (App. C)",
        r"$$(e_i - e_{i'})^\top W_{\text{ov}}^{(t)} x = 0, \quad \forall i, i' \neq \text{In}(x).$$"),
    "cor1": (
        "Corollary 1 of paper C (App. C)",
        r"$$\begin{cases} (e_{\mathrm{In}(x)} - e_i)^\top W_{\mathrm{ov}} x \in (\Delta, 3\Delta), \forall i \neq "
        r"\mathrm{In}(x) \\ (e_i - e_{i'})^\top W_{\mathrm{ov}} x = 0, \forall i, i' \neq \mathrm{In}(x) "
        r"\end{cases}$$"),
    "thm1-norm": (
        "Thm 1 of paper C (Sec. 5.2)",
        r"Then, for any $t \ge 2$, we have that $\frac{t\eta}{2\|W_{kq}^*\|} \le \|W_{kq}^{(t)}\| \le t\eta$."),
    "thm1-cos": (
        "Thm 1 of paper C (Sec. 5.2)",
        r"$$\left\langle \frac{W_{\mathrm{kq}}^{(t)}}{\|W_{\mathrm{kq}}^{(t)}\|}, "
        r"\frac{W_{\mathrm{kq}}^{*}}{\|W_{\mathrm{kq}}^{*}\|} \right\rangle \geq 1 - "
        r"\frac{54NL_{\mathrm{max}}^{4}\|W_{\mathrm{kq}}^{*}\|^{4}\log^{2}t}{t\eta}$$"),
    "thm1-rate": (
        "text after Thm 1 of paper C (Sec. 5.2)",
        r"Theorem 1 states that the key-query matrix W_{kq} converges in direction to the max-margin solution "
        r"$W_{kq}^*/||W_{kq}^*||$ at a convergence rate of $O(\log^2 t/t)$."),
    "thm2-attention": (
        "Thm 2 of paper C (Sec. 5.2)",
        r"the optimal token weight satisfies $\min_n \sum_{\ell_* \in l(n)} \varphi_{\ell_*}^{(n,t)} \ge (1 + "
        r"L_{\max} \exp(-tC_1)))^{-1}$."),
    "thm2-loss": (
        "Thm 2 of paper C, eq. (4)",
        r"$$\mathcal{L}(\theta^{(t)}) = \mathcal{L}(W_{\text{ov}}^{(T)}, W_{\text{kq}}^{(t)}) \le |\mathcal{V}| "
        r"\exp\left(-TC_0\left(1 - \frac{2L_{\max}}{L_{\max} + \exp(C_1 t)}\right)\right),\tag{4}$$"),
    "thm2-rate": (
        "footnote 3 of paper C (Thm 2)",
        r"Then Equation (4) implies $\mathcal{L}(\theta^{(t)}) - \mathcal{L}^* \leq \mathcal{L}^* TC_0 "
        r"O(e^{-C_1 t})$ for sufficiently large t, which further implies the linear convergence in t."),
    "thm2-prediction": (
        "text after Thm 2 of paper C (Sec. 5.2)",
        r"This implies that the trained transformer attends to the optimal token and thus outputs the correct next "
        r"token $n(x_{\ell_*}^{(n)})$ with probability $1 - O(\epsilon_0)$."),
    "lemma5": (
        "Lemma 5 of paper C (App. C.2)",
        r"$$\varphi_{\ell}^{(n,t)} \ge \varphi_{\ell}^{(n,0)} \ge 1/L_{\max}, \quad \forall \ell \in l(n)$$"),
    "lemma6-norm": (
        "Lemma 6 of paper C (App. C.3)",
        r"$$t\eta + \|W_{\mathbf{kq}}^{(0)}\| \ge \|W_{\mathbf{kq}}^{(t)}\| \ge "
        r"\frac{t\eta}{2L_{\max}\|W_{\mathbf{kq}}^*\|} - \|W_{\mathbf{kq}}^{(0)}\|.$$"),
    "lemma6-direction": (
        "proof of Lemma 6 of paper C (App. C.3)",
        r"$$\left\langle \frac{\nabla_{W_{\mathrm{kq}}} \mathcal{L}(\theta)}{\left\| \nabla_{W_{\mathrm{kq}}} "
        r"\mathcal{L}(\theta) \right\|}, \frac{W_{\mathrm{kq}}^*}{\left\| W_{\mathrm{kq}}^* \right\|} \right\rangle "
        r"\le -\frac{\min_n \varphi_+^{(n,t)}}{2 \| W_{\mathrm{kq}}^* \|} \le -\frac{1}{2L_{\max} \| "
        r"W_{\mathrm{kq}}^* \|}$$"),
    "lemma7": (
        "Lemma 7 of paper C (App. C.4)",
        r"$$\left\langle \nabla_{W_{\mathrm{kq}}} \mathcal{L}(\theta^{(t)}), W_{\mathrm{kq}}^{(t)} \right\rangle "
        r"\ge (1 + \alpha_t) \left\langle \nabla_{W_{\mathrm{kq}}} \mathcal{L}(\theta^{(t)}), W_{\mathrm{kq}}^* "
        r"\right\rangle \frac{\|W_{\mathrm{kq}}^{(t)}\|}{\|W_{\mathrm{kq}}^*\|}$$"),
    "prop2": (
        "Prop. 2 of paper C (Sec. 6)",
        r"$$x_*^\top W_{\mathrm{kq}}^* x^q = \frac{|\mathcal{N}_{x^q}|}{|\mathcal{O}_{x^q}| + |\mathcal{N}_{x^q}|}, "
        r"\quad x^\top W_{\mathrm{kq}}^* x^q = -\frac{|\mathcal{O}_{x^q}|}{|\mathcal{O}_{x^q}| + "
        r"|\mathcal{N}_{x^q}|}, \quad \forall x_* \in \mathcal{O}_{x^q}, x \in \mathcal{N}_{x^q}$$"),
    "thm3-growth": (
        "Thm 3 of paper C (Sec. 6)",
        r"$(x_* - x_0)^\top W_{kq}^{(t)} x^q \ge C_0 t, \quad (x_0 - x)^\top W_{kq}^{(t)} x^q \ge C_0 t, \quad "
        r"\forall x_* \in \mathcal{O}_{x^q}, x_0 \in \mathcal{M}_{x^q}, x \in \mathcal{N}_{x^q}.$"),
    "thm3-prediction": (
        "Thm 3 of paper C (Sec. 6)",
        r"Moreover, if the trained transformer takes input X with query x^q that consists of a non-comparable token "
        r"x_0 and non-optimal tokens, then the prediction made by $T_{\theta^{(t)}}(X)$ is $n(x_0)$ with high "
        r"probability."),
    "thm3-order": (
        "text after Thm 3 of paper C (Sec. 6)",
        r"Theorem 3 suggests that a new partial order is created by the trained transformer. Specifically, it inserts "
        r"the non-comparable tokens between the optimal and non-optimal tokens."),
    "ex2-classes": (
        "Example 2 of paper C (Sec. 6)",
        r"Consider the partial order $>_P$ under the punctuation mark P. We have that $O>_PP$ and O is an optimal "
        r"token, P is a non-optimal token, and S,V are non-comparable tokens."),
    "ex2-sp": (
        "Example 2 of paper C, case 1 (Sec. 6)",
        "Consider a new (unseen) input sentence SP. Since S is non-comparable before training, but is \"larger\" "
        r"than P under the trained key-query matrix $W_{kq}^{(t)}$, the next predicted token is n(S) = V."),
    "ex2-osp": (
        "Example 2 of paper C, case 2 (Sec. 6)",
        "Consider a new (unseen) input OSP. O is optimal and S is still \"smaller\" than O under the trained "
        "*P*-partial order. The trained transformer will consistently predict P."),
    "ex2-vp": (
        "Example 2 of paper C (Sec. 6)",
        r"However, in cases where the input is VP (verb-punctuation), it may be preferable to terminate the sequence "
        r"after the verb, i.e., VPP, as the verb alone can suffice to convey the intended meaning."),
}
