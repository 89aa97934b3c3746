"""`python -m parity.run` end to end, in subprocesses as a user runs it."""

import json
import os
import re
import subprocess
import sys
import time

import pytest
from parity_cli import TINY, run_parity

from parity.common import frameworks
from parity.common.tolerances import tolerance
from parity.judging.roofline import native_bf16
from parity.workloads.conv import CONV_QUICK

ROW_KEYS = {
    "kind",
    "framework",
    "variant",
    "device",
    "replicas",
    "precision",
    "median_s",
    "iqr_s",
    "compile_s",
    "gflops_per_s",
    "max_rel_err",
    "verified",
}


def run(*args, timeout=600, env=None):
    return run_parity(*args, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def quick_conv(tmp_path_factory):
    out = tmp_path_factory.mktemp("quick")
    # two timed calls a row (no calibration): the tests read what the rows hold, not their speed
    p = run(
        "--device",
        "cpu",
        "--quick",
        "--workload",
        "conv",
        "--reps",
        "2",
        "--budget",
        "0",
        "--configs",
        "best",
        "--verbose",
        "--out",
        str(out),
    )
    return p, out


def test_quick_run_prints_a_verified_table(quick_conv):
    p, _ = quick_conv
    assert p.returncode == 0, p.stderr[-2000:]
    import jax_impl
    from parity.judging.roofline import native_bf16

    # float32's setting: the best-ranked one offered here ('ynn+onednn+thp' with bfloat16 hardware and huge pages on
    # request, 'ynn' with neither)
    offered = jax_impl.settings("cpu", native_bf16("cpu", "cpu"))
    ynn = min((s for s in offered if s.rank is not None and "float32" in s.formats), key=lambda s: s.rank).name
    for variant in ("jit", "pmap", "shard_map", "function", "strategy", "ops", "data_parallel", f"jit+{ynn}"):
        assert f" {variant} " in p.stdout
    # --configs best: beside each framework out of the box, its best-known configuration only (`best` ranks)
    for variant in ("function+xla", f"pmap+{ynn}"):
        assert f" {variant} " not in p.stdout

    if not native_bf16("cpu", "cpu"):  # no bfloat16 hardware (or capped below it): no emulated rows, and it says so
        assert not re.search(r"\+bf16 +cpu", p.stdout)
        assert "'+bf16' variants not run" in p.stdout
    assert "INVALID" not in p.stdout


def test_results_json_schema(quick_conv):
    _, out = quick_conv
    doc = json.loads((out / "results.json").read_text())
    assert {"python", "device", "precision", "frameworks"} <= set(doc["env"])
    import jax_impl  # its tuned configurations: YNNPACK, and oneDNN where jaxlib and the CPU have bfloat16 for it
    from parity.engine.selection import settings_to_run

    best = {s.name for s in settings_to_run("best", jax_impl.settings("cpu", native_bf16("cpu", "cpu")))}
    # Keras on JAX runs on the same runtime, with the same settings
    tuned = {f"{fw}+{c}" for fw in ("jax", "keras-jax") for c in best}
    import torch_impl  # huge pages for its allocator, where the kernel grants them on request

    tuned |= {f"torch+{s.name}" for s in settings_to_run("best", torch_impl.settings("cpu"))}
    assert set(doc["env"]["frameworks"]) == {"tf", "jax", "keras-jax", "torch", *tuned}
    rows = doc["rows"]
    # PyTorch's conv at one device only (its data parallelism is the trained models': torch_impl.catalog)
    assert {(r["framework"], r["replicas"]) for r in rows} == {
        *((fw, n) for fw in ("tf", "jax", "keras-jax") for n in (1, 2)),
        ("torch", 1),
    }
    for r in rows:
        assert ROW_KEYS <= set(r)
        assert r["verified"] is True and r["median_s"] > 0 and r["compile_s"] > 0
        # the number format is the row's own: bfloat16 rows say so, get bfloat16's tolerance, meet only each other
        assert r["precision"] == ("bfloat16" if r["dtype"] == "bfloat16" else "default")
        assert r["tolerance"] == tolerance("cpu", "default", r["dtype"])
        assert r["max_rel_err"] < r["tolerance"] and r["xfw_max_rel_err"] < r["tolerance"]
        assert r["gflops_per_s"] == pytest.approx(r["flops"] / r["median_s"] / 1e9)
        assert r["spec"] == CONV_QUICK.to_dict()  # its shapes: what parity.compare matches a row on
        assert 0 < r["pct_peak"] <= 100 and r["bound"] in ("compute", "memory")
        assert r["reps"] >= 2 and r["q1_s"] <= r["median_s"] <= r["q3_s"]
    peak = doc["env"]["peak"]
    assert peak["measured_flops"] > 0 and peak["computed_flops"] > 0
    assert (out / "results.csv").read_text().count("\n") == len(rows) + 1
    assert (out / "results.png").read_bytes()[:4] == b"\x89PNG"


def test_a_tiny_run_end_to_end(tmp_path):
    """The fast tier's one run through real workers (conftest.FAST_TESTS): every framework's worker, the quick
    matmul at one device, two timed calls a row; its first screen and its files."""
    p = run(*TINY, "--quiet", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads((tmp_path / "results.json").read_text())
    assert {r["framework"] for r in doc["rows"]} == set(frameworks.KEYS)
    assert all(r["verified"] and r["max_rel_err"] < r["tolerance"] and r["reps"] == 2 for r in doc["rows"])
    lines = p.stdout.splitlines()
    assert f"verdict: {len(doc['rows'])} of {len(doc['rows'])} rows verified against float64" in p.stdout
    assert max(len(ln) for ln in lines if not ln.startswith("wrote ")) <= 120 and len(lines) <= 40
    assert " matmul " not in p.stdout  # the per-row table is in the files (and --verbose), not on the first screen
    assert "| matmul | tf |" in (tmp_path / "results.md").read_text()


def test_absent_device_is_one_clear_line(tmp_path):
    t0 = time.monotonic()
    p = run("--device", "tpu", "--quick", "--quiet", "--out", str(tmp_path))
    assert time.monotonic() - t0 < 60
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--device tpu asked for" in lines[0]
    assert "found" in lines[0]


def test_absent_framework_device_for_jax_only(tmp_path):
    # an --out of its own: the default results/ may be another test's run at the same time (its lock is refused)
    p = run("--device", "gpu", "--framework", "jax", "--quick", "--quiet", "--out", str(tmp_path))
    assert p.returncode == 2
    assert re.fullmatch(r"error: JAX: --device gpu asked for, but JAX found only: cpu x\d+ \(cpu\)", p.stderr.strip())


def test_non_dividing_replicas(tmp_path):
    p = run("--quick", "--replicas", "3", "--out", str(tmp_path))
    assert p.returncode == 2 and "does not divide by 3 replicas" in p.stderr
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--device", "npu"],
        ["--reps", "0"],
        ["--replicas", "two"],
        ["--bogus"],
        ["--quick", "--schedule", "notebook"],
        ["--validate", "sometimes"],
    ],
)
def test_bad_flags(args):
    p = run(*args)
    assert p.returncode == 2 and "error:" in p.stderr and "Traceback" not in p.stderr


