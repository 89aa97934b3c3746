"""The CNN's convolution, and the two forms of its gradients that the tuned variants use in place of JAX's own: the
input's gradient as a forward convolution ('+dgrad'), the kernel's summed over chunks of the batch ('+wgrad').
Both are the same gradients, summed in another order (docs/layers.md)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


def conv(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """The CNN's convolution as Flax's Conv computes it, bias apart: stride 1, SAME, NHWC input, HWIO kernel."""
    return jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _kernel_grad(x: jax.Array, kernel: jax.Array, g: jax.Array) -> jax.Array:
    """JAX's own gradient of conv(x, kernel) for the kernel, given the cotangent g."""
    return jax.vjp(lambda k: conv(x, k), kernel)[1](g)[0]


@jax.custom_vjp
def conv_flipped_grad(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """conv, with the gradient for its input written as a forward convolution of the cotangent with the flipped,
    transposed kernel (for an odd kernel at stride 1 under SAME padding, the exact transpose). JAX's own input
    gradient in bfloat16 compute XLA:CPU computes on float32 operands, off AMX; this one stays a bfloat16
    convolution (docs/layers.md, "The AMX class"). The kernel's gradient is JAX's. Used by the '+dgrad' variants."""
    return conv(x, kernel)


def _flipped_fwd(x, kernel):
    return conv(x, kernel), (x, kernel)


def _flipped_bwd(res, g):
    x, kernel = res
    return conv(g, jnp.flip(kernel, (0, 1)).transpose(0, 1, 3, 2)), _kernel_grad(x, kernel, g)


conv_flipped_grad.defvjp(_flipped_fwd, _flipped_bwd)


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def conv_chunked_kernel_grad(x: jax.Array, kernel: jax.Array, chunk: int) -> jax.Array:
    """conv, with the kernel's gradient the sum of JAX's own over consecutive chunks of `chunk` images (the last
    may be smaller), as straight-line code. XLA:CPU computes the kernel's gradient as a forward convolution with
    the batch as its input channels; at a batch of 256 that convolution runs 1.3-4x slower than the chunks' sum on
    xeon-amx (conv2's: 138 ms against 58 at chunks of 16 under `ynn+onednn`: docs/layers.md). The input's gradient
    is JAX's. Used by the '+wgrad' variants."""
    return conv(x, kernel)


def _chunked_fwd(x, kernel, chunk):
    return conv(x, kernel), (x, kernel)


def _chunked_bwd(chunk, res, g):
    x, kernel = res
    dx = jax.vjp(lambda xx: conv(xx, kernel), x)[1](g)[0]
    n = x.shape[0]
    # a Python loop, not lax.fori_loop: XLA:CPU runs a loop body's convolutions without its fast path (docs/tuning.md)
    dk = sum(_kernel_grad(x[i : i + chunk], kernel, g[i : i + chunk]) for i in range(0, n, chunk))
    return dx, dk


conv_chunked_kernel_grad.defvjp(_chunked_fwd, _chunked_bwd)
