"""The article's conv op in TensorFlow, on one device and data-parallel (tf.distribute)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from parity.api import Prepared, check_divisible
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


def _conv(x, w, stride: int, padding: str):
    return tf.nn.conv2d(x, w, strides=[1, stride, stride, 1], padding=padding)


_conv_fn = tf.function(_conv)


def conv_op(images, kernels, stride: int = 2, padding: str = "SAME") -> tf.Tensor:
    """NHWC images x HWIO kernels, TF's SAME/VALID convention; returns a tf.Tensor."""
    return _conv_fn(tf.convert_to_tensor(images), tf.convert_to_tensor(kernels), stride, padding)


def conv_variants(replicas: int) -> tuple[str, ...]:
    """Names of the ways this framework runs the conv over `replicas` devices."""
    return ("function", "function+xla", "function+bf16") if replicas == 1 else ("strategy",)


def _rows(out, idx) -> np.ndarray:
    parts = local_tensors(out)
    per = parts[0].shape[0]
    return np.stack([parts[i // per][i % per].numpy().astype(np.float32) for i in idx])


def _shape(out) -> tuple[int, ...]:
    parts = local_tensors(out)
    return (sum(p.shape[0] for p in parts), *parts[0].shape[1:])


def prepare_conv(
    variant: str, images: np.ndarray, kernels: np.ndarray, devices: list[str], stride: int = 2, padding: str = "SAME"
) -> Prepared:
    """Place the inputs on `devices` (batch split across them) and return the callable.

    'function' is a tf.function, 'function+xla' the same with jit_compile=True, 'function+bf16' the
    same on bfloat16 images and kernels (cast once, beforehand; bfloat16 out, as under Keras's
    mixed_bfloat16 policy), 'strategy' runs
    under TPUStrategy on a TPU and MirroredStrategy on GPUs or logical CPUs.

    Raises:
        ValueError: unknown variant, or a batch that does not divide by len(devices).
    """
    n = len(devices)
    check_divisible(images.shape[0], n)
    if variant not in conv_variants(n):
        raise ValueError(f"unknown TF conv variant {variant!r} for {n} replicas; have {conv_variants(n)}")
    if variant.startswith("function"):
        with tf.device(devices[0]):
            x, w = tf.constant(images), tf.constant(kernels)
            if variant in BFLOAT16_VARIANTS:
                x, w = tf.cast(x, tf.bfloat16), tf.cast(w, tf.bfloat16)
        f = tf.function(lambda a, b: _conv(a, b, stride, padding), jit_compile=variant.endswith("xla"))

        def run():
            with tf.device(devices[0]):
                return f(x, w)

        return Prepared(run, _shape, _rows, placement, lambda: graph_flops(f, x, w))
    s = strategy(devices)
    shards = np.split(images, n)
    x = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(shards[ctx.replica_id_in_sync_group]))
    w = s.experimental_distribute_values_from_function(lambda ctx: tf.constant(kernels))

    @tf.function
    def step(a, b):
        return s.run(lambda xa, wb: _conv(xa, wb, stride, padding), args=(a, b))

    def shape(out):  # every replica's share is the same; a worker of several holds only its own
        part = local_tensors(out)[0]
        return (n * part.shape[0], *part.shape[1:])

    # Function outputs on logical CPUs all report CPU:0 (shared host memory); the graph says where
    # each replica's conv really ran (in a multi-process run: this worker's replicas).
    return Prepared(lambda: step(x, w), shape, gather_rows if multiworker() else _rows,
                    lambda o: graph_placement(step, (x, w), "Conv2D"),
                    lambda: _for_all_workers(graph_flops(step, x, w), process_info(devices)["num_processes"]))


def _for_all_workers(cost: tuple[float | None, str], workers: int) -> tuple[float | None, str]:
    """A graph's FLOP count for every worker: each worker's graph holds only its own replicas' convs."""
    flops, source = cost
    return (flops * workers if flops else None), source
