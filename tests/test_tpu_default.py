"""docs/tpu.md's figures of the default and quick runs on one TPU v5e chip, and of compiling ahead and a worker's start
there, are those of the files they name (docs/results/tpu-v5e/default-log.txt, default.json, quick-log.txt,
quick.json, ahead.jsonl, start.jsonl, default-built-on-chip-log.txt): each sentence below is rendered from a file and
must appear in the page as written. No framework is imported."""

import json
import re
from pathlib import Path

from phases import run_phases

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "docs/results/tpu-v5e"
PAGES = ("docs/tpu.md", "docs/tpu-time.md")  # the TPU page and the page split from it: where a run's time goes


def _pages() -> str:
    return "\n".join((ROOT / p).read_text() for p in PAGES)


JAX_ROWS, KERAS_ROWS = 13, 11  # each worker's rows in the default on one chip (JAX's '+prefetch' rows beside)


def _stamped(name: str) -> list[tuple[int, str]]:
    lines = re.findall(r"\[(\d\d):(\d\d):(\d\d)\] (.*)", (TPU / name).read_text())
    return [(int(h) * 3600 + int(m) * 60 + int(sec), line) for h, m, sec, line in lines]


def _at(log: list[tuple[int, str]], start: str) -> int:
    """The time of the first line that begins with `start`."""
    return next(t for t, line in log if line.startswith(start))


def _span(s: int) -> str:
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def _turn(log, who: str, rows: int) -> tuple[int, int]:
    """(the worker's start, its building and compiling ahead, its parity rounds beside the compiling included) in
    seconds."""
    start, built = _at(log, f"starting the {who} worker"), _at(log, f"{who}: building {rows} rows")
    return built - start, _at(log, f"  {who}: {rows} programs compiled") - built


def _parts(log, who: str, rows: int) -> tuple[int, int, int]:
    """(its rows' building, its parity rounds, its wait for the compiling after them) in seconds: a worker that
    computes its parity rounds while its rows' programs compile (parity.engine.ahead)."""
    built, waits = _at(log, f"{who}: building {rows} rows"), _at(log, f"{who}: waiting for its rows' programs")
    rounds = next(t for t, line in log if t >= built and " parity x1: " in line and f"; {who})" in line)
    return rounds - built, waits - rounds, _at(log, f"  {who}: {rows} programs compiled") - waits


def _clock() -> dict[str, int]:
    """The seconds the clock read around each command (clock.txt, as the command printed them)."""
    return {m[1]: int(m[2]) for m in re.finditer(r"(\w+) rc=0 (\d+) s", (TPU / "clock.txt").read_text())}


def _longest(name: str, rows: int) -> list[float]:
    """Each worker's longest compile ahead, as its log line says."""
    text = (TPU / name).read_text()
    return [float(m) for m in re.findall(rf"{rows} programs compiled, the longest in (\d+\.\d) s", text)]


def _against(seconds: int, target: int) -> str:
    """'within' a target in seconds, or how far over it."""
    return "within" if seconds <= target else f"{seconds - target} s over"


def _note_s(doc: dict, who: str) -> int:
    """The seconds a worker's three parity rounds took, by the run's notes."""
    return sum(
        int(re.search(r"took (\d+) s", n)[1])
        for n in doc["env"]["notes"]
        if "parity x1: its arrays took" in n and f"s ({who};" in n
    )


def _jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (TPU / name).read_text().splitlines() if line.strip()]


