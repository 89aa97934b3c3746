"""What the tests that write or read a results file start from: the env of a CPU run and one verified row of the
conv's, each test adding or changing what it is about."""

import numpy as np

from parity.record.schema import SCHEMA_VERSION

ENV = {
    "schema_version": SCHEMA_VERSION,
    "device": "cpu",
    "host_cpu": "test",
    "host_cores": 2,
    "precision": "default",
    "python": "3.12",
}
ROW = {"kind": "conv", "framework": "tf", "variant": "function", "device": "cpu", "device_kind": "cpu", "replicas": 1}
ROW |= {"precision": "default", "median_s": 1.0, "flops": 1e9, "reps": 5, "verified": True}


def timed_row(framework: str, variant: str, times) -> dict:
    """A verified float32 row of the conv's on the CPU whose timed calls took `times` seconds, its median, quartiles
    and minimum theirs, one call a round."""
    t = [float(x) for x in times]
    q1, med, q3 = (float(v) for v in np.percentile(t, [25, 50, 75]))
    return {
        **ROW,
        "framework": framework,
        "variant": variant,
        "dtype": "float32",
        "median_s": med,
        "q1_s": q1,
        "q3_s": q3,
        "iqr_s": q3 - q1,
        "min_s": min(t),
        "reps": len(t),
        "times_s": t,
        "rounds": list(range(len(t))),
        "invalid_reason": None,
    }
