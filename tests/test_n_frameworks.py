"""N frameworks: the summary, its comparisons, the per-layer tables, the CNN's checks and `compare` name every
framework the rows hold, in the frameworks' table order, the first of them the reference; with today's two they
read as they always did. No TensorFlow or JAX starts: a third framework is one more row of the table, served by
the fake (tests/fakeimpl.py)."""

import dataclasses
import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
from fakeimpl import FakeImpl, LocalWorker, fake_engine, quick_config
from test_oracle import _saved, random_cnn_weights

from parity import compare
from parity.api.cnn import CNN_BLOCKS, CNN_WEIGHTS
from parity.api.lstm import LstmArchitecture
from parity.common import frameworks
from parity.engine.config import Config
from parity.engine.schedule import run_suite
from parity.judging import layers, roofline, summary
from parity.output import tables
from parity.output.files import load_results
from parity.workloads.cnn import CNN_LAYERS, checks
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.cnn.tolerances import cnn_grad_tolerance, cnn_loss_tolerance
from parity.workloads.trained import trajectories

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"
KERAS = frameworks.Framework("kjax", "Keras (JAX)", "Keras-JAX", "kjax_impl", ("keras",), "tab:green")
TODAY = ("kind", "replicas", "format", "TF fastest", "JAX fastest", "JAX/TF (95% CI)", "parity")
THREE = ("kind", "replicas", "format", "TF fastest", "JAX fastest", "Keras-JAX fastest")
THREE += ("JAX/TF (95% CI)", "Keras-JAX/TF (95% CI)", "parity")


@pytest.fixture
def three(monkeypatch):
    """The frameworks' table as TF, JAX and a stand-in third ('tf', 'jax', 'kjax'), declaring no `versus`: the
    engine's logic for any third framework, apart from Keras on JAX's own record."""
    table = {k: frameworks.TABLE[k] for k in (frameworks.TF, frameworks.JAX)} | {KERAS.key: KERAS}
    monkeypatch.setattr(frameworks, "TABLE", table)
    monkeypatch.setattr(frameworks, "KEYS", tuple(table))
    return tuple(table)


def _row(fw: str, median_s: float, wl: str = "conv", variant: str = "op", **kw) -> dict:
    """A verified row of five equal calls, in rounds 0-4."""
    row = {"kind": wl, "framework": fw, "variant": variant, "replicas": 1, "dtype": "float32", "tuned": False}
    row.update(verified=True, median_s=median_s, times_s=[median_s] * 5, rounds=list(range(5)), reps=5)
    return {**row, **kw}


def _doc(rows: list[dict]) -> dict:
    return {"env": {}, "rows": rows, "checks": []}


# ---- today's two: the same texts ------------------------------------------------------------------------------


def test_two_frameworks_read_as_they_always_did():
    doc = _doc([_row("tf", 0.1), _row("jax", 0.2), _row("jax", 0.1, variant="op+tuned", tuned=True)])
    assert tables.summary_columns(doc) == TODAY
    (line,) = tables.summary_body(doc)
    assert line[3:6] == ("op 100.00 ms", "op+tuned 100.00 ms", "1.00x (1.00-1.00) no difference")
    comps = summary.comparisons(doc["rows"])
    assert [(c["pair"], c["text"][:11]) for c in comps] == [
        ("jax_vs_tf", "JAX/TF 1.00"),
        ("tuned_vs_default", "op+tuned/op"),
    ]
    said = "JAX/TF (95% CI): the fastest JAX row's median over the fastest TF row's"
    assert summary.interval_note(doc).startswith(said)


def test_an_older_file_reads_with_todays_names():
    """A row's kind was its 'workload' in older files, a comparison's pair its 'kind': read, they have today's names."""
    path = RESULTS / "zen5/cnn-profile.json"
    raw, doc = json.loads(path.read_text()), load_results(path)
    assert [r["workload"] for r in raw["rows"]] == [r["kind"] for r in doc["rows"]]
    assert not any("workload" in r for r in doc["rows"])
    pairs = [(c["pair"], c["kind"]) for c in doc["comparisons"]]
    assert pairs == [(c["kind"], c["workload"]) for c in raw["comparisons"]] and pairs


