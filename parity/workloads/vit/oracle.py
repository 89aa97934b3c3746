"""The ViT's float64 oracle: the forward pass and its backpropagation written out by hand (LayerNorm, attention
with a softmax over the keys, exact GELU, the tokens' mean, the head), with what the tolerances need of each step
(the magnitudes each reduction sums)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from parity.api.vit import LN_EPSILON, PIXEL_SCALE, VitArchitecture, architecture_of
from parity.api.weights import by_name
from parity.workloads.trained.loss import cross_entropy


@cache
def _erf():
    """SciPy's erf where a framework brought SciPy (NumPy is the only dependency), math.erf's elsewhere: imported at
    the first call, not with the workloads (importing scipy.special would slow every worker's start, a ViT's or not)."""
    try:
        from scipy.special import erf
    except ImportError:  # pragma: no cover - every framework extra installs SciPy
        return np.frompyfunc(math.erf, 1, 1)
    return erf


def erf(z: np.ndarray) -> np.ndarray:
    """The error function elementwise, computed in float64 (either source within an ulp or two), in z's dtype."""
    z = np.asarray(z)
    return np.asarray(_erf()(z.astype(np.float64)), z.dtype)


def gelu(z: np.ndarray) -> np.ndarray:
    """Exact GELU, z * Phi(z) with Phi(z) = (1 + erf(z / sqrt 2)) / 2."""
    return 0.5 * z * (1.0 + erf(z / math.sqrt(2.0)))


