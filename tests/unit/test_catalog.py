"""The catalog of experiments, groups and presets (ntpbias.experiments.catalog): every dotted path it names resolves,
and every table agrees with the code it points to."""

import inspect

import pytest

from ntpbias.config import DTYPE_BYTES
from ntpbias.experiments.base import SCALES
from ntpbias.experiments.catalog import EXPERIMENTS, GROUPS, PRESETS, resolve, resolve_ids


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_experiment_names_code_that_exists_and_its_config_class_names_it(name):
    e = EXPERIMENTS[name]
    cls = e.config_class
    assert cls().experiment == name  # a TOML file's `experiment` key picks this row
    assert list(inspect.signature(resolve(e.trainer)).parameters)[:2] == ["cfg", "ctx"]
    assert resolve(e.checks).__name__ == e.checks and resolve(e.report).__name__ == e.report
    assert e.doc.startswith("docs/")


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds_at_every_scale_with_its_experiment(name):
    preset = PRESETS[name]
    for scale in SCALES:
        cfg = preset.make(scale)
        assert type(cfg) is EXPERIMENTS[cfg.experiment].config_class


def test_groups_name_existing_runners_presets_and_unique_figure_ids():
    figures = [f for g in GROUPS.values() for f in g.figures]
    assert len(figures) == len(set(figures)) and not set(figures) & set(GROUPS)
    for g in GROUPS.values():
        assert callable(resolve(g.run)) and set(g.presets) <= set(PRESETS)
    assert resolve_ids(["all"]) == dict.fromkeys(GROUPS)


def test_dtype_names_agree_with_torch():
    from ntpbias._tensor import DTYPES

    assert {name: dtype.itemsize for name, dtype in DTYPES.items()} == DTYPE_BYTES


@pytest.mark.parametrize("package", ["ntpbias", "ntpbias.data", "ntpbias.geometry", "ntpbias.experiments.linear",
                                     "ntpbias.experiments.separability", "ntpbias.experiments.optimizers",
                                     "ntpbias.experiments.ufm", "ntpbias.experiments.attention",
                                     "ntpbias.experiments.transformer"])
def test_every_lazily_exported_name_resolves(package):
    from importlib import import_module

    module = import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
