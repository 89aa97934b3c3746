"""docs/tpu.md's and the README's TPU v5e figures are those of the files they name (docs/results/tpu-v5e/): each
sentence below is rendered from a file and must appear in the page as written. No framework is imported."""

import json
import re
import statistics
from pathlib import Path

from parity.output.loading import current_names

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "docs/results/tpu-v5e"
PAGES = ("docs/tpu.md", "docs/tpu-time.md")  # the TPU page and the page split from it: where a run's time goes


def _pages() -> str:
    return "\n".join((ROOT / p).read_text() for p in PAGES)


def _doc(name: str) -> dict:
    return current_names(json.loads((TPU / name).read_text()))  # older files: today's names


def _row(doc: dict, framework: str, variant: str) -> dict:
    (row,) = [r for r in doc["rows"] if r["framework"] == framework and r["variant"] == variant]
    return row


def _ms(row: dict) -> str:
    return f"{row['median_s'] * 1e3:.2f} ms"


def _epochs(log: str, variant: str, key: str = "jax", label: str = "JAX") -> tuple[str, str]:
    """(the first epoch's call, the median later epoch) of a training variant, as the stopped run logged them."""
    start = log.index(f"first epoch (seed 0) {label} {variant} x1")
    first = re.search(r"first call (\d+\.\d+) s", log[start:]).group(1)
    later = re.findall(rf"epoch \d+: {key} {re.escape(variant)} (\d+\.\d+)s", log)
    return f"{float(first):.1f} s", f"{statistics.median(float(t) for t in later):.2f} s"


def _ratio(doc: dict, kind: str) -> str:
    """Keras-JAX/JAX's float32 ratio of row kind `kind`, with its interval, as the page writes it."""
    (c,) = [
        c
        for c in doc["comparisons"]
        if c["pair"] == "keras-jax_vs_jax" and (c["kind"], c["dtype"]) == (kind, "float32")
    ]
    return "{}x ({}-{})".format(*re.search(r"(\d+\.\d\d)x \(95% CI (\d+\.\d\d)-(\d+\.\d\d)", c["text"]).groups())


def _s(row: dict) -> str:
    return f"{row['median_s']:.3f} s"


def _matmul_and_lstm() -> list[str]:
    """What docs/tpu.md says of the matmul's and the LSTM's full-size runs, rendered from matmul.json and lstm.json."""
    mm, lstm = _doc("matmul.json"), _doc("lstm.json")
    jit, ops, bf16 = _row(mm, "jax", "jit"), _row(mm, "keras-jax", "ops"), _row(mm, "jax", "jit+bf16")
    train = [r for r in lstm["rows"] if r["kind"] == "lstm_train"]
    ljit, lfit, lbf16 = _row(lstm, "jax", "jit"), _row(lstm, "keras-jax", "fit"), _row(lstm, "jax", "jit+bf16")
    judged = [c["passed"] for c in lstm["checks"]]
    return [
        f"JAX's `jit` {_ms(jit)} a call, {jit['gflops_per_s'] / 1e3:.1f} TFLOP/s, {jit['pct_peak']:.1f}% of the "
        f"bfloat16 peak; Keras 3 on JAX's `ops` {_ms(ops)}, {_ratio(mm, 'matmul')}: no difference",
        f"In bfloat16 (`jit+bf16`) {_ms(bf16)}: at the default precision",
        f"{sum(r['verified'] for r in lstm['rows'])} of {len(lstm['rows'])} rows verified, {judged.count(True)} "
        "checks passed",
        f"JAX's `jit` trained an epoch in {_s(ljit)}, Keras 3 on JAX's `fit` in {_s(lfit)}: "
        f"{_ratio(lstm, 'lstm_train')}",
        f"`jit+bf16` {_s(lbf16)}",
        f"here a step takes {ljit['median_s'] / 100 * 1e3:.0f} ms",
    ] + ([] if all(r["verified"] for r in train) else ["every LSTM training row verified"])


