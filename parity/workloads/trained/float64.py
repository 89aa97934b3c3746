"""A trained model's float64 oracle where its workload brings no NumPy one: the same model run in float64 by a
framework that offers it (JAX with x64 enabled, PyTorch in double, Keras on TensorFlow in float64), chosen by the
workload (FrameworkOracle, the `float64` of parity.workloads.trained.model.TrainedModel). It runs in a child process of
its own, so that no float32 worker's precision is switched (JAX's x64 is a process's setting), given the weights and
inputs by an .npz file; it returns the forward blocks, and one batch's loss and gradients, as a NumPy oracle does.
That framework's adapter offers `float64(model)`: the model, its weights widened (exactly) and computing in float64;
an adapter function optional everywhere else. A float64 format is no proof of float64 arithmetic (a constant may pass
through float32 on its way in): tests/test_float64_oracle.py holds each framework's run of the GRU example to its
NumPy oracle."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from parity.common import frameworks
from parity.workloads.trained import child


@dataclass(frozen=True)
class Offer:
    """What a framework's float64 run is called in the checks, and what its child process's environment sets."""

    label: str
    env: dict[str, str]


OFFERS = {
    # x64: JAX computes float32 however float64 is asked for unless it is on; the CPU: a TPU has no float64
    frameworks.JAX: Offer("JAX float64 (x64)", {"JAX_ENABLE_X64": "1", "JAX_PLATFORMS": "cpu"}),
    # the CPU: float64 is slow or absent on accelerators, and the oracle's speed is not measured
    frameworks.TORCH: Offer("PyTorch float64 (double)", {"CUDA_VISIBLE_DEVICES": ""}),
    # Keras 3 on TensorFlow. Not on JAX: its float64 GRU stays as far from float64 as float32 rounding (numerics.md)
    frameworks.TF: Offer("TensorFlow float64", {"CUDA_VISIBLE_DEVICES": ""}),
}
NUMPY = "NumPy float64"  # what a workload's own oracle is called in the checks
# framework -> the interpreter its float64 runs take, as JSON: the run's --python (model_suite sets it for the run, its
# workers inherit it); a framework it does not name runs in this process's interpreter
PYTHONS = "PARITY_FLOAT64_PYTHONS"
ROOT = Path(__file__).resolve().parents[3]  # this checkout: what another environment's interpreter must find


class Float64Error(RuntimeError):
    """The float64 run could not give its figures: one line saying why."""


@dataclass(frozen=True)
class FrameworkOracle:
    """framework: the key (parity.common.frameworks) of the framework that runs the model in float64, one of OFFERS;
    workload: the workload's name (its adapter's); package: the module holding its adapter modules (a plug-in's:
    `parity_gru` for `parity_gru/jax_impl.py`), None where the implementation's own adapter serves (a built-in
    workload's); sizes(weights): what the adapter's build takes for a weight list in Keras's order (the GRU's
    (units,)); timeout_s: how long a run may take (None: the run's --timeout, child.TIMEOUT; the lower of the two
    where both are given). forward and loss_and_grads are the oracle's, as a NumPy one's."""

    framework: str
    workload: str
    package: str | None
    sizes: Callable[[Sequence[np.ndarray]], tuple[int, ...]]
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.framework not in OFFERS:
            offered = ", ".join(OFFERS)
            raise ValueError(f"no float64 oracle in framework {self.framework!r}: one of {offered} offers it")

    @property
    def label(self) -> str:
        """'JAX float64 (x64)': the oracle's name in the checks and rows it judges."""
        return OFFERS[self.framework].label

    def forward(self, weights: Sequence[np.ndarray], x: np.ndarray, cache: Path | None = None) -> dict[str, np.ndarray]:
        """Every block's output in float64, by block name (the adapter's forward_layers). cache: a folder where an
        answer is kept for other processes asking the same (each framework's inference row: one run, not four)."""
        return {k.removeprefix("forward/"): v for k, v in self._run(weights, x, None, cache).items()}

    def loss_and_grads(self, weights: Sequence[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, list]:
        """One batch's mean cross-entropy and every parameter's gradient, in Keras's order, in float64."""
        out = self._run(weights, x, y)
        return float(out["loss"]), [out[f"grad/{i:03d}"] for i in range(len(weights))]

    def terms(self, weights: Sequence[np.ndarray], x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        """A light workload's figures for its bounds in one run (its adapter's `vjp`: `_terms`), by name: forward/*,
        loss, grad/*, abs/* and terms/*. The loss and gradients then answer loss_and_grads too."""
        out = self._run(weights, x, y, extra={"terms": np.ones(1)})
        answers = {  # what the same run answers of the plain requests: the forward blocks, both ways; the gradients
            self._request(weights, x, y)[0]: {k: v for k, v in out.items() if k == "loss" or k.startswith("grad/")},
            self._request(weights, x)[0]: {k: v for k, v in out.items() if k.startswith("forward/")},
            self._request([np.abs(w) for w in weights], np.abs(x))[0]: {
                f"forward/{k[4:]}": v for k, v in out.items() if k.startswith("abs/")
            },
        }
        for key, answer in answers.items():
            _DONE.setdefault(key, answer)
        return out

    def _request(self, weights, x: np.ndarray, y=None, extra: dict | None = None) -> tuple[str, dict, dict]:
        """A request's digest (its answer's key), its meta and its arrays."""
        w = _float32(weights)
        arrays = {f"w{i:03d}": a for i, a in enumerate(w)} | {"x": np.asarray(x)}
        if y is not None:
            arrays["y"] = np.asarray(y)
        arrays |= extra or {}
        meta = {"framework": self.framework, "workload": self.workload, "package": self.package}
        meta["sizes"] = [int(s) for s in self.sizes(w)]
        digest = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
        for k in sorted(arrays):
            digest.update(k.encode() + arrays[k].dtype.str.encode() + str(arrays[k].shape).encode())
            digest.update(np.ascontiguousarray(arrays[k]).tobytes())
        return digest.hexdigest(), meta, arrays

    def ahead(self, requests: Sequence[tuple]) -> None:
        """Answer every request not answered yet, (weights, x, y or None, extra or None) each, in one child process:
        the framework imported once for all (the calls that then ask find their answers)."""
        todo = {}
        for r in requests:
            key, meta, arrays = self._request(*r)
            if key not in _DONE:
                todo[key] = (meta, arrays)
        if len(todo) == 1:
            key, (meta, arrays) = next(iter(todo.items()))
            _DONE[key] = _child(meta, arrays, child.timeout(self.timeout_s), OFFERS[self.framework].env)
        elif todo:
            metas = [m for m, _ in todo.values()]
            arrays = {f"j{j}/{k}": a for j, (_, arr) in enumerate(todo.values()) for k, a in arr.items()}
            out = _child(metas, arrays, child.timeout(self.timeout_s), OFFERS[self.framework].env)
            for j, key in enumerate(todo):
                _DONE[key] = {k.split("/", 1)[1]: v for k, v in out.items() if k.startswith(f"j{j}/")}

    def _run(self, weights, x: np.ndarray, y=None, cache: Path | None = None, extra: dict | None = None) -> dict:
        """The child's arrays for these inputs: run once a process for each (_DONE), and once for every process
        where they share a cache folder."""
        key, meta, arrays = self._request(weights, x, y, extra)
        kept = Path(cache) / f"float64-{key[:32]}.npz" if cache is not None else None
        if key not in _DONE and kept is not None and kept.exists():
            with np.load(kept) as f:
                _DONE[key] = {k: f[k] for k in f.files}
        if key not in _DONE:
            _DONE[key] = _child(meta, arrays, child.timeout(self.timeout_s), OFFERS[self.framework].env)
        if kept is not None and not kept.exists():  # written whole, then named: a reader never finds half of it
            np.savez(kept.with_suffix(f".{os.getpid()}.npz"), **_DONE[key])
            os.replace(kept.with_suffix(f".{os.getpid()}.npz"), kept)
        return _DONE[key]


_DONE: dict[str, dict[str, np.ndarray]] = {}  # by a digest of the request: its answer


def _float32(weights: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The weights as the adapters take them (float32, as every framework shares them). Raises ValueError for one
    that float32 does not hold exactly: the float64 run would not judge the weights it was given."""
    out = []
    for i, w in enumerate(weights):
        a = np.asarray(w)
        f = a.astype(np.float32)
        if not np.array_equal(f, a):
            raise ValueError(f"weight {i}: not exactly float32 (a framework's float64 run starts from float32 weights)")
        out.append(f)
    return out


def _child(meta: dict, arrays: dict, timeout_s: float, env: dict[str, str]) -> dict[str, np.ndarray]:
    """`python -m parity.workloads.trained.float64 IN OUT` in `env`; its arrays. Raises Float64Error with the child's
    one-line reason, or when it takes longer than timeout_s. The child dies with this process on every path
    (parity.workloads.trained.child)."""
    with tempfile.TemporaryDirectory(prefix="parity-float64-") as tmp:
        req, out = Path(tmp) / "in.npz", Path(tmp) / "out.npz"
        np.savez(req, meta=np.array(json.dumps(meta)), **arrays)
        first = meta[0] if isinstance(meta, list) else meta  # several requests: one framework's, one workload's
        python, path = _python(first["framework"])
        cmd = [python, "-m", "parity.workloads.trained.float64", str(req), str(out)]
        try:
            code, err = child.run(cmd, {**os.environ, **path, **env}, timeout_s)
        except OSError as e:
            raise Float64Error(f"{_who(meta)}: cannot start {python} ({e.strerror or e})") from None
        except subprocess.TimeoutExpired:
            raise Float64Error(f"{_who(meta)}: no answer within {timeout_s:g} s (stopped)") from None
        if code != 0 or not out.exists():
            raise Float64Error(f"{_who(meta)}: {child.why(code, err, out.with_suffix('.error'))}")
        with np.load(out) as f:
            return {k: f[k] for k in f.files}


def _python(framework: str) -> tuple[str, dict[str, str]]:
    """The interpreter of `framework`'s float64 runs (PYTHONS, else this one), and for another environment's, the
    PYTHONPATH that finds this checkout (as its workers get)."""
    try:
        chosen = json.loads(os.environ.get(PYTHONS) or "{}").get(framework)
    except (ValueError, AttributeError):
        raise Float64Error(f"{PYTHONS} is not a JSON object of framework -> interpreter") from None
    if not chosen:
        return sys.executable, {}
    return chosen, {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def _who(meta: dict | list) -> str:
    meta = meta[0] if isinstance(meta, list) else meta
    return f"the float64 run of {meta['workload']!r} in {OFFERS[meta['framework']].label}"


def _adapter(meta: dict):
    """The framework's adapter for the workload, in this (the child) process, a plug-in's plugged first."""
    import importlib.util

    from parity.api.adapters import SHARED, plug

    module = frameworks.TABLE[meta["framework"]].module
    for package in (module, *SHARED) if meta["package"] else ():  # the model code Keras's adapters share, too
        if importlib.util.find_spec(f"{meta['package']}.{package}"):
            plug(package, meta["workload"], f"{meta['package']}.{package}")
    return frameworks.load(meta["framework"]).adapter(meta["workload"])


def run(meta: dict, arrays: dict) -> dict[str, np.ndarray]:
    """In the child: the model at meta's sizes, the weights set, widened by the adapter's float64(model); its forward
    blocks, or with labels 'y', its loss and gradients. Raises Float64Error where the adapter offers no float64, or
    where an answer comes back in another format than float64."""
    adapter = _adapter(meta)
    code = adapter.model_code
    widen = getattr(code, "float64", None)
    if widen is None:
        raise Float64Error(f"{code.__name__} offers no float64(model): the float64 oracle needs it")
    model = adapter.build(*meta["sizes"], seed=0)
    adapter.set_weights(model, [arrays[k] for k in sorted(arrays) if k.startswith("w")])
    model = widen(model)
    if "terms" in arrays:
        out = _terms(adapter, meta, arrays, model, widen)
    elif "y" not in arrays:
        out = {f"forward/{k}": np.asarray(v) for k, v in adapter.forward_layers(model, arrays["x"]).items()}
    else:
        g = adapter.loss_and_grads(model, arrays["x"], arrays["y"])
        out = {"loss": np.asarray(g.loss, np.float64)} | {f"grad/{i:03d}": np.asarray(a) for i, a in enumerate(g.grads)}
    narrow = [k for k, v in out.items() if v.dtype != np.float64]  # float32, and an int64 that is no answer
    if narrow:
        raise Float64Error(f"{code.__name__}'s float64 model gave {narrow[0]} in {out[narrow[0]].dtype}, not float64")
    return out


def _terms(adapter, meta: dict, arrays: dict, model, widen) -> dict[str, np.ndarray]:
    """A light workload's figures for its bounds (parity.workloads.trained.light), in one run: the forward blocks,
    the loss and gradients, then the same model on |weights| and |images|: its blocks (`abs/`) and its logits'
    vector-Jacobian product with |dL/dlogits| (`terms/`: every gradient's terms in absolute value)."""
    x, y = arrays["x"], arrays["y"]
    out = {f"forward/{k}": np.asarray(v) for k, v in adapter.forward_layers(model, x).items()}
    g = adapter.loss_and_grads(model, x, y)
    out |= {"loss": np.asarray(g.loss, np.float64)} | {f"grad/{i:03d}": np.asarray(a) for i, a in enumerate(g.grads)}
    z = out["forward/logits"]
    p = np.exp(z - z.max(-1, keepdims=True))
    ct = np.abs(p / p.sum(-1, keepdims=True) - np.eye(z.shape[-1])[np.asarray(y)]) / len(y)
    absolute = adapter.build(*meta["sizes"], seed=0)
    adapter.set_weights(absolute, [np.abs(arrays[k]) for k in sorted(arrays) if k.startswith("w")])
    absolute = widen(absolute)
    out |= {f"abs/{k}": np.asarray(v) for k, v in adapter.forward_layers(absolute, np.abs(x)).items()}
    terms = adapter.model_code.vjp(adapter.owned(absolute), np.abs(x), ct)
    return out | {f"terms/{i:03d}": np.asarray(a) for i, a in enumerate(terms)}


def _jobs(metas: list[dict], arrays: dict) -> dict[str, np.ndarray]:
    """Several requests (FrameworkOracle.ahead), each one's arrays under j<k>/, answered under the same prefix."""
    out = {}
    for j, meta in enumerate(metas):
        job = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(f"j{j}/")}
        out |= {f"j{j}/{k}": v for k, v in run(meta, job).items()}
    return out


def main(argv: list[str]) -> int:
    """The child of _child: `IN OUT`; a failure's one line to OUT with the suffix .error (a path refused: on stderr,
    exit 2)."""
    child.die_with_parent()
    if len(argv) != 2:
        print("usage: python -m parity.workloads.trained.float64 IN.npz OUT.npz", file=sys.stderr)
        return 2
    bad = f"{argv[0]}: not a regular file" if not Path(argv[0]).is_file() else None  # a FIFO would never end
    if not Path(argv[1]).parent.is_dir():
        bad = f"{Path(argv[1]).parent}: no such folder for the answer"
    if bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    try:
        with np.load(argv[0]) as f:
            arrays = {k: f[k] for k in f.files}
        meta = json.loads(str(arrays.pop("meta")))
        out = _jobs(meta, arrays) if isinstance(meta, list) else run(meta, arrays)
        np.savez(argv[1], **out)
    except BaseException as e:  # noqa: BLE001 - the adapter's code, whatever it raises (sys.exit too): one line
        said = str(e) if isinstance(e, Float64Error) else f"{type(e).__name__}: {e}"
        Path(argv[1]).with_suffix(".error").write_text((said.splitlines() or [type(e).__name__])[0])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
