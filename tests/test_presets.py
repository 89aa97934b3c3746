"""Presets are complete configurations written once (parity.engine.config.PRESETS): `--quick` is the 'quick' one,
`--schedule notebook` the 'notebook' one, a flag beside a preset overrides only its own part, two that contradict
each other are one clear error, and --help says what each sets. No framework is imported."""

import dataclasses
import re

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
    assert cfg.notebook == (p.specs == "notebook") and cfg.overrides == {}
    if cfg.notebook:  # each trained workload on the notebook's schedule, as it declares it
        for wl in ("cnn", "lstm", "vit"):
            spec = cfg.spec(wl)
            assert (spec.global_batch, spec.epochs, spec.steps_per_epoch) == (CNN_FULL.global_batch, 10, 100), wl


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


def test_the_default_times_one_device_and_full_is_the_whole_matrix():
    """On a CPU the default times one device; 8 simulated devices share its cores (they check the data-parallel
    path, no speed a user can buy) and go to `full`; `quick` reaches the same code at 2. A GPU or TPU times one chip
    and every chip."""
    assert _config().replica_counts() == (1,)
    assert _config("--preset", "full").replica_counts() == (1, 8)
    assert _config("--quick").replica_counts() == (1, 2)
    assert _config("--preset", "full", "--replicas", "2").replica_counts() == (2,)  # a flag beside it wins
    for name in PRESETS:
        assert PRESETS[name].replica_counts("gpu") == PRESETS[name].replica_counts("tpu") == (1, 0)
    full, default = PRESETS["full"], PRESETS["default"]
    assert (full.configs, full.specs, full.parity_steps, full.peak_size) == (
        default.configs,
        default.specs,
        default.parity_steps,
        default.peak_size,
    )


def test_an_accelerator_with_one_chip_has_no_second_round():
    from parity.engine.config import chips

    one = {"tf": {"devices": ["/device:CPU:0 (CPU)", "/device:GPU:0 (GPU)"]}, "jax": {"devices": ["gpu:0 NVIDIA H200"]}}
    assert chips("gpu", one) == 1
    two = {"jax": {"devices": ["tpu:0 TPU v4", "tpu:1 TPU v4"]}}
    assert chips("tpu", two) == 2 and chips("gpu", two) == 0


def test_the_default_trains_for_its_trajectory_checks_the_variants_it_times():
    """The default judges the trajectories of the variants it times; `full` every variant the catalogs offer, as
    before. With one owner at a time too: the tuned owners' variants are known before they start."""
    from parity.workloads.trained import parity_variants

    timed = {"cnn_train": {"jax": {"jit+pool", "jit"}}, "lstm_train": {"jax": {"jit"}}}
    default, full = _config(), _config("--preset", "full")
    assert (default.parity_variants, full.parity_variants) == ("timed", "catalog")
    assert parity_variants(default, timed, "cnn_train", "jax") == {"variants": ["jit", "jit+pool"]}
    assert parity_variants(default, timed, "cnn_train", "tf") == {"variants": []}
    assert parity_variants(full, timed, "cnn_train", "jax") == {}
    assert parity_variants(_config("--exclusive"), timed, "cnn_train", "jax") == {"variants": ["jit", "jit+pool"]}


def test_one_owner_at_a_time_knows_what_its_tuned_owners_will_time_before_they_start():
    """The default owner takes the parity round; the variants its framework's tuned owners time (here '+fast', under
    which the float32 best-known runs) are added to the round's `timed` from its tables, before they start."""
    from pathlib import Path

    from parity.api.variants import ONE, Setting, Variant
    from parity.common.protocol import Offered
    from parity.engine.schedule import Round, RunState, _timed_by_tuned_owners

    table = (
        Variant("jit", "cnn_train", ONE, rank=1),
        Variant("jit+pool", "cnn_train", ONE, tuned=True, rank=0),
        Variant("jit+scan", "cnn_train", ONE, tuned=True, dispatch=True),
    )
    fast = Setting("fast", {"XLA_FLAGS": "--fast"}, ("float32",), rank=0)

    class Owner:
        framework = "jax"

        def ask(self, req):
            return Offered([v.wire() for v in table if v.kind == req.kind])

    rnd = Round(_config("--exclusive", "--workload", "cnn"), RunState({}, {}), 1, Path("."))
    rnd.workers, rnd.hello = {"jax": Owner()}, {"jax": {"settings": [fast.wire()]}}
    _timed_by_tuned_owners(rnd, "jax", {"fast": dict(fast.env)})
    assert rnd.timed["cnn_train"] == {"jax": {"jit+pool"}}


@pytest.mark.parametrize(
    "argv, said",
    [
        (("--reps", "3", "--max-reps", "2"), "--max-reps 2 is below --reps 3 (the least calls a row gets): choose one"),
        (("--budget", "0", "--max-reps", "1"), "--max-reps 1 is below --reps 5"),
        (
            ("--batch", "7", "--workload", "conv"),
            "--batch sets the trained workloads' schedule (cnn, lstm, vit): --workload conv",
        ),
        (("--epochs", "3", "--workload", "matmul"), "--epochs sets the trained workloads' schedule"),
    ],
)
def test_flags_that_contradict_or_would_be_ignored_are_one_clear_error(argv, said):
    with pytest.raises(HarnessError, match="^" + re.escape(said)):
        _config(*argv)
    assert _config("--batch", "64", "--workload", "cnn").overrides == {"global_batch": 64}


@pytest.mark.parametrize("workload", ["cnn", "lstm", "vit"])
def test_an_accelerator_trains_the_full_size_on_a_shorter_schedule_and_says_so(workload):
    """A GPU's or TPU's default: the full size and global batch, 6 epochs (5 timed) of 20 steps, said in one note;
    the notebook preset restores the notebook's schedule, and a CPU keeps its own."""
    from parity.workloads import WORKLOADS

    w = WORKLOADS[workload]
    spec = w.spec(False, "tpu")
    assert (spec.epochs, spec.steps_per_epoch, spec.global_batch) == (6, 20, w.full.global_batch)
    assert dataclasses.replace(spec, epochs=w.full.epochs, steps_per_epoch=w.full.steps_per_epoch) == w.full
    (note,) = w.size_note(spec)
    assert note.startswith(f"{workload}: accelerator schedule, 6 epochs x 20 steps at global batch 1024")
    notebook = w.spec(False, "tpu", None, True)
    assert (notebook.epochs, notebook.steps_per_epoch) == (w.full.epochs, w.full.steps_per_epoch)
    assert w.size_note(notebook) == [] and w.spec(False, "cpu") == w.cpu