def test_an_older_rows_config_env_reads_as_its_setting_env():
    """A row's setting's environment was its 'config_env' (the shipped files): read, it is its 'setting_env', and what
    reads it reads the same (Keras on JAX's tuned rows on JAX's runtime settings: the first screen's footnote)."""
    from parity.output import screen

    path = RESULTS / "zen4/cpu-default.json"
    raw, doc = json.loads(path.read_text()), load_results(path)
    assert [r["config_env"] for r in raw["rows"]] == [r["setting_env"] for r in doc["rows"]]
    assert any(r["setting_env"] for r in doc["rows"]) and not any("config_env" in r for r in doc["rows"])
    assert screen.same_runtime(doc["rows"]) == [
        "Keras-JAX's tuned rows run with JAX's runtime settings (XLA flags, huge pages): the same runtime as JAX's"
    ]


@pytest.mark.parametrize("name", ["zen5/cnn-profile", "zen5/conv-profile"])
def test_an_old_results_file_reads_as_it_was_written(name):
    """The file's own comparisons and every table of the Markdown written beside it come out again."""
    path = RESULTS / f"{name}.json"
    doc = load_results(path)
    written = json.loads(path.read_text())["comparisons"]
    assert [(c["pair"], c["text"]) for c in summary.comparisons(doc["rows"])] == [
        (c["kind"], c["text"])
        for c in written  # the file's own names: a comparison's pair was its 'kind'
    ]
    md = (RESULTS / f"{name}.md").read_text().splitlines()
    made = [ln for ln in tables.markdown(doc).splitlines() if ln.startswith("|") or "(95% CI)" in ln]
    # the same text: today's Markdown escapes what a results file's strings could smuggle in ('<' as '&lt;', a '|'
    # inside a cell as '\|'; parity/common/safe.py), which the file's own Markdown, written before, did not
    unescaped = [re.sub(r"\\([|`\[\]])", r"\1", html.unescape(ln)) for ln in made]
    # and headings since renamed, the figures under them the same: a row kind's column was 'workload', a framework's
    # fastest row its 'best' (which now means the best-known configuration alone)
    was = {"| kind |": "| workload |", " fastest |": " best |", "the fastest ": "the best "}
    unescaped = [re.sub("|".join(map(re.escape, was)), lambda m: was[m[0]], ln) for ln in unescaped]
    assert made and all(ln in md for ln in unescaped)
    assert "| layer | pass | TF ms | JAX ms | JAX/TF |" in made


def test_one_framework_has_no_ratio_column():
    doc = _doc([_row("jax", 0.2)])
    assert tables.summary_columns(doc) == ("kind", "replicas", "format", "JAX fastest", "parity")
    assert summary.interval_note(doc) == "" and "(95% CI)" not in tables.summary_table(doc)


# ---- a third framework -----------------------------------------------------------------------------------------


def test_a_third_framework_gets_its_own_fastest_and_ratio_columns(three):
    rows = [_row("kjax", 0.15), _row("jax", 0.2), _row("tf", 0.1)]  # the table's order decides, not the rows'
    doc = _doc(rows)
    assert tables.summary_columns(doc) == THREE
    (line,) = tables.summary_body(doc)
    assert line[3:8] == ("op 100.00 ms", "op 200.00 ms", "op 150.00 ms", "2.00x (2.00-2.00)", "1.50x (1.50-1.50)")
    comps = summary.comparisons(rows)
    assert [(c["pair"], c["num"]["framework"], c["den"]["framework"]) for c in comps] == [
        ("jax_vs_tf", "jax", "tf"),
        ("kjax_vs_tf", "kjax", "tf"),
    ]
    assert [c["ratio"] for c in comps] == [pytest.approx(2.0), pytest.approx(1.5)]
    assert comps[1]["text"].startswith("Keras-JAX/TF 1.50x (95% CI 1.50-1.50")
    note = summary.interval_note(doc)
    assert note.startswith("JAX/TF (95% CI), Keras-JAX/TF (95% CI): each framework's fastest row's median over the")


