"""The documentation site works offline: the built pages load no script, stylesheet, font or image from the network
(the formulas are typeset by the KaTeX shipped in docs/assets/katex), every local resource they load exists, and the
pages write their formulas in TeX (docs/development.md, "Writing the documentation")."""

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: pages generated from the code (their text escaped by the generator) or holding no prose
GENERATED = {"claims.md", "cli.md", "settings.md", "api.md"}
#: pages whose owners are converting them to TeX this round; empty this set as they land
CONVERTING: set[str] = set()
#: characters that only a formula uses: Greek letters, norms, sums, relations, super- and subscripts, combining hats
#: and bars, arrows; prose keeps ±, ≈ and × beside numbers ("0.6863 ± 0.0010", "7-80x")
MATH_ONLY = re.compile("[\u0370-\u03ff\u2016\u2211\u03a3\u2208\u2209\u22a5\u27c2\u221a\u221e\u2264\u2265\u00b2\u00b3"
                       "\u2070-\u209f\u0302\u0304\u2192\u21a6\u2297\u221d\u222b\u2202\u2207\u27e8\u27e9\u2200\u2203"
                       "\u2282\u2286\u222a\u2229\u22c5\u00b7]")


class _Loads(HTMLParser):
    """The resources a page loads: script and image sources, stylesheets, icons and preloads, inline styles."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "img", "iframe", "audio", "video", "source", "embed") and a.get("src"):
            self.urls.append(a["src"])
        if tag == "link" and a.get("href") and a.get("rel") not in ("canonical", "alternate", "prev", "next"):
            self.urls.append(a["href"])
        if a.get("style"):
            self.styles.append(a["style"])
        self._in_style = tag == "style"

    def handle_data(self, data):
        if self._in_style:
            self.styles.append(data)

    def handle_endtag(self, tag):
        self._in_style = False


def _css_urls(css: str) -> list[str]:
    return [u.strip("'\" ") for u in re.findall(r"url\(([^)]*)\)", css)] + re.findall(r"@import\s+['\"]([^'\"]+)",
                                                                                        css)


def network_loads(site: Path) -> list[str]:
    """Every load of a built site that would go to the network or find nothing: "page: url"."""
    problems = []
    for path in sorted(site.rglob("*")):
        if path.suffix not in (".html", ".css"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix == ".html":
            parser = _Loads()
            parser.feed(text)
            urls = parser.urls + [u for s in parser.styles for u in _css_urls(s)]
        else:
            urls = _css_urls(text)
        for url in urls:
            if re.match(r"(https?:)?//", url):
                problems.append(f"{path.relative_to(site)}: {url}")
            elif not url.startswith(("data:", "#", "mailto:")):
                local = url.split("#")[0].split("?")[0]
                target = (site / local.lstrip("/") if local.startswith("/") else path.parent / local).resolve()
                if not target.exists():
                    problems.append(f"{path.relative_to(site)}: {url} (missing)")
    return problems


@pytest.mark.slow
def test_built_site_loads_nothing_from_the_network(tmp_path):
    """`mkdocs build --strict`, then every script, stylesheet, font and image of every page is local and exists
    (the docs extra installs mkdocs, and the README's test command, CI's, installs the extra; without it this test is
    skipped)."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "NO_MKDOCS_2_WARNING": "1"}
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    pages = list(site.rglob("*.html"))
    assert len(pages) > 20
    assert network_loads(site) == []
    separability = (site / "separability" / "index.html").read_text(encoding="utf-8")
    assert "assets/katex/katex.min.js" in separability and 'class="arithmatex"' in separability
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert not re.search(r":(func|class|meth|data|mod|attr):", api), "a raw Sphinx role on the API page"
    assert "_cache" not in api and 'class="arithmatex"' in api
    assert '<a href="../formats/">docs/formats.md</a>' in api  # from_sequences' docstring mentions the page


def test_network_loads_are_found(tmp_path):
    """The scan is not blind: a CDN script, a web font, a Google stylesheet and a missing local file are reported."""
    (tmp_path / "index.html").write_text(
        '<html><head><script src="https://cdn.example/x.js"></script><link rel="stylesheet" href="//fonts.example/css">'
        '<link rel="stylesheet" href="local.css"><style>@font-face{src:url(https://f.example/a.woff2)}</style></head>'
        '<body><a href="https://example.org">a link is no load</a><img src="data:image/png;base64,AA"></body></html>')
    (tmp_path / "local.css").write_text("@font-face{src:url(fonts/missing.woff2)}")
    assert network_loads(tmp_path) == ["index.html: https://cdn.example/x.js", "index.html: //fonts.example/css",
                                       "index.html: https://f.example/a.woff2",
                                       "local.css: fonts/missing.woff2 (missing)"]


def _prose(markdown: str) -> str:
    """A page without what may hold any character: fenced and indented code, code spans, math, link targets, HTML
    comments, tags."""
    text = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    text = re.sub(r"^([ \t]*)(```|~~~).*?^\1\2", "", text, flags=re.S | re.M)
    text = re.sub(r"^\s*\$\$.*?\$\$\s*$", "", text, flags=re.S | re.M)
    text = re.sub(r"(`+).*?\1", "", text, flags=re.S)
    text = re.sub(r"(?<!\\)\$[^$\s][^$]*?(?<![\s\\])\$", "", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"\*\*[^*]*\*\*|(?<!\w)\*[^*\s][^*]*?\*", "", text)  # bold and italics
    return "\n".join(line for line in text.splitlines() if not line.startswith("    ") or line.lstrip()[:2] in
                     ("* ", "- ") or re.match(r"\s+\d+\. ", line))