def test_tpu_page_quotes_its_files():
    page = _pages()
    page = " ".join(page.split())  # the page's line breaks fall anywhere in a sentence
    quick, conv = _doc("quick.json"), _doc("conv.json")
    judged = [c["passed"] for c in quick["checks"]]
    verified = sum(r["verified"] for r in quick["rows"])
    jit, ops, bf16 = _row(conv, "jax", "jit"), _row(conv, "keras-jax", "ops"), _row(conv, "jax", "jit+bf16")
    ratio = next(c["text"] for c in conv["comparisons"] if c["text"].startswith("Keras-JAX/JAX"))
    r, lo, hi = re.search(r"(\d+\.\d\d)x \(95% CI (\d+\.\d\d)-(\d+\.\d\d)\)", ratio).groups()
    drift = re.search(r"moved (\S+ to \S+) between", next(n for n in conv["env"]["notes"] if "one owner" in n))
    log = (TPU / "cnn-stopped-log.txt").read_text()
    jit_first, jit_epoch = _epochs(log, "jit")
    said = [
        f"`--quick` verified {verified} of {len(quick['rows'])} rows against float64, passed {judged.count(True)} "
        f"checks, failed {'none' if False not in judged else judged.count(False)} and left {judged.count(None)} "
        "not judged",
        f"measured again after the others, moved {drift.group(1)}",
        f"JAX's `jit` {_ms(jit)} a call, Keras 3 on JAX's `ops` {_ms(ops)}",
        f"`Keras-JAX` / `JAX` {r}x ({lo}-{hi})",
        f"That is {jit['gflops_per_s'] / 1e3:.1f} TFLOP/s, {jit['pct_peak']:.1f}% of the chip's "
        f"{jit['peak_flops'] / 1e12:.0f} TFLOP/s bfloat16 peak",
        f"at least {jit['min_bytes'] / 1e9:.1f} GB moved a call",
        f"In bfloat16 (`jit+bf16`) {_ms(bf16)}",
        f"trained an epoch in {jit_epoch} after a {jit_first} first epoch",
        f"`jit+pool+wgrad+masks` took {_epochs(log, 'jit+pool+wgrad+masks')[1]} an epoch",
        f"`jit+bf16+pool+bias+dgrad+wgrad+masks` {_epochs(log, 'jit+bf16+pool+bias+dgrad+wgrad+masks')[1]}",
    ]
    keras = [_epochs(log, v, "keras-jax", "Keras 3 (JAX)")[1] for v in ("fit", "fit+spe")]
    said.append(f"Keras 3 on JAX's `fit` in {keras[0]}, `fit+spe` (10 steps a dispatch) in {keras[1]}")
    missing = [s for s in said + _matmul_and_lstm() if s not in page]
    assert not missing, f"docs/tpu.md does not say, as its files do: {missing}"
    readme = " ".join((ROOT / "README.md").read_text().split())
    rows = _doc("default-ops.json")["rows"]
    lay = next(r for r in rows if r["variant"] == "jit+layout")
    mm16 = next(r for r in rows if r["kind"] == "matmul" and r["dtype"] == "bfloat16")
    floor = lay["min_bytes"] / 819e9
    said = f"JAX's conv took {_ms(lay)} ({lay['median_s'] / floor:.2f}x its [memory floor](docs/glossary.md#terms)), "
    said += "a bfloat16 8192 matmul "
    assert said + f"{mm16['pct_peak']:.1f}% of peak" in readme


def test_tpu_pages_log_lines_are_the_shipped_logs():
    page = _pages()
    block = page.split("## What the first lines of a good run look like", 1)[1].split("```")[1]
    log = (TPU / "cnn-stopped-log.txt").read_text().splitlines()
    lines = [ln for ln in block.strip().splitlines() if ln != "..."]
    assert len(lines) >= 5 and all(ln in log for ln in lines), [ln for ln in lines if ln not in log]


def test_workloads_tpu_row_is_the_shipped_log():
    log = (TPU / "cnn-stopped-log.txt").read_text()
    first, epoch = _epochs(log, "jit")
    total = float(first[:-2]) + 9 * float(epoch[:-2])
    fit = _epochs(log, "fit", "keras-jax", "Keras 3 (JAX)")[1]
    row = f"`jit`: epoch 1 {first}, later epochs {epoch} ({float(epoch[:-2]) * 10:.0f} ms a step): about {total:.0f} s"
    page = (ROOT / "docs/workloads.md").read_text()
    assert row in page and f"Keras 3 on JAX's `fit` {fit} an epoch" in page


