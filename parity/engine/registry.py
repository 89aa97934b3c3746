"""The one place that names each workload's code: its parent side (a parity.workloads.suite.Suite), the
timed case of each row kind (workloads.RowKind.case), and the untimed calls a parent side sends a worker by name."""

from __future__ import annotations

from parity.workloads import ops as cases
from parity.workloads.cnn import cases as cnn_cases
from parity.workloads.cnn import suite as cnn_suite
from parity.workloads.suite import Suite

# Workload name -> its parent side; workloads without one are operations.
SUITES: dict[str, Suite] = {"cnn": cnn_suite}
CASES = {"op": cases.op_case, "cnn_train": cnn_cases.cnn_train_case, "cnn_infer": cnn_cases.cnn_infer_case}
WORKER_CALLS = {
    f.__name__: f
    for f in (cnn_cases.cnn_warm, cnn_cases.cnn_init_weights, cnn_cases.cnn_parity, cases.bf16_matmul_peak)
}
