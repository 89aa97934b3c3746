"""The ablation witness: what one CNN training step saves when one layer's work is made trivial, to check the
per-layer profile table (docs/layers.md) against.

Each case runs in a fresh process of its own, which builds two trainers through the implementation's make_trainer:
the model as it is (A) and the same model with one layer's work made trivial (B), then times them in alternating
rounds (ABBA..., who goes first alternates), each round one call of `--steps` training steps on each. The saving is
the median over rounds of A's time minus B's (paired: both felt the same load), per step; `none` (B the same model)
is the noise floor. The load average is read beside every round: other processes on the machine show there.

TensorFlow's trainers (tf_impl) and JAX's (jax_impl); not Keras on JAX. The ablations (the implementations are
left as they are: the benchmark swaps modules or layers of the model it hands the trainer):
    dropout  every dropout layer at rate 0 (the model built with dropout=False)
    conv1 / conv2 / conv3  the convolution replaced by x[..., :1] * w + b (the same output shape; its ELU kept)
    bn       every BatchNorm replaced by the identity
    pool     every max pooling replaced by a strided slice (the same output shape); JAX: `flax.nnx.max_pool` and
             `pool_elementwise` as `jax_impl.cnn` calls it, swapped while B's step is traced (run with --check to see it
             took)

    python benchmarks/ablation.py --framework jax tf --out docs/results/layers/CLASS-ablation.json
    python benchmarks/ablation.py --framework jax --variant jit+pool --setting ynn+onednn+thp
    python benchmarks/ablation.py --compare PROFILED_RESULTS.json docs/results/layers/CLASS-ablation.json
(the commands behind the shipped figures: docs/results/layers/README.md)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
ABLATIONS = ("none", "dropout", "conv1", "conv2", "conv3", "bn", "pool")
DEFAULT_VARIANT = {"jax": "jit", "tf": "fit"}


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


# ---- JAX: modules swapped on the NNX model, the pooling functions swapped while B is traced ---------------------


def _jax_case(ablation: str, variant: str, batch: int, steps: int):
    import contextlib

    import jax
    import jax.numpy as jnp
    from flax import nnx

    import jax_impl
    import jax_impl.cnn as cnn
    from parity.api.cnn import CNN_ARCHITECTURE as arch

    class Cheap(nnx.Module):  # a conv's output shape from its first input channel: x[..., :1] * w + b
        def __init__(self, filters: int, rngs: nnx.Rngs, dtype=None):
            self.dtype = dtype  # the replaced conv's, which the trainer reads off conv1 (None: float32)
            self.w = nnx.Param(jax.random.normal(rngs.params(), (filters,)) * 0.1)
            self.b = nnx.Param(jnp.zeros((filters,)))

        def __call__(self, h):  # in the input's dtype: bfloat16 in a '+bf16' variant's copy, as its convs
            return h[..., :1] * self.w.value.astype(h.dtype) + self.b.value.astype(h.dtype)

    class Identity(nnx.Module):
        def __call__(self, h, use_running_average=None):
            return h

    def strided(h, size=2):
        r, k = h.shape[1] // size, h.shape[2] // size
        return h[:, : size * r : size, : size * k : size, :]

    def strided_window(h, window, strides=None, padding=None):  # nnx.max_pool's arguments
        return strided(h, window[0])

    devices = jax_impl.setup_devices("cpu", 1)
    model = jax_impl.adapter("cnn").build(0, dropout=ablation != "dropout")
    record = next(v for v in jax_impl.variants("cnn_train", 1) if v.name == variant)
    trains_as = variant
    if record.float32:  # a '+bf16' variant's trainer builds its bfloat16 copy afresh from the layers' classes, which
        # would drop a swapped module: the swap goes on that copy, which the float32 counterpart trains as it is
        model, trains_as = jax_impl.adapter("cnn").mixed_precision(model), record.float32
    patch, swapped = contextlib.nullcontext(), []
    if ablation.startswith("conv"):
        b = next(b for b in arch.convs if b.names[1] == ablation)
        setattr(model, ablation, Cheap(b.filters, nnx.Rngs(params=1), getattr(model, ablation).dtype))
        swapped = [ablation]
    elif ablation == "bn":
        for b in arch.convs:
            setattr(model, b.names[0], Identity())
        swapped = [b.names[0] for b in arch.convs]
    elif ablation == "pool":
        # JAX's own pooling is Flax's max_pool, looked up when traced; '+pool' calls cnn.pool_elementwise
        patch = _patched([(nnx, "max_pool", strided_window), (cnn, "pool_elementwise", strided)])
    base = jax_impl.adapter("cnn").make_trainer(jax_impl.adapter("cnn").build(0), devices, variant)
    x, y = _batches(batch, steps)
    base.steps(x, y)  # traced and compiled with the real layers
    with patch:  # the swapped function is read when B's step is traced, here
        ablated = jax_impl.adapter("cnn").make_trainer(model, devices, trains_as)
        ablated.steps(x, y)
    trained = ablated.model()  # the model B trains (a '+bf16' variant's: the bfloat16 copy made above)
    if ablated.compute_dtype != base.compute_dtype or any(
        not isinstance(getattr(trained, n), (Cheap, Identity)) for n in swapped
    ):  # B must train the swapped model in A's number format, or the saving measures nothing
        raise SystemExit(f"ablation {ablation}: the trainer of {variant} does not run the swapped layers")
    return base, ablated, x, y


def _patched(swaps: list):
    """A context in which each (module, name, function) of `swaps` stands in for the module's own."""
    import contextlib

    @contextlib.contextmanager
    def patch():
        saved = [(module, n, getattr(module, n)) for module, n, _ in swaps]
        for module, n, f in swaps:
            setattr(module, n, f)
        try:
            yield
        finally:
            for module, n, f in saved:
                setattr(module, n, f)

    return patch()


