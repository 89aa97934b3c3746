"""Where a profiled row's time goes, op by op: each traced op of a `--profile` run summed by its name and pass, the
time summed over threads (as the per-layer table's CPU column), with how many times it ran. The per-layer table says
in which layer a gap sits; this says in which kernels. Each framework's traces are read by its own `trace_ops`, in a
process of its own (Keras's backend is fixed once a process).

    python -m parity.run --device cpu --workload vit --configs default --profile --out OUT
    python benchmarks/op_sums.py OUT/results.json --out op-sums.json

Every framework's op names are its own (TF's kernels, JAX's HLO ops named by the primitive that made them,
PyTorch's aten ops and autograd nodes); a numeric suffix ('mul.3') is dropped, so one name sums every instance.
Each row's total is split in two: the matrix products (`PRODUCT`, by name) and the rest.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

SUFFIX = re.compile(r"[._]\d+$")
# a matrix product by its name: TF's MatMul, BatchMatMulV2, Einsum; JAX's dot_general; PyTorch's aten::linear (its
# addmm inside), aten::matmul, aten::einsum, and their autograd nodes (AddmmBackward0, BmmBackward0, MmBackward0)
PRODUCT = re.compile(r"matmul|einsum|dot_general|addmm|bmm|^mm|linear", re.I)


def profiled(doc: dict, framework: str | None = None) -> list[dict]:
    """The file's rows with a trace folder, of one framework or all."""
    rows = [r for r in doc["rows"] if r.get("profile_dir")]
    return [r for r in rows if framework in (None, r["framework"])]


def sums(ops, layers: tuple[str, ...]) -> list[dict]:
    """(scope/op name, seconds, start, thread) ops -> one record per (op, pass), the longest first."""
    from parity.judging.layers import classify

    total, count = defaultdict(float), defaultdict(int)
    for name, seconds, _start, _thread in ops:
        key = (SUFFIX.sub("", name.rsplit("/", 1)[-1]), classify(name, layers)[1])
        total[key] += seconds
        count[key] += 1
    out = [{"op": op, "pass": p, "seconds": s, "count": count[(op, p)]} for (op, p), s in total.items()]
    return sorted(out, key=lambda o: -o["seconds"])


def one_framework(path: Path, framework: str) -> list[dict]:
    """Every profiled row of `framework` in the results file at `path`, its ops summed."""
    from parity.common.frameworks import load

    impl, doc, out = load(framework), json.loads(path.read_text()), []
    for row in profiled(doc, framework):
        folder = path.parent / row["profile_dir"]
        hlo = folder / "program.hlo.txt"
        ops = impl.trace_ops(str(folder), hlo.read_text() if hlo.exists() else None)
        layers = tuple(dict.fromkeys(ln["layer"] for ln in row.get("layers") or []))
        keys = ("framework", "workload", "variant", "dtype", "replicas", "median_s", "profile_call_s")
        summed = sums(ops, layers)
        products = sum(o["seconds"] for o in summed if PRODUCT.search(o["op"]))
        rest = sum(o["seconds"] for o in summed) - products
        out.append({**{k: row.get(k) for k in keys}, "products_s": products, "rest_s": rest, "ops": summed})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="a --profile run's results.json, its profiles/ folder beside it")
    p.add_argument("--out", type=Path, help="write every row's sums here as JSON")
    p.add_argument("--top", type=int, default=8, help="ops printed per row (default 8)")
    p.add_argument("--framework", help=argparse.SUPPRESS)  # the child's: one framework, JSON on stdout
    args = p.parse_args()
    if args.framework:
        print(json.dumps(one_framework(args.results, args.framework)))
        return 0
    rows = []
    for fw in dict.fromkeys(r["framework"] for r in profiled(json.loads(args.results.read_text()))):
        cmd = [sys.executable, __file__, str(args.results), "--framework", fw]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rows += json.loads(done.stdout.strip().splitlines()[-1])
    for row in rows:
        head = f"{row['framework']} {row['kind']} {row['variant']} ({row['dtype']}):"
        print(f"{head} products {row['products_s'] * 1e3:.1f} ms, the rest {row['rest_s'] * 1e3:.1f} ms")
        for o in row["ops"][: args.top]:
            print(f"  {o['seconds'] * 1e3:9.2f} ms {o['count']:6d}  {o['op']} ({o['pass']})")
    if args.out:
        lines = ",\n".join(json.dumps(r) for r in rows)  # a row a line
        args.out.write_text(f'{{"source": {json.dumps(args.results.name)},\n"rows": [\n{lines}\n]}}\n')
    return 0


if __name__ == "__main__":
    sys.exit(main())
