"""Find every quoted sentence of the checks in its source: the paper's text, or the docs page a "docs" claim names.

The papers are not part of the repository: point this script at a folder of their plain-text versions (any file
names; a paper is recognised by its title in the file). Each quote must occur verbatim, up to whitespace.

Run: ``python calibration/check_quotes.py PAPERS_DIR`` (exit status 1 and one line per quote not found; 0 when every
quote of :data:`ntpbias.experiments.claims.CLAIMS` is found). Without PAPERS_DIR only the docs quotes are checked.
"""

import re
import sys
from pathlib import Path

from ntpbias.experiments.claims import CLAIMS, TITLES

ROOT = Path(__file__).resolve().parents[1]


def normalize(text: str) -> str:
    """Whitespace runs collapsed to one space (text extracted from PDF or HTML breaks lines anywhere)."""
    return re.sub(r"\s+", " ", text).strip()


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def paper_texts(folder: Path) -> dict[str, str]:
    """Paper letter -> the normalized text of every file of ``folder`` whose opening holds that paper's title."""
    out: dict[str, str] = {}
    for path in sorted(folder.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        for letter, title in TITLES.items():
            if _key(title) in _key(text[:3000]):
                out[letter] = out.get(letter, "") + " \n " + normalize(text)
    return out


def missing(papers: dict[str, str] | None) -> list[str]:
    """The claims whose quote is not found (papers None: docs claims only)."""
    out = []
    for key, claim in CLAIMS.items():
        if key.startswith("docs:"):
            page = ROOT / claim.paper
            found = page.is_file() and normalize(claim.quote) in normalize(page.read_text(encoding="utf-8"))
        elif papers is None:
            continue
        else:
            found = normalize(claim.quote) in papers.get(claim.paper, "")
        if not found:
            out.append(f"{key}: not found in {claim.paper}: {claim.quote[:100]}")
    return out


def main(argv: list[str]) -> int:
    papers = paper_texts(Path(argv[0])) if argv else None
    if papers is not None and set(papers) != set(TITLES):
        print(f"papers found: {sorted(papers)}; expected {sorted(TITLES)}")
        return 1
    bad = missing(papers)
    print("\n".join(bad) if bad else f"every quote found ({len(CLAIMS)} claims)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