# ---- TensorFlow: the Sequential rebuilt with layers swapped (names kept, so the profile's scopes stay) -----------


def _tf_case(ablation: str, variant: str, batch: int, steps: int):
    import keras

    import tf_impl

    @keras.saving.register_keras_serializable("ablation")
    class Cheap(keras.layers.Layer):  # a conv's output shape from its first input channel, its ELU kept
        def __init__(self, filters: int, **kw):
            super().__init__(**kw)
            self.filters = filters

        def build(self, shape):
            self.w = self.add_weight(shape=(self.filters,), initializer=keras.initializers.RandomNormal(0, 0.1))
            self.b = self.add_weight(shape=(self.filters,), initializer="zeros")

        def call(self, x):
            return keras.activations.elu(x[..., :1] * self.w + self.b)

        def get_config(self):
            return {**super().get_config(), "filters": self.filters}

    @keras.saving.register_keras_serializable("ablation")
    class Strided(keras.layers.Layer):  # max pooling's output shape, by a strided slice
        def __init__(self, size: int = 2, **kw):
            super().__init__(**kw)
            self.size = size

        def call(self, x):
            s, r, k = self.size, x.shape[1] // self.size, x.shape[2] // self.size
            return x[:, : s * r : s, : s * k : s, :]

        def get_config(self):
            return {**super().get_config(), "size": self.size}

    def swap(layer):
        if ablation.startswith("conv") and layer.name == ablation:
            return Cheap(layer.filters, name=layer.name)
        if ablation == "bn" and isinstance(layer, keras.layers.BatchNormalization):
            return keras.layers.Identity(name=layer.name)
        if ablation == "pool" and isinstance(layer, keras.layers.MaxPooling2D):
            return Strided(layer.pool_size[0], name=layer.name)
        return layer

    devices = tf_impl.setup_devices("cpu", 1)
    src = tf_impl.adapter("cnn").build(0, dropout=ablation != "dropout")
    model = keras.Sequential([keras.Input(src.input_shape[1:]), *map(swap, src.layers)], name=src.name)
    base = tf_impl.adapter("cnn").make_trainer(tf_impl.adapter("cnn").build(0), devices, variant)
    ablated = tf_impl.adapter("cnn").make_trainer(model, devices, variant)
    x, y = _batches(batch, steps)
    base.steps(x, y)
    ablated.steps(x, y)
    return base, ablated, x, y


def _batches(batch: int, steps: int):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (steps, batch, 28, 28, 1)).astype(np.float32)
    return x, rng.integers(0, 10, (steps, batch)).astype(np.int32)


