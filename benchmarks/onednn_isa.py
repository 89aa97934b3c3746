"""What TensorFlow's AVX2-capped oneDNN kernels cost on an AVX-512 CPU, side by side in one harness run.

    python benchmarks/onednn_isa.py --workload conv --replicas 1 --out results/isa
    python benchmarks/onednn_isa.py --workload cnn --replicas 1 --epochs 3 --out results/isa-cnn

A second TensorFlow worker runs with ONEDNN_MAX_CPU_ISA=AVX2 (its rows are named '...+avx2'),
interleaved with the out-of-the-box worker, as the harness runs JAX's YNNPACK setting. Every other
argument goes to parity.run unchanged. On an AVX2 machine both workers run the same kernels.
"""

from __future__ import annotations

import argparse
import sys

from parity import run


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="every other argument: python -m parity.run --help",
    )
    _, rest = p.parse_known_args()
    # oneDNN capped at AVX2 has no bfloat16 convolution: the harness leaves the capped worker's bf16 rows out
    return run.main(
        ["--device", "cpu", "--framework", "tf", "--configs", "all", *rest],
        extra_settings={"tf": {"avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}},
    )


if __name__ == "__main__":
    sys.exit(main())
