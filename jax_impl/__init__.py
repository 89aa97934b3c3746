"""JAX / Flax NNX implementations of the article's workloads (mirror image of `tf_impl`): the model functions take
any trained model, the CNN, the row LSTM or the ViT (jax_impl.models)."""

from jax_impl.catalog import SETTINGS, settings, table, variants
from jax_impl.devices import (
    block,
    describe_devices,
    device_kind,
    list_devices,
    memory_stats,
    placement,
    process_info,
    reset_memory_peak,
    set_precision,
    setup_devices,
    slowest,
)
from jax_impl.models import (
    adapter,
    count_params,
    forward_layers,
    get_weights,
    load_weights,
    loss_and_grads,
    mixed_precision,
    prepare_inference,
    save_weights,
    set_weights,
)
from jax_impl.profile import trace, trace_ops
from jax_impl.train import make_trainer
from parity.api import SURFACE

VARIANTS = table()  # every variant, as its adapters declare them (all importable by now)

__all__ = list(SURFACE)  # the surface is written once, as parity.api.FrameworkImpl