def gelu_grad(z: np.ndarray) -> np.ndarray:
    """GELU's derivative, Phi(z) + z * phi(z)."""
    return 0.5 * (1.0 + erf(z / math.sqrt(2.0))) + z * np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def dense(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """a @ w over a's last axis as one matrix product (NumPy's stacked (B, T, D) @ (D, N) is several times slower)."""
    return (a.reshape(-1, a.shape[-1]) @ w).reshape(*a.shape[:-1], w.shape[-1])


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, the maximum subtracted first (no overflow)."""
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def named(weights: list[np.ndarray], dtype=np.float64) -> tuple[VitArchitecture, dict[str, np.ndarray]]:
    """The architecture read off the weights, and the Keras-order arrays by name ('block1_attn.query_kernel', ...)
    in `dtype`."""
    arch = architecture_of(weights)
    return arch, by_name(weights, arch.weights, dtype)


def patches(x: np.ndarray, patch: int, dtype=np.float64) -> np.ndarray:
    """(B, H, W, 1) raw pixels -> (B, tokens, patch * patch) in [0, 1]: the Rescaling, then each patch's pixels in
    the conv kernel's (row, column) order, the patches in row-major order (the (7, 7, D) map read as 49 tokens)."""
    x = np.asarray(x, dtype) * dtype(PIXEL_SCALE)
    b, h, w = x.shape[:3]
    n, m = h // patch, w // patch
    x = x.reshape(b, n, patch, m, patch).transpose(0, 1, 3, 2, 4)
    return x.reshape(b, n * m, patch * patch)


@dataclass
class Norm:
    """A LayerNorm over the last axis of `x`: its normalised input xhat, 1 / sqrt(var + eps) (..., 1) and output."""

    x: np.ndarray
    gamma: np.ndarray
    xhat: np.ndarray
    rstd: np.ndarray
    out: np.ndarray

    @classmethod
    def run(cls, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> Norm:
        c = x - x.mean(-1, keepdims=True)
        rstd = 1.0 / np.sqrt((c * c).mean(-1, keepdims=True) + LN_EPSILON)
        xhat = c * rstd
        return cls(x, gamma, xhat, rstd, xhat * gamma + beta)

    def backward(self, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(dx, dgamma, dbeta) from dout; gamma's and beta's summed over every leading axis."""
        dxhat = dout * self.gamma
        dx = self.rstd * (
            dxhat - dxhat.mean(-1, keepdims=True) - self.xhat * (dxhat * self.xhat).mean(-1, keepdims=True)
        )
        lead = tuple(range(dout.ndim - 1))
        return dx, (dout * self.xhat).sum(lead), dout.sum(lead)


def heads_in(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """A projection to heads in Keras's layout ("btd,dhk->bthk" plus the (H, hd) bias), returned as (B, H, T, hd)."""
    d, h, k = kernel.shape
    return (dense(x, kernel.reshape(d, h * k)) + bias.reshape(-1)).reshape(*x.shape[:2], h, k).transpose(0, 2, 1, 3)


def heads_out(heads: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """(B, H, T, hd) heads through the (H, hd, D) output kernel ("bthk,hkd->btd"), no bias: (B, T, D)."""
    b, h, t, k = heads.shape
    return dense(heads.transpose(0, 2, 1, 3).reshape(b, t, h * k), kernel.reshape(h * k, -1))


@dataclass
class Attention:
    """Multi-head self-attention on `x` (B, T, D) with Keras's weights `w` (ATTENTION_FIELDS by name): q, k, v
    (B, H, T, hd), the softmax p of the scaled scores over the keys (B, H, T queries, T keys), the heads' outputs
    (B, H, T, hd) and the projection `out` (B, T, D)."""

    x: np.ndarray
    w: dict[str, np.ndarray]
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray
    p: np.ndarray
    heads: np.ndarray
    out: np.ndarray

    @classmethod
    def run(cls, x: np.ndarray, w: dict[str, np.ndarray]) -> Attention:
        q, k, v = (heads_in(x, w[f"{n}_kernel"], w[f"{n}_bias"]) for n in ("query", "key", "value"))
        scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])
        p = softmax(scores)
        heads = p @ v
        return cls(x, w, q, k, v, scores, p, heads, heads_out(heads, w["output_kernel"]) + w["output_bias"])

    def abs_scores(self) -> np.ndarray:
        """Each score's sum of |terms| (B, H, T, T): |q| . |k| / sqrt(hd)."""
        return np.abs(self.q) @ np.abs(self.k).swapaxes(-1, -2) / math.sqrt(self.q.shape[-1])

    def key_bias_terms(self, ds: np.ndarray) -> np.ndarray:
        """The key bias's gradient's sum of |terms| (H, hd) for ds (B, H, T, T), the scaled scores' gradient: its
        gradient is Σ over samples, queries i and keys j of ds_ij q_i / sqrt(hd), and each query's ds sums to zero
        over the keys (a softmax ignores what every key adds alike), so the terms cancel: zero in exact arithmetic."""
        return np.einsum("bhi,bhid->hd", np.abs(ds).sum(-1), np.abs(self.q)) / math.sqrt(self.q.shape[-1])

    def backward(self, dout: np.ndarray) -> AttentionAdjoint:
        """The gradients from dout (B, T, D), the loss's gradient for the attention's output."""
        w, hd = self.w, self.q.shape[-1]
        b, h, t, _ = self.q.shape
        dheads = dense(dout, w["output_kernel"].reshape(h * hd, -1).T).reshape(b, t, h, hd).transpose(0, 2, 1, 3)
        dp = dheads @ self.v.swapaxes(-1, -2)
        dv = self.p.swapaxes(-1, -2) @ dheads
        ds = self.p * (dp - (self.p * dp).sum(-1, keepdims=True))
        dq, dk = ds @ self.k / math.sqrt(hd), ds.swapaxes(-1, -2) @ self.q / math.sqrt(hd)
        flat = lambda a: a.transpose(0, 2, 1, 3).reshape(b * t, h * hd)  # noqa: E731
        x = self.x.reshape(b * t, -1)
        dx, grads = np.zeros_like(self.x), []
        for name, d in (("query", dq), ("key", dk), ("value", dv)):
            kernel = w[f"{name}_kernel"]
            dx += (flat(d) @ kernel.reshape(len(kernel), -1).T).reshape(dx.shape)
            grads += [(x.T @ flat(d)).reshape(kernel.shape), flat(d).sum(0).reshape(h, hd)]
        grads += [(flat(self.heads).T @ dout.reshape(b * t, -1)).reshape(h, hd, -1), dout.sum((0, 1))]
        return AttentionAdjoint(dout, dheads, dp, dv, ds, dq, dk, dx, grads)


@dataclass
class AttentionAdjoint:
    """The attention's backward pass: the loss's gradient for its output (B, T, D), the heads' outputs, the
    probabilities (B, H, T, T), the values, the scaled scores (B, H, T, T), the queries and keys (B, H, T, hd), its
    input x (B, T, D), and its 8 weights' gradients (ATTENTION_FIELDS' order)."""

    dout: np.ndarray
    dheads: np.ndarray
    dp: np.ndarray
    dv: np.ndarray
    ds: np.ndarray
    dq: np.ndarray
    dk: np.ndarray
    dx: np.ndarray
    grads: list[np.ndarray]


@dataclass
class Block:
    """One pre-norm encoder block on `x` (B, T, D): ln1, the attention, h = x + attention, ln2, the MLP's
    pre-activation z (B, T, M) and GELU(z) g, and the block's output `out` = h + g @ mlp2 + bias."""

    x: np.ndarray
    ln1: Norm
    attn: Attention
    h: np.ndarray
    ln2: Norm
    z: np.ndarray
    g: np.ndarray
    out: np.ndarray

    @classmethod
    def run(cls, x: np.ndarray, p: dict[str, np.ndarray], name: str) -> Block:
        ln1 = Norm.run(x, p[f"{name}_ln1.gamma"], p[f"{name}_ln1.beta"])
        pre = f"{name}_attn."
        attn = Attention.run(ln1.out, {k[len(pre) :]: v for k, v in p.items() if k.startswith(pre)})
        h = x + attn.out
        ln2 = Norm.run(h, p[f"{name}_ln2.gamma"], p[f"{name}_ln2.beta"])
        z = dense(ln2.out, p[f"{name}_mlp1.kernel"]) + p[f"{name}_mlp1.bias"]
        g = gelu(z)
        return cls(x, ln1, attn, h, ln2, z, g, h + dense(g, p[f"{name}_mlp2.kernel"]) + p[f"{name}_mlp2.bias"])

    def backward(self, dout: np.ndarray, p: dict[str, np.ndarray], name: str) -> BlockAdjoint:
        """The gradients from dout (B, T, D), the loss's gradient for the block's output."""
        dg = dense(dout, p[f"{name}_mlp2.kernel"].T)
        dz = dg * gelu_grad(self.z)
        dln2 = dense(dz, p[f"{name}_mlp1.kernel"].T)
        dh_ln, gamma2, beta2 = self.ln2.backward(dln2)
        dh = dout + dh_ln
        attn = self.attn.backward(dh)
        dx_ln, gamma1, beta1 = self.ln1.backward(attn.dx)
        mlp = [_rows(self.ln2.out).T @ _rows(dz), _rows(dz).sum(0)]
        mlp += [_rows(self.g).T @ _rows(dout), _rows(dout).sum(0)]
        grads = [gamma1, beta1, *attn.grads, gamma2, beta2, *mlp]
        return BlockAdjoint(dout, dg, dz, dln2, dh, attn, dh + dx_ln, grads)


def _rows(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1, a.shape[-1])


@dataclass
class BlockAdjoint:
    """A block's backward pass, the loss's gradient for: its output, GELU's output and input z (B, T, M), the second
    LayerNorm's output, h (the first residual sum), the attention's (AttentionAdjoint, whose dx is the first
    LayerNorm's output's), the block's input dx; and its 16 weights' gradients in Keras's order."""

    dout: np.ndarray
    dg: np.ndarray
    dz: np.ndarray
    dln2: np.ndarray
    dh: np.ndarray
    attn: AttentionAdjoint
    dx: np.ndarray
    grads: list[np.ndarray]


@dataclass
class Trace:
    """The whole forward pass (float64 unless asked otherwise): the architecture, the weights by name, the patches
    (B, T, P), the embedded tokens, the blocks, the final LayerNorm, the pooled features, the logits and the
    probabilities."""

    arch: VitArchitecture
    weights: dict[str, np.ndarray]
    patches: np.ndarray
    embed: np.ndarray
    blocks: list[Block]
    norm: Norm
    pool: np.ndarray
    logits: np.ndarray
    probs: np.ndarray


def vit_trace(weights: list[np.ndarray], x: np.ndarray, dtype=np.float64) -> Trace:
    """The forward pass with every step's quantities kept (the backward pass and the tolerances read them); in
    float64, or in `dtype` (float32: NumPy's own arithmetic in that format, for the tests of the bounds)."""
    arch, p = named(weights, dtype)
    if np.shape(x)[1:] != arch.image:
        raise ValueError(f"images of shape {np.shape(x)[1:]}, expected {arch.image}")
    xp = patches(x, arch.patch, dtype)
    t = dense(xp, p["patch_embed.kernel"].reshape(arch.patch_pixels, arch.dim)) + p["patch_embed.bias"]
    embed = t + p["pos_embed.embeddings"]
    blocks, t = [], embed
    for name in arch.block_names:
        blocks.append(Block.run(t, p, name))
        t = blocks[-1].out
    norm = Norm.run(t, p["norm.gamma"], p["norm.beta"])
    pool = norm.out.mean(axis=1)
    logits = pool @ p["dense.kernel"] + p["dense.bias"]
    return Trace(arch, p, xp, embed, blocks, norm, pool, logits, softmax(logits))


def forward(weights: list[np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """Float64 inference pass of the ViT.

    Args:
        weights: the arrays in Keras's get_weights() order (the architecture is read off them).
        x: (B, 28, 28, 1) raw pixels.
    Returns:
        Every block by name (VitArchitecture.blocks' values), float64: "embed" (B, T, D) the patches' embedding plus
        the position embedding, "block1".. (B, T, D) each block's output, "pool" (B, D) the final LayerNorm's tokens'
        mean, "logits" (B, 10), "probs" (B, 10).
    """
    tr = vit_trace(weights, x)
    out = {"embed": tr.embed, **{n: b.out for n, b in zip(tr.arch.block_names, tr.blocks, strict=True)}}
    return {**out, "pool": tr.pool, "logits": tr.logits, "probs": tr.probs}


@dataclass
class Backward:
    """Backpropagation of a Trace: the loss, the gradients (Keras order), the loss's gradient for the logits
    (dlogits, B x 10), the pooled features (B, D), the final LayerNorm's input (B, T, D), and each block's adjoint."""

    loss: float
    grads: list[np.ndarray]
    dlogits: np.ndarray
    dpool: np.ndarray
    dnorm: np.ndarray
    blocks: list[BlockAdjoint]


def vit_backward(tr: Trace, y: np.ndarray) -> Backward:
    """Mean sparse cross-entropy of the trace's logits against labels `y` (B,), and its gradients."""
    p, arch = tr.weights, tr.arch
    loss, d = cross_entropy(tr.logits, tr.probs, y)
    dpool = d @ p["dense.kernel"].T
    dt, gamma, beta = tr.norm.backward(np.repeat(dpool[:, None] / arch.tokens, arch.tokens, axis=1))
    dnorm, adjoints = dt, []
    for name, blk in reversed(list(zip(arch.block_names, tr.blocks, strict=True))):
        adjoints.insert(0, blk.backward(dt, p, name))
        dt = adjoints[0].dx
    kernel = (_rows(tr.patches).T @ _rows(dt)).reshape(p["patch_embed.kernel"].shape)
    grads = [kernel, _rows(dt).sum(0), dt.sum(0), *(g for a in adjoints for g in a.grads), gamma, beta]
    grads += [tr.pool.T @ d, d.sum(0)]
    return Backward(loss, grads, d, dpool, dnorm, adjoints)


def loss_and_grads(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """Float64 loss and gradients of one batch, by backpropagation written out by hand (no framework code).

    Args:
        weights: the arrays in Keras's get_weights() order.
        x: (B, 28, 28, 1) raw pixels; y: (B,) integer labels.
    Returns:
        (mean sparse cross-entropy of the logits, every gradient in Keras's trainable_weights order).
    """
    bw = vit_backward(vit_trace(weights, x), y)
    return bw.loss, bw.grads
