"""docs/tpu.md's and the README's TPU v5e figures are those of the files they name (docs/results/tpu-v5e/): each
sentence below is rendered from a file and must appear in the page as written. No framework is imported."""

import json
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TPU = ROOT / "docs/results/tpu-v5e"


def _doc(name: str) -> dict:
    return json.loads((TPU / name).read_text())


def _row(doc: dict, framework: str, variant: str) -> dict:
    (row,) = [r for r in doc["rows"] if r["framework"] == framework and r["variant"] == variant]
    return row


def _ms(row: dict) -> str:
    return f"{row['median_s'] * 1e3:.2f} ms"


def _epochs(log: str, variant: str) -> tuple[str, str]:
    """(the first epoch's call, the median later epoch) of a JAX training variant, as the stopped run logged them."""
    start = log.index(f"first epoch (seed 0) JAX {variant} x1")
    first = re.search(r"first call (\d+\.\d+) s", log[start:]).group(1)
    later = re.findall(rf"epoch \d+: jax {re.escape(variant)} (\d+\.\d+)s", log)
    return f"{float(first):.1f} s", f"{statistics.median(float(t) for t in later):.2f} s"


def test_tpu_page_quotes_its_files():
    page = (ROOT / "docs/tpu.md").read_text()
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
        f"at the end moved {drift.group(1)}",
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
    missing = [s for s in said if s not in page]
    assert not missing, f"docs/tpu.md does not say, as its files do: {missing}"
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"the article's convolution in {_ms(jit)} and {_ms(ops)}" in readme


def test_tpu_pages_log_lines_are_the_shipped_logs():
    page = (ROOT / "docs/tpu.md").read_text()
    block = page.split("## What the first lines of a good run look like", 1)[1].split("```")[1]
    log = (TPU / "cnn-stopped-log.txt").read_text().splitlines()
    lines = [ln for ln in block.strip().splitlines() if ln != "..."]
    assert len(lines) >= 5 and all(ln in log for ln in lines), [ln for ln in lines if ln not in log]