def said() -> dict[str, str]:
    log, quick = _stamped("default-log.txt"), _stamped("quick-log.txt")
    doc = json.loads((TPU / "default.json").read_text())
    judged = [c["passed"] for c in doc["checks"]]
    jax, keras = _turn(log, "JAX", JAX_ROWS), _turn(log, "Keras 3 (JAX)", KERAS_ROWS)
    jbuild, jrounds, jwait = _parts(log, "JAX", JAX_ROWS)
    kbuild, krounds, kwait = _parts(log, "Keras 3 (JAX)", KERAS_ROWS)
    clock = _clock()
    rest_jax = _at(log, "starting the Keras") - _at(log, f"  JAX: {JAX_ROWS} programs compiled")
    rest_keras = _at(log, "starting the PyTorch") - _at(log, "  Keras 3 (JAX): 11 programs compiled")
    total = log[-1][0] - log[0][0]
    qjax, qkeras = _turn(quick, "JAX", 6), _turn(quick, "Keras 3 (JAX)", 6)
    ahead = [r for r in _jsonl("ahead.jsonl") if r.get("part") == "ahead"]
    # three runs, in order: JAX's steps side by side, Keras 3 on JAX's side by side, JAX's one after another
    jax_wall, keras_wall, serial_wall = (r["all_wall_s"] for r in ahead if "all_wall_s" in r)
    runs = [[r for r in ahead if "row" in r][i : i + 7] for i in (0, 14)]
    together, alone = ({r["row"]: r["compile_s"] for r in run} for run in runs)
    longest = [*_longest("default-log.txt", JAX_ROWS), *_longest("default-log.txt", KERAS_ROWS)]
    before = _stamped("default-built-on-chip-log.txt")  # the run before Keras 3 on JAX built on the host
    keras_before = _turn(before, "Keras 3 (JAX)", 11)[1]
    start = {(r["framework"], r["stage"]): r["at_s"] for r in _jsonl("start.jsonl") if "stage" in r}
    beside = {
        r["framework"]: r["imported_beside_a_holder_s"]
        for r in _jsonl("start.jsonl")
        if "imported_beside_a_holder_s" in r
    }
    imports, opened = "the framework's import", "opening the device"
    drift = re.search(
        r"moved (\S+ to \S+) between",
        next(
            n
            for n in json.loads((TPU / "quick.json").read_text())["env"]["notes"]
            if n.startswith("one owner of the device at a time: JAX")
        ),
    )
    waited = re.search(r"waited (\d+\.\d) s for a float64 reference", (TPU / "default-log.txt").read_text())[1]
    again = [
        _at(log, f"starting the {w}") - _at(log, f"measuring the {m} rows again")
        for w, m in (("Keras", "JAX"), ("PyTorch", "Keras 3 (JAX)"))
    ]
    return {
        "TOP": (
            f"the default run ends in {_span(total)} (`default-log.txt`): JAX and Keras 3 on JAX run every workload, "
            f"{sum(r['verified'] for r in doc['rows'])} of {len(doc['rows'])} rows verified against float64, "
            f"{judged.count(True)} checks passed, {'none' if False not in judged else judged.count(False)} failed, "
            f"{judged.count(None)} not judged (`default.json`)"
        ),
        "TOP_QUICK": f"`--quick` ends in {_span(quick[-1][0] - quick[0][0])} (`quick-log.txt`)",
        "CLOCK": (
            f"the clock around each command, the interpreter's start and exit included, read {clock['default']} s "
            f"and {clock['quick']} s (`clock.txt`): the default {_against(clock['default'], 360)} the 6 minutes it "
            f"aims at, `--quick` {_against(clock['quick'], 120)} its 2"
        ),
        "TABLE": (
            f"| the worker's start (opening the chip; JAX's also imports JAX and initialises the models' shared "
            f"weights, Keras 3 on JAX's imported while JAX's turn ran) | {_span(jax[0])} | {_span(keras[0])} | | its "
            f"rows built (JAX's 13: 9 training, 4 inference; Keras 3 on JAX's 11: 7 and 4) | {_span(jbuild)} | "
            f"{_span(kbuild)} | | its three parity rounds, "
            f"while the rows' programs compiled side by side | {_span(jrounds + jwait)} | "
            f"{_span(krounds + kwait)} | | the rest: the operations' first calls, the timed calls, the rows timed "
            f"again | {_span(rest_jax)} | {_span(rest_keras)} |"
        ),
        "AROUND": (
            f"and {_span(_at(log, 'starting the JAX') - log[0][0])} before them (the data, TensorFlow's one line), "
            f"{_span(log[-1][0] - _at(log, 'starting the PyTorch'))} after (PyTorch's one line, the float64 checks, "
            f"the files): {_span(total)} in all. In `--quick` (`quick-log.txt`) the starts took {_span(qjax[0])} and "
            f"{_span(qkeras[0])}, the rows built and their parity rounds {_span(qjax[1])} and {_span(qkeras[1])}"
        ),
        "AHEAD": (
            f"JAX's 7 training steps of the default compiled in {jax_wall:.1f} s side by side, against "
            f"{serial_wall:.1f} s one after another; each compile took longer beside the others (the CNN's `jit` "
            f"{together['cnn jit']:.1f} s against {alone['cnn jit']:.1f} s alone), and no first epoch compiled its "
            f"step again. Keras 3 on JAX's 7 compiled in {keras_wall:.1f} s side by side"
        ),
        "AHEAD_KERAS": (
            f"each worker's longest compile (JAX's {longest[0]} s, Keras 3 on JAX's {longest[1]} s) had ended when "
            f"its parity rounds did: neither waited for its programs after them"
            if jwait == kwait == 0
            else "(a worker waited for its programs: the sentence no longer fits the log)"
        ),
        "HOST": (
            f"on JAX built them on the chip, its building and compiling ahead took {_span(keras_before)} "
            f"(`default-built-on-chip-log.txt`, the same default otherwise); on the host its 11 rows are built in "
            f"{_span(kbuild)}"
        ),
        "START": (
            f"JAX's interpreter and imports took {start[('jax', imports)]:.1f} s and the chip was open at "
            f"{start[('jax', opened)]:.1f} s; Keras 3 on JAX's at {start[('keras-jax', imports)]:.1f} s and "
            f"{start[('keras-jax', opened)]:.1f} s. A second process imported JAX ({beside['jax']:.1f} s) and Keras 3 "
            f"on JAX ({beside['keras-jax']:.1f} s) while another held the chip"
        ),
        "LEFT": (
            f"The parity rounds, which hold each turn's middle: JAX's three took {_note_s(doc, 'JAX')} s, Keras 3 "
            f"on JAX's {_note_s(doc, 'Keras 3 (JAX)')} s (the run's notes)"
        ),
        "LEFT_AGAIN": f"The rows timed again at each owner's end (drift): {again[0]} s and {again[1]} s",
        "REFERENCES": (
            f"In the default run JAX's rows waited {waited} s for the one under way; after the last worker the checks "
            f"took {_span(log[-1][0] - _at(log, 'starting the PyTorch'))} with PyTorch's one line"
        ),
        "LEFT_END": f"JAX's start with the shared weights: {_span(jax[0])}",
        "DRIFT": f"JAX's moved {drift.group(1)} when timed again",
    }


