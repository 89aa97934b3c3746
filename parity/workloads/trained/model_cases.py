"""A trained model's worker side (the row LSTM's, the ViT's; parity.workloads.trained.model.TrainedModel): its timed
cases (a training epoch per call, inference) and its untimed calls (set-up, shared initial weights, parity arrays).
What it shares with the CNN is parity.workloads.trained's."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np

from parity.api.variants import Variant
from parity.api.weights import load_npz, save_npz
from parity.workloads.base import RowKind, Timed, judged_by_checks, output_verifier
from parity.workloads.ops import _saving
from parity.workloads.trained import Epochs, dataset, kept, parity_arrays
from parity.workloads.trained.model import TrainedModel


def _times(flops: int | None, n: int) -> int | None:
    """A formula's FLOPs n times; None where the workload declares none (a light one: the framework's count)."""
    return None if flops is None else flops * n


def _model(m: TrainedModel, impl, s, weights: str):
    """The model every framework starts from: the same weights, given as it is built (build_with)."""
    w = load_npz(weights, s.architecture.weights)
    return impl.adapter(m.name).build_with(w, *m.sizes(m.fields(s)), s.seed)


def train_case(
    m: TrainedModel,
    impl,
    devices,
    kind: RowKind,
    spec,
    variant: Variant,
    device: str,
    precision: str,
    save,
    data,
    weights,
    validate: str = "none",
):
    """One epoch per timed call (steps_per_epoch global batches in the CNN's batch order), as the CNN's."""
    s, ds = spec, dataset(data)
    trainer = impl.adapter(m.name).make_trainer(
        _model(m, impl, s, weights), devices, variant.name, s.learning_rate, s.adam_epsilon, s.seed
    )
    # kept for the parity round's trajectory of the same variant, model, weights and batch (trained.kept)
    keep_as = kept.key(kind.name, variant.name, devices, m.sizes(m.fields(s)), weights, s, s.global_batch)
    epochs = Epochs(impl, devices, device, variant, s, ds, trainer, validate, keep_as)
    k = s.steps_per_epoch
    info = {
        "flops": _times(s.step_flops(), k),
        "flops_formula": type(s).step_flops.__doc__,
        "min_bytes": s.step_min_bytes() * k,
        "images": k * s.global_batch,
        "data": ds.source,
        "kernel_path": trainer.kernel_path,
        "cost": epochs.cost,
        "program": trainer.program_text,
    }
    return Timed(epochs.run, epochs.verify, info, epochs.finish, epochs.ahead)


def infer_case(
    m: TrainedModel,
    impl,
    devices,
    kind: RowKind,
    spec,
    variant: Variant,
    device: str,
    precision: str,
    save,
    data,
    weights,
    **_,
):
    """Inference on one global batch of test images, checked against the float64 forward pass within the bound
    derived for these weights and images (the workload's block_tolerances)."""
    ds = dataset(data)
    x = ds.x_test[: spec.global_batch].astype(np.float32)
    idx = [0, len(x) - 1]
    w = load_npz(weights, spec.architecture.weights)
    ref = m.oracle_forward(w, x[idx], cache=Path(weights).parent)["probs"]  # every framework's row: one float64 run
    tol = m.block_tolerances(w, x[idx], device, precision)["probs"]  # the output's own bound
    p = impl.adapter(m.name).prepare_inference(_model(m, impl, spec, weights), x, devices, variant.name)
    verify = output_verifier(
        p.shape, _saving(p.rows, save), p.placement, (len(x), 10), idx, ref, tol, device, len(devices)
    )
    info = {
        "flops": _times(spec.architecture.forward_flops(), len(x)),
        "flops_formula": spec.architecture.forward_flops.__doc__,
        "min_bytes": spec.infer_min_bytes(len(x)),
        "images": len(x),
        "data": ds.source,
        "kernel_path": p.kernel_path,
        "tolerance": tol,
        "cost": p.cost,
        "program": p.program,
    }
    return Timed(p.run, verify, info, ahead=p.ahead)


# Untimed requests by name (the workload's WORKLOAD.calls, from calls()): fn(impl, devices, request) -> answer.


def warm(m: TrainedModel, impl, devices, req: dict) -> dict:
    """A framework's first model build runs its one-off set-up: done before anything is timed (as build_with builds,
    its initialisers left out where the framework leaves them out)."""
    impl.adapter(m.name).unfilled(*m.sizes({**m.warm, **req}), 0)
    return {}


def init_weights(m: TrainedModel, impl, devices, req: dict) -> dict:
    """This framework's freshly initialised weights for a seed and size, to a .npz every framework starts from."""
    adapter = impl.adapter(m.name)
    save_npz(adapter.get_weights(adapter.build(*m.sizes(req), req["seed"])), req["out"])
    return {}


def parity(m: TrainedModel, impl, devices, req: dict) -> dict:
    """Forward blocks, one batch's loss and gradients, and a short trajectory per variant, to .npz."""
    s = type(m.full)(**req["spec"])
    model = lambda w: _model(m, impl, s, w)  # noqa: E731
    return parity_arrays(impl, impl.adapter(m.name), devices, req, model, s, m.sizes(m.fields(s)))


def kinds(m: TrainedModel, infer_tolerance) -> tuple[RowKind, RowKind]:
    """The workload's row kinds: <name>_train (judged by its checks) and <name>_infer (infer_tolerance's table)."""
    return (
        RowKind(f"{m.name}_train", partial(train_case, m), judged_by_checks, epochs=True, seeded=True),
        RowKind(f"{m.name}_infer", partial(infer_case, m), infer_tolerance),
    )


def calls(m: TrainedModel) -> dict:
    """The workload's untimed calls by name."""
    return {"warm": partial(warm, m), "init_weights": partial(init_weights, m), "parity": partial(parity, m)}
