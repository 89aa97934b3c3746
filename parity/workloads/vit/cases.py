"""The ViT's worker side: its timed cases (a training epoch per call, inference) and its untimed calls (set-up,
shared initial weights, parity arrays). What it shares with the CNN and the row LSTM is parity.workloads.trained's."""

from __future__ import annotations

import numpy as np

from parity.api.variants import Variant
from parity.api.weights import load_npz, save_npz
from parity.workloads.base import RowKind, Timed, output_verifier
from parity.workloads.ops import _saving
from parity.workloads.trained import Epochs, dataset, parity_arrays
from parity.workloads.vit import oracle
from parity.workloads.vit.spec import VitSpec
from parity.workloads.vit.tolerances import vit_block_tolerances

WARM = {"dim": 8, "depth": 1, "heads": 2, "mlp": 16}  # the smallest ViT a framework's one-off set-up builds


def _model(impl, s: VitSpec, weights: str):
    model = impl.build_vit(s.dim, s.depth, s.heads, s.mlp, s.seed)
    impl.set_weights(model, load_npz(weights, s.architecture.weights))  # every framework starts from the same weights
    return model


def vit_train_case(
    impl,
    devices,
    kind: RowKind,
    spec: VitSpec,
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
    trainer = impl.make_trainer(
        _model(impl, s, weights), devices, variant.name, s.learning_rate, s.adam_epsilon, s.seed
    )
    epochs = Epochs(impl, devices, device, variant, s, ds, trainer, validate)
    k = s.steps_per_epoch
    info = {
        "flops": s.step_flops() * k,
        "flops_formula": VitSpec.step_flops.__doc__,
        "min_bytes": s.step_min_bytes() * k,
        "images": k * s.global_batch,
        "data": ds.source,
        "kernel_path": trainer.kernel_path,
        "cost": epochs.cost,
        "program": trainer.program_text,
    }
    return Timed(epochs.run, epochs.verify, info, epochs.finish)


def vit_infer_case(
    impl,
    devices,
    kind: RowKind,
    spec: VitSpec,
    variant: Variant,
    device: str,
    precision: str,
    save,
    data,
    weights,
    **_,
):
    """Inference on one global batch of test images, checked against the float64 forward pass within the bound
    derived for these weights and images (parity.workloads.vit.tolerances)."""
    ds = dataset(data)
    x = ds.x_test[: spec.global_batch].astype(np.float32)
    idx = [0, len(x) - 1]
    w = load_npz(weights, spec.architecture.weights)
    ref = oracle.forward(w, x[idx])["probs"]
    tol = vit_block_tolerances(w, x[idx], device, precision)["probs"]  # the output's own bound
    p = impl.prepare_inference(_model(impl, spec, weights), x, devices, variant.name)
    verify = output_verifier(
        p.shape, _saving(p.rows, save), p.placement, (len(x), 10), idx, ref, tol, device, len(devices)
    )
    info = {
        "flops": spec.architecture.forward_flops() * len(x),
        "flops_formula": spec.architecture.forward_flops.__doc__,
        "min_bytes": spec.infer_min_bytes(len(x)),
        "images": len(x),
        "data": ds.source,
        "kernel_path": p.kernel_path,
        "tolerance": tol,
        "cost": p.cost,
        "program": p.program,
    }
    return Timed(p.run, verify, info)


# Untimed requests by name (parity.workloads.vit.WORKLOAD.calls): fn(impl, devices, request) -> answer.


def vit_warm(impl, devices, req: dict) -> dict:
    """A framework's first model build runs its one-off set-up: done before anything is timed."""
    impl.build_vit(**{k: req.get(k, v) for k, v in WARM.items()})
    return {}


def vit_init_weights(impl, devices, req: dict) -> dict:
    """This framework's freshly initialised weights for a seed and size, to a .npz every framework starts from."""
    model = impl.build_vit(req["dim"], req["depth"], req["heads"], req["mlp"], req["seed"])
    save_npz(impl.get_weights(model), req["out"])
    return {}


def vit_parity(impl, devices, req: dict) -> dict:
    """Forward blocks, one batch's loss and gradients, and a short trajectory per variant, to .npz."""
    s = VitSpec(**req["spec"])
    return parity_arrays(impl, devices, req, lambda w: _model(impl, s, w), "vit_train", s)
