"""Every public name of ``import ntpbias as nb`` has a numpydoc docstring with Parameters, Returns and an Example.

The examples themselves run as doctests (``--doctest-modules`` over ``src/ntpbias``), so a name documented here is
also a name whose example works.
"""

import inspect

import pytest

import ntpbias as nb

#: public names that are values, not functions or classes: documented on docs/api.md in words
VALUES = {"__version__", "PRESETS"}


def _sections(doc: str) -> set[str]:
    lines = doc.splitlines()
    return {lines[i].strip() for i in range(len(lines) - 1)
            if lines[i + 1].strip() and set(lines[i + 1].strip()) == {"-"} and lines[i].strip()}


@pytest.mark.parametrize("name", sorted(set(nb.__all__) - VALUES))
def test_public_name_has_a_numpydoc_docstring_with_an_example(name):
    obj = getattr(nb, name)
    doc = inspect.getdoc(obj)
    assert doc, f"nb.{name} has no docstring"
    sections = _sections(doc)
    assert "Examples" in sections and ">>>" in doc.split("Examples", 1)[1], f"nb.{name}: no Examples section"
    if inspect.isclass(obj):
        assert "Parameters" in sections or "Attributes" in sections, f"nb.{name}: no Parameters/Attributes"
    else:
        has_params = any(p.name != "self" for p in inspect.signature(obj).parameters.values())
        assert not has_params or "Parameters" in sections, f"nb.{name}: no Parameters section"
        assert "Returns" in sections, f"nb.{name}: no Returns section"
    example = doc.split("Examples", 1)[1]
    assert f"{name}" in example, f"nb.{name}: the example does not use the name it documents"
