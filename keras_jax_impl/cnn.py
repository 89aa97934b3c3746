"""The notebook's 5-layer Fashion-MNIST CNN in Keras 3 on the JAX backend: the model is keras_models.cnn's
(the code tf_impl runs too). The model functions (keras_jax_impl.models) and the trainer (keras_jax_impl.train)
take it as they take every model."""

from keras_jax_impl.catalog import TrainOptions, declare
from keras_models.cnn import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
from parity.api.cnn import STEPS_PER_DISPATCH as SPE
from parity.api.variants import MANY, ONE, Variant


def _variants(name: str, span: str, distributed: bool) -> tuple[Variant, ...]:
    """fit (or DataParallel's), with several steps an execution (the best-known), in bfloat16."""
    o = TrainOptions
    return (
        declare(name, TRAIN, span, rank=1, options=o(distributed)),
        declare(f"{name}+spe", TRAIN, span, tuned=True, dispatch=True, rank=0, options=o(distributed, SPE)),
        declare(
            f"{name}+bf16",
            TRAIN,
            span,
            "bfloat16",
            tuned=True,
            rank=0,
            float32=name,
            options=o(distributed, mixed=True),
        ),
    )


VARIANTS: tuple[Variant, ...] = (
    *_variants("fit", ONE, False),
    *_variants("data_parallel", MANY, True),
    declare("predict", INFER, ONE, rank=0),
)
