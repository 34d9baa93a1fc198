"""The repository cites only itself and the papers.

Source, tests, benchmarks, calibration scripts and docs cite a paper's equation or section ("eq. (12) of paper B",
"App. D of paper A") or a page of ``docs/``, never a document outside the repository (the implementation notes the
project was built from, section signs that point into them). Every ``docs/PAGE.md#anchor`` they name exists, and so
does every decision, erratum or check ID (``A-D19``, ``C-E1``, ``B-C15``, ``U-3``) they cite.
"""

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("src", "tests", "benchmarks", "calibration", "docs")
SUFFIXES = {".py", ".md", ".toml", ".txt", ".yml", ".yaml"}
#: citations of documents that are not in the repository (assembled so that this file does not match itself)
OUTSIDE = re.compile("|".join([
    "\u00a7",  # a section sign: sections of the papers are written "Sec. 4"
    r"the spec\b", r"spec [A-Z][0-9]", r"(?i:\bspec (?:check|\d))",
    *(re.escape(name) + r"\.md" for name in ("linear_ntp", "transformer_ntp", "attention_embeddings", "dependencies",
                                             "DESIGN")),
    re.escape("shared/" + "spec"),
]))
LINK = re.compile(r"docs/([\w.-]+\.md)(?:#([\w-]+))?")
IDS = re.compile(r"\b([ABC]-[CDE]\d+|U-D?\d+)\b")


def _files(*tops: str):
    for top in tops:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and path != Path(__file__).resolve():
                yield path


def _slugs(markdown: str) -> set[str]:
    """Heading anchors as MkDocs (toc's slugify) and GitHub write them."""
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.+)$", markdown, re.M):
        text = heading.replace("`", "").strip()
        ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
        out.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", ascii_text).strip().lower()))
        out.add(re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-"))
    return out


def test_nothing_cites_a_document_outside_the_repository():
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
            for path in _files(*SCANNED)
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, ("cite a paper's equation or section, or a docs/ page, instead of:\n" + "\n".join(hits))


def test_every_docs_link_and_anchor_exists():
    missing = []
    for path in _files("src", "tests", "benchmarks", "calibration"):
        for page, anchor in LINK.findall(path.read_text(encoding="utf-8")):
            target = ROOT / "docs" / page
            if not target.is_file():
                missing.append(f"{path.relative_to(ROOT)}: docs/{page} does not exist")
            elif anchor and anchor not in _slugs(target.read_text(encoding="utf-8")):
                missing.append(f"{path.relative_to(ROOT)}: docs/{page} has no heading #{anchor}")
    assert not missing, "\n".join(missing)


def test_every_cited_decision_erratum_and_check_is_defined_in_docs():
    defined = {m for page in (ROOT / "docs").glob("*.md") for m in IDS.findall(page.read_text(encoding="utf-8"))}
    undefined = sorted({f"{path.relative_to(ROOT)}: {m}" for path in _files("src", "tests")
                        for m in IDS.findall(path.read_text(encoding="utf-8")) if m not in defined})
    assert not undefined, "IDs cited but defined on no docs/ page:\n" + "\n".join(undefined)
