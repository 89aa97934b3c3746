"""What tests/test_inputs.py checks of Keras on JAX's entry points, run in a process of its own (Keras's backend is
fixed once a process: the test process's Keras is TensorFlow's): every case of tests/inputs_cases.py, its outcome
(the error's type and message, or 'ok') to a JSON file. argv: a folder the cases may write in, the JSON file. Not a
test module: pytest does not collect it."""

import json
import sys
from pathlib import Path

sys.modules["tensorflow"] = None  # as the harness's worker does (parity.common.frameworks: keeps_out)
from inputs_cases import CASES, outcome  # noqa: E402

import keras_jax_impl as kj  # noqa: E402


def main(folder: str, out: str) -> None:
    devices = kj.setup_devices("cpu", 1)
    kj.set_precision("highest")
    found = {}
    for name, case in CASES.items():
        found[name] = outcome(lambda case=case: case.call(kj, devices, Path(folder)))
    Path(out).write_text(json.dumps(found))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