def test_tpu_page_quotes_the_vit_file():
    from parity.workloads.vit.spec import VIT_FULL

    doc = _doc("vit.json")
    rows = {(r["framework"], r["variant"]): r for r in doc["rows"]}
    jit = rows["jax", "jit"]
    flops = VIT_FULL.step_flops() * VIT_FULL.steps_per_epoch / jit["median_s"]
    judged = [c["passed"] for c in doc["checks"]]
    verified = sum(r["verified"] for r in doc["rows"])
    s, ms = (lambda k: f"{rows[k]['median_s']:.2f} s"), (lambda k: f"{rows[k]['median_s'] * 1000:.1f} ms")
    said = [
        f"{verified} of {len(doc['rows'])} rows verified, {judged.count(True)} checks passed, "
        f"{judged.count(None)} not judged",
        f"JAX's `jit` trained an epoch in {s(('jax', 'jit'))} after a {jit['first_epoch_s']:.1f} s first epoch, "
        f"{flops / 1e12:.1f} TFLOP/s, {100 * flops / 197e12:.1f}% of the bfloat16 peak; `jit+bf16` in "
        f"{s(('jax', 'jit+bf16'))}; Keras 3 on JAX's `fit` in {s(('keras-jax', 'fit'))} and `fit+bf16` in "
        f"{s(('keras-jax', 'fit+bf16'))}; inference {ms(('jax', 'predict'))} (JAX) and {ms(('keras-jax', 'predict'))} "
        f"(Keras 3 on JAX) for {VIT_FULL.global_batch:,} images",
    ]
    page = " ".join(_pages().split())
    assert [x for x in said if x not in page] == []


def _jsonl(name: str) -> list[dict]:
    return [json.loads(ln) for ln in (TPU / name).read_text().splitlines() if ln.strip()]


def _pct(part: str, r: dict) -> str:
    from parity.workloads import WORKLOADS

    flops = WORKLOADS[part].full.step_flops()  # the full size's step, at the levers' batch
    return f"{flops / (r['step_ms'] / 1e3) / 197e12 * 100:.1f}%"


def levers_said() -> dict[str, str]:
    """What docs/tpu.md's sections on the chip's best-known variants, its roofline and its time say, each rendered
    from the file it names: placeholder -> text."""
    trained = [r for r in _jsonl("levers-trained.jsonl") if "step_ms" in r]
    table = "\n".join(
        f"| {r['part']} | `{r['variant']}` | {r['dtype']} | {r['step_ms']:.2f} ms | {r['first_call_s']:.1f} s | "
        f"{_pct(r['part'], r)} |"
        for r in trained
    )
    step = {(r["part"], r["variant"]): r for r in trained}
    hlo = (TPU / "conv-row-major.hlo.txt").read_text()
    conv_c, copy_c = (
        int(re.search(rf"%{name} = [^\n]*\"estimated_cycles\":\"(\d+)\"", hlo).group(1))
        for name in ("fusion", "copy.1")
    )
    ops = _doc("default-ops.json")
    conv = {"rows": [r for r in ops["rows"] if r["kind"] == "conv"]}
    jit, lay, lay16 = (_row(conv, "jax", v) for v in ("jit", "jit+layout", "jit+bf16+layout"))
    floor = lambda r: r["min_bytes"] / 819e9  # noqa: E731  the chip's 819 GB/s
    mm, mm16 = (r for r in ops["rows"] if r["kind"] == "matmul")
    kernel = next(r for r in _jsonl("levers-ops.jsonl") if r.get("n") == 4096 and r.get("dtype") == "float32")
    cases = {r["case"]: r["compile_s"] for r in _jsonl("levers-layout.jsonl") if "case" in r}
    log = (TPU / "levers-trained-compiles.txt").read_text()
    cnn = [float(m) for m in re.findall(r"jit\(_train_step\) in (\d+\.\d+) sec", log)][:6]  # the CNN ran first
    ortho = re.search(r"jit\(_orthogonal\) in (\d+\.\d+) sec", log)
    return {
        "TRAINED_TABLE": table,
        "CONV_CYCLES": f"{conv_c:,}",
        "COPY_CYCLES": f"{copy_c:,}",
        "CONV_HARNESS": (
            f"`jit` {_ms(jit)} a call against the {floor(jit) * 1e3:.2f} ms its "
            f"{jit['min_bytes'] / 1e9:.2f} GB take at 819 GB/s ({jit['median_s'] / floor(jit):.1f}x); `jit+layout` "
            f"{_ms(lay)} ({lay['median_s'] / floor(lay):.2f}x); in bfloat16 `jit+bf16+layout` {_ms(lay16)} "
            f"({lay16['median_s'] / floor(lay16):.2f}x its floor of {floor(lay16) * 1e3:.2f} ms), every row verified"
        ),
        "MM4096_KERNEL": f"{kernel['pct_bf16_peak']:.1f}%",
        "MM8192_HARNESS": (
            f"`jit` {_ms(mm)} a call, {mm['gflops_per_s'] / 1e3:.1f} TFLOP/s, {mm['pct_peak']:.1f}% of the peak "
            f"(float32 operands, one bfloat16 pass at the default precision); `jit+bf16` {_ms(mm16)}, "
            f"{mm16['gflops_per_s'] / 1e3:.1f} TFLOP/s, {mm16['pct_peak']:.1f}%"
        ),
        "CNN_PCT": _pct("cnn", step["cnn", "jit"]),
        "VIT_PCT": _pct("vit", step["vit", "jit"]),
        "CNN_COMPILE": f"{min(cnn):.1f} to {max(cnn):.1f} s",
        "COMPILE_CASES": (
            f"{cases['as-is']:.1f} s as it is, {cases['no-dropout']:.1f} s without dropout, {cases['rbg']:.1f} s and "
            f"{cases['unsafe_rbg']:.1f} s with the `rbg` and `unsafe_rbg` random number generators"
        ),
        "ORTHO": f"{float(ortho.group(1)):.1f} s",
    }