def test_a_group_without_the_reference_divides_by_the_next_framework_and_says_so(three):
    rows = [
        _row("tf", 0.1),
        _row("jax", 0.2),
        _row("kjax", 0.1),
        _row("jax", 0.2, "matmul"),
        _row("kjax", 0.1, "matmul"),
    ]
    doc = _doc(rows)
    conv, matmul = tables.summary_body(doc)
    assert conv[6:8] == ("2.00x (2.00-2.00)", "1.00x (1.00-1.00) no difference")
    assert matmul[3:8] == ("-", "op 200.00 ms", "op 100.00 ms", "-", "0.50x (0.50-0.50), over JAX")
    kinds = [(c["kind"], c["pair"]) for c in summary.comparisons(rows)]
    assert kinds == [("conv", "jax_vs_tf"), ("conv", "kjax_vs_tf"), ("matmul", "kjax_vs_jax")]


def _profiled(fw: str, median_s: float, seconds: dict[tuple[str, str], float]) -> dict:
    lines = [{"layer": ly, "pass": p, "seconds": s, "share": 0.0} for (ly, p), s in seconds.items()]
    return _row(fw, median_s, "cnn_train", "fit", layers=lines, profile_coverage=0.9)


def test_the_per_layer_table_has_a_column_per_profiled_framework(three):
    doc = _doc(
        [
            _profiled("tf", 0.3, {("conv1", "forward"): 0.010, ("conv1", "backward"): 0.030}),
            _profiled("jax", 0.2, {("conv1", "forward"): 0.020, ("conv1", "backward"): 0.010}),
            _profiled(
                "kjax", 0.25, {("conv1", "forward"): 0.015, ("conv1", "backward"): 0.020, ("loss", "forward"): 1e-3}
            ),
        ]
    )
    (g,) = tables.layer_groups(doc)
    assert g.frameworks == ["tf", "jax", "kjax"]
    assert g.columns == ("layer", "pass", "TF ms", "JAX ms", "Keras-JAX ms", "JAX/TF", "Keras-JAX/TF")
    assert g.body == [
        ("conv1", "forward", "10.00", "20.00", "15.00", "2.00", "1.50"),
        ("conv1", "backward", "30.00", "10.00", "20.00", "0.33", "0.67"),
        ("loss", "forward", "-", "-", "1.00", "-", "-"),
    ]
    # each framework where it is slowest beyond the fastest other, the reference last
    assert g.said == (
        "jax loses most in conv1 forward (+10.00 ms); kjax loses most in conv1 backward (+10.00 ms); "
        "tf loses most in conv1 backward (+20.00 ms)"
    )


def test_a_framework_whose_fastest_row_was_not_profiled_is_left_out_of_the_layers(three):
    seconds = {("conv1", "forward"): 0.01}
    doc = _doc([_profiled("tf", 0.3, seconds), _row("jax", 0.2, "cnn_train", "fit"), _profiled("kjax", 0.25, seconds)])
    (g,) = tables.layer_groups(doc)
    assert g.columns == ("layer", "pass", "TF ms", "Keras-JAX ms", "Keras-JAX/TF")
    assert not tables.layer_groups(_doc([_profiled("tf", 0.3, seconds), _row("jax", 0.2, "cnn_train", "fit")]))


def test_side_by_side_keeps_the_frameworks_order_and_marks_a_missing_layer():
    rows = {"b": _profiled("b", 1, {("pool1", "forward"): 2.0}), "a": _profiled("a", 1, {("conv1", "forward"): 1.0})}
    lines = layers.side_by_side(rows, CNN_LAYERS)  # in the model's order
    assert lines == [("conv1", "forward", (None, 1.0)), ("pool1", "forward", (2.0, None))]
    assert layers.loses_most(lines, ["b", "a"]) == {}  # no line both hold: nobody is slower anywhere


