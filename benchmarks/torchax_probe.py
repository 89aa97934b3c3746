"""Whether PyTorch's model code runs on JAX through torchax (the one PyTorch path to a TPU a machine without torch_xla
has): torch_impl's CNN, unchanged, its training loss and gradients on one batch computed by JAX (torchax's
`jax_value_and_grad` over `torch.func.functional_call`, on JAX's default backend), against eager PyTorch on the
CPU. torchax 0.0.13 names ATen operations and overloads that torch 2.13 and later removed (`aten.cholesky`,
`aten.prod.dim_Dimname`, ...) at import and when its environment loads its table; here each such name gets a
placeholder while that happens (`tolerated`), and the names are listed. One JSON line to --out (and printed).

    python -m pip install --no-deps --target /tmp/torchax torchax==0.0.13
    PYTHONPATH=/tmp/torchax python benchmarks/torchax_probe.py --out torchax.jsonl [--batch 64]

Not a test and not the harness: one batch, float32 against float32 (docs/tpu.md names the file it wrote).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class Removed:
    """A placeholder for an ATen operation or overload this torch does not have: hashable, never called."""

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, key: str):
        if key.startswith("__"):
            raise AttributeError(key)
        return Removed(f"{self.name}.{key}")

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other) -> bool:
        return isinstance(other, Removed) and other.name == self.name


@contextlib.contextmanager
def tolerated(names: list[str]):
    """While it lasts, a missing `torch.ops.<namespace>.<op>` or `<op>.<overload>` is a Removed, its name appended."""
    from torch import _ops

    packet, namespace = _ops.OpOverloadPacket.__getattr__, _ops._OpNamespace.__getattr__

    def patched(original, qualified):
        def get(self, key):
            try:
                return original(self, key)
            except AttributeError:
                if key.startswith("_"):
                    raise
                names.append(f"{qualified(self)}.{key}")
                return Removed(names[-1])

        return get

    _ops.OpOverloadPacket.__getattr__ = patched(packet, lambda s: s._qualified_op_name)
    _ops._OpNamespace.__getattr__ = patched(namespace, lambda s: s.name)
    try:
        yield
    finally:
        _ops.OpOverloadPacket.__getattr__, _ops._OpNamespace.__getattr__ = packet, namespace


def probe(batch: int) -> dict:
    import jax
    import torch

    import torch_impl
    from torch_impl.models import cross_entropy, images, labels

    removed: list[str] = []
    with tolerated(removed):
        import torchax

        env = torchax.default_env()
    model = torch_impl.adapter("cnn").build(0, dropout=False)

    class Logits(torch.nn.Module):  # the model's training-mode logits as a forward (functional_call calls forward)
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m.logits(x, train=True)

    wrapped = Logits(model)
    params = {k: v.detach() for k, v in wrapped.named_parameters()}
    buffers = {k: v.detach().clone() for k, v in wrapped.named_buffers()}
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (batch, 28, 28, 1)).astype(np.float32)  # no two pixels alike: no max-pooling ties
    y = rng.integers(0, 10, batch)

    def loss_fn(p, xb, yb):
        return cross_entropy(torch.func.functional_call(wrapped, {**p, **buffers}, (xb,)), yb)

    eager = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    loss_e = loss_fn(eager, images(x), labels(y))
    grads_e = dict(zip(eager, torch.autograd.grad(loss_e, list(eager.values())), strict=True))
    buffers = {k: v.clone() for k, v in dict(wrapped.named_buffers()).items()}  # as before the eager pass
    out = {"torch": torch.__version__, "jax": jax.__version__, "torchax": torchax.__version__}
    out.update(backend=jax.default_backend(), removed_names=len(removed), removed_sample=removed[:4])
    try:
        with env:
            pj = {k: v.to("jax") for k, v in params.items()}
            buffers = {k: v.to("jax") for k, v in buffers.items()}
            loss_j, grads_j = torchax.interop.jax_value_and_grad(loss_fn)(pj, images(x).to("jax"), labels(y).to("jax"))
            grads_j = {k: np.asarray(jax.device_get(torchax.interop.jax_view(g))) for k, g in grads_j.items()}
            loss_j = float(np.asarray(jax.device_get(torchax.interop.jax_view(loss_j))))
    except Exception as e:  # what stops it, said as it is
        out.update(ran=False, error=f"{type(e).__name__}: {' '.join(str(e).split())[:300]}")
        out["where"] = traceback.format_exc().strip().splitlines()[-3][:200]
        return out
    rel = {
        k: float(np.abs(grads_j[k] - g.numpy()).max() / max(np.abs(g.numpy()).max(), 1e-30)) for k, g in grads_e.items()
    }
    out.update(ran=True, loss_eager=loss_e.item(), loss_torchax=loss_j, params=len(rel))
    out.update(max_rel_grad_diff=max(rel.values()), worst=max(rel, key=rel.get))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    line = json.dumps(probe(a.batch))
    print(line, flush=True)
    with a.out.open("a") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    main()
