"""Each place where PyTorch's default differs from Keras's and torch_impl sets Keras's (REFERENCE.md's table): with
the convention the checked figure is within its tolerance; with PyTorch's default put back (monkeypatched where the
model reads it, computed beside it where the convention is a line of code) it leaves it. Tiny batches."""

import dataclasses
import functools

import jax.numpy as jnp
import numpy as np
import optax
import pytest
import torch
import torch.nn.functional as F
from frameworks_setup import TORCH_DEVICES
from test_lstm_jax import UNITS, images, random_weights

import jax_impl
import torch_impl
from parity.api.cnn import CNN_ARCHITECTURE, CNN_WEIGHTS
from parity.common.float64 import conv2d, errors
from parity.common.tolerances import F32_UNIT_ROUNDOFF as U
from parity.common.tolerances import ROUNDING_LAMBDA, tolerance
from parity.workloads.cnn import checks
from parity.workloads.cnn import oracle as cnn_oracle
from parity.workloads.cnn.tolerances import cnn_grad_tolerance, cnn_loss_tolerance, cnn_tolerances
from parity.workloads.lstm import oracle as lstm_oracle
from parity.workloads.lstm.tolerances import LSTM_TOLERANCES, lstm_block_tolerances, lstm_bounds
from torch_impl import cnn, conv, lstm, models, train

BATCH = 2  # the CNN's
NAMES = [w.name for w in CNN_WEIGHTS]


def _set(target, name, value):
    """An undo: `target.name` replaced by `value` for the test."""
    return lambda mp: mp.setattr(target, name, value)


def _architecture(**changes):
    """An undo: the CNN built with other BatchNorm numbers (its build reads torch_impl.cnn.CNN_ARCHITECTURE)."""
    return _set(cnn, "CNN_ARCHITECTURE", dataclasses.replace(CNN_ARCHITECTURE, **changes))


def _poured(dims, back=False):
    """models.to_torch (back: models.to_keras), but an array of `dims` dimensions reshaped into the other side's
    shape (a conv kernel HWIO <-> OIHW, a dense one (in, out) <-> (out, in)) instead of transposed."""
    convert = models.to_keras if back else models.to_torch

    def poured(a):
        t = a.detach() if back else torch.tensor(np.asarray(a))
        if t.dim() != dims:
            return convert(a)
        out = t.reshape(convert(torch.zeros(t.shape) if back else np.zeros(t.shape, np.float32)).shape)
        return out.numpy() if back else out

    return poured


# ---- the CNN: BatchNorm, layouts, flattening, against its float64 oracle ----


@functools.cache
def _cnn_case():
    """Keras's initial weights (torch_impl's, seed 0), a batch, the float64 oracle's training-mode pass on it, and its
    inference pass with each BatchNorm's moving statistics set to the batch's own (the weights it ran)."""
    w = torch_impl.adapter("cnn").get_weights(torch_impl.adapter("cnn").build(0, dropout=False))
    x, y = images(BATCH, seed=2)
    f64 = cnn_oracle.cnn_loss_and_grads(w, x, y)
    stats = _moving(w, [(s["mean"], s["variance"]) for s in f64[2]["batch_stats"]])
    return w, x, y, f64, stats, cnn_oracle.cnn_forward(stats, x)


def _moving(w, stats):
    """`w` with bn1, bn2, ... moving (mean, variance) replaced by `stats`, as float32."""
    out = list(w)
    for k, s in enumerate(stats, 1):
        for field, a in zip(("mean", "variance"), s, strict=True):
            out[NAMES.index(f"bn{k}.moving_{field}")] = np.asarray(a, np.float32)
    return out


def _cnn(w):
    torch_impl.adapter("cnn").set_weights(m := torch_impl.adapter("cnn").build(0, dropout=False), w)
    return m


def _cnn_forward_figure():
    """Inference, every block against float64: the worst block's error over the CNN's forward tolerance."""
    _, x, _, _, w, ref = _cnn_case()
    got = torch_impl.adapter("cnn").forward_layers(_cnn(w), x)
    tol = cnn_tolerances("cpu", "highest")["forward"]
    return max(errors(got[b], ref[b])["max_rel_err"] for b in checks.BLOCKS), tol