def test_compare_matches_every_framework_on_its_own_rows(three):
    old = _doc([_row(fw, 0.1) for fw in three])
    new = _doc([_row("tf", 0.1), _row("jax", 0.1), _row("kjax", 0.2)])
    lines, bad = compare.compare(old, new, 0.10)
    assert bad and [(ln["row"]["framework"], ln["verdict"].split(":")[0]) for ln in lines] == [
        ("tf", "ok (95% CI 1.000-1.000)"),
        ("jax", "ok (95% CI 1.000-1.000)"),
        ("kjax", "REGRESSION"),
    ]


# ---- the CNN's checks ------------------------------------------------------------------------------------------


def test_forward_checks_compare_every_pair_in_table_order(three):
    rng = np.random.default_rng(0)
    ref = {b: rng.normal(size=(2, 4)) for b in CNN_BLOCKS}
    fwd = {
        fw: {f"forward/{b}": (a * (1 + 1e-6 * (k + 1))).astype(np.float32) for b, a in ref.items()}
        for k, fw in enumerate(three)
    }
    rows = checks.forward(fwd, ref, 1e-4)
    assert list(rows[0]["figures"]) == [
        "jax_vs_f64",
        "kjax_vs_f64",
        "tf_vs_f64",
        "tf_vs_jax",
        "tf_vs_kjax",
        "jax_vs_kjax",
    ]
    assert all(r["passed"] for r in rows)
    two = checks.forward({fw: fwd[fw] for fw in ("jax", "tf")}, ref, 1e-4)
    assert list(two[0]["figures"]) == ["jax_vs_f64", "tf_vs_f64", "tf_vs_jax"]


@pytest.fixture(scope="module")
def tie():
    """A batch and its routing, and the same routing with one pool1 window's gradient sent elsewhere."""
    w = random_cnn_weights()
    x, y = np.random.default_rng(2).uniform(0, 255, (4, 28, 28, 1)), np.array([0, 3, 7, 9])
    routing = cnn_oracle.cnn_loss_and_grads(w, x, y)[2]["routing"]
    flipped = [r.copy() for r in routing]
    win = cnn_oracle._windows(flipped[0])
    k = int(np.argmax(win[0, 3, 4, 5]))
    win[0, 3, 4, 5, k], win[0, 3, 4, 5, (k + 1) % 4] = 0.0, 1.0
    flipped[0] = cnn_oracle._unwindows(win, flipped[0].shape)
    return w, x, y, routing, flipped


def test_gradients_of_three_frameworks_explain_each_pair_that_differs(three, tie):
    w, x, y, routing, flipped = tie
    same, other = (cnn_oracle.cnn_loss_and_grads(w, x, y, r)[:2] for r in (routing, flipped))
    saved = {"tf": _saved(same, routing), "jax": _saved(same, routing), "kjax": _saved(other, flipped)}
    loss, grads = checks.grads(saved, w, x, y, cnn_grad_tolerance(4), cnn_loss_tolerance(4))
    assert set(loss["figures"]) == {"jax_vs_f64", "kjax_vs_f64", "tf_vs_f64", "tf_vs_jax", "tf_vs_kjax", "jax_vs_kjax"}
    assert set(grads["figures"]) == set(loss["figures"]) and grads["passed"], grads["detail"]
    assert grads["figures"]["tf_vs_jax"] == 0.0 and grads["figures"]["tf_vs_kjax"] > grads["tolerance"]
    assert {"routing_alone_tf_vs_kjax", "routing_alone_jax_vs_kjax"} <= set(grads["per_parameter"]["conv1.kernel"])
    said = grads["detail"].split("; ")
    assert said[0].startswith("TF and Keras-JAX differ by") and "route 1 of" in said[0] and "pool1: 1" in said[0]
    assert any(s.startswith("JAX and Keras-JAX differ by") for s in said)
    assert not any(s.startswith("TF and JAX") for s in said)


