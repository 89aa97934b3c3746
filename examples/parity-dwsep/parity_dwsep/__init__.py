"""A depthwise-separable CNN for Fashion-MNIST, ported from JAX/Flax NNX (jax_impl.py) to PyTorch (torch_impl.py): a
model on one page (docs/your-workload.md). The harness trains, times and judges both against JAX's float64 run:

    PYTHONPATH=examples/parity-dwsep python -m parity.run --workload parity_dwsep --framework jax,torch --replicas 1
"""

from parity.api.light import Light, Size

WORKLOAD = Light(
    "dwsep",
    blocks=("conv", "dw1", "pw1", "dw2", "pw2", "pool", "logits"),
    weights={  # the shared order and layout (Flax's): conv (h, w, in, out), depthwise (h, w, 1, channels)
        "conv.kernel": (3, 3, 1, 16),
        "conv.bias": (16,),
        "dw1.kernel": (3, 3, 1, 16),
        "dw1.bias": (16,),
        "pw1.kernel": (1, 1, 16, 32),
        "pw1.bias": (32,),
        "dw2.kernel": (3, 3, 1, 32),
        "dw2.bias": (32,),
        "pw2.kernel": (1, 1, 32, 64),
        "pw2.bias": (64,),
        "dense.kernel": (64, 10),
        "dense.bias": (10,),
    },
    cpu=Size(256, steps=2, epochs=6),
    quick=Size(16, steps=2, epochs=2, train=256, test=64),
)