def child(
    framework: str, ablation: str, variant: str, batch: int, steps: int, rounds: int, warmup: int, check: bool
) -> dict:
    """One case in this process: A and B built, warmed, then timed in alternating rounds."""
    case = _jax_case if framework == "jax" else _tf_case
    base, ablated, x, y = case(ablation, variant, batch, steps)
    made = _what_ran(framework, base, ablated) if check else {}
    for _ in range(warmup):
        base.steps(x, y)
        ablated.steps(x, y)
    a, b, load = [], [], []
    for i in range(rounds):
        for which in "ab" if i % 2 == 0 else "ba":
            t = base if which == "a" else ablated
            t0 = time.perf_counter()
            t.steps(x, y)
            (a if which == "a" else b).append((time.perf_counter() - t0) / steps)
        load.append(loadavg())
    return {"a_s": a, "b_s": b, "loadavg": load, "check": made}


# what shows that B's work changed: JAX, the compiled steps' ops by what they came from (their HLO metadata); TF,
# the layer classes of the model B's trainer copied (its model() loads the copy's weights back into it)
_MARKS = ("conv_general_dilated", "reduce_window", "threefry", "jvp(bn", "onednn$convolution", "%wrapped_reduce-window")


def _what_ran(framework: str, base, ablated) -> dict:
    if framework == "jax":
        a, b = base.program_text(), ablated.program_text()
        return {m: [a.count(m), b.count(m)] for m in _MARKS}
    return {"layers": [type(layer).__name__ for layer in ablated.model().layers]}


def summarise(r: dict) -> dict:
    a, b = np.array(r["a_s"]), np.array(r["b_s"])
    d = a - b
    return {
        "baseline_ms": float(np.median(a) * 1e3),
        "baseline_iqr_ms": [float(np.percentile(a, 25) * 1e3), float(np.percentile(a, 75) * 1e3)],
        "ablated_ms": float(np.median(b) * 1e3),
        "saving_ms": float(np.median(d) * 1e3),
        "saving_iqr_ms": [float(np.percentile(d, 25) * 1e3), float(np.percentile(d, 75) * 1e3)],
        "saving_range_ms": [float(d.min() * 1e3), float(d.max() * 1e3)],
        "loadavg": [min(r["loadavg"]), max(r["loadavg"])],
    }


# the profile table's lines each ablation takes away: every pass of those layers
REMOVES = {
    "none": (),
    "dropout": ("drop1", "drop2", "drop3", "drop4"),
    "conv1": ("conv1",),
    "conv2": ("conv2",),
    "conv3": ("conv3",),
    "bn": ("bn1", "bn2", "bn3"),
    "pool": ("pool1", "pool2", "pool3"),
}