def _unsaid(said: dict[str, str]) -> dict[str, str]:
    """Each sentence docs/tpu.md does not say as its file does (line breaks anywhere)."""
    page = " ".join(_pages().split())
    return {k: v for k, v in said.items() if " ".join(v.split()) not in page}


def test_tpu_page_quotes_the_chips_levers_roofline_and_time():
    said = levers_said()
    said["DRIFT_NOTE"] = next(n for n in _doc("default-ops.json")["env"]["notes"] if n.startswith("one owner"))
    assert not _unsaid(said), f"docs/tpu.md does not say, as its files do: {_unsaid(said)}"


def tuning_tpu_rows() -> str:
    """docs/tuning-tpu.md's `tpu-v5e` column, rendered from default-ops.json's comparisons and levers-trained.jsonl."""
    ops = _doc("default-ops.json")
    rows = []
    for c in ops["comparisons"]:
        if c["pair"] != "tuned_vs_default":
            continue
        r, lo, hi = re.search(r"(\d+\.\d\d)x \(95% CI (\d+\.\d\d)-(\d+\.\d\d)\)", c["text"]).groups()
        num, den = c["text"].split(" ")[0].split("/")
        fmt = " bfloat16" if c["dtype"] == "bfloat16" else ""
        rows.append(f"| {c['kind']} x1{fmt}: JAX `{num}` / `{den}` | {r}x ({lo}-{hi}) | `{num}` |")
    step = {(r["part"], r["variant"]): r for r in _jsonl("levers-trained.jsonl") if "step_ms" in r}
    best = {"cnn": ("jit", "jit+bf16"), "lstm": ("jit+unroll", "jit+bf16"), "vit": ("jit", "jit+bf16")}
    for (part, variant), r in step.items():
        if variant == "jit":
            continue
        fmt = " bfloat16" if r["dtype"] == "bfloat16" else ""
        ratio = r["step_ms"] / step[part, "jit"]["step_ms"]
        rows.append(
            f"| {part.upper() if part != 'vit' else 'ViT'} training x1{fmt}: JAX `{variant}` / `jit` | {ratio:.2f}x | "
            f"`{best[part][r['dtype'] == 'bfloat16']}` |"
        )
    return "\n".join(rows)


def test_tuning_pages_tpu_column_is_its_files():
    page = (ROOT / "docs/tuning-tpu.md").read_text()
    assert tuning_tpu_rows() in page