def _cnn_grads_figure():
    """Training-mode loss and gradients judged by the harness's own check (checks.grads, each against float64 under
    torch's max-pool routing): the worse row's error over its tolerance."""
    w, x, y, *_ = _cnn_case()
    g = torch_impl.adapter("cnn").loss_and_grads(_cnn(w), x, y)
    saved = {"loss": g.loss} | {f"grad/{i:03d}": a for i, a in enumerate(g.grads)}
    saved |= {f"routing/{i}": a for i, a in enumerate(g.routing)}
    rows = checks.grads({"torch": saved}, w, x, y, cnn_grad_tolerance(BATCH), cnn_loss_tolerance(BATCH))
    return max(r["max_rel_err"] / r["tolerance"] for r in rows), 1.0


def _moving_figure():
    """One eager training step from zero moving statistics, which leaves Keras's (1 - momentum) times the batch's mean
    and biased variance: the worst array's error against that from float64, over the forward path's float32 bound
    (the batch statistics lie on it)."""
    w, x, y, f64, *_ = _cnn_case()
    zero = [(np.zeros_like(s["mean"]), np.zeros_like(s["variance"])) for s in f64[2]["batch_stats"]]
    t = torch_impl.adapter("cnn").make_trainer(_cnn(_moving(w, zero)), TORCH_DEVICES, "eager")
    t.steps(x[None], y[None])
    got, rate = (
        dict(zip(NAMES, torch_impl.adapter("cnn").get_weights(t.model()), strict=True)),
        1 - CNN_ARCHITECTURE.bn_momentum,
    )
    stats = [(f"bn{k}.moving_{f}", s[f]) for k, s in enumerate(f64[2]["batch_stats"], 1) for f in ("mean", "variance")]
    return max(errors(got[name], rate * ref)["max_rel_err"] for name, ref in stats), cnn_loss_tolerance(BATCH)


def _torchs_own_batchnorm(self, h, train):
    """nn.BatchNorm2d's own pass: its running_var takes the batch's unbiased variance (momentum still Keras's)."""
    return F.batch_norm(h, self.running_mean, self.running_var, self.weight, self.bias, train, self.momentum, self.eps)


def _conv_figure():
    """The conv op at stride 2, kernel 5, 8 pixels (TF pads (1, 2)) against float64, over the conv's tolerance."""
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 8, 8, 2)).astype(np.float32), rng.normal(size=(5, 5, 2, 3)).astype(np.float32)
    got = conv.conv_op(x, w, 2, "SAME").numpy()
    return errors(got, conv2d(x, w, 2, "SAME"))["max_rel_err"], tolerance("cpu", "highest")


# ---- the LSTM: gate order, layouts, one bias ----


def _lstm(w):
    torch_impl.adapter("lstm").set_weights(m := torch_impl.adapter("lstm").build(UNITS), w)
    return m


def _lstm_forward_figure():
    """Every block against float64: the worst block's error over its bound derived on these inputs."""
    w, (x, _) = random_weights(), images()
    got, ref = torch_impl.adapter("lstm").forward_layers(_lstm(w), x), lstm_oracle.lstm_forward(w, x)
    tols = lstm_block_tolerances(w, x, "cpu", "highest")
    return max(errors(got[k], ref[k])["max_rel_err"] / tols[k] for k in ref), 1.0


def _onnxs(a):
    """torch_impl.models.to_torch, but an LSTM array's 4 column blocks read as ONNX's gate order i, o, f, c
    (torch's and Keras's: i, f, c, o)."""
    a = np.asarray(a)
    if a.shape[-1] == 4 * UNITS:
        i, o, f, c = np.split(a, 4, axis=-1)
        a = np.concatenate([i, f, c, o], axis=-1)
    return models.to_torch(a)