def _acc(fw: str, variant: str, acc: float) -> dict:
    spec = {"epochs": 1, "steps_per_epoch": checks.MIN_ACCURACY_STEPS}
    return {"framework": fw, "variant": variant, "replicas": 1, "test_accuracy": acc, "spec": spec, "seed": 0}


def test_the_accuracy_gap_is_the_largest_between_any_two_frameworks(three):
    (c,) = checks.accuracy([_acc("tf", "fit", 0.90), _acc("jax", "jit", 0.89), _acc("kjax", "fit", 0.86)], 0.05)
    assert c["max_abs_gap"] == pytest.approx(0.04) and c["passed"] is True
    assert checks.accuracy([_acc("kjax", "fit", 0.86)], 0.05) == []  # one framework: nothing to compare


LSTM_WEIGHTS = LstmArchitecture(8).weights


def _traj(variants: list[str], scale: float = 1.0) -> dict:
    out = {}
    for v in variants:
        out.update({f"traj/{v}/loss": np.linspace(2, 1, 4) * scale, f"traj/{v}/dtype": np.array("float32")})
        out.update({f"traj/{v}/w{i:03d}": np.ones(3) for i in range(len(checks.WEIGHT_NAMES))})
    return out


def test_trajectories_judge_each_trainer_against_the_reference_and_say_a_pair_left_out(three):
    saved = {"kjax": _traj(["fit"]), "tf": _traj(["fit"]), "jax": _traj(["jit"])}
    tols = {"trajectory_loss": 1e-3, "trajectory_params": 1e-3}
    rows, skipped = trajectories.trajectories(saved, dict.fromkeys(saved, 1), tols, 1, tols, CNN_WEIGHTS, "cnn")
    assert [(r["check"], *r["figures"]) for r in rows if r["check"].startswith("trajectory loss")] == [
        ("trajectory loss (tf fit vs jax jit, 4 steps)", "tf_vs_jax"),
        ("trajectory loss (tf fit vs kjax fit, 4 steps)", "tf_vs_kjax"),
    ]
    assert skipped is None
    rows, skipped = trajectories.trajectories(saved, {"tf": 1, "jax": 1, "kjax": 2}, tols, 2, tols, CNN_WEIGHTS, "cnn")
    assert {r["check"].split("(")[1].split(",")[0] for r in rows} == {"tf fit vs jax jit"}
    assert skipped == (
        "cnn: no TF-vs-Keras-JAX trajectory check: TensorFlow trained on 1 replicas, Keras (JAX) on 2 (BatchNorm "
        "statistics: per replica)"
    )


def test_a_model_without_batchnorm_has_its_reference_too(three):
    """The LSTM's trainers keep no BatchNorm statistics ('none'): each is still judged against the reference."""
    saved = {"tf": _traj(["fit"]), "jax": _traj(["jit", "jit+unroll"])}
    for fw, v in (("tf", "fit"), ("jax", "jit"), ("jax", "jit+unroll")):
        saved[fw][f"traj/{v}/batchnorm"] = np.array("none")
    tols = {"trajectory_loss": 1e-3, "trajectory_params": 1e-3}
    rows, skipped = trajectories.trajectories(saved, dict.fromkeys(saved, 8), tols, 8, tols, LSTM_WEIGHTS, "lstm")
    assert {r["check"].split("(")[1].split(",")[0] for r in rows} == {"tf fit vs jax jit", "tf fit vs jax jit+unroll"}
    assert skipped is None


