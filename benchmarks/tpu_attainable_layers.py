"""Each layer of a training step against what the chip could attain for it: a compiled step's ops (its HLO text, as
`--profile` writes it beside a row's trace: program.hlo.txt, or gzipped) grouped by the layer their op names carry,
each op at the larger of its FLOPs at the peak and its bytes at the bandwidth (parity.judging.program and roofline),
beside the same layers' op time in the row's trace (a results file's `layers`). No framework is imported.

    python benchmarks/tpu_attainable_layers.py docs/results/tpu-v5e/cnn-prefetch-step.hlo.txt.gz \
        docs/results/tpu-v5e/profile.json cnn_train jit+prefetch
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from parity.judging import program  # noqa: E402

V5E = (197e12, 819e9)  # the bfloat16 peak and HBM bandwidth of one v5e chip (parity.judging.roofline's table)


def layer_of(op_name: str) -> tuple[str, str]:
    """(layer, pass) from an op's name: 'jit(_train_step)/transpose(jvp(conv1))/...' is conv1's backward."""
    found = re.search(r"jvp\((\w+)\)", op_name)
    if found:
        return found.group(1), "backward" if "transpose(" in op_name else "forward"
    return ("optimizer", "optimizer") if "optimizer" in op_name else ("other", "other")


def attainable_by_layer(text: str, peak: tuple[float, float] = V5E, tile: int = 128) -> dict[tuple[str, str], float]:
    """Seconds a step's ops could take at best, summed by (layer, pass) (the entry computation's ops)."""
    comps, entry = program.parse(text)
    c, out = comps[entry], {}
    for ins in c.instrs:
        if ins.opcode in program.NO_WORK or ins.opcode.endswith("-done"):
            continue
        flops = program.matrix_flops(ins, c.shapes, tile)
        if ins.opcode == "fusion":
            flops = sum(program._fused_flops(comps, s, tile) for s in program._called(ins.attrs, "calls"))
        name = re.search(r'op_name="([^"]*)"', ins.attrs)
        key = layer_of(name.group(1) if name else "")
        out[key] = out.get(key, 0.0) + max(flops / peak[0], program._moved(comps, c, ins) / peak[1])
    return out


def traced_by_layer(results: dict, kind: str, variant: str) -> dict[tuple[str, str], float]:
    """A row's op time a step by (layer, pass), from its trace (`layers`)."""
    (row,) = [r for r in results["rows"] if r["kind"] == kind and r["variant"] == variant and r["framework"] == "jax"]
    out: dict[tuple[str, str], float] = {}
    for line in row["layers"]:
        key = (line["layer"], line["pass"])
        out[key] = out.get(key, 0.0) + line["seconds"]
    return out


def read(hlo: Path) -> str:
    return gzip.open(hlo, "rt").read() if hlo.suffix == ".gz" else hlo.read_text()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("hlo", type=Path)
    ap.add_argument("results", type=Path)
    ap.add_argument("kind")
    ap.add_argument("variant")
    a = ap.parse_args(argv)
    best = attainable_by_layer(read(a.hlo))
    traced = traced_by_layer(json.loads(a.results.read_text()), a.kind, a.variant)
    print(f"{'layer':12s} {'pass':9s} {'traced ms':>10s} {'attainable ms':>14s} {'share':>6s}")
    for key in sorted(traced, key=lambda k: -traced[k]):
        t, b = traced[key], best.get(key, 0.0)
        print(f"{key[0]:12s} {key[1]:9s} {t * 1e3:10.3f} {b * 1e3:14.3f} " + (f"{b / t:6.0%}" if t else "     -"))
    print(f"{'all':22s} {sum(traced.values()) * 1e3:10.3f} {sum(best.values()) * 1e3:14.3f}")


if __name__ == "__main__":
    main()
