"""The CNN's layers whose gradients the tuned variants compute in place of JAX's own, each the same gradient: max
pooling's routed elementwise ('+pool'), the bias's summed in float32 ('+bias'), the convolution's input gradient as a
forward convolution ('+dgrad') and its kernel's summed over chunks of the batch ('+wgrad'), those two summed in
another order (docs/results/layers/README.md)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from flax import nnx


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
      it slower at a batch of 256 than the chunks' sum (docs/tuning.md, "JAX variants"; docs/results/layers/README.md,
      "Float32 on the AMX class"). The '+wgrad' variants.
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


def max_pool(h: jax.Array, size: int = 2) -> jax.Array:
    """Max pooling of `size` x `size` windows, stride `size`, VALID (the default: Keras's MaxPooling2D's)."""
    return nnx.max_pool(h, (size, size), strides=(size, size), padding="VALID")


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def pool_elementwise(h: jax.Array, size: int = 2) -> jax.Array:
    """Max pooling (max_pool's) whose gradient is elementwise: each window's cotangent goes to its first maximum in
    row-major order, the routing of JAX's own gradient (select_and_scatter with >=) and of TF's MaxPoolGrad, so the
    gradient is the same array. XLA:CPU expands JAX's own into a variadic reduce-window that recomputes every
    window's argmax with index iotas (four for 2x2 windows), then a single-threaded scatter (docs/tuning.md, "JAX
    variants"). Used by the '+pool' variants."""
    return max_pool(h, size)


def _pool_fwd(h, size):
    y = max_pool(h, size)
    return y, (h, y)


def _pool_bwd(size, res, g):
    h, y = res
    n, rows, cols, c = h.shape
    r, k = rows // size, cols // size
    hit = h[:, : size * r, : size * k, :].reshape(n, r, size, k, size, c) == y[:, :, None, :, None, :]
    taken, zero, grid = jnp.zeros_like(y, dtype=bool), jnp.zeros_like(g), []
    for i in range(size):  # row-major: the first maximum wins a tie
        row = []
        for j in range(size):
            first = hit[:, :, i, :, j] & ~taken
            taken = taken | first
            row.append(jnp.where(first, g, zero))
        grid.append(jnp.stack(row, axis=3))
    grad = jnp.stack(grid, axis=2).reshape(n, size * r, size * k, c)
    # VALID pooling leaves an odd last row or column out (7 -> 3): its gradient is zero
    return (jnp.pad(grad, ((0, 0), (0, rows - size * r), (0, cols - size * k), (0, 0))),)


pool_elementwise.defvjp(_pool_fwd, _pool_bwd)


@jax.custom_vjp
def bias_add(h: jax.Array, bias: jax.Array) -> jax.Array:
    """h + bias in h's dtype, as Flax's Conv adds its float32 bias (promoted to the compute dtype), with the bias's
    gradient summed in float32 over every position. JAX's own gradient in bfloat16 compute is a bfloat16 sum, which
    XLA:CPU emits as a loop reduce-window that neither YNNPACK nor oneDNN takes (docs/tuning.md, "JAX variants";
    docs/results/layers/README.md, "The AMX class"); a float32 sum goes to YNNPACK. The input's gradient is the
    cotangent, as JAX's. Used by the '+bias' variants."""
    return h + bias.astype(h.dtype)


def _bias_fwd(h, bias):
    return bias_add(h, bias), bias


def _bias_bwd(bias, g):
    summed = jnp.sum(g.reshape(-1, g.shape[-1]).astype(jnp.float32), axis=0)
    return g, summed.astype(bias.dtype)


bias_add.defvjp(_bias_fwd, _bias_bwd)