def test_a_trainer_with_global_batchnorm_is_compared_with_the_one_device_trainers_only(three):
    """Keras's DataParallel takes BatchNorm's statistics over the global batch (one SPMD program): over 8 replicas
    it is no per-replica trainer's model, but every one-device trainer's on the same batches."""
    many = {"tf": _traj(["strategy"]), "jax": _traj(["pmap"]), "kjax": _traj(["data_parallel"])}
    many["kjax"]["traj/data_parallel/batchnorm"] = np.array("global")
    tols = {"trajectory_loss": 1e-3, "trajectory_params": 1e-3}
    rows, skipped = trajectories.trajectories(many, dict.fromkeys(many, 8), tols, 8, tols, CNN_WEIGHTS, "cnn")
    assert {r["check"].split("(")[1].split(",")[0] for r in rows} == {"tf strategy vs jax pmap"}
    assert "over the global batch (Keras-JAX data_parallel) are not compared" in skipped
    one = {"tf": _traj(["fit"]), "jax": _traj(["jit"]), "kjax": _traj(["fit"])}
    rows = trajectories.global_batchnorm(many, one, tols, tols, 8, CNN_WEIGHTS)
    assert [(r["check"], *r["figures"]) for r in rows if r["check"].startswith("trajectory loss")] == [
        ("trajectory loss (tf x1 fit vs kjax x8 data_parallel, 4 steps)", "tf_vs_kjax"),
        ("trajectory loss (jax x1 jit vs kjax x8 data_parallel, 4 steps)", "jax_vs_kjax"),
    ]
    assert all(r["passed"] for r in rows)  # the same arrays: nothing apart


# ---- end to end: the engine on three fakes ---------------------------------------------------------------------

PEAK = roofline.Peak("cpu", "fp32", 1e9, 1e9, "fixed", computed_flops=1e9, measured_flops=1e9, headroom=1.5)
DELAY = {"tf": 0.1, "jax": 0.12, "kjax": 0.15}  # seconds per call on the fake clock


@pytest.mark.parametrize("exclusive", [False, True], ids=["interleaved", "one-owner-at-a-time"])
def test_a_third_framework_runs_end_to_end_into_the_summary(three, tmp_path, monkeypatch, exclusive):
    fakes = {fw: {"default": FakeImpl(delay_s=DELAY[fw])} for fw in three}
    fake_engine(monkeypatch, PEAK, fakes)  # each fake's calls advance its clock by DELAY
    # frameworks named: Config's default is the table's keys as imported
    cfg = quick_config(three, ("conv", "matmul"), 5, replicas=(1,), exclusive=exclusive)
    res = run_suite(cfg, tmp_path)
    got = {(r["kind"], r["framework"], r["variant"]) for r in res["rows"]}
    assert got == {(wl, fw, v) for wl in ("conv", "matmul") for fw in three for v in ("op", "op+tuned")}
    assert all(r["verified"] and r["xfw_max_rel_err"] == 0.0 for r in res["rows"])
    doc = {"env": {}, "rows": res["rows"], "checks": res["checks"]}
    assert tables.summary_columns(doc) == THREE
    body = tables.summary_body(doc)
    assert [line[:3] for line in body] == [("conv", "1", "float32"), ("matmul", "1", "float32")]
    for line in body:
        assert line[5].endswith("150.00 ms") and line[6].startswith("1.20x") and line[7].startswith("1.50x")
    comps = [c for c in summary.comparisons(res["rows"]) if c["pair"] != "tuned_vs_default"]
    assert [(c["kind"], c["pair"], round(c["ratio"], 6)) for c in comps] == [
        ("conv", "jax_vs_tf", 1.2),
        ("conv", "kjax_vs_tf", 1.5),
        ("matmul", "jax_vs_tf", 1.2),
        ("matmul", "kjax_vs_tf", 1.5),
    ]
    assert "Keras-JAX/TF (95% CI)" in tables.summary_table(doc)
    if exclusive:
        owners = [n.split("'s rows timed again")[0].rsplit(": ", 1)[1] for n in res["notes"] if "timed again" in n]
        assert owners == ["TensorFlow", "JAX", "Keras (JAX)"]  # each owner's rows timed again at its turn's end


