"""``ntpbias settings`` and docs/settings.md: every config key with what it admits and its default."""

import json
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "settings.md"


def test_docs_settings_page_is_the_generated_table(cli):
    code, out, err = cli("settings", "--markdown")
    assert code == 0, err
    page = DOC.read_text(encoding="utf-8")
    assert page[page.index("## linear"):] == out, "regenerate docs/settings.md with `ntpbias settings --markdown`"


def test_settings_of_an_experiment_and_of_a_preset(cli):
    code, out, _ = cli("settings", "linear")
    assert code == 0
    assert "  data.dirichlet = 1.0    # float > 0; random: Dirichlet concentration" in out
    assert "  data.pi = \"uniform\"    # one of uniform, dirichlet;" in out
    code, out, _ = cli("settings", "linear-fig5-adam", "--json")
    rows = {r["key"]: r for r in next(iter(json.loads(out).values()))}
    assert rows["optimizer.name"]["default"] == '"adam"' and rows["optimizer.lr"]["allowed"] == "float > 0"


def test_unknown_settings_name_is_a_user_error(cli, assert_user_error):
    code, _, err = cli("settings", "nope")
    assert_user_error(code, err, "unknown experiment or preset 'nope'")


def test_train_help_says_where_the_settings_are(cli):
    code, out, _ = cli("train", "--help")
    out = " ".join(out.split())
    assert code == 0 and "ntpbias settings" in out and "docs/settings.md" in out and "--max-memory" in out
