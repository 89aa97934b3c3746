"""What a worker prepares and times for an operation workload (the conv, the matmul): the implementation's prepare
function on the spec's inputs, every call's output checked on the spec's oracle rows (a parity.workloads.base.Timed).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from parity.api.variants import Variant
from parity.workloads.base import RowKind, Timed, output_verifier


def _saving(rows, save: str | None):
    """rows(), also saving what it read at the row's first call, for the parent's framework-vs-framework comparison.
    Once, not at every call: every call's rows are checked against the float64 oracle, and a CPU conv's are 34 MB
    a call to write."""
    saved = False

    def read(out, indices):
        nonlocal saved
        got = rows(out, indices)
        if save and not saved:
            np.save(save, got)
            saved = True
        return got

    return read


@cache
def op_inputs(spec):
    """The spec's inputs, the oracle's rows and their float64 values (once per spec in a process)."""
    inputs = spec.inputs()
    idx = spec.oracle_indices()
    return inputs, idx, spec.oracle(inputs, idx)


def op_case(impl, devices, kind: RowKind, spec, variant: Variant, device: str, precision: str, save: str | None, **_):
    """One operation (the conv, the matmul): the implementation's prepare function on the spec's inputs, every
    call's output checked on the spec's oracle rows."""
    dtype = variant.dtype
    inputs, idx, ref = op_inputs(spec)
    p = kind.prepare(impl)(variant.name, *inputs, devices, **spec.op_args())
    verify = output_verifier(
        p.shape,
        _saving(p.rows, save),
        p.placement,
        spec.output_shape,
        idx,
        ref,
        kind.tolerance(device, precision, dtype),
        device,
        impl.process_info(devices)["local_replicas"],
    )
    info = {
        "flops": spec.flops(),
        "flops_unpadded": spec.flops_unpadded(),
        "flops_formula": type(spec).flops.__doc__,
        "min_bytes": spec.min_bytes(2 if dtype == "bfloat16" else None),
        "cost": p.cost,
        # this process's share of one output: a row whose peak memory is below it measured nothing real
        "output_bytes": math.prod(spec.output_shape)
        * (2 if dtype == "bfloat16" else 4)
        * impl.process_info(devices)["local_replicas"]
        // len(devices),
    }
    return Timed(p.run, verify, info)
