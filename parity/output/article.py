"""The 2018 article's own figures: a labelled reference set that report prints beside measured rows."""

# The 2018 article's own figures: a labelled reference set, never mixed with measured rows. Times
# are per conv call, or 5 epochs of the notebook's schedule for cnn_train (500 steps at batch 1024).
ARTICLE_ROWS = (
    {"kind": "conv", "device": "cpu", "device_kind": "Colab CPU (2018)", "time_s": 2.44, "invalid_reason": None},
    {"kind": "conv", "device": "gpu", "device_kind": "Tesla K80", "time_s": 0.280, "invalid_reason": None},
    {
        "kind": "conv",
        "device": "tpu",
        "device_kind": "TPU v2-8, unchanged code",
        "time_s": 2.47,
        "invalid_reason": "no TPU code path: it ran on the host CPU",
    },
    {
        "kind": "conv",
        "device": "tpu",
        "device_kind": "TPU v2-8, batch_parallel",
        "time_s": 1.22e-3,
        "invalid_reason": "measured nothing: conv_op returned no output, so the conv was pruned (80.5 GFLOP in "
        "1.22 ms would be 66 TFLOP/s)",
    },
    {
        "kind": "cnn_train",
        "device": "tpu",
        "device_kind": "TPU v2-8",
        "time_s": 40.0,
        "invalid_reason": None,
        "approx": "about",
    },
    {
        "kind": "cnn_train",
        "device": "gpu",
        "device_kind": "Tesla K80",
        "time_s": 120.0,
        "invalid_reason": None,
        "approx": "over",
    },
)
