"""One two-operand operation (the conv, the matmul) timed on one device or under a strategy: the placing and
reading both share, so each operation's module holds only its op and its variants."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from parity.api import Prepared, check_divisible
from parity.api.variants import Variant
from tf_impl.devices import (
    gather_rows,
    graph_flops,
    graph_placement,
    local_tensors,
    multiworker,
    placement,
    process_info,
    strategy,
)


def _rows(out, idx) -> np.ndarray:
    parts = local_tensors(out)
    per = parts[0].shape[0]
    return np.stack([parts[i // per][i % per].numpy().astype(np.float32) for i in idx])


def _shape(out) -> tuple[int, ...]:
    parts = local_tensors(out)
    return (sum(p.shape[0] for p in parts), *parts[0].shape[1:])


def _for_all_workers(cost: tuple[float | None, str], workers: int) -> tuple[float | None, str]:
    """A graph's FLOP count for every worker: each worker's graph holds only its own replicas' share."""
    flops, source = cost
    return (flops * workers if flops else None), source


def prepare_op(op: Callable, graph_op: str, v: Variant, x: np.ndarray, w: np.ndarray, devices: list[str]) -> Prepared:
    """`op(x, w)` with x's leading axis split across `devices` and w on every one, as the variant's options say
    (tf_impl.catalog.OpOptions). `graph_op` names the op in the graph, where placement is read.

    Raises:
        ValueError: a leading axis that does not divide by len(devices).
    """
    check_divisible(x.shape[0], len(devices))
    if v.options.parallel == "function":
        return _prepare_function(op, v.options, x, w, devices[0])
    return _prepare_strategy(op, graph_op, x, w, devices)


def _prepare_function(op: Callable, o, x: np.ndarray, w: np.ndarray, device: str) -> Prepared:
    """`op` as one tf.function on `device` (XLA-compiled, on bfloat16 operands, as the options say)."""
    with tf.device(device):
        a, b = tf.constant(x), tf.constant(w)
        if o.bfloat16:
            a, b = tf.cast(a, tf.bfloat16), tf.cast(b, tf.bfloat16)
    f = tf.function(op, jit_compile=o.xla)

    def run():
        with tf.device(device):
            return f(a, b)

    return Prepared(run, _shape, _rows, placement, lambda: graph_flops(f, a, b))


def _prepare_strategy(op: Callable, graph_op: str, x: np.ndarray, w: np.ndarray, devices: list[str]) -> Prepared:
    """`op` under the device's strategy, x's leading axis split across `devices` and w on every one."""
    n = len(devices)
    s = strategy(devices)
    shards = np.split(x, n)
    a = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(shards[ctx.replica_id_in_sync_group]))
    b = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(w))

    @tf.function
    def step(p, q):
        return s.run(op, args=(p, q))

    def shape(out):  # every replica's share is the same; a worker of several holds only its own
        part = local_tensors(out)[0]
        return (n * part.shape[0], *part.shape[1:])

    # Function outputs on logical CPUs all report CPU:0 (shared host memory); the graph says where
    # each replica's op really ran (in a multi-process run: this worker's replicas).
    return Prepared(
        lambda: step(a, b),
        shape,
        gather_rows if multiworker() else _rows,
        lambda o: graph_placement(step, (a, b), graph_op),
        lambda: _for_all_workers(graph_flops(step, a, b), process_info(devices)["num_processes"]),
    )