def tuning_tpu_keras_rows() -> str:
    """docs/tuning-tpu.md's Keras 3 on JAX rows of the `tpu-v5e` column, rendered from default.json's comparisons."""
    rows = []
    for c in _doc("default.json")["comparisons"]:
        if c["pair"] != "tuned_vs_default" or c["num"]["framework"] != "keras-jax":
            continue
        r, lo, hi = re.search(r"(\d+\.\d\d)x \(95% CI (\d+\.\d\d)-(\d+\.\d\d)", c["text"]).groups()
        num, den = c["text"].split(" ")[0].split("/")
        fmt = " bfloat16" if c["dtype"] == "bfloat16" else ""
        tie = "~" if "no difference" in c["text"] else ""
        rows.append(f"| {c['kind']} x1{fmt}: Keras 3 on JAX `{num}` / `{den}` | {r}x{tie} ({lo}-{hi}) |")
    return "\n".join(rows)


def test_tuning_pages_keras_rows_on_the_chip_are_its_default_runs():
    rows = tuning_tpu_keras_rows()
    assert rows.count("\n") >= 5 and rows in (ROOT / "docs/tuning-tpu.md").read_text()


def _stamped(name: str) -> list[tuple[int, str]]:
    """A run's log as (seconds since midnight, line) for each stamped line."""
    lines = re.findall(r"\[(\d\d):(\d\d):(\d\d)\] (.*)", (TPU / name).read_text())
    return [(int(h) * 3600 + int(m) * 60 + int(sec), line) for h, m, sec, line in lines]


def _min_s(seconds: int) -> str:
    return f"{seconds // 60} min {seconds % 60} s"


def _after(log: list[tuple[int, str]], start: str) -> list[int]:
    """Seconds from each line that begins with `start` to the next stamped line."""
    return [log[i + 1][0] - t for i, (t, line) in enumerate(log[:-1]) if line.startswith(start)]


def _phases(name: str) -> dict[str, int]:
    """benchmarks/run_phases.py's phases file, as {phase: seconds}."""
    found = re.findall(r"(\d+) min +(\d+) s  (.*)", (TPU / name).read_text())
    return {phase: int(m) * 60 + int(sec) for m, sec, phase in found}


def _firsts(log: list[tuple[int, str]], start: str) -> list[float]:
    """The first call after each line that begins with `start` (a training variant's first epoch, say)."""
    out, pending = [], False
    for _, line in log:
        if line.startswith(start):
            pending = True
        elif pending and "first call" in line:
            out.append(float(re.search(r"first call (\d+\.\d+) s", line).group(1)))
            pending = False
    return out


def runs_said() -> dict[str, str]:
    """docs/tpu.md's sentences on the compile times, one at a time and by part, and the parity round, rendered from
    default-stopped-log.txt, its phases, default-log.txt and compile.jsonl (the default's turns:
    tests/test_tpu_default.py)."""
    ph, log = _phases("default-stopped-phases.txt"), _stamped("default-stopped-log.txt")
    total = ph.pop("from the first stamped line to the last")
    cnn, (unroll,) = (
        _firsts(log, "cnn_train: first epoch"),
        _firsts(log, "lstm_train: first epoch (seed 0) JAX jit+unroll"),
    )
    parts = {r["case"]: r for r in _jsonl("compile.jsonl") if r.get("part") == "piece"}
    level = {(r["optimization"], r["memory_fitting"]): r for r in _jsonl("compile.jsonl") if r.get("part") == "level"}
    default, o1 = level["UNKNOWN", "O2"], level["O1", "O2"]
    c = lambda case: f"{parts[case]['compile_s']:.2f} s"  # noqa: E731
    now = _stamped("default-log.txt")
    return {
        "STOPPED": (
            f"the same default had spent {_min_s(sum(v for k, v in ph.items() if 'compiling' in k))} on first epochs "
            f"and first calls when its command's 10-minute limit stopped it, at {_min_s(total)}"
        ),
        "FIRST_CNN": f"the CNN's step took {min(cnn):.1f} to {max(cnn):.1f} s",
        "FIRST_UNROLL": f"(`jit+unroll`, the TPU's best-known) {unroll:.1f} s",
        "COMPILE_PARTS": (
            f"conv3 alone (its 7x7 maps, 128 to 256 channels: the kernel's, bias's and input's gradients) "
            f"{c('conv3 alone')} of the whole gradient's {c('step gradient (all)')}; conv1 alone {c('conv1 alone')}, "
            f"conv2 alone {c('conv2 alone')}, the forward pass alone {c('forward only')}"
        ),
        "COMPILE_PADDED": (
            f"padded with zeros to 8 and to 128 channels the gradient compiled in "
            f"{c('gradient, input padded to 8 channels')} and {c('gradient, input padded to 128 channels')}"
        ),
        "LEVEL": (
            f"in {o1['first_call_s']:.2f} s against {default['first_call_s']:.2f} s, and then took "
            f"{o1['step_ms']:.2f} ms a step against {default['step_ms']:.2f} ms"
        ),
        "PARITY_CNN": f"JAX's CNN round took {_after(now, 'cnn parity')[0]} s on the chip in the default run",
        "PARITY_BEFORE": f"had taken {_min_s(_after(_stamped('cnn-stopped-log.txt'), 'cnn parity')[0])}",
    }