def test_list_devices():
    p = run("--list-devices")
    assert p.returncode == 0
    assert "JAX" in p.stdout and "TensorFlow" in p.stdout and "cpu:0" in p.stdout


def test_help_explains_every_flag():
    p = run("--help")
    for flag in (
        "--device",
        "--framework",
        "--workload",
        "--replicas",
        "--precision",
        "--quick",
        "--reps",
        "--warmup",
        "--timeout",
        "--out",
        "--list-devices",
        "--quiet",
        "--budget",
        "--max-reps",
        "--configs",
    ):
        assert flag in p.stdout


CNN_ARGS = [
    "--workload",
    "cnn",
    "--quick",
    "--replicas",
    "1",
    "--validate",
    "epoch",
    "--exclusive",
    "--compile-ahead",  # as on a TPU: one owner at a time, each one's training steps compiled ahead
    "--configs",
    "default",
    # two timed calls a row (no calibration): the tests read what the rows hold, not their speed
    "--reps",
    "2",
    "--budget",
    "0",
]


@pytest.fixture(scope="module")
def quick_cnn(tmp_path_factory):
    """One CNN run end to end, read by the tests below: synthetic data, per-epoch validation, and one owner of the
    device at a time (the two cost the same start-up and training, so they share one run)."""
    out = tmp_path_factory.mktemp("cnn")
    (out / "empty").mkdir()  # a data folder that exists and holds no Fashion-MNIST: --data auto falls back, saying so
    args = [*CNN_ARGS, "--data-dir", str(out / "empty"), "--out", str(out)]
    # a device lock of its own: the one every run of this user shares may be another test's now
    return run(*args, env={**os.environ, "PARITY_LOCK_DIR": str(out / "locks")}), out, args