def test_tpu_page_quotes_the_default_and_quick_runs_and_compiling_ahead():
    page = " ".join(_pages().split())
    unsaid = {k: v for k, v in said().items() if " ".join(v.split()) not in page}
    assert not unsaid, f"docs/tpu.md does not say, as its files do: {unsaid}"
    firsts = [r for r in _jsonl("ahead.jsonl") if r.get("part") == "first epoch"]
    assert len(firsts) == 21 and all(r["compile_s"] < 1 for r in firsts)  # no step compiled again at its first epoch


def test_the_presets_help_gives_the_chips_times():
    """`--help`'s presets (Config's PRESETS, took) give the default's and the quick run's spans on the chip, as
    their logs do."""
    from parity.engine.config import PRESETS

    for preset, name in (("default", "default-log.txt"), ("quick", "quick-log.txt")):
        log = _stamped(name)
        assert f"{_span(log[-1][0] - log[0][0])} on one TPU v5e" in PRESETS[preset].took, (preset, PRESETS[preset].took)


def test_tpu_page_quotes_the_torchax_probe():
    """The PyTorch-on-a-TPU section's figures are the probe's file (benchmarks/torchax_probe.py, run on a CPU)."""
    (r,) = [json.loads(line) for line in (ROOT / "docs/results/zen4/torchax-cnn.jsonl").read_text().splitlines()]
    page = " ".join(_pages().split())
    assert r["ran"] and r["backend"] == "cpu"
    said = (
        f"gave the loss {r['loss_torchax']} against eager PyTorch's {r['loss_eager']}, and every gradient within "
        f"{r['max_rel_grad_diff']:.1e} of eager PyTorch's, relative to its largest element (the largest difference: "
        f"`{r['worst'].removeprefix('m.')}`; `zen4`, JAX {r['jax']}, {r['removed_names']} names given a placeholder"
    )
    assert said in page, said
    assert f"torchax {r['torchax']}, the newest on PyPI" in page and f"torch {r['torch'].split('+')[0]}" in page


