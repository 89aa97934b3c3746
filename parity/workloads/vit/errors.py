"""The ViT's float32 error model: each error's standard deviation (sd) carried through the network's forward and
backward passes with its own quantities on the run's inputs (the float64 oracle's trace), from which
parity.workloads.vit.tolerances derives its bounds (that module's docstring gives the model)."""

from __future__ import annotations

import math

import numpy as np

from parity.common.tolerances import F32_UNIT_ROUNDOFF, ROUNDING_LAMBDA, grad_sum_bound
from parity.workloads.vit import oracle as o

U = F32_UNIT_ROUNDOFF
ULPS = 4  # a float32 exp, erf or reciprocal square root: within a few ulps in Eigen, XLA, oneDNN and SLEEF alike
_sq = np.square


def _dense_sd(sd: np.ndarray, a: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """The sd of a @ w (+ bias) over a's last axis, `a`'s elements with independent errors of sd `sd`: carried
    through w, and the product's own rounding, relative to its terms."""
    terms = o.dense(np.abs(a), np.abs(w)) + (0.0 if bias is None else np.abs(bias))
    return np.sqrt(o.dense(_sq(sd), _sq(w)) + _sq(U * math.sqrt(w.shape[0] + (bias is not None)) * terms))


def _ln_carry(xh: np.ndarray, rstd: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Σ_j J_ij² v_j over the last axis, J = rstd (I - 1/D - xh xhᵀ / D) LayerNorm's Jacobian less gamma (symmetric)."""
    d = xh.shape[-1]
    s0, s1, s2 = (np.sum(v * xh**k, -1, keepdims=True) for k in range(3))
    own = v * (1 - 2 / d - 2 * xh * xh / d) + (s0 + 2 * xh * s1 + xh * xh * s2) / d**2
    return rstd * rstd * np.maximum(own, 0.0)


class NormErrors:
    """A LayerNorm's forward errors from its input's (sd_x): the sd of xhat, of 1/sqrt(var + eps) relative to it
    (rstd, (..., 1)) and of its output."""

    def __init__(self, n: o.Norm, sd_x: np.ndarray):
        d, ax = n.x.shape[-1], np.abs(n.x)
        mean, var = n.x.mean(-1, keepdims=True), 1 / _sq(n.rstd) - o.LN_EPSILON
        s_mean = U * math.sqrt(d) * ax.mean(-1, keepdims=True)
        s_var = U * (math.sqrt(d) + 1) * (var + mean * mean) + 2 * np.abs(mean) * s_mean  # E[x²]-mean²'s roundings
        own_rstd = 0.5 * s_var * _sq(n.rstd) + ULPS * U
        self.rstd = np.sqrt(np.sum(_sq(n.xhat * sd_x), -1, keepdims=True)) * n.rstd / d + own_rstd
        self.xhat = np.sqrt(_ln_carry(n.xhat, n.rstd, _sq(sd_x))) + n.rstd * (s_mean + U * np.abs(n.x - mean))
        self.xhat += np.abs(n.xhat) * (own_rstd + U)
        self.out = np.abs(n.gamma) * self.xhat + U * (np.abs(n.gamma * n.xhat) + np.abs(n.out))

    def backward(self, n: o.Norm, dout: np.ndarray, sd_dout: np.ndarray) -> np.ndarray:
        """The sd of the input's gradient, rstd (dxh - mean(dxh) - xhat mean(dxh xhat)) with dxh = dout gamma, from
        dout's errors (sd_dout), this LayerNorm's forward errors, and its own two means and elementwise ops."""
        d, dxh = n.x.shape[-1], dout * n.gamma
        sd_dxh = np.abs(n.gamma) * sd_dout + U * np.abs(dxh)
        dx = n.rstd * (dxh - dxh.mean(-1, keepdims=True) - n.xhat * (dxh * n.xhat).mean(-1, keepdims=True))
        m1, m2 = np.abs(dxh).mean(-1, keepdims=True), np.abs(dxh * n.xhat).mean(-1, keepdims=True)
        m3 = (np.abs(dxh) * self.xhat).mean(-1, keepdims=True)
        fwd = self.rstd * np.abs(dx) + n.rstd * (self.xhat * m2 + np.abs(n.xhat) * m3)
        own = n.rstd * U * ((math.sqrt(d) + 1) * (m1 + np.abs(n.xhat) * m2) + 2 * np.abs(dxh)) + U * np.abs(dx)
        return np.sqrt(_ln_carry(n.xhat, n.rstd, _sq(sd_dxh))) + fwd + own


def _heads(sd: np.ndarray, a: o.Attention, name: str) -> np.ndarray:
    """The sd of the projection `name` ('query', 'key', 'value') to heads (B, H, T, hd), as oracle.heads_in."""
    d, h, k = a.w[f"{name}_kernel"].shape
    sd = _dense_sd(sd, a.x, a.w[f"{name}_kernel"].reshape(d, h * k), a.w[f"{name}_bias"].reshape(-1))
    return sd.reshape(*a.x.shape[:2], h, k).transpose(0, 2, 1, 3)


def _flat(a: np.ndarray) -> np.ndarray:
    """(B, H, T, hd) -> (B, T, H * hd), the layout the output kernel reads."""
    b, h, t, k = a.shape
    return a.transpose(0, 2, 1, 3).reshape(b, t, h * k)


def _softmax_sd(p: np.ndarray, s: np.ndarray, sd_s: np.ndarray) -> np.ndarray:
    """The sd of softmax(s) over the last axis (the row LSTM's): its Jacobian diag(p) - p pᵀ on the scores' errors,
    linearly; the shift by the maximum, exp, the sum and the division."""
    spread = np.abs(s - s.max(-1, keepdims=True))
    carried = p * (sd_s + (p * sd_s).sum(-1, keepdims=True))
    return carried + U * p * (spread + ULPS + math.sqrt(s.shape[-1]) + 1)


class AttentionErrors:
    """The sd of an attention's forward errors from its input's (sd_x): q, k, v (B, H, T, hd), the scaled scores and
    the probabilities (B, H, T, T), the heads' outputs and the projection `out` (B, T, D)."""

    def __init__(self, a: o.Attention, sd_x: np.ndarray):
        w, (t, hd) = a.w, a.q.shape[-2:]
        self.q, self.k, self.v = (_heads(sd_x, a, n) for n in ("query", "key", "value"))
        carried = (_sq(self.q) @ _sq(a.k).swapaxes(-1, -2) + _sq(a.q) @ _sq(self.k).swapaxes(-1, -2)) / hd
        self.s = np.sqrt(carried + _sq(U * math.sqrt(hd) * a.abs_scores()) + _sq(U * a.scores))
        self.p = _softmax_sd(a.p, a.scores, self.s)
        # p @ v: the scores' errors through the softmax, Σ_t p_t (v_t - heads) e_t, exactly for independent e_t;
        # each p's own exp and division, the sum's rounding (common to a query's p), the values' errors, the product
        c = _sq(a.p * self.s) + _sq(U * a.p * np.abs(a.scores - a.scores.max(-1, keepdims=True)))
        through_p = c @ _sq(a.v) - 2 * a.heads * (c @ a.v) + _sq(a.heads) * c.sum(-1, keepdims=True)
        own_p = _sq(U * (ULPS + 1) * a.p) @ _sq(a.v)
        product = _sq(a.p) @ _sq(self.v) + _sq(U * math.sqrt(t) * (a.p @ np.abs(a.v)))
        self.heads = np.sqrt(np.maximum(through_p, 0) + own_p + product) + U * math.sqrt(t) * np.abs(a.heads)
        kernel = w["output_kernel"].reshape(-1, a.x.shape[-1])
        self.out = _dense_sd(_flat(self.heads), _flat(a.heads), kernel, w["output_bias"])

    def backward(self, a: o.Attention, adj: o.AttentionAdjoint, sd_dout: np.ndarray, sd_x: np.ndarray):
        """(the sd of the input's gradient (B, T, D), the bounds of the 8 weights' gradients)."""
        w, (b, h, t, hd) = a.w, a.q.shape
        sd_dh = _dense_sd(sd_dout, adj.dout, w["output_kernel"].reshape(h * hd, -1).T)
        sd_dh = sd_dh.reshape(b, t, h, hd).transpose(0, 2, 1, 3)
        sd_dp = np.sqrt(_sq(sd_dh) @ _sq(a.v).swapaxes(-1, -2) + _sq(adj.dheads) @ _sq(self.v).swapaxes(-1, -2))
        sd_dp += U * math.sqrt(hd) * (np.abs(adj.dheads) @ np.abs(a.v).swapaxes(-1, -2))
        pt = a.p.swapaxes(-1, -2)
        sd_dv = np.sqrt(_sq(self.p).swapaxes(-1, -2) @ _sq(adj.dheads) + _sq(pt) @ _sq(sd_dh))
        sd_dv += U * math.sqrt(t) * (pt @ np.abs(adj.dheads))
        # ds = p (dp - Σ p dp): dp's errors as a softmax's (linearly), p's, and the sum's and products' roundings
        c, adp = (a.p * adj.dp).sum(-1, keepdims=True), np.abs(adj.dp)
        sd_ds = a.p * (sd_dp + (a.p * sd_dp).sum(-1, keepdims=True)) + np.abs(adj.dp - c) * self.p
        sd_ds += a.p * ((self.p + U * math.sqrt(t) * a.p) * adp).sum(-1, keepdims=True) + U * a.p * adp
        sd_ds += 2 * U * np.abs(adj.ds)
        dn = {"query": (adj.dq, _qk_sd(adj.ds, sd_ds, a.k, self.k)), "value": (adj.dv, sd_dv)}
        dn["key"] = (adj.dk, _qk_sd(adj.ds.swapaxes(-1, -2), sd_ds.swapaxes(-1, -2), a.q, self.q))
        var_dx, grads = 0.0, []
        for name in ("query", "key", "value"):
            d, sd = _flat(dn[name][0]), _flat(dn[name][1])
            kernel = w[f"{name}_kernel"]
            var_dx = var_dx + _sq(_dense_sd(sd, d, kernel.reshape(len(kernel), -1).T))
            grads += [grad_sum_bound(a.x, sd_x, d, sd).reshape(kernel.shape), _bias_bound(d, sd).reshape(h, hd)]
        grads += [grad_sum_bound(_flat(a.heads), _flat(self.heads), adj.dout, sd_dout).reshape(h, hd, -1)]
        return np.sqrt(var_dx) + 2 * U * np.abs(adj.dx), [*grads, _bias_bound(adj.dout, sd_dout)]


def _qk_sd(ds: np.ndarray, sd_ds: np.ndarray, other: np.ndarray, sd_other: np.ndarray) -> np.ndarray:
    """The sd of ds @ other / sqrt(hd) (a query's or a key's gradient): both factors' errors and the product's."""
    t, hd = other.shape[-2:]
    carried = np.sqrt(_sq(sd_ds) @ _sq(other) + _sq(ds) @ _sq(sd_other))
    return (carried + U * math.sqrt(t) * (np.abs(ds) @ np.abs(other)) + U * np.abs(ds @ other)) / math.sqrt(hd)


def _sum_bound(a, sd_a, dz: np.ndarray, sd_dz: np.ndarray, run: int = 1) -> np.ndarray:
    """grad_sum_bound of a LayerNorm's gamma (a: xhat) or, a = 1 and sd_a = 0, a bias: the sum of a * dz (B, T, ...)
    over samples and tokens, per element. run: how many consecutive terms repeat (the final LayerNorm's bias: a
    sample's mean's gradient, for each of its T tokens), their roundings alike: one, `run` times as large."""
    per_sample = (sd_a * np.abs(dz) + np.abs(a) * sd_dz).sum(1)
    last = U * math.sqrt(dz.shape[0] * dz.shape[1] * run) * np.abs(a * dz).sum((0, 1))
    return ROUNDING_LAMBDA * (np.sqrt(np.sum(_sq(per_sample), 0)) + last)


def _bias_bound(dz: np.ndarray, sd_dz: np.ndarray) -> np.ndarray:
    return _sum_bound(1.0, 0.0, dz, sd_dz)


class BlockErrors:
    """The sd of an encoder block's forward errors from its input's (sd_x): its LayerNorms, the attention, h, the
    MLP's pre-activation z and GELU(z) g, and its output."""

    def __init__(self, blk: o.Block, sd_x: np.ndarray, p: dict[str, np.ndarray], name: str):
        self.ln1 = NormErrors(blk.ln1, sd_x)
        self.attn = AttentionErrors(blk.attn, self.ln1.out)
        self.h = np.hypot(sd_x, self.attn.out) + U * np.abs(blk.h)
        self.ln2 = NormErrors(blk.ln2, self.h)
        self.z = _dense_sd(self.ln2.out, blk.ln2.out, p[f"{name}_mlp1.kernel"], p[f"{name}_mlp1.bias"])
        # GELU, z (1 + erf(z / sqrt 2)) / 2: erf's ulps absolute where 1 + erf cancels (z < 0), a few products
        self.g = np.abs(o.gelu_grad(blk.z)) * self.z + U * (ULPS * 0.5 * np.abs(blk.z) + 3 * np.abs(blk.g))
        mlp = _dense_sd(self.g, blk.g, p[f"{name}_mlp2.kernel"], p[f"{name}_mlp2.bias"])
        self.out = np.hypot(self.h, mlp) + U * np.abs(blk.out)

    def backward(self, blk: o.Block, adj: o.BlockAdjoint, sd_dout: np.ndarray, p: dict, name: str):
        """(the sd of the block input's gradient, the bounds of its 16 weights' gradients in Keras's order)."""
        sd_dg = _dense_sd(sd_dout, adj.dout, p[f"{name}_mlp2.kernel"].T)
        z, phi = blk.z, np.exp(-0.5 * blk.z**2) / math.sqrt(2 * math.pi)
        slope = 0.5 * (1 + o.erf(z / math.sqrt(2))) + np.abs(z) * phi  # GELU's derivative's terms, |.|
        sd_dz = np.abs(o.gelu_grad(z)) * sd_dg + np.abs(adj.dg * phi * (2 - z * z)) * self.z
        sd_dz += U * (ULPS + 4) * np.abs(adj.dg) * slope
        sd_dln2 = _dense_sd(sd_dz, adj.dz, p[f"{name}_mlp1.kernel"].T)
        sd_dh = np.hypot(sd_dout, self.ln2.backward(blk.ln2, adj.dln2, sd_dln2)) + U * np.abs(adj.dh)
        sd_dln1, attn = self.attn.backward(blk.attn, adj.attn, sd_dh, self.ln1.out)
        sd_dx = np.hypot(sd_dh, self.ln1.backward(blk.ln1, adj.attn.dx, sd_dln1)) + U * np.abs(adj.dx)
        ln1 = [_sum_bound(blk.ln1.xhat, self.ln1.xhat, adj.attn.dx, sd_dln1), _bias_bound(adj.attn.dx, sd_dln1)]
        ln2 = [_sum_bound(blk.ln2.xhat, self.ln2.xhat, adj.dln2, sd_dln2), _bias_bound(adj.dln2, sd_dln2)]
        mlp = [grad_sum_bound(blk.ln2.out, self.ln2.out, adj.dz, sd_dz), _bias_bound(adj.dz, sd_dz)]
        mlp += [grad_sum_bound(blk.g, self.g, adj.dout, sd_dout), _bias_bound(adj.dout, sd_dout)]
        return sd_dx, [*ln1, *attn, *ln2, *mlp]


class Errors:
    """The sd of every float32 forward error of a batch: the embedded tokens, each block, the final LayerNorm, the
    pooled features, the logits, the probabilities and, given labels, each sample's loss (B,)."""

    def __init__(self, tr: o.Trace, y: np.ndarray | None = None):
        p, t = tr.weights, tr.arch.tokens
        self.patches = U * tr.patches  # the pixels' scaling rounds once
        kernel = p["patch_embed.kernel"].reshape(-1, tr.arch.dim)
        self.embed = _dense_sd(self.patches, tr.patches, kernel, p["patch_embed.bias"]) + U * np.abs(tr.embed)
        self.blocks, sd = [], self.embed
        for name, blk in zip(tr.arch.block_names, tr.blocks, strict=True):
            self.blocks.append(BlockErrors(blk, sd, p, name))
            sd = self.blocks[-1].out
        self.norm = NormErrors(tr.norm, sd)  # the mean over tokens: their errors linearly, and the sum's rounding
        self.pool = self.norm.out.mean(1) + U * math.sqrt(t) * np.abs(tr.norm.out).mean(1)
        self.logits = _dense_sd(self.pool, tr.pool, p["dense.kernel"], p["dense.bias"])
        self.probs = _softmax_sd(tr.probs, tr.logits, self.logits)
        self.loss, self.per_sample_loss = None, None
        if y is not None:  # L = lse - l_y: the logits' errors through p - onehot; exp and log, the sum, the max back
            y, classes = np.asarray(y).astype(np.int64), tr.probs.shape[1]
            top = tr.logits.max(-1)
            lse = top + np.log(np.exp(tr.logits - top[:, None]).sum(-1))
            self.per_sample_loss = lse - tr.logits[np.arange(len(y)), y]
            carried = (np.abs(tr.probs - np.eye(classes)[y]) * self.logits).sum(-1)
            self.loss = carried + U * (2 * ULPS + math.sqrt(classes) + 2 * np.abs(lse) + self.per_sample_loss)


def vit_grad_bounds(tr: o.Trace, bw: o.Backward, e: Errors) -> list[np.ndarray]:
    """Each gradient's float32 bound per element (LAMBDA · sd), Keras order."""
    p, b, t = tr.weights, len(bw.dlogits), tr.arch.tokens
    sd_d = e.probs / b + 2 * U * np.abs(bw.dlogits)  # (p - onehot) / B
    sd_dpool = _dense_sd(sd_d, bw.dlogits, p["dense.kernel"].T)
    dout = np.repeat(bw.dpool[:, None] / t, t, axis=1)
    sd_dout = np.repeat(sd_dpool[:, None] / t, t, axis=1) + U * np.abs(dout)
    head = [_sum_bound(tr.norm.xhat, e.norm.xhat, dout, sd_dout), _sum_bound(1.0, 0.0, dout, sd_dout, t)]
    head += [grad_sum_bound(tr.pool[:, None], e.pool[:, None], bw.dlogits[:, None], sd_d[:, None])]
    head += [_bias_bound(bw.dlogits[:, None], sd_d[:, None])]
    sd, blocks = e.norm.backward(tr.norm, dout, sd_dout), []
    items = zip(tr.arch.block_names, tr.blocks, bw.blocks, e.blocks, strict=True)
    for name, blk, adj, be in reversed(list(items)):
        sd, grads = be.backward(blk, adj, sd, p, name)
        blocks = grads + blocks
    dt = bw.blocks[0].dx if bw.blocks else bw.dnorm
    flat = dt.reshape(b, 1, -1)  # the position embedding's: a sum over the batch alone
    embed = [grad_sum_bound(tr.patches, e.patches, dt, sd).reshape(p["patch_embed.kernel"].shape), _bias_bound(dt, sd)]
    embed += [_bias_bound(flat, sd.reshape(flat.shape)).reshape(dt.shape[1:])]
    return [*embed, *blocks, *head]
