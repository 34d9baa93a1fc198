// Typesets the formulas of every page with the KaTeX shipped in docs/assets/katex (no network).
// pymdownx.arithmatex (generic mode) wraps inline math as <span class="arithmatex">\(...\)</span> and display math as
// <div class="arithmatex">\[...\]</div>; only those elements are touched, so a "$" in code or prose stays as written.
// A formula KaTeX cannot parse is shown as its TeX source in red (class katex-error), never dropped.
function typesetMath(root) {
  root.querySelectorAll(".arithmatex").forEach((el) => {
    if (el.dataset.typeset) return;
    const tex = el.textContent.trim();
    const display = tex.startsWith("\\[");
    katex.render(tex.slice(2, -2), el, {displayMode: display, throwOnError: false, strict: "ignore"});
    el.dataset.typeset = "1";
  });
}
if (typeof document$ !== "undefined") {
  document$.subscribe(({body}) => typesetMath(body));  // Material's page-load observable (instant navigation too)
} else {
  document.addEventListener("DOMContentLoaded", () => typesetMath(document.body));
}