def test_run_phases_gives_compiling_ahead_its_own_phase():
    """benchmarks/run_phases.py puts each worker's building and compiling ahead, to its answer, in one phase."""
    rp = run_phases()
    log = _stamped("default-log.txt")
    found = rp.phases((TPU / "default-log.txt").read_text().splitlines())
    (jbuild, _, jwait), (kbuild, _, kwait) = _parts(log, "JAX", JAX_ROWS), _parts(log, "Keras 3 (JAX)", KERAS_ROWS)
    assert found[rp.AHEAD] == jbuild + jwait + kbuild + kwait  # the rows built, docs/tpu-time.md's table
    waited = float(re.search(r"waited (\d+\.\d) s for a float64 reference", (TPU / "default-log.txt").read_text())[1])
    assert abs(found[rp.REFERENCES] - waited) <= 1  # the log's line, by stamps
    old = rp.phases((TPU / "default-stopped-log.txt").read_text().splitlines())  # a log of the old words still reads
    assert rp.AHEAD not in old and sum(old.values()) > 0


def test_run_phases_gives_the_wait_after_the_parity_rounds_to_compiling_ahead():
    """A worker that computed its parity rounds while its rows' programs compiled: its building and its wait for the
    compiling are the compiling-ahead phase, the rounds theirs (the log's words: parity.engine.ahead)."""
    rp = run_phases()
    lines = [
        "[00:00:00] JAX: building 6 rows (3 training, 3 inference), their programs compiled side by side where it can",
        "[00:00:05] cnn parity x1: gradients and a 3-step trajectory (dropout off, batch 32; JAX)",
        "[00:00:20] JAX: waiting for its rows' programs, compiling since they were built",
        "[00:00:30]   JAX: 6 programs compiled, the longest in 24.0 s",
        "[00:00:30] conv: compiling JAX jit x1",
        "[00:00:31]   first call 0.805 s, output verified",
    ]
    assert rp.phases(lines) == {rp.AHEAD: 5 + 10, "cnn parity checks": 15, "conv compiling, first epoch": 1}


def test_run_phases_gives_the_wait_for_a_float64_reference_its_own_phase():
    """The wait for a float64 reference under way before a worker's rows (parity.engine.ahead.finish), said after
    it: its seconds move from the phase before to their own."""
    rp = run_phases()
    lines = [
        "[00:00:00] JAX: waiting for its rows' programs, compiling since they were built",
        "[00:00:10]   JAX: 6 programs compiled, the longest in 24.0 s",
        "[00:00:14] waited 4.1 s for a float64 reference of the parity checks, computed beside the rounds",
        "[00:00:14] conv: compiling JAX jit x1",
        "[00:00:15]   first call 0.805 s, output verified",
    ]
    assert rp.phases(lines) == {rp.AHEAD: 10, rp.REFERENCES: 4, "conv compiling, first epoch": 1}


def test_tpu_page_gives_compiling_ahead_on_a_cpu_as_its_logs_do():
    """The CPU's runs with and without --compile-ahead (docs/results/zen4/cpu-ahead-*-log.txt): their spans as the
    page gives them, and each log's rows all ran with the flag as named (the building line only with it)."""
    zen4 = ROOT / "docs/results/zen4"
    span = {}
    for run in ("quick", "default"):
        for flag in ("off", "on"):
            name = f"cpu-ahead-{run}-{flag}-log.txt"
            log = [(t, line) for t, line in _stamped(f"../zen4/{name}")]
            assert any("their programs compiled side by side" in line for _, line in log) == (flag == "on"), name
            span[run, flag] = _span(log[-1][0] - log[0][0])
    assert (zen4 / "README.md").read_text().count("cpu-ahead-") >= 1
    said = (
        f"took the quick run from {span['quick', 'off']} to {span['quick', 'on']} and the default from "
        f"{span['default', 'off']} to {span['default', 'on']}, one run each"
    )
    page = " ".join(_pages().split())
    assert said in page, said
