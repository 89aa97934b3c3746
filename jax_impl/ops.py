"""One two-operand operation (the conv, the matmul) timed on one device or sharded with shard_map: the placing
and reading both share, so each operation's module holds only its op and its variants."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.experimental.layout import Format, Layout
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jax_impl.devices import gather_rows, lowered_flops, placement, put_global
from parity.api import Prepared, check_divisible
from parity.api.variants import Variant


def rows(out: jax.Array, idx: Sequence[int], per: int = 0, mesh=None) -> np.ndarray:
    """Global batch rows read from the device shards that hold them (no cross-device gather).

    per > 0 means pmap's layout, (devices, per, ...): global row i is out[i // per, i % per].
    In a multi-process run the rows are gathered from whichever process holds them (a collective:
    every process reads the same rows); pmap's per-process output is first seen as the global
    array over `mesh`.
    """
    if jax.process_count() > 1:
        if per and out.is_fully_addressable:
            out = multihost_utils.host_local_array_to_global_array(out, mesh, P("batch"))
        idx = np.asarray(idx)
        return gather_rows(out, (idx // per, idx % per) if per else (idx,))
    rows = []
    for i in idx:
        lead, rest = (i // per, (i % per,)) if per else (i, ())
        for shard in out.addressable_shards:
            start, stop, _ = shard.index[0].indices(out.shape[0])
            if start <= lead < stop:
                rows.append(np.asarray(shard.data[(lead - start, *rest)], np.float32))
                break
    return np.stack(rows)


def _compiled_at_first_call(f, *args) -> Callable[[], jax.Array]:
    """f(*args) through its compiled program, compiled explicitly (as a layout the compiler picks wants) at the first
    call, so that the first call's time holds the compilation as every other variant's does."""
    compiled = []

    def run():
        if not compiled:
            compiled.append(f.lower(*args).compile())
        return compiled[0](*args)

    return run


def prepare_op(op: Callable, v: Variant, x: np.ndarray, w: np.ndarray, devices: Sequence[jax.Device]) -> Prepared:
    """`op(x, w)` with x's leading axis split across `devices` and w on every one, as the variant's options say
    (jax_impl.catalog.OpOptions): jitted on one device, or jax.jit of jax.shard_map over a 1-D mesh.

    Raises:
        ValueError: a leading axis that does not divide by len(devices).
    """
    n = len(devices)
    check_divisible(x.shape[0], n)
    if v.options.parallel == "jit":
        dtype = jnp.bfloat16 if v.options.bfloat16 else x.dtype
        a, b = (jax.device_put(m.astype(dtype), devices[0]) for m in (x, w))
        f = jax.jit(op, out_shardings=Format(Layout.AUTO)) if v.options.layout else jax.jit(op)
        run = _compiled_at_first_call(f, a, b) if v.options.layout else lambda: f(a, b)
        return Prepared(run, lambda o: tuple(o.shape), rows, placement, lambda: lowered_flops(f, a, b))
    mesh = jax.make_mesh((n,), ("batch",), devices=devices)
    a = put_global(x, NamedSharding(mesh, P("batch")))  # each process places only its own devices' blocks
    b = put_global(w, NamedSharding(mesh, P()))
    f = jax.jit(jax.shard_map(op, mesh=mesh, in_specs=(P("batch"), P()), out_specs=P("batch")))
    return Prepared(
        lambda: f(a, b), lambda o: tuple(o.shape), rows, placement, lambda: lowered_flops(f, a, b, devices=n)
    )
