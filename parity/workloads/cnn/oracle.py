"""The CNN's float64 oracle: forward and training-mode backward written out by hand, with each gradient's terms."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from parity.api.cnn import CNN_CONVS, CNN_TRAINABLE, CNN_WEIGHTS
from parity.api.weights import by_name
from parity.common.float64 import conv2d, patches

BN_EPSILON = 1e-3  # Keras's default, set explicitly on both sides


def _bn(x, gamma, beta, mean, var, eps=BN_EPSILON):
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _elu(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _windows(x: np.ndarray) -> np.ndarray:
    """(N, H, W, C) -> (N, H//2, W//2, C, 4): each 2x2 pooling window's values, row-major; an odd last
    row or column is dropped, as VALID pooling does."""
    n, h, w, c = x.shape
    h2, w2 = h // 2, w // 2
    return x[:, : 2 * h2, : 2 * w2].reshape(n, h2, 2, w2, 2, c).transpose(0, 1, 3, 5, 2, 4).reshape(n, h2, w2, c, 4)


def _unwindows(win: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, h2, w2, c, _ = win.shape
    out = np.zeros(shape, win.dtype)
    out[:, : 2 * h2, : 2 * w2] = (
        win.reshape(n, h2, w2, c, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(n, 2 * h2, 2 * w2, c)
    )
    return out


def _pool(x):
    return _windows(x).max(axis=-1)


def pool_routing(x: np.ndarray) -> np.ndarray:
    """Max pooling's subgradient at `x`: 1 at each 2x2 window's first largest value (row-major), 0 elsewhere.

    Frameworks may break ties differently; pass their own routing to cnn_loss_and_grads instead."""
    win = _windows(np.asarray(x))
    onehot = np.zeros(win.shape, np.float64)
    np.put_along_axis(onehot, win.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return _unwindows(onehot, x.shape)


def pool_window_stats(a: np.ndarray, routings: dict[str, np.ndarray], ulps: int = 4) -> dict[str, int]:
    """Pooling windows of activations `a`: how many, how many are near-ties (the two largest values within
    `ulps` float32 ulps of the largest, exact ties included), and how many are routed differently by
    the given routings (the weights each framework's max-pool gradient puts on each position)."""
    win = _windows(np.asarray(a, np.float64))
    top = np.sort(win, axis=-1)
    gap = top[..., -1] - top[..., -2]
    ulp = np.spacing(np.abs(top[..., -1]).astype(np.float32)).astype(np.float64)
    out = {"windows": int(gap.size), "near_ties": int(np.sum(gap <= ulps * ulp))}
    names = sorted(routings)
    for i, p in enumerate(names):
        for q in names[i + 1 :]:
            d = np.abs(_windows(routings[p]) - _windows(routings[q])).max(axis=-1)
            out[f"routed_differently_{p}_{q}"] = int(np.sum(d > 0))
    return out


def _named(weights: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Keras-order arrays by name ('conv1.kernel', ...), in float64."""
    return by_name(weights, CNN_WEIGHTS)


def cnn_forward(weights: list[np.ndarray], x: np.ndarray) -> dict[str, np.ndarray]:
    """Float64 inference pass of the notebook's CNN (BatchNorm on moving statistics, dropout off).

    Args:
        weights: the 22 arrays in Keras's get_weights() order.
        x: (N, 28, 28, 1) raw pixels.
    Returns:
        Every block's output by name (block1..3, dense1, logits, probs), as the implementations name them.
    """
    p = _named(weights)
    h = np.asarray(x, np.float64)
    out = {}
    for i in range(1, len(CNN_CONVS) + 1):
        bn = _bn(h, p[f"bn{i}.gamma"], p[f"bn{i}.beta"], p[f"bn{i}.moving_mean"], p[f"bn{i}.moving_variance"])
        h = _pool(_elu(conv2d(bn, p[f"conv{i}.kernel"], stride=1, padding="SAME") + p[f"conv{i}.bias"]))
        out[f"block{i}"] = h
    h = _elu(h.reshape(len(h), -1) @ p["dense1.kernel"] + p["dense1.bias"])
    out["dense1"] = h
    logits = h @ p["dense2.kernel"] + p["dense2.bias"]
    out["logits"] = logits
    e = np.exp(logits - logits.max(-1, keepdims=True))
    out["probs"] = e / e.sum(-1, keepdims=True)
    return out


def _kernel_grads(x: np.ndarray, dz: np.ndarray, kh: int, kw: int) -> tuple[np.ndarray, Terms]:
    """The kernel gradient of a stride-1 SAME conv (odd kernel) of input `x` with output gradient `dz` (the
    patches times dz, over N x H x W), and its terms."""
    cin, cout = x.shape[-1], dz.shape[-1]
    xp = np.pad(x, ((0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    grad, abs_sum, sq_sum = (np.zeros((kh * kw * cin, cout)) for _ in range(3))
    for rows, pt in patches(xp, kh, kw):
        d = dz[rows].reshape(-1, cout)
        grad += pt.T @ d
        abs_sum += np.abs(pt).T @ np.abs(d)
        sq_sum += (pt * pt).T @ (d * d)
    shape = (kh, kw, cin, cout)
    return grad.reshape(shape), Terms(
        int(np.prod(dz.shape[:3])), abs_sum.reshape(shape), np.sqrt(sq_sum).reshape(shape)
    )


def _conv_input_grad(k: np.ndarray, dz: np.ndarray) -> np.ndarray:
    """The input gradient of a stride-1 SAME conv (odd kernel: symmetric padding)."""
    return conv2d(dz, k[::-1, ::-1].transpose(0, 1, 3, 2), stride=1, padding="SAME")


@dataclass(frozen=True)
class Terms:
    """What a gradient's last reduction sums, per element: how many terms, the sum of their magnitudes
    (sum |t|) and their root sum of squares (sqrt(sum t^2)). A result much smaller than `abs_sum` cancels:
    float32 can resolve it only to about `abs_sum` times its rounding error, whatever the kernel."""

    n: int
    abs_sum: np.ndarray
    rss: np.ndarray


def _terms(a: np.ndarray, b: np.ndarray, axes: tuple[int, ...]) -> Terms:
    """Terms a * b summed over `axes` (broadcasting)."""
    t = np.abs(a * b)
    return Terms(int(np.prod([t.shape[i] for i in axes])), t.sum(axes), np.sqrt((t * t).sum(axes)))


def _matmul_terms(a: np.ndarray, b: np.ndarray) -> Terms:
    """Terms of a.T @ b (the sum over a's and b's first axis)."""
    return Terms(a.shape[0], np.abs(a).T @ np.abs(b), np.sqrt((a * a).T @ (b * b)))


def _elu_grad(z: np.ndarray) -> np.ndarray:
    return np.where(z > 0, 1.0, np.exp(np.minimum(z, 0)))


@dataclass
class _Block:
    """One training-mode BatchNorm -> conv -> ELU -> routed max-pool block, with what its backward needs."""

    i: int
    xhat: np.ndarray
    std: np.ndarray
    gamma: np.ndarray
    u: np.ndarray  # the conv's input
    kernel: np.ndarray
    z: np.ndarray  # the conv's output plus bias
    a: np.ndarray  # the pooling input
    r: np.ndarray  # the routing: the weight each pooling input position gets
    out: np.ndarray
    stats: dict  # the BatchNorm's batch statistics: 'mean', 'variance' (biased), and 'abs_mean' (mean |input|)

    @classmethod
    def forward(cls, h: np.ndarray, p: dict, i: int, routing: np.ndarray | None) -> _Block:
        mean = h.mean(axis=(0, 1, 2))
        var = ((h - mean) ** 2).mean(axis=(0, 1, 2))  # two-pass, biased
        std = np.sqrt(var + BN_EPSILON)
        xhat = (h - mean) / std
        u = xhat * p[f"bn{i}.gamma"] + p[f"bn{i}.beta"]
        z = conv2d(u, p[f"conv{i}.kernel"], stride=1, padding="SAME") + p[f"conv{i}.bias"]
        a = _elu(z)
        r = pool_routing(a) if routing is None else np.asarray(routing, np.float64)
        if r.shape != a.shape:
            raise ValueError(f"routing {i - 1}: shape {r.shape}, pooling input {a.shape}")
        out = (_windows(a) * _windows(r)).sum(axis=-1)
        stats = {"mean": mean, "variance": var, "abs_mean": np.abs(h).mean(axis=(0, 1, 2))}
        return cls(i, xhat, std, p[f"bn{i}.gamma"], u, p[f"conv{i}.kernel"], z, a, r, out, stats)

    def backward(self, dout: np.ndarray, grads: dict, terms: dict) -> np.ndarray:
        """The block's parameter gradients into `grads` and their terms into `terms`; returns the gradient
        for its input."""
        da = _unwindows(_windows(self.r) * dout[..., None], self.a.shape)
        dz = da * _elu_grad(self.z)
        du = _conv_input_grad(self.kernel, dz)
        dk, terms[f"conv{self.i}.kernel"] = _kernel_grads(self.u, dz, *self.kernel.shape[:2])
        pix = (0, 1, 2)
        grads[f"conv{self.i}.kernel"], grads[f"conv{self.i}.bias"] = dk, dz.sum(axis=pix)
        grads[f"bn{self.i}.gamma"], grads[f"bn{self.i}.beta"] = (du * self.xhat).sum(axis=pix), du.sum(pix)
        terms[f"conv{self.i}.bias"] = _terms(dz, 1.0, pix)
        terms[f"bn{self.i}.gamma"], terms[f"bn{self.i}.beta"] = _terms(du, self.xhat, pix), _terms(du, 1.0, pix)
        dxhat = du * self.gamma
        mean_dxhat = dxhat.mean(axis=(0, 1, 2))
        return (dxhat - mean_dxhat - self.xhat * (dxhat * self.xhat).mean(axis=(0, 1, 2))) / self.std


@dataclass
class _Head:
    """The dense layers and the mean sparse cross-entropy on the last block's output, with what their backward
    needs."""

    h: np.ndarray  # the last block's output
    z4: np.ndarray  # dense1's output plus bias
    h4: np.ndarray
    logits: np.ndarray
    lse: np.ndarray  # each sample's log-sum-exp of its logits
    y: np.ndarray
    loss: float

    @classmethod
    def forward(cls, p: dict, h: np.ndarray, y: np.ndarray) -> _Head:
        z4 = h.reshape(len(h), -1) @ p["dense1.kernel"] + p["dense1.bias"]
        h4 = _elu(z4)
        logits = h4 @ p["dense2.kernel"] + p["dense2.bias"]
        top = logits.max(-1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(logits - top).sum(-1))
        return cls(h, z4, h4, logits, lse, y, float(np.mean(lse - logits[np.arange(len(y)), y])))

    def backward(self, p: dict, grads: dict, terms: dict) -> np.ndarray:
        """The dense layers' gradients into `grads` and their terms into `terms`; returns the gradient for `h`."""
        y, h4, flat = self.y, self.h4, self.h.reshape(len(self.h), -1)
        d = np.exp(self.logits - self.lse[:, None])  # softmax cross-entropy's gradient for the logits
        d[np.arange(len(y)), y] -= 1.0
        d /= len(y)
        grads["dense2.kernel"], grads["dense2.bias"] = h4.T @ d, d.sum(0)
        terms["dense2.kernel"], terms["dense2.bias"] = _matmul_terms(h4, d), _terms(d, 1.0, (0,))
        dz4 = (d @ p["dense2.kernel"].T) * _elu_grad(self.z4)
        grads["dense1.kernel"], grads["dense1.bias"] = flat.T @ dz4, dz4.sum(0)
        terms["dense1.kernel"], terms["dense1.bias"] = _matmul_terms(flat, dz4), _terms(dz4, 1.0, (0,))
        return (dz4 @ p["dense1.kernel"].T).reshape(self.h.shape)


def _forward(weights, x, y, routing) -> tuple[dict, list[_Block], _Head]:
    """The training-mode forward pass of cnn_loss_and_grads: the named float64 weights, each block, the head."""
    p = _named(weights)
    h, blocks = np.asarray(x, np.float64), []
    for i in range(len(CNN_CONVS)):
        blocks.append(_Block.forward(h, p, i + 1, None if routing is None else routing[i]))
        h = blocks[-1].out
    return p, blocks, _Head.forward(p, h, np.asarray(y))


def cnn_loss(weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, routing: list[np.ndarray] | None = None) -> float:
    """cnn_loss_and_grads's loss alone (its forward pass, no backward): the same arguments, the same float64 value."""
    return _forward(weights, x, y, routing)[2].loss


def cnn_loss_and_grads(
    weights: list[np.ndarray], x: np.ndarray, y: np.ndarray, routing: list[np.ndarray] | None = None
) -> tuple[float, list[np.ndarray], dict]:
    """Float64 training-mode loss and gradients of one batch, written out by hand (no framework code).

    Training mode as both implementations' loss_and_grads: BatchNorm on the batch's statistics
    (biased variance, two-pass), dropout off, mean sparse cross-entropy on the logits.

    Args:
        weights: the 22 arrays in Keras's get_weights() order (moving statistics unused).
        x: (N, 28, 28, 1) raw pixels; y: (N,) integer labels.
        routing: max pooling's subgradient for each of the 3 pooling layers, as weights on the
            pooling inputs' positions (each framework's own, from its max-pool gradient); None: the
            first largest value of each window in this float64 pass.
    Returns:
        (loss, the 16 gradients in Keras's trainable_weights order, {"pool_inputs": the 3 float64
        pooling inputs, "routing": the routing used, "terms": each gradient's Terms, in the same order,
        "batch_stats": each BatchNorm's batch statistics}).
        A window's pooled value is the routed combination of its values, so loss and gradients belong
        to one smooth function.
    """
    p, blocks, head = _forward(weights, x, y, routing)
    grads, terms = {}, {}
    dh = head.backward(p, grads, terms)
    for b in reversed(blocks):  # backward through each block in reverse
        dh = b.backward(dh, grads, terms)
    pool_in, used = [b.a for b in blocks], [b.r for b in blocks]
    order = [w.name for w in CNN_TRAINABLE]
    info = {
        "pool_inputs": pool_in,
        "routing": used,
        "terms": [terms[k] for k in order],
        "batch_stats": [b.stats for b in blocks],
    }
    return head.loss, [grads[k] for k in order], info
