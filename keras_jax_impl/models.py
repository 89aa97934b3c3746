"""What every trained model shares on Keras 3's JAX backend, written once for every model keras_models builds
(mirror image of jax_impl.models): gradients, inference, and which kernel a model's recurrent layers run and
whether the FLOP count can count it. Each model's adapter (keras_models.models.KerasTrained) calls these."""

from __future__ import annotations

from types import ModuleType

import jax
import keras
import numpy as np

from jax_impl.devices import lowered_flops, on_host, placement  # on_host: where KerasTrained.build builds, as JAX's
from jax_impl.ops import rows
from keras_jax_impl.catalog import variant as variant_record
from keras_models.models import KerasTrained, check_no_dropout, logits_copy, logits_loss, unfilled
from parity.api import Gradients, Prepared

if keras.backend.backend() != "jax":
    raise ImportError(f"keras_jax_impl needs Keras's JAX backend, got {keras.backend.backend()!r}")


# unfilled (imported above): how a model given its weights is built here (KerasTrained.build_with), its initialisers
# left out


def built_for(device: jax.Device):
    """Where a model that will run on `device` is built: on an accelerator the host's CPU (on_host: its initialisers
    compile in milliseconds there, for seconds each on a TPU), the arrays then placed on the device; else the
    device itself."""
    return jax.default_device(device) if jax.default_backend() == "cpu" else on_host()


def _values(variables) -> list[jax.Array]:
    return [v.value for v in variables]


def loss_and_grads(model, x: np.ndarray, y: np.ndarray, pools: tuple[str, ...] = ()) -> Gradients:
    """Training-mode loss and gradients of one batch, grads in Keras's trainable_weights order, and how
    each max-pooling layer (`pools`, by name) routed its gradient in this pass (a model without any: routing []).

    Batch statistics as in training, dropout off (build the model with dropout=False); the model itself is not
    changed (Keras's stateless_call: the moving statistics it would update are returned, and dropped). The loss
    from the logits, as the trainer's (keras_models.models.logits_loss).
    """
    check_no_dropout(model)
    trainable, frozen = _values(model.trainable_variables), _values(model.non_trainable_variables)
    x, y = jax.numpy.asarray(x, jax.numpy.float32), jax.numpy.asarray(y)
    to_logits, loss_of = unfilled(lambda: logits_copy(model)), logits_loss()  # its weights: the call's own

    def loss_fn(params, frozen, x, y):
        logits, _ = to_logits.stateless_call(params, frozen, x, training=True)
        return loss_of(y, logits)

    # one compiled program, as the trainer's step is (op by op, the first call compiled each op on its own, slowly)
    loss, grads = jax.jit(jax.value_and_grad(loss_fn))(trainable, frozen, x, y)
    if not pools:
        return Gradients(float(loss), [np.asarray(g) for g in grads], [])

    def routes(h):
        routing = []
        with keras.StatelessScope(state_mapping=[]):  # what model(x, training=True) runs, keeping the pooling inputs
            for layer in model.layers:
                if layer.name in pools:  # JAX's own max-pool gradient on these activations
                    out, vjp = jax.vjp(layer, h)
                    routing.append(vjp(jax.numpy.ones_like(out))[0])
                h = layer(h, training=True)
        return routing

    routing = [np.asarray(r) for r in jax.jit(routes)(x)]
    return Gradients(float(loss), [np.asarray(g) for g in grads], routing)


def prepare_inference(adapter: KerasTrained, model, images: np.ndarray, devices, variant: str = "predict") -> Prepared:
    """Softmax probabilities of `images` (inference mode) on devices[0], inputs placed beforehand: the model's
    stateless call, jitted, as Keras's own predict step runs it; for the LSTM, its kernel path too. Raises ValueError
    for a variant not of the adapter's INFER ('<workload>_infer')."""
    model = adapter.variant_model(model, variant_record(adapter.INFER, variant, 1).options)
    path = kernel_path(adapter.model_code, model, devices[0])
    x = jax.device_put(np.asarray(images, np.float32), devices[0])
    trainable, frozen = (
        [jax.device_put(v, devices[0]) for v in _values(vs)]
        for vs in (model.trainable_variables, model.non_trainable_variables)
    )
    f = jax.jit(lambda t, n, x: model.stateless_call(t, n, x, training=False)[0])
    return Prepared(
        lambda: f(trainable, frozen, x),
        lambda o: tuple(o.shape),
        rows,
        placement,
        lambda: (None, uncounted(path)) if uncounted(path) else lowered_flops(f, trainable, frozen, x),
        # the compiled program's text: Keras's layer scopes are JAX named scopes, which --profile maps ops back by
        lambda: f.lower(trainable, frozen, x).compile().as_text(),
        kernel_path=path,
        ahead=lambda: bool(f.lower(trainable, frozen, x).compile()),  # JAX keeps the program for the first call
    )


def kernel_path(code: ModuleType, model, device: jax.Device) -> str:
    """Which kernel the model's LSTM layers run on `device` (keras_models.lstm.kernel_path): "Keras's generic loop
    (lax.scan)" or 'unrolled'; on a GPU, Keras 3.15's JAX backend takes cuDNN's too (jax.experimental.rnn) where its
    conditions hold: 'cuDNN' (unverified here); None for a model without recurrent layers (the CNN). `code`: the
    model's Keras code (keras_models.<workload>)."""
    with jax.default_device(device):
        return code.kernel_path(model)


def uncounted(path: str | None) -> str | None:
    """Why XLA's cost analysis cannot count the FLOPs of a program whose LSTM layers run `path`, or None where it can
    (no LSTM, or unrolled): it counts a while loop's body (lax.scan's) once however many steps it runs."""
    if path in (None, "unrolled"):
        return None
    return f"XLA cost analysis: not counted (the LSTM's {path} is counted for one step, not each step)"