def test_keras_on_jax_is_divided_by_tf_and_by_flax():
    """Keras on JAX declares `versus` JAX: the summary gives its fastest over TF's (the reference) and over Flax's
    (the same runtime, other model code), each with its interval."""
    kj = frameworks.KERAS_JAX
    assert frameworks.ratios([kj, frameworks.JAX, frameworks.TF]) == [("jax", "tf"), (kj, "tf"), (kj, "jax")]
    assert frameworks.ratios([kj, frameworks.TF]) == [(kj, "tf")]  # without Flax's rows: over TF's only
    assert frameworks.ratios([kj, frameworks.JAX]) == [(kj, "jax")]  # JAX the reference: said once
    doc = _doc([_row("tf", 0.1), _row("jax", 0.2), _row(kj, 0.3)])
    cols = tables.summary_columns(doc)
    assert cols[-4:] == ("JAX/TF (95% CI)", "Keras-JAX/TF (95% CI)", "Keras-JAX/JAX (95% CI)", "parity")
    (line,) = tables.summary_body(doc)
    assert [c.split(" (")[0] for c in line[-4:-1]] == ["2.00x", "3.00x", "1.50x"]
    kinds = [(c["pair"], c["text"].split(" (")[0]) for c in summary.comparisons(doc["rows"])]
    assert kinds == [
        ("jax_vs_tf", "JAX/TF 2.00x"),
        (f"{kj}_vs_tf", "Keras-JAX/TF 3.00x"),
        (f"{kj}_vs_jax", "Keras-JAX/JAX 1.50x"),
    ]
    assert "and Keras-JAX's over JAX's" in summary.interval_note(doc)


def test_a_framework_with_no_multi_process_part_is_left_out_of_all_and_refused_by_name():
    kj = frameworks.KERAS_JAX
    assert frameworks.chosen("all", multiprocess=False) == (frameworks.KEYS, [])
    assert frameworks.chosen("all", multiprocess=True) == ((frameworks.TF, frameworks.JAX), [kj, frameworks.TORCH])
    assert frameworks.chosen(frameworks.JAX, multiprocess=True) == ((frameworks.JAX,), [])
    with pytest.raises(ValueError, match="takes no part in a multi-process run: run it without --coordinator"):
        frameworks.chosen(kj, multiprocess=True)
    from parity import run as cli

    args = cli.parser().parse_args(["--coordinator", "localhost:1", "--num-processes", "2", "--process-id", "1"])
    assert cli.config(args).frameworks == (frameworks.TF, frameworks.JAX)


def test_a_framework_without_data_parallelism_starts_no_worker_over_several_devices(three, tmp_path, monkeypatch):
    """PyTorch's case (frameworks.Framework.data_parallel): over 2 devices no worker of it starts, its rows are one
    device's, and the run says why once; the others run both rounds."""
    one = dataclasses.replace(KERAS, data_parallel=False)
    monkeypatch.setitem(frameworks.TABLE, one.key, one)
    fakes = {fw: {"default": FakeImpl(delay_s=DELAY[fw])} for fw in three}
    fake_engine(monkeypatch, PEAK, fakes)
    started = []
    init = LocalWorker.__init__
    monkeypatch.setattr(
        LocalWorker, "__init__", lambda w, fw, dev, n, *a, **k: started.append((fw, n)) or init(w, fw, dev, n, *a, **k)
    )
    cfg = quick_config(three, ("conv",), 3, replicas=(1, 2))
    res = run_suite(cfg, tmp_path)
    assert sorted(started) == sorted([(fw, 1) for fw in three] + [("tf", 2), ("jax", 2)])
    assert {(r["framework"], r["replicas"]) for r in res["rows"]} == {*((fw, 1) for fw in three), ("tf", 2), ("jax", 2)}
    assert res["skipped"] == [
        {"framework": "kjax", "reason": "over 2 devices: Keras (JAX) offers no data-parallel variant"}
    ]
    assert Config(frameworks=("kjax",), replicas=(2,)).rounds(2) == []
