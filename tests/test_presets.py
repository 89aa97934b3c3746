"""Presets are complete configurations written once (parity.engine.config.PRESETS): `--quick` is the 'quick' one,
`--schedule notebook` the 'notebook' one, a flag beside a preset overrides only its own part, two that contradict
each other are one clear error, and --help says what each sets. No framework is imported."""

import dataclasses

import pytest

from parity import run
from parity.common.messages import HarnessError
from parity.engine.config import PRESETS
from parity.workloads.cnn.spec import CNN_FULL


def _config(*argv: str):
    return run.config(run.parser().parse_args(list(argv)))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_sets_every_part_of_the_run_it_names(name):
    p, cfg = PRESETS[name], _config("--preset", name)
    assert (cfg.preset, cfg.configs, cfg.budget_s, cfg.parity_steps) == (
        name,
        p.configs,
        p.budget_s,
        p.parity_steps,
    )
    assert cfg.max_reps == p.max_reps and cfg.matmul_size() == p.peak_size and cfg.quick == (p.specs == "quick")
    assert cfg.tuned == (p.configs != "default")
    notebook = {"global_batch": CNN_FULL.global_batch, "epochs": CNN_FULL.epochs, "steps_per_epoch": 100}
    assert (cfg.overrides == notebook) == (p.specs == "notebook")


def test_the_short_flags_are_their_presets():
    assert _config("--quick") == _config("--preset", "quick")
    assert _config("--schedule", "notebook") == dataclasses.replace(
        _config("--preset", "notebook"), command=_config("--schedule", "notebook").command
    )
    assert _config().preset == "default"


def test_a_flag_beside_a_preset_overrides_its_own_part_only():
    cfg = _config("--quick", "--configs", "levers", "--parity-steps", "20", "--budget", "0")
    assert (cfg.configs, cfg.parity_steps, cfg.budget_s, cfg.max_reps) == ("levers", 20, 0.0, 50)
    assert cfg.quick


@pytest.mark.parametrize(
    "argv",
    [
        ("--quick", "--schedule", "notebook"),
        ("--preset", "levers", "--quick"),
        ("--preset", "quick", "--schedule", "notebook"),
    ],
)
def test_presets_that_contradict_each_other_are_one_clear_error(argv):
    with pytest.raises(HarnessError, match="contradict each other: choose one"):
        _config(*argv)


def test_help_says_what_each_preset_sets():
    text = " ".join(run.parser().format_help().split())
    for p in PRESETS.values():
        assert f"'{p.name}': {' '.join(p.about.split())}" in text
