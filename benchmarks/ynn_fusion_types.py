"""What XLA:CPU's `--xla_cpu_experimental_ynn_fusion_type` does to the CNN's training step and the full-size conv:
each setting in a fresh process (XLA_FLAGS is read once), the step's compiled program searched for YNNPACK
fusions, and the median of timed calls (issue "JAX at its best on CPUs", item 1: a list without '+'/'-' replaces
XLA's default list instead of adding to it).

    python benchmarks/ynn_fusion_types.py [NAME ...]   (substrings of the settings' names; default: all)

It also answers item 4 (oneDNN's rewriter and float32 convolutions): the settings with oneDNN's custom calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SETTINGS = {
    "out of the box": "",
    "dot,eltwise,reduce (the first '+ynn' worker's)": "--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce",
    "dot,reduce (the '+ynn' worker's)": "--xla_cpu_experimental_ynn_fusion_type=dot,reduce",
    "+dot,+eltwise,+reduce (added to the default)": "--xla_cpu_experimental_ynn_fusion_type=+dot,+eltwise,+reduce",
    # item 4: out of the box YNNPACK takes the float32 convolutions before oneDNN's rewriter can; with YNNPACK's
    # list emptied, or without its convolutions, oneDNN's rewriter takes them
    "oneDNN's custom calls (the '+onednn' worker's)": "--xla_cpu_experimental_onednn_custom_call=true",
    "oneDNN's custom calls, no YNNPACK": "--xla_cpu_experimental_onednn_custom_call=true "
    "--xla_cpu_experimental_ynn_fusion_type=",
    "oneDNN's custom calls and dot,eltwise,reduce": "--xla_cpu_experimental_onednn_custom_call=true "
    "--xla_cpu_experimental_ynn_fusion_type=dot,eltwise,reduce",
    # YNNPACK's elementwise fusions take a convolution in with its bias add: without them oneDNN takes the CNN's
    "oneDNN's custom calls and dot,reduce ('+ynn+onednn')": "--xla_cpu_experimental_onednn_custom_call=true "
    "--xla_cpu_experimental_ynn_fusion_type=dot,reduce",
}

CHILD = r"""
import json, time
import jax, numpy as np
from jax import lax
from jax_impl.cnn import build_cnn
from jax_impl.cnn_train import make_trainer
rng = np.random.default_rng(0)
out = {}
for variant in ("jit", "jit+pool"):
    t = make_trainer(build_cnn(0), jax.devices()[:1], variant)
    x = rng.standard_normal((2, 256, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, (2, 256))
    t.steps(x, y)
    times = []
    for _ in range(5):
        t0 = time.perf_counter(); t.steps(x, y); times.append(time.perf_counter() - t0)
    text = t.program_text()
    out[variant] = {"epoch_s": float(np.median(times)), "ynn_fusions": text.count("__ynn_fusion"),
                    "onednn_convs": text.count('custom_call_target="__onednn$convolution"'),
                    "loss": float(np.asarray(t.steps(x, y))[-1, 0])}
x = jax.device_put(rng.standard_normal((128, 256, 256, 3), dtype=np.float32))
k = jax.device_put(rng.standard_normal((5, 5, 3, 256), dtype=np.float32))
f = jax.jit(lambda x, k: lax.conv_general_dilated(x, k, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
f(x, k).block_until_ready()
times = []
for _ in range(5):
    t0 = time.perf_counter(); f(x, k).block_until_ready(); times.append(time.perf_counter() - t0)
text = f.lower(x, k).compile().as_text()
out["conv"] = {"call_s": float(np.median(times)), "ynn_fusions": text.count("__ynn_fusion"),
               "onednn_convs": text.count('custom_call_target="__onednn$convolution"')}
print(json.dumps(out))
"""


def main() -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    only = sys.argv[1:]  # substrings of the settings' names to run (default: all)
    for name, flags in SETTINGS.items():
        if only and not any(o in name for o in only):
            continue
        env = dict(os.environ, XLA_FLAGS=flags, PYTHONPATH=here)
        p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
        if p.returncode:
            print(name, "failed:", p.stderr.strip().splitlines()[-1])
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        print(
            f"{name}: CNN 2 steps jit {r['jit']['epoch_s']:.3f} s ({r['jit']['ynn_fusions']} YNNPACK fusions, "
            f"{r['jit']['onednn_convs']} oneDNN convolutions), jit+pool {r['jit+pool']['epoch_s']:.3f} s "
            f"(loss {r['jit+pool']['loss']:.6f}); conv {r['conv']['call_s']:.3f} s "
            f"({r['conv']['ynn_fusions']} YNNPACK fusions, {r['conv']['onednn_convs']} oneDNN)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
