"""The CNN's convolution, and the two forms of its gradients that the tuned variants use in place of JAX's own: the
input's gradient as a forward convolution ('+dgrad'), the kernel's summed over chunks of the batch ('+wgrad').
Both are the same gradients, summed in another order (docs/results/layers/README.md)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


def conv(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """The CNN's convolution as Flax's Conv computes it, bias apart: stride 1, SAME, NHWC input, HWIO kernel."""
    return jax.lax.conv_general_dilated(x, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _kernel_grad(x: jax.Array, kernel: jax.Array, g: jax.Array, chunk: int) -> jax.Array:
    """The gradient of conv(x, kernel) for the kernel given the cotangent g: JAX's own (chunk 0), or JAX's own on
    each run of `chunk` images (the last may be fewer), the runs added in float32 and rounded once to the kernel's
    dtype. A Python loop, not lax.fori_loop: XLA:CPU runs a loop body's convolutions without its fast path."""

    def own(xs, gs):
        return jax.vjp(lambda k: conv(xs, k), kernel)[1](gs)[0]

    if not chunk or chunk >= x.shape[0]:
        return own(x, g)
    parts = (own(x[i : i + chunk], g[i : i + chunk]).astype(jnp.float32) for i in range(0, x.shape[0], chunk))
    return sum(parts).astype(kernel.dtype)


@partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def conv_rewritten_grads(x: jax.Array, kernel: jax.Array, flipped_input_grad: bool, kernel_grad_chunk: int):
    """conv, with its gradients computed another way, each the same sums in another order:
    - flipped_input_grad: the input's as a forward convolution of the cotangent with the flipped, transposed kernel
      (for an odd kernel at stride 1 under SAME padding, the exact transpose). JAX's own in bfloat16 compute XLA:CPU
      computes on float32 operands, off AMX; this one stays a bfloat16 convolution (docs/results/layers/README.md,
      "The AMX class"). The '+dgrad' variants.
    - kernel_grad_chunk: the kernel's summed over chunks of that many images (_kernel_grad). JAX's own is a forward
      convolution whose input features are the whole batch and whose window is the whole feature map; oneDNN runs
      it 1.4-2.4x slower at a batch of 256 than the chunks' sum (docs/results/layers/README.md, "Float32 on the AMX
      class"). The '+wgrad' variants.
    Otherwise JAX's own."""
    return conv(x, kernel)


def _rewritten_fwd(x, kernel, flipped_input_grad, kernel_grad_chunk):
    return conv(x, kernel), (x, kernel)


def _rewritten_bwd(flipped_input_grad, kernel_grad_chunk, res, g):
    x, kernel = res
    if flipped_input_grad:
        dx = conv(g, jnp.flip(kernel, (0, 1)).transpose(0, 1, 3, 2))
    else:
        dx = jax.vjp(lambda xx: conv(xx, kernel), x)[1](g)[0]
    return dx, _kernel_grad(x, kernel, g, kernel_grad_chunk)


conv_rewritten_grads.defvjp(_rewritten_fwd, _rewritten_bwd)


def conv_flipped_grad(x: jax.Array, kernel: jax.Array) -> jax.Array:
    """conv with the flipped input gradient ('+dgrad') and JAX's own kernel gradient."""
    return conv_rewritten_grads(x, kernel, True, 0)


def conv_chunked_kernel_grad(x: jax.Array, kernel: jax.Array, chunk: int) -> jax.Array:
    """conv with JAX's own input gradient and the kernel's summed over chunks of `chunk` images ('+wgrad')."""
    return conv_rewritten_grads(x, kernel, False, chunk)
