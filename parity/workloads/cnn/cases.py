"""The CNN's worker side: its timed cases (a training epoch per call, inference) and its untimed calls (set-up,
shared initial weights, parity arrays)."""

from __future__ import annotations

import numpy as np

from parity.api.cnn import CNN_WEIGHTS
from parity.api.variants import Variant
from parity.api.weights import load_npz, save_npz
from parity.workloads.base import RowKind, Timed, output_verifier
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.cnn.spec import CnnSpec, cnn_forward_flops
from parity.workloads.ops import _saving
from parity.workloads.trained import Epochs, parity_arrays
from parity.workloads.trained import dataset as _dataset


def _cnn_model(impl, s: CnnSpec, weights: str, dropout: bool = True):
    # every framework starts from the same weights, given as the model is built (build_with)
    return impl.adapter("cnn").build_with(load_npz(weights, CNN_WEIGHTS), s.seed, dropout=dropout)


def cnn_train_case(
    impl,
    devices,
    kind: RowKind,
    spec: CnnSpec,
    variant: Variant,
    device: str,
    precision: str,
    save,
    data,
    weights,
    validate: str = "none",
):
    """One epoch per timed call (steps_per_epoch global batches in the notebook's order).

    Slicing the epoch's batches out of the uint8 arrays, as the notebook's generator did, is part of
    the timed epoch (milliseconds against seconds of training). validate: 'epoch' evaluates on the test
    set after every epoch, as Keras's fit(validation_data=...) does, 'end' once after the last, 'none' never;
    always outside the timed interval (the Timer times the call and its synchronisation, then verifies).
    """
    s, ds = spec, _dataset(data)
    model = _cnn_model(impl, s, weights)
    trainer = impl.adapter("cnn").make_trainer(model, devices, variant.name, s.learning_rate, s.adam_epsilon, s.seed)
    epochs = Epochs(impl, devices, device, variant, s, ds, trainer, validate)
    k = s.steps_per_epoch
    info = {
        "flops": s.step_flops() * k,
        "flops_unpadded": s.step_flops(padded=False) * k,
        "flops_formula": CnnSpec.step_flops.__doc__,
        "min_bytes": s.step_min_bytes() * k,
        "images": k * s.global_batch,
        "data": ds.source,
        "cost": epochs.cost,
        "program": epochs.trainer.program_text,
    }
    return Timed(epochs.run, epochs.verify, info, epochs.finish, epochs.ahead)


def cnn_infer_case(
    impl, devices, kind: RowKind, spec: CnnSpec, variant: Variant, device: str, precision: str, save, data, weights, **_
):
    """Inference on one global batch of test images, checked against the float64 forward pass."""
    ds = _dataset(data)
    x = ds.x_test[: spec.global_batch].astype(np.float32)
    idx = [0, len(x) - 1]
    ref = cnn_oracle.cnn_forward(load_npz(weights, CNN_WEIGHTS), x[idx])["probs"]
    p = impl.adapter("cnn").prepare_inference(_cnn_model(impl, spec, weights), x, devices, variant.name)
    verify = output_verifier(
        p.shape,
        _saving(p.rows, save),
        p.placement,
        (len(x), 10),
        idx,
        ref,
        kind.tolerance(device, precision, "float32"),
        device,
        len(devices),
    )
    info = {
        "flops": cnn_forward_flops() * len(x),
        "flops_unpadded": cnn_forward_flops(padded=False) * len(x),
        "flops_formula": cnn_forward_flops.__doc__,
        "min_bytes": spec.infer_min_bytes(len(x)),
        "images": len(x),
        "data": ds.source,
        "cost": p.cost,
        "program": p.program,
    }
    return Timed(p.run, verify, info, ahead=p.ahead)


# Untimed requests by name (parity.workloads.cnn.WORKLOAD.calls): fn(impl, devices, request) -> answer.


def cnn_warm(impl, devices, req: dict) -> dict:
    """A framework's first model build runs its one-off set-up: done before anything is timed (as build_with builds,
    its initialisers left out where the framework leaves them out)."""
    impl.adapter("cnn").unfilled(0)
    return {}


def cnn_init_weights(impl, devices, req: dict) -> dict:
    """This framework's freshly initialised weights for a seed, to a .npz both frameworks then start from."""
    cnn = impl.adapter("cnn")
    save_npz(cnn.get_weights(cnn.build(req["seed"])), req["out"])
    return {}


def cnn_parity(impl, devices, req: dict) -> dict:
    """Forward blocks, one batch's loss and gradients, and a short dropout-free trajectory, to .npz."""
    s = CnnSpec(**req["spec"])
    return parity_arrays(impl, impl.adapter("cnn"), devices, req, lambda w: _cnn_model(impl, s, w, dropout=False), s)
