"""TensorFlow / Keras implementations of the article's workloads (mirror image of `jax_impl`)."""

import os

from parity.api import SURFACE

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: its C++ log noise

from tf_impl.cnn import (  # noqa: E402
    build_cnn,
    cnn_variants,
    count_params,
    forward_layers,
    get_weights,
    infer_variants,
    load_weights,
    loss_and_grads,
    mixed_precision,
    prepare_inference,
    save_weights,
    set_weights,
)
from tf_impl.cnn_train import make_trainer  # noqa: E402
from tf_impl.conv import conv_op, conv_variants, prepare_conv
from tf_impl.devices import (
    BEST_CONFIGS,
    BEST_VARIANTS,
    BFLOAT16_VARIANTS,
    DISPATCH_VARIANTS,
    TUNED_CONFIG_FORMATS,
    TUNED_VARIANTS,
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
    tuned_configs,
)
from tf_impl.matmul import matmul_variants, prepare_matmul  # noqa: E402
from tf_impl.profile import trace, trace_ops  # noqa: E402

__all__ = list(SURFACE)  # the surface is written once, as parity.api.FrameworkImpl