def compare(profile: Path, witnesses: list[Path]) -> str:
    """A Markdown table: each case's measured saving beside the profiled row's figures for the layers it takes
    away (wall and CPU ms per step, every pass), the row the case's framework, variant and setting ran."""
    rows = json.loads(profile.read_text())["rows"]
    out = [
        "| framework | row | ablation | baseline ms | saving ms (IQR) | table wall ms | table CPU ms | load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for w in witnesses:
        for c in json.loads(w.read_text())["cases"]:
            name = c["variant"] + (f"+{c['setting']}" if c.get("setting") else "")
            row = next(
                (
                    r
                    for r in rows
                    if r["framework"] == c["framework"]
                    and r["kind"] == "cnn_train"
                    and r["replicas"] == 1
                    and r["variant"] == name  # names the number format too ('+bf16')
                    and r.get("layers")
                ),
                None,
            )
            lines = [ln for ln in (row or {}).get("layers") or [] if ln["layer"] in REMOVES[c["ablation"]]]
            wall = sum(ln.get("wall_s", float("nan")) for ln in lines) * 1e3 if row else float("nan")
            cpu = sum(ln["seconds"] for ln in lines) * 1e3 if row else float("nan")
            lo, hi = c["saving_iqr_ms"]
            out.append(
                f"| {c['framework']} | {name} | {c['ablation']} | {c['baseline_ms']:.1f} | {c['saving_ms']:.1f}"
                f" ({lo:.1f}..{hi:.1f}) | {wall:.1f} | {cpu:.1f} | {c['loadavg'][0]:.1f}-{c['loadavg'][1]:.1f} |"
            )
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", nargs="+", choices=("jax", "tf"), default=["jax", "tf"])
    p.add_argument("--ablation", nargs="+", choices=ABLATIONS, default=list(ABLATIONS))
    p.add_argument("--variant", help="the trainer's variant (default: jit for JAX, fit for TF)")
    p.add_argument("--setting", help="a JAX process-wide setting by name (jax_impl.SETTINGS): its env")
    p.add_argument("--env", nargs="*", default=[], metavar="K=V", help="more environment for the case processes")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=2, help="training steps per timed call")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--out", type=Path)
    p.add_argument("--check", action="store_true", help="record what B runs (JAX: two more compilations a case)")
    p.add_argument(
        "--compare",
        nargs="+",
        type=Path,
        metavar=("PROFILE", "WITNESS"),
        help="print the table of a --profile run's results.json beside witness files, and exit",
    )
    p.add_argument("--child", nargs=2, metavar=("FRAMEWORK", "ABLATION"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.compare:
        print(compare(args.compare[0], args.compare[1:]))
        return 0
    if args.child:
        fw, ab = args.child
        variant = args.variant or DEFAULT_VARIANT[fw]
        r = child(fw, ab, variant, args.batch, args.steps, args.rounds, args.warmup, args.check)
        print("RESULT " + json.dumps(r))
        return 0
    env = dict(os.environ)
    for kv in args.env:
        k, sep, v = kv.partition("=")
        if not sep:
            p.error(f"--env takes K=V, got {kv!r}")
        env[k] = v
    if args.setting:
        if args.framework != ["jax"]:
            p.error("--setting is a JAX setting: give --framework jax")
        import jax_impl

        named = {s.name: s for s in jax_impl.SETTINGS}
        if args.setting not in named:
            p.error(f"no JAX setting {args.setting!r}; there are: {', '.join(named)}")
        for k, v in named[args.setting].env.items():
            env[k] = f"{env[k]} {v}" if k == "XLA_FLAGS" and env.get(k) else v
    out = {
        "argv": sys.argv[1:],
        "cpu": _cpu(),
        "env": {k: env[k] for k in ("XLA_FLAGS", "GLIBC_TUNABLES", "OMP_NUM_THREADS") if k in env},
        "cases": [],
    }
    for fw in args.framework:
        variant = args.variant or DEFAULT_VARIANT[fw]
        for ab in args.ablation:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                fw,
                ab,
                "--variant",
                variant,
                "--batch",
                str(args.batch),
                "--steps",
                str(args.steps),
                "--rounds",
                str(args.rounds),
                "--warmup",
                str(args.warmup),
                *(["--check"] if args.check else []),
            ]
            started = loadavg()
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
            if done.returncode or not line:
                print(
                    f"{fw} {variant} {ab}: failed ({done.returncode}): {done.stderr.strip()[-2000:]}", file=sys.stderr
                )
                return 1
            raw = json.loads(line[-1][7:])
            s = summarise(raw)
            out["cases"].append(
                {
                    "framework": fw,
                    "variant": variant,
                    "setting": args.setting,
                    "ablation": ab,
                    "batch": args.batch,
                    "loadavg_before": started,
                    **s,
                    "raw": raw,
                }
            )
            if raw["check"]:
                print(f"  check: {raw['check']}", flush=True)
            print(
                f"{fw} {variant}{'+' + args.setting if args.setting else ''} {ab:8s}"
                f" baseline {s['baseline_ms']:8.1f} ms"
                f"  ablated {s['ablated_ms']:8.1f} ms  saving {s['saving_ms']:7.1f} ms"
                f" (IQR {s['saving_iqr_ms'][0]:.1f}..{s['saving_iqr_ms'][1]:.1f})"
                f"  load {s['loadavg'][0]:.2f}-{s['loadavg'][1]:.2f}",
                flush=True,
            )
            if args.out:  # after every case: a stopped run keeps what it measured
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


def _cpu() -> dict:
    """The CPU class: its model line and family/model numbers from /proc/cpuinfo, and the cores this process has."""
    fields = dict(
        (k.strip(), v.strip())
        for k, _, v in (ln.partition(":") for ln in Path("/proc/cpuinfo").read_text().splitlines())
    )
    keep = ("model name", "vendor_id", "cpu family", "model")
    return {**{k: fields.get(k) for k in keep}, "cores": len(os.sched_getaffinity(0))}


if __name__ == "__main__":
    sys.exit(main())
