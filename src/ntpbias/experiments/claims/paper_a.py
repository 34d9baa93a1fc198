r"""Paper A's sentences (Thrampoulidis, NeurIPS 2024), verbatim: key -> (where, quote). Theorem numbers are the full
version's; a sentence is quoted from the workshop version's text where the full version's extraction garbles its
formulas (the same sentence; both versions are searched)."""

CLAIMS = {
    "descent": (
        "Sec. 4 of paper A (before Lemma 2)",
        r"Denote the GD iterates at time  $k$  by  $\mathbf{W}_k = \mathbf{W}_{k-1} - \eta \nabla "
        r"\text{CE}(\mathbf{W}_{k-1})$  for arbitrary initial point  $\mathbf{W}_0$  and constant step-size  "
        r"$\eta > 0$  small enough to guarantee descent."),
    "lemma1": (
        "Lemma 1 of paper A (Sec. 3; Lemma A.1 of the workshop version)",
        r"Assume overparameterization  $d > m$  and full-rank embedding matrix  $\bar{\mathbf{H}} \in "
        r"\mathbb{R}^{d \times m}$ . Then, there exists an infinite number of solutions  $\mathbf{W}^p$  and  "
        r"$\mathbf{W}^d$  that satisfy conditions (3) and (4), respectively."),
    "cover": (
        "Remark 1 of paper A (Sec. 3; Remark A.2 of the workshop version)",
        r"For binary classification, (Cover, 1965) showed that  $d/m > 1/2$  is sufficient and necessary for data in "
        r"general position to be linearly separable."),
    "lemma2": (
        "Lemma 2 of paper A (Sec. 4)",
        r"Under NTP $_{\mathcal{H}}$ -compatibility and NTP-separability,  $\lim_{k \rightarrow \infty} "
        r"\text{CE}(\mathbf{W}_k) = \mathcal{H}$  and  $\lim_{k \rightarrow \infty} \|\mathbf{W}_k\| = \infty$ ."),
    "thm2": (
        "Thm 2 of paper A (Sec. 4)",
        r"Then, it holds that  $\lim_{k \rightarrow \infty} \left\langle \frac{\mathbf{W}_k}{\|\mathbf{W}_k\|}, "
        r"\frac{\mathbf{W}^{\text{mm}}}{\|\mathbf{W}^{\text{mm}}\|} \right\rangle = 1$ . Moreover,  "
        r"$\lim_{k \rightarrow \infty} \mathcal{P}_{\mathcal{F}}(\mathbf{W}_k) = \mathbf{W}^*$ ."),
    "key-lemma": (
        "Lemma 5 of paper A, eq. (14) (App. E.1.2, the key lemma)",
        r"Fix any  $\alpha \in (0, 1)$ . There exists large enough  $R = R(\alpha)$  and  $k_0 = k_0(R)$  such "
        r"that for any  $k \geq k_0$ , it holds that  $\|\mathbf{W}_{k,\perp}\| \geq R$  and*  $$\text{CE}("
        r"\mathbf{W}_{k,\mathcal{F}} + (1 + \alpha)\|\mathbf{W}_{k,\perp}\|\overline{\mathbf{W}^{\text{mm}}}) \leq "
        r"\text{CE}(\mathbf{W}_k). \quad (9)$$"),
    "thm1": (
        "Thm 1 of paper A (Sec. 4.1)",
        r"Then, it holds that  $\lim_{B \rightarrow \infty} \left\langle \frac{\widehat{\mathbf{W}}_B}"
        r"{\|\widehat{\mathbf{W}}_B\|}, \frac{\mathbf{W}^{\text{mm}}}{\|\mathbf{W}^{\text{mm}}\|} "
        r"\right\rangle = 1$ .*"),
    "lemma4": (
        "Lemma 4 of paper A, claim 5 (App. E; Lemma F.2 of the workshop version)",
        r"$\lim_{B \rightarrow \infty} \mathcal{P}_{\mathcal{F}}(\widehat{\mathbf{W}}_B) = \mathbf{W}^*$ , where  "
        r"$\widehat{\mathbf{W}}_B$  is the regularized solution (6),"),
    "fig2-mm": (
        "Fig. 2 caption of paper A",
        r"Thus,  $w_1 = w_5$  in the Middle plot."),
    "fig2-supports": (
        "Fig. 2 caption of paper A (erratum A-E13: with Fig. 1's caption, no support pattern fits)",
        r"As seen from visualization of  $P$ , the words 1 and 5 have the same support pattern (i.e., both follow the "
        r"same contexts A and B)."),
    "fig2-star": (
        "Fig. 2 caption of paper A",
        r"However, on the subspace  $\mathcal{F}$  corresponding to the Right plot,  $w_1 \neq w_5$ , which allows "
        r"matching the different conditional probabilities with which each follows contexts A and B."),
    "fig1-w3": (
        "Fig. 1 caption of paper A",
        r"E.g., word embedding  $w_3$  (almost) aligns with context-embedding A and the normal hyperplane it defines "
        r"separates A from B and C, since word 3 only appears after context A."),
    "fig1-cones": (
        "Fig. 1 caption of paper A",
        r"The rest of the words follow two contexts each and their word-representation naturally belongs to the cone "
        r"defined by the embeddings of those respective contexts."),
    "fig1-norms": (
        "Fig. 1 caption of paper A",
        r"The wider the cone, the larger the magnitude of the word embedding to compensate for the large angle between "
        r"context-representations that share the same next-word."),
    "fig1-entropy": (
        "App. A.1 of paper A (Fig. 1's 2D example)",
        r"Probabilities are assigned randomly. The empirical conditional entropy evaluates to "
        r"=0.88110.8811\mathcal{H}=0.8811caligraphic_H = 0.8811"),
    "fig3-entropy": (
        "App. A.2 of paper A (the Figs. 3-5 dataset)",
        r"For a fixed realization of the dataset (for which  $\mathcal{H} \approx 1.445$  nats), we run GD, "
        r"normalized GD (NGD), and Adam from random LeCun initialization."),
    "fig4": (
        "App. A.2 of paper A (Fig. 4)",
        r"As predicted by our analysis, in this overparameterized setting: CE loss converges to its lower-bound, "
        r"parameter norm increases, iterates align in direction with  $W^{mm}$ , and the subspace component converges "
        r"to  $W^*$ ."),
    "fig5": (
        "Fig. 5 caption of paper A",
        r"Both exhibit the same implicit bias, but converge faster than GD, with Adam being slightly faster than NGD."),
    # the errata of paper A that a measurement can decide (docs/paper-a-linear-ntp.md#errata)
    "cef-definition": (
        "eq. (12) of paper A [short: (7)] (erratum A-E1: the inner sum must run over z' in S_j)",
        r"$$\text{CE}_{\mathcal{F}}(\mathbf{W}) = \sum_{j \in [m]} \hat{\pi}_j \sum_{z \in \mathcal{S}_j} "
        r"\hat{p}_{j,z} \log \left( 1 + \sum_{z \neq z'} e^{-(\mathbf{e}_z - \mathbf{e}_{z'})^\top \mathbf{W} "
        r"\bar{\mathbf{h}}_j} \right). \quad (7)$$"),
    "lemma4-cef": (
        "Lemma 4 of paper A, claim 1 (App. E; Lemma F.2 of the workshop version)",
        r"$\text{CE}_{\mathcal{F}}(\mathbf{W}^*) = \inf_{\mathbf{W} \in \mathcal{F}} "
        r"\text{CE}_{\mathcal{F}}(\mathbf{W}) = \mathcal{H}$"),
    "cef-limit": (
        "App. E of paper A, after eq. (12) [short: after (7)] (erratum A-E2: W^d must satisfy (6b) too)",
        r"Note also that for all  $\mathbf{W} \in \mathcal{F}$  and for all  $\mathbf{W}^d \in \mathcal{F}^\perp$  "
        r"that satisfy Eq. (4a), it holds  $\text{CE}_{\mathcal{F}}(\mathbf{W}) = \lim_{R \rightarrow \infty} "
        r"\text{CE}(\mathbf{W} + R\mathbf{W}^d)$ ."),
    "lemma4-norms": (
        "proof of Lemma 4, claim 4, of paper A (erratum A-E3: the squares add)",
        r"Thus, the desired follows by applying the fact that  $\|\mathbf{W}_k\| = \|\mathcal{P}_{\mathcal{F}}"
        r"(\mathbf{W}_k)\| + \|\mathcal{P}_{\perp}(\mathbf{W}_k)\|$ ."),
    "strictly-convex": (
        "Sec. 4 of paper A, after eq. (8) [short: App. A.2] (erratum A-E11: CE has flat directions)",
        r"This involves minimizing a strictly convex function in a bounded domain; thus,  $\widehat{\mathbf{W}}_B$  is "
        r"unique."),
    "ar-contexts": (
        "App. C of paper A [short: App. D] (erratum A-E12: for sequences of equal length m_t grows with t)",
        r"Note that  $m_1 \geq m_2 \geq \dots \geq m_{T-1}$ ."),
    "ar-shannon": (
        "Remark 2 of paper A, App. C [short: Remark D.1] (A-E12: guaranteed for stationary sources only)",
        r"This dynamic is captured by Shannon’s inequality, $$\mathcal{H}_t \geq \mathcal{H}_{t+1}, \text{ where } "
        r"\mathcal{H}_t = - \sum_{j \in [m_t]} \sum_{z \in \mathcal{S}_{t,j}^\ell} \pi_{t,j} \hat{p}_{t,j,z} "
        r"\log(\hat{p}_{t,j,z}),$$"),
}
