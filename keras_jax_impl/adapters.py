"""The adapters of Keras 3 on the JAX backend (parity.api.adapters): an operation's module as it is, a trained model's
bound to the Keras model code (keras_models.models.KerasTrained), to the one trainer (keras_jax_impl.train) and to
what needs JAX itself, written here once for every model keras_models builds: gradients and inference."""

from __future__ import annotations

from typing import Any

import jax
import keras
import numpy as np

from jax_impl.ops import rows
from keras_jax_impl import lstm as kj_lstm
from keras_jax_impl.catalog import variant as variant_record
from keras_jax_impl.devices import lowered_flops, placement
from keras_models.cnn import check_no_dropout, logits_copy, logits_loss
from keras_models.models import KerasTrained
from parity.api import Gradients, Prepared, adapters

if keras.backend.backend() != "jax":
    raise ImportError(f"keras_jax_impl needs Keras's JAX backend, got {keras.backend.backend()!r}")


def _values(variables) -> list[jax.Array]:
    return [v.value for v in variables]


def loss_and_grads(model, x: np.ndarray, y: np.ndarray) -> Gradients:
    """Training-mode loss and gradients of one batch, grads in Keras's trainable_weights order, and how
    each max-pooling layer routed its gradient in this pass (a model without any: routing []).

    Batch statistics as in training, dropout off (build the model with dropout=False); the model itself is not
    changed (Keras's stateless_call: the moving statistics it would update are returned, and dropped). The loss
    from the logits, as the trainer's (keras_models.cnn.logits_loss).
    """
    check_no_dropout(model)
    trainable, frozen = _values(model.trainable_variables), _values(model.non_trainable_variables)
    x, y = jax.numpy.asarray(x, jax.numpy.float32), jax.numpy.asarray(y)
    to_logits, loss_of = logits_copy(model), logits_loss()

    def loss_fn(params, frozen, x, y):
        logits, _ = to_logits.stateless_call(params, frozen, x, training=True)
        return loss_of(y, logits)

    # one compiled program, as the trainer's step is (op by op, the first call compiled each op: 9 s on the CNN)
    loss, grads = jax.jit(jax.value_and_grad(loss_fn))(trainable, frozen, x, y)
    if not any(isinstance(layer, keras.layers.MaxPooling2D) for layer in model.layers):
        return Gradients(float(loss), [np.asarray(g) for g in grads], [])

    def routes(h):
        routing = []
        with keras.StatelessScope(state_mapping=[]):  # what model(x, training=True) runs, keeping the pooling inputs
            for layer in model.layers:
                if isinstance(layer, keras.layers.MaxPooling2D):  # JAX's own max-pool gradient on these activations
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
    path = kj_lstm.kernel_path(adapter.model_code, model, devices[0])
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
        lambda: (None, kj_lstm.uncounted(path)) if kj_lstm.uncounted(path) else lowered_flops(f, trainable, frozen, x),
        # the compiled program's text: Keras's layer scopes are JAX named scopes, which --profile maps ops back by
        lambda: f.lower(trainable, frozen, x).compile().as_text(),
        kernel_path=path,
    )


def adapter(workload: str) -> Any:
    """This implementation's adapter for `workload`, its module of that name (parity.api.adapters), found by listing;
    a trained model's bound to the Keras model code, keras_jax_impl.train's trainer and this module's gradients and
    inference (keras_models.models.KerasTrained). Raises ValueError for a workload it has none for."""
    return adapters.bound(__package__, workload, lambda code: KerasTrained(code, "keras_jax_impl.train", __name__))
