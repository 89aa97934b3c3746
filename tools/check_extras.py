"""Do the accelerator extras install? pip's own resolver, against the registry, metadata only (nothing installed).

    python tools/check_extras.py                 # gpu, tpu, tpu-jax, tpu-tf
    python tools/check_extras.py tpu --python-version 3.12

Each extra's requirements are read from pyproject.toml (references to this project's other extras expanded)
and resolved with `pip install --dry-run --ignore-installed --report`. Prints what each would install of the
packages that matter (the frameworks, libtpu, the CUDA stacks) or pip's reason for refusing; exits 1 if any
extra does not resolve. Needs the package registry (not the accelerator). With --python-version, pip resolves
for another interpreter from wheels only (--only-binary=:all:), as on a machine whose Python differs from this.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOWN = re.compile(r"^(jax|jaxlib|jax-cuda.*|libtpu|tensorflow.*|keras|flax|nvidia-cudnn.*|nvidia-cublas.*)$")


def requirements(extras: dict, name: str) -> list[str]:
    """An extra's requirement strings, 'parity[a,b]' expanded to a's and b's."""
    out = []
    for req in extras[name]:
        m = re.fullmatch(r"parity\[([\w,-]+)\]", req)
        out += [r for sub in m.group(1).split(",") for r in requirements(extras, sub)] if m else [req]
    return out


def resolve(reqs: list[str], python_version: str | None) -> tuple[bool, str]:
    """(resolved, what it would install or pip's last error lines)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--quiet",
            "--ignore-installed",
            "--report",
            str(report),
            *reqs,
        ]
        if python_version:
            cmd += ["--python-version", python_version, "--only-binary=:all:"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if p.returncode:
            errors = [ln for ln in p.stderr.splitlines() if ln.startswith("ERROR")]
            return False, "\n    ".join(errors[-3:] or [p.stderr.strip()[-500:]])
        doc = json.loads(report.read_text())
    got = sorted((i["metadata"]["name"], i["metadata"]["version"]) for i in doc["install"])
    return True, ", ".join(f"{n} {v}" for n, v in got if SHOWN.match(n.lower().replace("_", "-")))


def main(argv=None) -> int:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "extras", nargs="*", help=f"extras to check, of {', '.join(extras)} (default: gpu, tpu, tpu-jax, tpu-tf)"
    )
    ap.add_argument("--python-version", help="resolve for this Python (e.g. 3.12), wheels only")
    args = ap.parse_args(argv)
    unknown = [e for e in args.extras if e not in extras]
    if unknown:
        ap.error(f"no extra named {', '.join(unknown)} in pyproject.toml")
    failed = 0
    for name in args.extras or ["gpu", "tpu", "tpu-jax", "tpu-tf"]:
        ok, what = resolve(requirements(extras, name), args.python_version)
        print(f"{name}: {'resolves' if ok else 'DOES NOT RESOLVE'}\n    {what}", flush=True)
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
