r"""Paper B's sentences (Wu, Shevchenko, Oymak, Mondelli, 2025), verbatim: key -> (where, quote)."""

CLAIMS = {
    "lemma41-shift": (
        "Lemma 4.1 of paper B, eq. (6)",
        r"$$E_s^1 = E_s^0 + \frac{\eta_0}{2} \alpha_s v + \text{err}_s, \quad p^1 = p^0 + \text{err}_p, \quad (6)$$"),
    "lemma41-bound": (
        "Lemma 4.1 of paper B, eq. (7)",
        r"$$\max \left\{ \max_{s \in \mathcal{S}} \|\text{err}_s\|_2, \|\text{err}_p\|_2 \right\} \leq 11\eta_0 "
        r"d^{-\frac{1}{4}}. \quad (7)$$"),
    "lemma41-words": (
        "text after Lemma 4.1 of paper B (Sec. 4)",
        r"Lemma 4.1 implies that after one step of training, the embedding vector E_s of each token s learns the "
        r"empirical importance of the tokens by adding a vector in the direction of the output vector v with "
        r"magnitude proportional to α_s ."),
    "init-event": (
        "App. B of paper B, eq. (22)",
        r"Properties of initialization. By standard concentration inequalities, with probability at least "
        r"$1 - \delta$, at initialization we have"),
    "lemmaB1": (
        "Lemma B.1 of paper B",
        r"$$\max_{s \in \mathcal{S}} \|E_s^1\|_2 \leq 2(1 + 2\eta_0), \quad \|p^1\|_2 \leq 2 + 11\eta_0 "
        r"d^{-\frac{1}{4}}.$$"),
    "lemmaB2": (
        "Lemma B.2 of paper B",
        r"$$\mathcal{L}(\mathbf{E}^1, p^1) \leq \widehat{\mathbb{E}} \left[\log \left(1 + \exp \left(-\frac{1}{T} "
        r"\sum_{i=1}^T \frac{\eta_0}{2} y \alpha_{x_i} + \frac{1}{22\eta_0} \right) \right) \right].$$"),
    "thm43-norm": (
        "Thm 4.3 of paper B (and Lemma C.1)",
        r"Let p_t be the solution of the gradient flow (9). Then, with probability at least $1 - \delta$, we have "
        r"that $\|p_t\|_2 \rightarrow \infty$."),
    "thm43-item1": (
        "Thm 4.3 of paper B, item 1",
        r"1. p_∞ selects all completely positive and completely negative tokens, i.e., $\mathcal{S}_c \subseteq "
        r"\bigcup_X \mathcal{S}_X(p_\infty)$."),
    "thm43-item2": (
        "Thm 4.3 of paper B, item 2",
        r"2. p_∞ is the max-margin direction for such a selection, i.e., $p_\infty = p_*(p_\infty)$."),
    "lemma44": (
        "text after Lemma 4.4 of paper B (Sec. 4)",
        r"Then, the combination of Theorem 4.3 and Lemma 4.4 gives that only the completely positive/negative tokens "
        r"are selected by gradient flow."),
    "lemma45": (
        "Lemma 4.5 of paper B",
        r"we have that $p_\infty = \frac{\hat{p}}{\|\hat{p}\|_2}$ with probability at least $1 - \delta$."),
    "lemma45-expect": (
        "text after Lemma 4.5 of paper B (Sec. 4)",
        r"We expect this to be the case e.g. for datasets where all the completely positive/negative tokens have the "
        r"same α_s ."),
    "lemma45-printed": (
        "Lemma 4.5 of paper B (its gap condition as printed)",
        r"for any \hat{p}' solving (12) with a different selection, $\|\hat{p}'\|_2 < (1 - \mu) \|\hat{p}\|_2$ for "
        r"some constant μ that does not depend on d"),
    "lemma45-heuristic-scores": (
        "text after Lemma 4.5 of paper B (Sec. 4)",
        r"the max-margin solution \hat{p} is expected to satisfy $\hat{p}^\top v \approx 0, \hat{p}^\top E_s "
        r"\approx 1, \hat{p}^\top E_{s'} \approx 0$ for all $s \in \mathcal{S}_X(\hat{p})$ and $s' \in "
        r"\mathcal{S}_X(\hat{p})$."),
    "lemma45-heuristic-norm": (
        "text after Lemma 4.5 of paper B (Sec. 4)",
        r"Since the token embeddings at initialization are approximately orthogonal to each other, $\hat{p} \approx "
        r"\sum_{s \in \mathcal{S}_X(\hat{p})} E_s^0$, meaning that $\|\hat{p}\|_2 \approx "
        r"\sqrt{|\mathcal{S}_X(\hat{p})|}$, which implies that the sufficient condition holds."),
    "law15": (
        "Sec. 5 of paper B, eq. (15)",
        r"$$p(s|y) = \begin{cases} \frac{1-\tilde{\delta}}{|\tilde{\mathcal{S}}|}, & s \in \tilde{\mathcal{S}}, \\ "
        r"\frac{\tilde{\delta}(1-\delta_k)}{\sum_{k=1}^K |\mathcal{S}_k^y|}, & s \in \mathcal{S}_k^y, \\ "
        r"\frac{\delta_k}{\sum_{k=1}^K |\mathcal{S}_k^{\neg y}|}, & s \in \mathcal{S}_k^{\neg y}, \end{cases} \quad "
        r"(15)$$"),
    "level-sizes": (
        "Sec. 5 of paper B (Fig. 2's hyper-parameters)",
        r"For the experiments in Figure 2, we select the following hyper-parameters: $|\mathcal{S}| = 2048$, $K = 8$ "
        r"and sequence length $T = 256$; $|\mathcal{S}_k^{+1}| = |\mathcal{S}_k^{-1}|$ with $|\mathcal{S}_k^{+1}| = 4 "
        r"+ 2^{k-1}$, and $|\tilde{\mathcal{S}}| = 964$;"),
    "same-counts": (
        "Sec. 5 of paper B (after eq. (18))",
        r"For synthetic data sampled according to (15), due to the uniform nature of the sampling procedure, all "
        r"tokens appear the same number of times."),
    "fig2-pattern": (
        "Sec. 5 of paper B (Fig. 2)",
        r"Specifically, the trained embeddings capture the importance of the corresponding tokens: the dot-product "
        r"with v is proportional to how frequently the token appears in positive sequences rather than in negative "
        r"ones, and the dot-product with p is proportional to the modulus of such frequency."),
    "fig2-irrelevant": (
        "Fig. 2 caption of paper B",
        r"The point cloud around zero corresponds to the tokens in the irrelevant set."),
    "fig3": (
        "Sec. 5 of paper B (Fig. 3)",
        r"The numerical simulations for both datasets are reported in Figure 3, which displays a phenomenology "
        r"similar to that obtained for synthetic data in Figure 2, thus providing additional grounding for our "
        r"theoretical claims."),
    "fig1-v": (
        "Sec. 1 of paper B (Fig. 1)",
        r"Specifically, the predictive mechanism (overlap with the regression coefficient v) favors the tokens which "
        r"appear more frequently in the corresponding positive/negative context."),
    "fig1-p": (
        "Sec. 1 of paper B (Fig. 1)",
        r"A similar pattern emerges at the selection stage of the attention mechanism (overlap with the `(cls)` "
        r"embedding p), i.e., more frequent tokens have a higher attention score."),
    "loss-orders": (
        "Sec. 5 of paper B (two-layer model)",
        r"We note that, for both IMDB and Yelp data, the model in (17) achieves significantly smaller loss values at "
        r"convergence (of the order of 10^{-5} , in contrast to the order of 10^{-1} achieved by the model in (1))."),
}