def test_tpu_page_quotes_the_runs_where_the_time_went():
    assert not _unsaid(runs_said()), f"docs/tpu.md does not say, as its files do: {_unsaid(runs_said())}"


def test_the_chips_profiled_run_is_as_the_page_says():
    """docs/tpu.md's training bullet: the profiled run's rows (JAX's of every workload) all verified, each with its
    trace and its layer split, and the figures the page gives from them."""
    doc = json.loads((TPU / "profile.json").read_text())
    rows = doc["rows"]
    judged = [c["passed"] for c in doc["checks"]]
    assert {r["framework"] for r in rows} == {"jax"} and {r["kind"].split("_")[0] for r in rows} == {
        "conv", "matmul", "cnn", "lstm", "vit",
    }  # fmt: skip
    assert all(r["verified"] and r["profile_dir"] and r["layers"] for r in rows)
    assert False not in judged
    cnn, vit = (next(r for r in rows if r["kind"] == k and r["variant"] == "jit") for k in ("cnn_train", "vit_train"))
    steps = cnn["spec"]["steps_per_epoch"]
    assert vit["spec"]["steps_per_epoch"] == steps

    def share(row: dict, prefix: str) -> str:
        return f"{sum(line['share'] for line in row['layers'] if line['layer'].startswith(prefix)):.0%}"

    def padded(row: dict) -> float:  # the levers' table counts a step's FLOPs with SAME padding's zeros (_pct)
        return row["flops"] / row["median_s"] / row["peak_flops"] * 100

    assert vit["flops_unpadded"] in (None, vit["flops"])  # the ViT pads nothing: one count
    batch_mb = steps * cnn["spec"]["global_batch"] * 28 * 28 * 4 / 1e6
    page = " ".join(_pages().split())
    for said in (
        f"The harness's epochs give less, counted the same way {padded(cnn):.1f}% and {padded(vit):.1f}%",
        f"the CNN's {cnn['pct_peak']:.1f}% in the run's `% peak`, which leaves out SAME padding's zeros",
        f"JAX's rows of every workload at the default, each row traced for one more call with `--profile`, "
        f"{sum(r['verified'] for r in rows)} of {len(rows)} rows verified;",
        f"in the CNN's `jit` epoch the chip ran an op {cnn['profile_coverage']:.0%} of the time, {step_ms(cnn, 'ops')} "
        f"of each step's {step_ms(cnn, 'step')}, and between its first op and its last it was idle "
        f"{step_ms(cnn, 'idle')} a step",
        f"where the call slices its {steps} batches from the dataset on the host ({batch_mb:.0f} MB in float32)",
        f"the three convolutions took {share(cnn, 'conv')} (forward and backward), the pooling {share(cnn, 'pool')}, "
        f"the dropout {share(cnn, 'drop')}",
        f"The ViT's `jit` epoch ran an op {vit['profile_coverage']:.0%} of the time ({step_ms(vit, 'ops')} of "
        f"{step_ms(vit, 'step')} a step), its six blocks {share(vit, 'block')} of that",
    ):
        assert " ".join(said.split()) in page, said


def step_ms(row: dict, what: str) -> str:
    """A profiled training row's op time a step ('ops'), its idle time between ops ('idle'), or its step ('step')."""
    lines = row["layers"]
    if what == "ops":
        return f"{sum(line['seconds'] for line in lines) * 1e3:.2f} ms"
    if what == "idle":
        return f"{sum(line['wall_s'] for line in lines if line['pass'] == 'idle') * 1e3:.2f} ms"
    return f"{row['median_s'] / row['spec']['steps_per_epoch'] * 1e3:.2f} ms"