def test_prose_is_what_remains_outside_code_and_math():
    page = ("a `W_mm` b $\\delta^*$ c\n\n```text\nx_1\n```\n\n$$\ny_2\n$$\n\n[l](a_b.md) \\$5 and $6 e_f <!-- g_h --> "
            "*it* **bold** **`x_1`** d*")
    assert _prose(page).split() == ["a", "b", "c", "[l]", "\\$5", "and", "$6", "e_f", "d*"]


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md") if p.name not in GENERATED | CONVERTING))
def test_pages_write_formulas_in_tex(page):
    """Outside code and math a page has no underscore (Markdown starts italics there), no star after a symbol, no
    Unicode formula character: its formulas are `$...$` TeX (docs/development.md)."""
    prose = _prose((DOCS / page).read_text(encoding="utf-8"))
    bad = [line.strip()[:100] for line in prose.splitlines()
           if "_" in line or re.search(r"\w\*(?![*\w])", line) or MATH_ONLY.search(line)]
    assert not bad, f"{page}: {len(bad)} lines with pseudo-math, e.g. {bad[:3]}"


def _docstrings():
    """docs/hooks/griffe_docstrings.py, the build's docstring converter (pure Python: no docs extra needed)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("griffe_docstrings", DOCS / "hooks" / "griffe_docstrings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docstring_formulas_become_tex_and_the_rest_is_escaped():
    prose = _docstrings().prose
    assert prose("Empirical entropy H = -Σ_j π̂_j Σ_{z∈S_j} p̂_{j,z} log p̂_{j,z} in nats (Sec. 2 of paper A).") == (
        r"Empirical entropy $H = -\sum_{j} \hat{\pi}_{j} \sum_{z\in S_{j}} \hat{p}_{j,z} \log  \hat{p}_{j,z}$ in "
        "nats (Sec. 2 of paper A).")
    assert prose("M = √2 max_j ||h̄_j||, the constant") == r"$M = \sqrt{2} \max _{j} \|\bar{h}_{j}\|$, the constant"
    assert prose("feasible (||Λ||_op <= 1, columns)") == r"feasible ($\|\Lambda\|_{\mathrm{op}} \le  1$, columns)"
    assert prose("(||L||* + Σ_out Λ) / ||L||* (>= 0 by weak duality)") == (
        r"$(\|L\|_* + \sum_{\mathrm{out}} \Lambda) / \|L\|_*$ (>= 0 by weak duality)")
    assert prose("the margin of W^mm and W_kq* at d*") == (
        r"the margin of $W^{\mathrm{mm}}$ and $W_{\mathrm{kq}}^*$ at $d^*$")
    # names from the code, stars and underscores in prose: escaped, never italics, never math
    assert prose("embedding_scale and *this* x_i") == r"embedding\_scale and \*this\* $x_{i}$"
    # brackets that do not pair on the line: each formula word alone
    assert prose("h̄_j ~ N(0, embedding_scale² I_d) i.i.d.") == (
        r"$\bar{h}_{j}$ ~ N(0, embedding\_scale² $I_{d}$) i.i.d.")
    # code spans, web addresses and docs pages as written; a formula set as code becomes math
    assert prose("``W_mm`` at https://a.org/x_y and docs/formats.md#file-formats") == (
        "``W_mm`` at https://a.org/x_y and docs/formats.md#file-formats")
    assert prose("set ``T_m = {(h̄_j, π̂_j)}``") == r"set $T_{m} = \{(\bar{h}_{j}, \hat{\pi}_{j})\}$"


def test_docstring_roles_become_links_to_documented_objects():
    prose = _docstrings().prose
    paths = {"train": "ntpbias.api.train", "NTPData.load": "ntpbias.data.ntp.NTPData.load"}
    assert prose("see :func:`~ntpbias.api.train` and :meth:`NTPData.load`", paths.get) == (
        'see <autoref identifier="None" optional><code>train</code></autoref> and '
        '<autoref identifier="ntpbias.data.ntp.NTPData.load" optional><code>NTPData.load</code></autoref>'
    ).replace('<autoref identifier="None" optional><code>train</code></autoref>', "`train`")
    assert prose(":data:`CLAIMS`", lambda name: None) == "`CLAIMS`"


def test_docstring_structure_is_kept():
    """Parameter names and types, examples and literal blocks stay as written; descriptions are prose."""
    text = ("Summary with W_k.\n\nUsage::\n\n    python -m x --a_b\n\nParameters\n----------\n"
            "first_arg, W_k : Tensor (m, d)\n    The multipliers λ >= 0 of ab_cd.\ncert : :class:`~a.b.Certificate`\n\n"
            "Examples\n--------\n>>> x_1 = 2 * 3\n6\n")
    assert _docstrings().to_markdown(text) == (
        "Summary with $W_{k}$.\n\nUsage::\n\n    python -m x --a_b\n\nParameters\n----------\n"
        "first_arg, W_k : Tensor (m, d)\n    The multipliers $\\lambda \\ge  0$ of ab\\_cd.\ncert : Certificate\n\n"
        "Examples\n--------\n"
        ">>> x_1 = 2 * 3\n6\n")


def test_a_formula_ends_at_a_top_level_comma():
    prose = _docstrings().prose
    assert prose("at d = 2048, 500 epochs") == "at $d = 2048$, 500 epochs"
    assert prose("cos(W_k, W^mm) rises") == r"$\cos (W_{k}, W^{\mathrm{mm}})$ rises"
