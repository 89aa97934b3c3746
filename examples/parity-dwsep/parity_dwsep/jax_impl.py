"""The depthwise-separable CNN in Flax NNX: every block by its name, images NHWC."""

import jax
from flax import nnx


class Model(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        def conv(c_in, c_out, k, stride=1, groups=1):
            return nnx.Conv(c_in, c_out, (k, k), stride, padding="SAME", feature_group_count=groups, rngs=rngs)

        self.conv = conv(1, 16, 3)
        self.dw1 = conv(16, 16, 3, 2, groups=16)
        self.pw1 = conv(16, 32, 1)
        self.dw2 = conv(32, 32, 3, 2, groups=32)
        self.pw2 = conv(32, 64, 1)
        self.dense = nnx.Linear(64, 10, rngs=rngs)

    def __call__(self, x):
        out = {"conv": jax.nn.relu(self.conv(x / 255.0))}
        out["dw1"] = self.dw1(out["conv"])
        out["pw1"] = jax.nn.relu(self.pw1(out["dw1"]))
        out["dw2"] = self.dw2(out["pw1"])
        out["pw2"] = jax.nn.relu(self.pw2(out["dw2"]))
        out["pool"] = out["pw2"].mean((1, 2))
        out["logits"] = self.dense(out["pool"])
        return out
