"""docs/cli.md is the commands' own help: regenerating it changes nothing."""

from pathlib import Path

from ntpbias.cli import reference

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_cli_reference_matches_the_commands():
    assert DOC.read_text(encoding="utf-8") == reference.markdown(), (
        "docs/cli.md is out of date: regenerate it with `python -m ntpbias.cli.reference > docs/cli.md`")


def test_every_command_has_a_section_with_examples():
    page = reference.markdown()
    for name in ("analyze", "corpus", "list", "predict", "reproduce", "settings", "structure", "sweep", "train"):
        section = page.split(f"## ntpbias {name}\n", 1)[1].split("\n## ", 1)[0]
        assert "Usage: ntpbias" in section and "Example" in section, name


def test_ranges_without_an_upper_limit_read_as_lower_bounds():
    page = reference.markdown()
    assert "9223372036854775807" not in page
    assert "[default: 900; x>=1]" in page  # predict --steps
