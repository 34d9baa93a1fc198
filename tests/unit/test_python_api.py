"""The README's "Python API" section runs as written, and ``import ntpbias as nb`` exposes what it promises."""

import re
from pathlib import Path

import pytest

import ntpbias as nb

README = Path(__file__).resolve().parents[2] / "README.md"


def _section_code(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, f"no python block in the README section {title!r}"
    return "\n".join(blocks)


def test_readme_python_api_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(_section_code("Python API"), "README.md (Python API)", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith("Analysis(m=2, V=3, d=2, entropy=0.346574, dim_F=1, compatible=True, separable=True")
    assert (tmp_path / "runs" / "gd" / "summary.json").is_file()


def test_every_public_name_resolves_and_unknown_names_fail():
    for name in nb.__all__:
        assert getattr(nb, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        nb.nope  # noqa: B018


def test_analysis_repr_is_short_and_has_an_html_form():
    import torch

    a = nb.analyze(nb.NTPData.from_arrays(torch.eye(3), torch.eye(3)))
    assert len(repr(a)) < 300 and "tensor" not in repr(a)
    assert a._repr_html_().startswith("<table>") and "separable" in a._repr_html_()


def test_a_separability_run_reads_back(tmp_path):
    """A study's metrics.csv holds curves over d, not training histories: load_run still reads the run back."""
    import ntpbias as nb

    run = nb.train("separability-ntp", out=tmp_path / "s", set={"trials": 2, "m": 6})
    assert run.histories == {} and run.passed and run.summary["status"] == "completed"
