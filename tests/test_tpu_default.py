"""docs/tpu.md's figures of the default and quick runs on one TPU v5e chip, and of compiling ahead there, are those of
the files they name (docs/results/tpu-v5e/default-log.txt, default.json, quick-log.txt, quick.json, ahead.jsonl):
each sentence below is rendered from a file and must appear in the page as written. No framework is imported."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "docs/results/tpu-v5e"


def _stamped(name: str) -> list[tuple[int, str]]:
    lines = re.findall(r"\[(\d\d):(\d\d):(\d\d)\] (.*)", (TPU / name).read_text())
    return [(int(h) * 3600 + int(m) * 60 + int(sec), line) for h, m, sec, line in lines]


def _at(log: list[tuple[int, str]], start: str) -> int:
    """The time of the first line that begins with `start`."""
    return next(t for t, line in log if line.startswith(start))


def _span(s: int) -> str:
    return f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


def _turn(log, who: str, rows: int) -> tuple[int, int]:
    """(the worker's start, its compiling ahead) in seconds."""
    start, built = _at(log, f"starting the {who} worker"), _at(log, f"{who}: building {rows} training rows")
    return built - start, _at(log, f"  {who}: {rows} steps compiled") - built


def _firsts(log, after: str, before: str, what: str = "compiling") -> float:
    """The first calls of the operations and inference rows ('compiling' lines) between two lines."""
    out, lo, hi, pending = 0.0, _at(log, after), _at(log, before), False
    for t, line in log:
        if lo <= t <= hi and f": {what} " in line:
            pending = True
        elif pending and "first call" in line:
            out += float(re.search(r"first call (\d+\.\d+) s", line).group(1))
            pending = False
    return out


def _jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (TPU / name).read_text().splitlines() if line.strip()]