def _one_bias_figure():
    """One eager training step, then the trainer's own evaluation of the batch against float64 on the weights it
    exports (Keras's one bias a layer): the loss's error over its float32 bound."""
    w, (x, y) = random_weights(), images()
    t = torch_impl.adapter("lstm").make_trainer(_lstm(w), TORCH_DEVICES, "eager")
    t.steps(x[None], y[None])
    trained = torch_impl.adapter("lstm").get_weights(t.model())
    loss = lstm_oracle.lstm_loss_and_grads(trained, x, y)[0]
    return abs(t.evaluate(x, y)["loss"] - loss) / loss, lstm_bounds(trained, x, y, "cpu", "highest")["loss"]


def _second_bias(trained: bool, initialised: bool):
    """torch_impl.lstm._init_lstm, but torch's second bias (bias_hh) trained, or at torch's initial values."""
    keras = lstm._init_lstm

    def init(layer, forget_bias, g):
        layer = keras(layer, forget_bias, g)
        layer.bias_hh_l0.requires_grad_(trained)
        if initialised:
            bound = layer.hidden_size**-0.5  # torch's: every LSTM parameter uniform in +-1/sqrt(U)
            torch.nn.init.uniform_(layer.bias_hh_l0, -bound, bound, generator=g)
        return layer

    return init


# ---- each convention: its figure within its tolerance, beyond it with PyTorch's default put back ----

