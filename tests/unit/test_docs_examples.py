"""The Python examples of the documentation pages run as written (the README's run in test_python_api.py).

Every ```python block of docs/ runs, except those that need a cluster (the SLURM recipe of guide-sweeps.md names
``dask_jobqueue``, which the tests do not install).
"""

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
NEEDS_A_CLUSTER = ("dask_jobqueue",)


def _blocks():
    for page in sorted(DOCS.glob("*.md")):
        for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)):
            if not any(name in code for name in NEEDS_A_CLUSTER):
                yield pytest.param(code, id=f"{page.name}-{i}")


@pytest.mark.slow
@pytest.mark.parametrize("code", list(_blocks()))
def test_docs_python_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs example", "exec"), {})


def test_every_code_path_on_the_concepts_page_exists():
    """docs/concepts.md names where each object lives (``geometry.linear.subspace.subspace``): each name resolves."""
    import importlib

    page = (DOCS / "concepts.md").read_text(encoding="utf-8")
    missing = []
    for path in sorted(set(re.findall(r"`((?:geometry|data|training|models|metrics)(?:\.\w+)+)", page))):
        parts = path.split(".")
        for k in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module("ntpbias." + ".".join(parts[:k]))
                break
            except ImportError:
                continue
        for attr in parts[k:]:
            obj = getattr(obj, attr, None)
        if obj is None:
            missing.append(path)
    assert not missing, f"docs/concepts.md names code that does not exist: {missing}"
