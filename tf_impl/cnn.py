"""The notebook's 5-layer Fashion-MNIST CNN in Keras 3 on the TensorFlow backend: the model is keras_models.cnn's
(the code keras_jax_impl runs too). The model functions (tf_impl.models) and the trainer (tf_impl.train)
take it as they take every model."""

from keras_models.cnn import INFER, MODEL, TRAIN, WORKLOAD, build  # noqa: F401 (the shared model code: this adapter's)
from parity.api.cnn import STEPS_PER_DISPATCH as SPE
from parity.api.variants import MANY, ONE, Variant
from tf_impl.catalog import TrainOptions

# `rank`: several steps a dispatch (Keras's steps_per_execution; at 8 replicas the custom loop, which stalls less
# than fit), mixed precision, not '+xla' (slower in every Zen 4 and Zen 5 run recorded: docs/tuning.md, "Which rows a
# run times"). `multiprocess=False`: fit, which fails under MultiWorkerMirroredStrategy (tf_impl.catalog).
VARIANTS: tuple[Variant, ...] = (
    Variant("fit", TRAIN, ONE, options=TrainOptions()),
    Variant("fit+xla", TRAIN, ONE, tuned=True, options=TrainOptions(xla=True)),
    Variant("fit+spe", TRAIN, ONE, tuned=True, dispatch=True, rank=0, options=TrainOptions(steps_per_dispatch=SPE)),
    Variant("fit+bf16", TRAIN, ONE, "bfloat16", tuned=True, rank=0, float32="fit", options=TrainOptions(mixed=True)),
    Variant("strategy", TRAIN, MANY, rank=1, multiprocess=False, options=TrainOptions(distributed=True)),
    Variant("loop", TRAIN, MANY, tuned=True, options=TrainOptions("loop", True)),
    Variant(
        "strategy+spe",
        TRAIN,
        MANY,
        tuned=True,
        dispatch=True,
        multiprocess=False,
        options=TrainOptions(distributed=True, steps_per_dispatch=SPE),
    ),
    Variant("loop+spe", TRAIN, MANY, tuned=True, dispatch=True, rank=0, options=TrainOptions("loop", True, False, SPE)),
    Variant(
        "strategy+bf16",
        TRAIN,
        MANY,
        "bfloat16",
        tuned=True,
        rank=1,
        multiprocess=False,
        float32="strategy",
        options=TrainOptions(distributed=True, mixed=True),
    ),
    # bfloat16 over several devices on the float32 row's path: the custom loop, 10 steps a dispatch. Ranked first by
    # the mechanism measured in float32 (fit under MirroredStrategy stalls at each epoch's end, whatever the format:
    # docs/tuning.md, `loop`); its own speed is unmeasured, on no class with bfloat16 yet.
    Variant(
        "loop+spe+bf16",
        TRAIN,
        MANY,
        "bfloat16",
        tuned=True,
        dispatch=True,
        rank=0,
        float32="loop+spe",
        options=TrainOptions("loop", True, False, SPE, mixed=True),
    ),
    Variant("predict", INFER, ONE, rank=0),
)
