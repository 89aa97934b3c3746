"""What TensorFlow's AVX2-capped oneDNN kernels cost on an AVX-512 CPU, side by side in one harness run.

    python benchmarks/onednn_isa.py --workload conv --replicas 1 --out results/isa
    python benchmarks/onednn_isa.py --workload cnn --replicas 1 --epochs 3 --out results/isa-cnn

A second TensorFlow worker runs with ONEDNN_MAX_CPU_ISA=AVX2 (its rows are named '...+avx2'),
interleaved with the out-of-the-box worker, as the harness runs JAX's YNNPACK setting. Every other
argument goes to parity.run unchanged. On an AVX2 machine both workers run the same kernels.
"""

from __future__ import annotations

import sys

from parity import harness, roofline, run


def main() -> int:
    harness.TUNED[("tf", "cpu")] = {"avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}
    # oneDNN capped at AVX2 has no bfloat16 convolution (it refuses to create one): float32 rows only
    roofline.native_bf16 = lambda device, kind: False
    return run.main(["--device", "cpu", "--framework", "tf", "--configs", "all", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
