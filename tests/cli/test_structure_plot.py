"""Paper C's Figure 1 for a dataset: ``ntpbias structure FILE --plot OUT.png``."""

import pytest

from ntpbias.data.sentences import example1
from ntpbias.data.structure import analyze_structure
from ntpbias.report.structure import structure_data


def test_example1_orders_are_the_papers():
    """Example 2 of paper C: under P, O is optimal (O >_P P), P non-optimal, S and V non-comparable."""
    data = structure_data(analyze_structure(example1()))
    vocab = data["vocab"]
    P = vocab.index("P")
    assert {vocab[t]: c for t, c in enumerate(data["classes"][P])} == {
        "O": "optimal", "P": "non-optimal", "S": "non-comparable", "V": "non-comparable"}
    assert [(vocab[u], vocab[v]) for q, u, v in data["relations"] if q == P] == [("O", "P")]
    assert [vocab[n] for n in data["next_token"]] == ["V", "O", "P", "S"]  # the collocation S->V->O->P->S


@pytest.mark.parametrize("name", ["fig1.png", "fig1.svg"])
def test_structure_plot_writes_the_figure(tmp_path, cli, name):
    out = tmp_path / name
    code, _, err = cli("structure", "example1", "--plot", out)
    assert code == 0, err
    assert out.stat().st_size > 5000


def test_structure_plot_refuses_an_unknown_format_before_any_work(tmp_path, cli, assert_user_error):
    code, _, err = cli("structure", "example1", "--plot", tmp_path / "fig.txt")
    assert_user_error(code, err, "give a .png, .svg or .pdf")
    assert not (tmp_path / "fig.txt").exists()
