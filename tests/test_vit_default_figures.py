"""The figures the docs quote from the runs with PyTorch and the ViT (`docs/results/zen4/`'s two defaults,
`docs/results/xeon-amx/`'s default and `--quick`) are their files': the wall times (the last line of each log,
`/usr/bin/time -f "%e s"`), the phases (benchmarks/run_phases.py on the logs), the counts, the rows that differed
between `zen4`'s runs beyond their intervals, and the `xeon-amx` host's peaks and times against its class's earlier
file. No framework is imported."""

import json
import statistics
from pathlib import Path

from phases import run_phases

from parity.output.loading import current_names

ROOT = Path(__file__).resolve().parents[1]
ZEN4, AMX = ROOT / "docs/results/zen4", ROOT / "docs/results/xeon-amx"
FORMAT = " ".join((ROOT / "docs/results-format.md").read_text().split())
README = " ".join((ROOT / "README.md").read_text().split())
NOW, BEFORE, QUICK = "cpu-default-vit", "cpu-default-vit-earlier", "cpu-quick-vit"


def _text(folder: Path) -> str:
    return (folder / "README.md").read_text()


def _phases(folder: Path, name: str) -> dict[str, int]:
    return run_phases().phases((folder / f"{name}-log.txt").read_text().splitlines())


def _mmss(s: float) -> str:
    s = round(s)
    return f"{s // 60}:{s % 60:02d}"


def _wall(folder: Path, name: str) -> str:
    """'9 min 40 s' from the log's last line, '580.15 s'."""
    s = round(float((folder / f"{name}-log.txt").read_text().split()[-2]))
    return f"{s // 60} min {s % 60} s"


def _doc(folder: Path, name: str) -> dict:
    return current_names(json.loads((folder / f"{name}.json").read_text()))  # older files: today's names


def _median_ms(name: str, workload: str, framework: str, variant: str) -> str:
    (row,) = [
        r
        for r in _doc(ZEN4, name)["rows"]
        if (r["kind"], r["framework"], r["variant"]) == (workload, framework, variant)
    ]
    return f"{row['median_s'] * 1000:.1f}"


def test_the_default_runs_wall_times_and_counts_are_their_files():
    for folder, name in ((ZEN4, NOW), (ZEN4, BEFORE), (AMX, NOW), (AMX, QUICK)):
        doc = _doc(folder, name)
        verified = sum(r["verified"] for r in doc["rows"])
        passed = sum(c["passed"] is True for c in doc["checks"])
        judged = sum(c["passed"] is not None for c in doc["checks"])
        line = next(ln for ln in _text(folder).splitlines() if ln.startswith(f"| `{name}.{{json,md}}`"))
        said = f"{verified} of {len(doc['rows'])} rows verified, {passed} checks passed, "
        assert said + f"{len(doc['checks']) - judged} not judged" in line
        assert line.endswith(f"at {doc['env']['git_commit']} | {_wall(folder, name)} |")
    assert f"(`docs/results/zen4/{NOW}-log.txt`)" in FORMAT and f"with the ViT too {_wall(ZEN4, NOW)}" in FORMAT
    # the README's zen4 times across hosts: tests/test_docs_facts.py
    now = _wall(AMX, "cpu-default")  # the README's grid's file for the class, beside the slower host's
    row = f"| `xeon-amx`: Intel Xeon with AMX exposed (family 6 model 167 or 207) | {now} with PyTorch and the ViT "
    row += f"({_wall(AMX, NOW)} on a slower host of the class) | 14 min 23 s without PyTorch and the ViT | "
    assert row + f"{_wall(AMX, QUICK)} with PyTorch and the ViT, on the slower host " in README


def test_results_formats_phases_are_the_logs():
    now = _phases(ZEN4, NOW)
    vit = sum(now[p] for p in ("vit_train compiling, first epoch", "vit parity checks", "vit_train timed calls"))
    vit += now["vit_infer compiling, first epoch"] + now.get("vit_infer timed calls", 0)
    matmul = now["matmul compiling, first epoch"] + now["matmul timed calls"]
    first = {w: _mmss(now[f"{w} compiling, first epoch"]) for w in ("cnn_train", "vit_train", "conv")}
    said = [
        f"the CNN's parity checks {_mmss(now['cnn parity checks'])}, timed epochs "
        f"{_mmss(now['cnn_train timed calls'])} and first epochs {first['cnn_train']}; the conv's first calls (with "
        f"its first round) {first['conv']} and timed calls {_mmss(now['conv timed calls'])}; the ViT's first epochs "
        f"{first['vit_train']} and parity checks {_mmss(now['vit parity checks'])}",
        f"(its phases 3:15 to {_mmss(vit)}:",
        f"(1:04 to {_mmss(matmul)}:",
    ]
    assert [s for s in said if s not in FORMAT] == []


def test_the_rows_that_moved_between_the_runs_are_the_files():
    """The class README's figures (the README links to them) for two rows, unchanged in code, that differed beyond their
    intervals between `zen4`'s two runs."""
    lstm = [_median_ms(n, "lstm_train", "jax", "jit+ynn+onednn+thp") for n in (BEFORE, NOW)]
    xla = [_median_ms(n, "lstm_infer", "tf", "predict+xla") for n in (BEFORE, NOW)]
    assert "([two `zen4` runs](docs/results/zen4/README.md) an hour apart differed beyond their intervals)" in README
    said = f"JAX's tuned LSTM epoch {lstm[0]} ms here and {lstm[1]} ms there, TF's LSTM inference under XLA "
    said += f"{xla[0]} ms and {xla[1]} ms"
    assert said in " ".join(_text(ZEN4).split())