_SYMMETRIC = _set(conv, "same_padding", lambda size, kernel, stride: (kernel // 2, kernel // 2))  # torch's usual
CONVENTIONS = {  # what torch_impl sets: (figure() -> (error, tolerance), undo(monkeypatch) putting PyTorch's back)
    "cnn forward, bn epsilon 1e-3": (_cnn_forward_figure, _architecture(bn_epsilon=1e-5)),
    "cnn forward, flatten (h, w, c)": (_cnn_forward_figure, _set(cnn, "_flat", lambda h: h.flatten(1))),
    "cnn forward, conv HWIO to OIHW": (_cnn_forward_figure, _set(cnn, "to_torch", _poured(4))),
    "cnn forward, dense (in, out) to (out, in)": (_cnn_forward_figure, _set(cnn, "to_torch", _poured(2))),
    "cnn gradients, bn epsilon 1e-3": (_cnn_grads_figure, _architecture(bn_epsilon=1e-5)),
    "cnn gradients, conv OIHW to HWIO": (_cnn_grads_figure, _set(cnn, "to_keras", _poured(4, back=True))),
    "cnn gradients, dense (out, in) to (in, out)": (_cnn_grads_figure, _set(cnn, "to_keras", _poured(2, back=True))),
    "bn moving, momentum 0.99 (torch 0.1)": (_moving_figure, _architecture(bn_momentum=0.9)),
    "bn moving, momentum 0.99 (as torch's)": (_moving_figure, _architecture(bn_momentum=0.01)),
    "bn moving, biased variance": (_moving_figure, _set(cnn.BatchNorm, "normalise", _torchs_own_batchnorm)),
    "conv, TF's SAME padding": (_conv_figure, _SYMMETRIC),
    "lstm forward, gates i f c o (onnx's i o f c)": (_lstm_forward_figure, _set(lstm, "to_torch", _onnxs)),
    "lstm forward, kernels (in, 4U) to (4U, in)": (_lstm_forward_figure, _set(lstm, "to_torch", _poured(2))),
    "lstm one bias, bias_hh not trained": (_one_bias_figure, _set(lstm, "_init_lstm", _second_bias(True, False))),
    "lstm one bias, bias_hh zero": (_one_bias_figure, _set(lstm, "_init_lstm", _second_bias(False, True))),
}


@pytest.mark.parametrize("figure, undo", CONVENTIONS.values(), ids=CONVENTIONS)
def test_each_convention_keeps_its_figure_within_tolerance_where_pytorchs_default_does_not(figure, undo, monkeypatch):
    err, tol = figure()
    assert err <= tol, ("off with the convention", err, tol)
    with monkeypatch.context() as mp:
        undo(mp)
        undone, _ = figure()
    assert undone > tol, ("within with PyTorch's default", undone, tol)


# ---- initialisers ----


def _off_kerass_initialisers(workload: str, *sizes: int) -> list[str]:
    """The weights (Keras's names) of a new model of `workload` at `sizes` not drawn as Keras draws them: a kernel
    glorot_uniform within its limit
    L = sqrt(6 / (fan_in + fan_out)) and reaching q L, q = 1e-9^(1/n) (the largest of n uniform draws stays below
    q L with probability 1e-9); a recurrent kernel with orthonormal rows; a bias zero but the LSTM forget gate's 1."""
    off, adapter = [], torch_impl.adapter(workload)
    model = adapter.build(*sizes)
    for w, a in zip(model.arch.weights, adapter.get_weights(model), strict=True):
        if w.field == "kernel":
            fans = np.prod(a.shape[:-2], dtype=int) * sum(a.shape[-2:])
            limit, peak = np.sqrt(6 / fans), np.abs(a).max()
            ok = (1e-9 ** (1 / a.size)) * limit <= peak <= limit
        elif w.field == "recurrent_kernel":
            ok = np.allclose(a @ a.T, np.eye(len(a)), atol=1e-5)
        elif w.field == "bias":
            expected = np.zeros_like(a)
            if w.layer.startswith("lstm"):
                u = len(a) // 4
                expected[u : 2 * u] = 1.0  # gates i, f, c, o: unit_forget_bias
            ok = np.array_equal(a, expected)
        else:  # BatchNorm's: Keras's and torch's alike (gamma 1, beta 0, mean 0, variance 1)
            ok = True
        off += [] if ok else [w.name]
    return off


def test_weights_start_as_kerass_initialisers_draw_them(monkeypatch):
    wide = 64  # an LSTM wide enough that torch's range, 1/sqrt(U), and glorot's differ beyond q
    assert _off_kerass_initialisers("cnn", 0) == [] == _off_kerass_initialisers("lstm", wide)
    monkeypatch.setattr(cnn, "_glorot", lambda layer, g: layer)  # torch's own initialisers, its own second bias
    monkeypatch.setattr(lstm, "_init_lstm", lambda layer, forget_bias, g: layer)
    cnn_layers = [w.name for w in CNN_WEIGHTS if w.field in ("kernel", "bias")]
    assert _off_kerass_initialisers("cnn", 0) == cnn_layers
    lstm_layers = [f"lstm{k}.{f}" for k in (1, 2) for f in ("kernel", "recurrent_kernel", "bias")]
    assert _off_kerass_initialisers("lstm", wide) == lstm_layers


# ---- Adam and the loss: written out, so computed beside PyTorch's own ----

STEPS, LR, B1, B2 = 10, 1e-3, 0.9, 0.999


def _adam_case():
    """Parameters and 10 steps' gradients whose sizes run from far below Adam's epsilon to a typical gradient's (a
    weight whose gradient is near zero: a dead unit's, a border pixel's); each element's sign kept, so nothing
    cancels."""
    rng = np.random.default_rng(0)
    size, sign = 10.0 ** rng.uniform(-9, -3, 512), rng.choice([-1.0, 1.0], 512)
    grads = [(sign * size * rng.uniform(0.5, 1.5, 512)).astype(np.float32) for _ in range(STEPS)]
    return rng.normal(0, 0.05, 512).astype(np.float32), grads


def _keras_adam_float64(p0, grads, eps=1e-7):
    """Keras 3's Adam in float64, and each element's float32 bound: per step, 1 - b^t in float32 cancels (b^t's
    rounding and b's own, u b^t + t u / 2, over 1 - b^t; halved by the square root for b2), and m, v, the square
    root, the sum with epsilon, the division and the products round once each (8 u), relative to the step; the
    parameter's own sum rounds by u of it."""
    p, m, v, bound = p0.astype(np.float64), 0.0, 0.0, 0.0
    for t, g in enumerate(grads, 1):
        m, v = m + (g - m) * (1 - B1), v + (g * g - v) * (1 - B2)
        step = LR * np.sqrt(1 - B2**t) / (1 - B1**t) * m / (np.sqrt(v) + eps)
        p = p - step
        rel = (B2**t + t / 2) / (2 * (1 - B2**t)) + (B1**t + t / 2) / (1 - B1**t) + 8
        bound = bound + U * (rel * np.abs(step) + np.abs(p))
    return p, bound


def _torch_impls_adam(p0, grads, eps=1e-7):
    state = train.adam_state(params := [torch.tensor(p0)])
    for g in grads:
        train.keras_adam(params, [torch.tensor(g)], state, LR, eps)
    return params[0].numpy()


def _jax_impls_adam(p0, grads):
    tx, p = jax_impl.train.keras_adam(LR, 1e-7), jnp.asarray(p0)
    state = tx.init(p)
    for g in grads:
        updates, state = tx.update(jnp.asarray(g), state, p)
        p = optax.apply_updates(p, updates)
    return np.asarray(p)


def _torch_optim_adam(p0, grads, eps):
    opt = torch.optim.Adam([p := torch.tensor(p0, requires_grad=True)], lr=LR, betas=(B1, B2), eps=eps)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    return p.detach().numpy()


def test_adam_is_kerass_form_where_torch_optims_leaves_its_bound():
    """torch_impl's Keras Adam and jax_impl's meet float64 Keras within float32's bound, element by element; torch's
    Adam (epsilon after the bias correction, 1e-8), either change alone, leaves it, and PyTorch's own moves the
    parameters beyond the trajectory check's tolerance."""
    p0, grads = _adam_case()
    ref, bound = _keras_adam_float64(p0, grads)

    def figure(p):
        return float(np.max(np.abs(p - ref) / bound))

    assert figure(_torch_impls_adam(p0, grads)) <= 1 and figure(_jax_impls_adam(p0, grads)) <= 1
    torchs = _torch_optim_adam(p0, grads, 1e-8)
    for undone in (torchs, _torch_optim_adam(p0, grads, 1e-7), _torch_impls_adam(p0, grads, 1e-8)):
        assert figure(undone) > 1
    assert np.linalg.norm(torchs - ref) / np.linalg.norm(ref) > LSTM_TOLERANCES["trajectory_params"]


def test_the_loss_is_the_log_sum_exp_of_float32_logits():
    """torch_impl's loss meets float64 within float32's bound on the loss of given logits; Keras's own form (softmax
    probabilities clipped to [1e-7, 1 - 1e-7], then their log) and the loss in the compute dtype (bfloat16, as
    autocast's model would give without its float32 logits) leave it."""
    rng = np.random.default_rng(0)
    logits, y = rng.normal(0, 6, (64, 10)).astype(np.float32), rng.integers(0, 10, 64)  # some p(y) below 1e-7
    z = logits.astype(np.float64)
    lse = z.max(-1) + np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1))
    per = lse - z[np.arange(len(y)), y]
    # the loss's own roundings (parity.workloads.lstm.tolerances.Errors: 2 ULPS + sqrt(classes) + 2 |lse| + the
    # sample's loss, in u), samples independent, and the mean's
    own = U * (2 * 4 + np.sqrt(10) + 2 * np.abs(lse) + per)
    tol = ROUNDING_LAMBDA * (np.sqrt(np.sum(own**2)) / len(y) + U * np.sqrt(len(y)) * per.mean()) / per.mean()
    lt, yt = torch.tensor(logits), torch.tensor(y)
    clipped = -torch.log(torch.softmax(lt, -1).clamp(1e-7, 1 - 1e-7))[torch.arange(len(y)), yt].mean()
    forms = {
        "torch_impl": models.cross_entropy(lt, yt),
        "keras's clipped probabilities": clipped,
        "bfloat16": F.cross_entropy(lt.bfloat16(), yt),
    }
    err = {k: abs(float(v) - per.mean()) / per.mean() for k, v in forms.items()}
    assert err["torch_impl"] <= tol, (err, tol)
    assert all(e > tol for k, e in err.items() if k != "torch_impl"), (err, tol)