def said() -> dict[str, str]:
    log, quick = _stamped("default-log.txt"), _stamped("quick-log.txt")
    doc = json.loads((TPU / "default.json").read_text())
    judged = [c["passed"] for c in doc["checks"]]
    jax, keras = _turn(log, "JAX", 7), _turn(log, "Keras 3 (JAX)", 7)
    rest_jax = _at(log, "starting the Keras") - _at(log, "  JAX: 7 steps compiled")
    rest_keras = _at(log, "starting the PyTorch") - _at(log, "  Keras 3 (JAX): 7 steps compiled")
    total = log[-1][0] - log[0][0]
    qjax, qkeras = _turn(quick, "JAX", 3), _turn(quick, "Keras 3 (JAX)", 3)
    ahead = [r for r in _jsonl("ahead.jsonl") if r.get("part") == "ahead"]
    # three runs, in order: JAX's steps side by side, Keras 3 on JAX's side by side, JAX's one after another
    jax_wall, keras_wall, serial_wall = (r["all_wall_s"] for r in ahead if "all_wall_s" in r)
    runs = [[r for r in ahead if "row" in r][i : i + 7] for i in (0, 14)]
    together, alone = ({r["row"]: r["compile_s"] for r in run} for run in runs)
    longest = [
        float(m)
        for m in re.findall(r"7 steps compiled, the longest in (\d+\.\d) s", (TPU / "default-log.txt").read_text())
    ]
    jax_turn, keras_turn = ("starting the JAX", "starting the Keras"), ("starting the Keras", "starting the PyTorch")
    keras_start = _at(log, "starting the Keras")
    rounds = [(t, line) for t, line in log if re.match(r"(cnn|lstm|vit) parity x1", line) and t < keras_start]
    parity = sum(log[log.index(r) + 1][0] - r[0] for r in rounds)  # JAX's three: each to the next stamped line
    keras_parity = sum(
        int(re.search(r"took (\d+) s \(Keras 3 \(JAX\)", n)[1]) for n in doc["env"]["notes"] if "(Keras 3 (JAX);" in n
    )
    drift = re.search(
        r"moved (\S+ to \S+) between",
        next(
            n
            for n in json.loads((TPU / "quick.json").read_text())["env"]["notes"]
            if n.startswith("one owner of the device at a time: JAX")
        ),
    )
    return {
        "TOP": (
            f"the default run ends in {_span(total)} (`default-log.txt`): JAX and Keras 3 on JAX run every workload, "
            f"{sum(r['verified'] for r in doc['rows'])} of {len(doc['rows'])} rows verified against float64, "
            f"{judged.count(True)} checks passed, {'none' if False not in judged else judged.count(False)} failed, "
            f"{judged.count(None)} not judged (`default.json`)"
        ),
        "TOP_QUICK": f"`--quick` ends in {_span(quick[-1][0] - quick[0][0])} (`quick-log.txt`)",
        "TABLE": (
            f"| the worker's start (opening the chip, importing, building each model once) | {_span(jax[0])} | "
            f"{_span(keras[0])} | | its 7 training rows built, their steps compiled side by side | {_span(jax[1])} | "
            f"{_span(keras[1])} | | the rest: the other first calls, the timed calls, the parity rounds, the rows "
            f"timed again | {_span(rest_jax)} | {_span(rest_keras)} |"
        ),
        "AROUND": (
            f"and {_span(_at(log, 'starting the JAX') - log[0][0])} before them (the data, TensorFlow's one line), "
            f"{_span(log[-1][0] - _at(log, 'starting the PyTorch'))} after (PyTorch's one line, the judging, the "
            f"files): {_span(total)} in all. In `--quick` (`quick-log.txt`) the starts took {_span(qjax[0])} and "
            f"{_span(qkeras[0])}, the compiling ahead {_span(qjax[1])} and {_span(qkeras[1])}"
        ),
        "AHEAD": (
            f"JAX's 7 training steps of the default compiled in {jax_wall:.1f} s side by side, against "
            f"{serial_wall:.1f} s one after another; each compile took longer beside the others (the CNN's `jit` "
            f"{together['cnn jit']:.1f} s against {alone['cnn jit']:.1f} s alone), and no first epoch compiled its "
            f"step again. Keras 3 on JAX's 7 compiled in {keras_wall:.1f} s side by side"
        ),
        "AHEAD_KERAS": (
            f"Keras 3 on JAX's part is {keras[1] - longest[1]:.0f} s longer than its longest compile ({longest[1]} s): "
            f"the time its 7 rows took to build, one after another, before the compiling began (JAX's: "
            f"{jax[1] - longest[0]:.0f} s)"
        ),
        "FIRSTS": (
            f"{_firsts(log, *jax_turn):.1f} s of JAX's turn and {_firsts(log, *keras_turn):.1f} s of Keras 3 on JAX's"
        ),
        "PARITY": f"The parity rounds (JAX's three, {parity} s; Keras 3 on JAX's, {keras_parity} s by the run's notes)",
        "DRIFT": f"JAX's moved {drift.group(1)} when timed again",
    }


def test_tpu_page_quotes_the_default_and_quick_runs_and_compiling_ahead():
    page = " ".join((ROOT / "docs/tpu.md").read_text().split())
    unsaid = {k: v for k, v in said().items() if " ".join(v.split()) not in page}
    assert not unsaid, f"docs/tpu.md does not say, as its files do: {unsaid}"
    firsts = [r for r in _jsonl("ahead.jsonl") if r.get("part") == "first epoch"]
    assert len(firsts) == 21 and all(r["compile_s"] < 1 for r in firsts)  # no step compiled again at its first epoch


def test_tpu_page_quotes_the_torchax_probe():
    """The PyTorch-on-a-TPU section's figures are the probe's file (benchmarks/torchax_probe.py, run on a CPU)."""
    (r,) = [json.loads(line) for line in (ROOT / "docs/results/zen4/torchax-cnn.jsonl").read_text().splitlines()]
    page = " ".join((ROOT / "docs/tpu.md").read_text().split())
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
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_phases", ROOT / "benchmarks/run_phases.py")
    rp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rp)
    log = _stamped("default-log.txt")
    found = rp.phases((TPU / "default-log.txt").read_text().splitlines())
    assert found[rp.AHEAD] == _turn(log, "JAX", 7)[1] + _turn(log, "Keras 3 (JAX)", 7)[1] == 56 + 73