def test_cnn_quick_compiled_jax_and_keras_training_steps_ahead(quick_cnn):
    """JAX's and Keras 3 on JAX's training steps and inference programs compiled before their first calls
    (tests/test_ahead.py has the schedule), and their parity programs side by side; TensorFlow's and PyTorch's have
    nothing to compile ahead."""
    p, out, _ = quick_cnn
    notes = json.loads((out / "results.json").read_text())["env"]["notes"]
    ahead = sorted(n.split(":")[0] for n in notes if "compiled side by side before their first calls" in n)
    assert ahead == ["JAX on cpu x1", "Keras 3 (JAX) on cpu x1"], notes
    # and each worker's parity programs, the gradients' beside the trajectories' (the real trainers' ahead)
    assert any(n.startswith("cnn parity x1") and "trajectory programs compiled side by side" in n for n in notes)
    # JAX's and Keras 3 on JAX's training row and inference row each
    assert p.stderr.count("s of it compiled ahead), output verified") == 4, p.stderr[-3000:]
    # each owner after the first started while the one before compiled, its imports done before it had the device
    started = re.findall(
        r"starting the (.+) worker alone on cpu x1 \(one owner at a time(; its imports done)?\)", p.stderr
    )
    assert [s[1] != "" for s in started] == [False, True, True, True], started
    # the parity rounds ran while the rows' programs compiled, before any row's first call
    assert (
        p.stderr.index("cnn parity x1")
        < p.stderr.index("waiting for its rows' programs")
        < p.stderr.index("cnn_train: first epoch")
    )


def test_cnn_quick_one_replica(quick_cnn):
    p, out, args = quick_cnn
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    kinds = {(r["kind"], r["framework"], r["variant"]) for r in doc["rows"]}
    assert kinds == {
        ("cnn_train", "tf", "fit"),
        ("cnn_train", "jax", "jit"),
        ("cnn_train", "keras-jax", "fit"),
        ("cnn_infer", "tf", "predict"),
        ("cnn_infer", "jax", "predict"),
        ("cnn_infer", "keras-jax", "predict"),
        ("cnn_train", "torch", "eager"),
        ("cnn_infer", "torch", "predict"),
    }
    for r in doc["rows"]:
        assert r["verified"] and r["data"] == "synthetic" and r["images_per_s"] > 0
    names = [c["check"] for c in doc["checks"]]
    assert "forward block1" in names and "gradients (every parameter)" in names
    # each trainer once, against the reference (TF's fit): Keras on JAX and Flax against the same trajectory
    for pair in ("tf fit vs jax jit", "tf fit vs keras-jax fit", "tf fit vs torch eager"):
        assert any(n.startswith(f"trajectory loss ({pair}") for n in names), pair
    assert all(c["passed"] for c in doc["checks"] if not c["check"].startswith("test accuracy"))
    assert "SYNTHETIC" in p.stdout  # the table says which data it used
    # ... and so does a boxed warning before training, with the exact command that gets the real data
    command = " ".join(["python -m parity.run", *args, "--data download"])
    assert "SYNTHETIC DATA" in p.stderr and command in p.stderr, p.stderr[:2000]
    assert p.stderr.index("SYNTHETIC DATA") < p.stderr.index("first epoch")
    # per-epoch validation: every training row's history, in the JSON, the Markdown and a chart of its own
    for r in doc["rows"]:
        if r["kind"] == "cnn_train":
            assert [h["epoch"] for h in r["history"]] == [1, 2]
            assert r["test_accuracy"] == r["history"][-1]["val_accuracy"]
    assert "| training row | epoch 1 | epoch 2 |" in (out / "results.md").read_text()
    assert (out / "results_history.png").stat().st_size > 0


