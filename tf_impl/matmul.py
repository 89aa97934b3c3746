"""A large matrix product in TensorFlow: the framework's ceiling on the machine, on one device and under a strategy."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from parity.api import Prepared, check_divisible
from tf_impl.conv import _for_all_workers, _rows, _shape
from tf_impl.devices import (
    BFLOAT16_VARIANTS,
    gather_rows,
    graph_flops,
    graph_placement,
    local_tensors,
    multiworker,
    placement,
    process_info,
    strategy,
)


def matmul_variants(replicas: int) -> tuple[str, ...]:
    """Names of the ways this framework runs the matmul over `replicas` devices."""
    return ("function", "function+xla", "function+bf16") if replicas == 1 else ("strategy",)


def prepare_matmul(variant: str, a: np.ndarray, b: np.ndarray, devices: list[str]) -> Prepared:
    """Place the operands on `devices` (a's rows split across them, b on every replica) and return the callable.

    'function' is a tf.function, 'function+xla' the same with jit_compile=True, 'function+bf16' the same
    on bfloat16 operands (cast once, beforehand); 'strategy' runs under TPUStrategy on a TPU and
    MirroredStrategy on GPUs or logical CPUs.

    Raises:
        ValueError: unknown variant, or rows that do not divide by len(devices).
    """
    n = len(devices)
    check_divisible(a.shape[0], n)
    if variant not in matmul_variants(n):
        raise ValueError(f"unknown TF matmul variant {variant!r} for {n} replicas; have {matmul_variants(n)}")
    if n == 1:
        with tf.device(devices[0]):
            x, w = tf.constant(a), tf.constant(b)
            if variant in BFLOAT16_VARIANTS:
                x, w = tf.cast(x, tf.bfloat16), tf.cast(w, tf.bfloat16)
        f = tf.function(tf.linalg.matmul, jit_compile=variant.endswith("xla"))

        def run():
            with tf.device(devices[0]):
                return f(x, w)

        return Prepared(run, _shape, _rows, placement, lambda: graph_flops(f, x, w))
    s = strategy(devices)
    shards = np.split(a, n)
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(shards[ctx.replica_id_in_sync_group]))
    w = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(b))

    @tf.function
    def step(p, q):
        return s.run(tf.linalg.matmul, args=(p, q))

    def shape(out):  # every replica's share is the same; a worker of several holds only its own
        part = local_tensors(out)[0]
        return (n * part.shape[0], *part.shape[1:])

    # the graph says where each replica's product really ran (logical CPUs all report CPU:0)
    return Prepared(lambda: step(x, w), shape, gather_rows if multiworker() else _rows,
                    lambda o: graph_placement(step, (x, w), "MatMul"),
                    lambda: _for_all_workers(graph_flops(step, x, w), process_info(devices)["num_processes"]))