def test_the_amx_hosts_phases_beside_zen4s_are_the_logs():
    amx, zen4 = _phases(AMX, NOW), _phases(ZEN4, NOW)
    text = " ".join(_text(AMX).split())
    span = [sum(p.values()) for p in (amx, zen4)]
    assert f"The run took {_mmss(span[0]).replace(':', ' min ')} s" in text
    assert f"against {_mmss(span[1]).replace(':', ' min ')} s for the same default on `zen4`" in text
    table = ("cnn_train compiling, first epoch", "cnn_train timed calls", "cnn parity checks")
    table += ("vit_train compiling, first epoch", "conv timed calls", "vit parity checks")
    assert [p for p in table if f"| {_mmss(amx[p])} | {_mmss(zen4[p])} |" not in text] == []


def test_the_amx_hosts_peaks_and_times_against_the_earlier_file_are_the_files():
    new, old = _doc(AMX, NOW), _doc(AMX, "cpu-default-three-frameworks")
    text = " ".join(_text(AMX).split())
    peak, before = new["env"]["peak"], old["env"]["peak"]
    bf16 = sorted(peak["measured_bf16"].values())
    said = [
        f"= {peak['computed_flops'] / 1e9:.1f} GFLOP/s (NumPy's matmul measured {peak['measured_flops'] / 1e9:.1f}; "
        f"the copy {peak['measured_bandwidth'] / 1e9:.1f} GB/s)",
        f"reached {bf16[0] / 1e9:,.0f}-{bf16[-1] / 1e9:,.0f} GFLOP/s",
        f"NumPy's matmul {before['measured_flops'] / 1e9:.1f} GFLOP/s, "
        f"the copy {before['measured_bandwidth'] / 1e9:.1f}",
        f"model {old['env']['host']['model']}, stepping {old['env']['host']['stepping']}",
        f"model {new['env']['host']['model']}, stepping {new['env']['host']['stepping']}",
    ]
    key = ("kind", "framework", "variant", "replicas", "flops")
    earlier = {tuple(r[k] for k in key): r["median_s"] for r in old["rows"]}
    ratios = [r["median_s"] / earlier[k] for r in new["rows"] if (k := tuple(r[k] for k in key)) in earlier]
    said.append(
        f"the {len(ratios)} rows both files hold at the same size took from {min(ratios):.2f}x to "
        f"{max(ratios):.2f}x (median {statistics.median(ratios):.2f}x) their time there"
    )
    assert [s for s in said if s not in text] == []


def test_the_amx_runs_unsettled_comparisons_are_its_printout():
    """'46 of its 96 comparisons did not settle ... (`zen4`'s run: 25)', from each run's first screen, and the
    bfloat16 CNN comparison it names, from the file."""
    unsettled = [
        next(ln for ln in (f / f"{NOW}-stdout.txt").read_text().splitlines() if "not settled" in ln).split()
        for f in (AMX, ZEN4)
    ]
    text = " ".join(_text(AMX).split())
    assert f"{unsettled[0][0]} of its {unsettled[0][2]} comparisons did not settle" in text
    assert f"(`zen4`'s run: {unsettled[1][0]})" in text
    (cnn,) = [
        c
        for c in _doc(AMX, NOW)["comparisons"]
        if (c["pair"], c["kind"], c["replicas"], c["dtype"]) == ("jax_vs_tf", "cnn_train", 1, "bfloat16")
    ]
    lo, hi = cnn["ci95"]
    assert f"JAX/TF {cnn['ratio']:.2f}x ({lo:.2f}-{hi:.2f}), no difference measurable" in text and lo < 1 < hi


def test_the_default_with_the_conv_on_32_images_is_its_files():
    """results-format.md's figures for the default with the CPU's conv on 32 images: its wall time, floor, the conv's
    phases against the run at 128, the trained workloads' parity checks and PyTorch's compiled first calls."""
    module = run_phases()
    name, before = "cpu-default-conv32", "cpu-default-trained"
    now, doc = _phases(ZEN4, name), _doc(ZEN4, name)
    conv = [
        sum(p[f"conv {k}"] for k in ("timed calls", "compiling, first epoch")) for p in (now, _phases(ZEN4, before))
    ]
    parity = sum(now[f"{w} parity checks"] for w in ("cnn", "lstm", "vit"))
    wall = float((ZEN4 / f"{name}-log.txt").read_text().split()[-2])  # the log's last line: "602.11 s"
    compiled = [r for r in doc["rows"] if r["framework"] == "torch" and "compile" in r["variant"]]
    torch = sum(r["compile_s"] or r["first_epoch_s"] for r in compiled)
    said = (
        f"the default took {_wall(ZEN4, name)} (`docs/results/zen4/{name}-log.txt`), its floor "
        f"{_mmss(sum(module.floor(now, doc).values()))}: the conv's phases {_mmss(conv[0])}, where they took "
        f"{_mmss(conv[1])}; over the target by {_mmss(wall - 480)}, most of it the trained workloads' first epochs "
        f"(compilation: PyTorch's compiled steps alone {torch:.0f} s), their parity checks ({_mmss(parity)})"
    )
    assert wall > 480 and said in FORMAT