def test_one_owner_at_a_time_runs_every_row_and_reports_drift(quick_cnn):
    """The CNN with --exclusive and real frameworks: each worker alone (they take the lock, so any overlap would
    fail the run), the parity checks judged from the arrays each left, and each worker's rows timed again at its
    end. (The schedule itself, operations' rows and their cross-check across owners: tests/test_engine.py; a second
    owner refused: tests/test_owners.py.)"""
    p, out, _ = quick_cnn
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    assert doc["env"]["one_owner_at_a_time"] is True
    assert {r["framework"] for r in doc["rows"]} == set(frameworks.KEYS)
    assert all(r["verified"] for r in doc["rows"])
    starts = [ln for ln in p.stderr.splitlines() if "worker alone" in ln]
    assert [next(f.label for f in frameworks.TABLE.values() if f" {f.label} " in ln) for ln in starts] == [
        f.label for f in frameworks.TABLE.values()
    ]
    assert "measuring the TensorFlow rows again, at the end of its turn (drift)" in p.stderr
    notes = [n for n in doc["env"]["notes"] if n.startswith("one owner of the device at a time")]
    assert len(notes) == len(frameworks.TABLE) and all("between the first and the last" in n for n in notes)
    assert all(r["drift"] is not None for r in doc["rows"])  # each owner's rows, timed again at its end
    took = [n for n in doc["env"]["notes"] if n.startswith("cnn parity x1: its arrays took")]
    assert len(took) == len(frameworks.TABLE)  # each owner's parity round, its time said
    names = {c["check"] for c in doc["checks"]}
    assert {"gradients (every parameter)", "forward block1"} <= names
    assert any(n.startswith("trajectory loss (tf fit vs jax jit") for n in names)
    assert all(c["passed"] is not False for c in doc["checks"])


def test_the_notebook_schedule_in_one_flag():
    from parity import run as cli
    from parity.workloads.cnn.suite import validation

    cfg = cli.config(cli.parser().parse_args(["--schedule", "notebook"]))
    spec = cfg.spec("cnn")
    assert (spec.epochs, spec.steps_per_epoch, spec.global_batch) == (10, 100, 1024)
    assert validation(cfg, spec) == "epoch"  # the notebook's validation_data after every epoch
    cfg = cli.config(cli.parser().parse_args(["--schedule", "notebook", "--epochs", "3"]))
    assert (cfg.spec("cnn").epochs, cfg.spec("cnn").global_batch) == (3, 1024)  # a flag still overrides it
    cfg = cli.config(cli.parser().parse_args([]))
    assert validation(cfg, cfg.spec("cnn")) == "none"  # the CPU's 12 steps: accuracy would mean nothing


def test_several_workloads_in_one_flag_run_in_the_tables_order():
    from parity import run as cli
    from parity.workloads import WORKLOADS

    def chosen(*args):
        return cli.config(cli.parser().parse_args(list(args))).workloads

    assert chosen("--workload", "matmul", "cnn", "matmul") == ("cnn", "matmul")  # each once, in WORKLOADS' order
    assert chosen() == chosen("--workload", "all") == chosen("--workload", "conv", "all") == tuple(WORKLOADS)
    p = run("--workload", "cnn", "mlp")
    assert p.returncode == 2 and "invalid choice: 'mlp'" in p.stderr


def test_real_data_absent_is_a_clear_error(tmp_path):
    p = run("--workload", "cnn", "--quick", "--data", "real", "--data-dir", str(tmp_path), "--quiet")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "not found" in p.stderr and "--data-dir" in p.stderr


def test_a_framework_that_is_not_installed_is_a_note_not_a_crash(tmp_path):
    fake = tmp_path / "site" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named tensorflow (a stand-in)')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])}
    args = [*TINY, "--out", str(tmp_path / "out")]
    p = subprocess.run(
        [sys.executable, "-m", "parity.run", *args], capture_output=True, text=True, timeout=600, env=env
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "not run: tf: tf is not installed" in p.stdout
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {r["framework"] for r in doc["rows"]} == {"jax", "keras-jax", "torch"}  # Keras on JAX needs no TensorFlow
    assert doc["env"]["skipped"][0]["framework"] == "tf"


def test_quick_caps_its_calibrated_calls_lower_and_a_given_cap_wins():
    from parity import run as cli

    def cap(*args):
        return cli.config(cli.parser().parse_args(list(args))).max_reps

    from parity.engine.config import PRESETS

    assert (cap(), cap("--quick"), cap("--quick", "--max-reps", "7"), cap("--reps", "60")) == (
        PRESETS["default"].max_reps,
        50,
        7,
        60,  # more least calls than the preset's cap: the cap follows
    )
