"""Device set-up for JAX: simulated CPU devices, presence checks, precision."""

from __future__ import annotations

import os

import jax

from parity.api import DeviceUnavailable

FRAMEWORK = "jax"
# Variants that are not the framework out of the box: bfloat16 inputs (the harness runs '+bf16' only
# where the device computes in bfloat16 natively). JAX's other tuned settings are process-wide
# XLA_FLAGS, which parity.harness.TUNED gives a worker of their own.
TUNED_VARIANTS: tuple[str, ...] = ("jit+bf16",)


def setup_devices(device: str, replicas: int) -> list[jax.Device]:
    """Make `replicas` devices of kind `device` available and return them (0: all of them).

    On the CPU, N > 1 replicas are simulated devices (`jax_num_cpu_devices`), which must be set
    before JAX's backend starts; call this first thing in a process.

    Raises:
        DeviceUnavailable: the device kind is absent or has fewer than `replicas` devices.
    """
    if device == "cpu":
        flag = "--xla_cpu_collective_call_terminate_timeout_seconds"
        if flag not in os.environ.get("XLA_FLAGS", ""):
            # N simulated devices share 2 cores: one can reach an all-reduce long after the others,
            # and XLA aborts the process after 40 s of waiting by default.
            os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}=1200".strip()
        try:
            jax.config.update("jax_num_cpu_devices", max(replicas, 1))
        except RuntimeError:
            pass  # backend already up (e.g. a test session configured 8): check the count below
    try:
        devs = jax.devices(device)
    except RuntimeError:
        raise DeviceUnavailable(f"--device {device} asked for, but JAX found only: {describe_devices()}") from None
    replicas = replicas or len(devs)
    if len(devs) < replicas:
        raise DeviceUnavailable(
            f"--replicas {replicas} asked for on {device}, but JAX found {len(devs)}: {describe_devices()}"
        )
    return devs[:replicas]


def describe_devices() -> str:
    """What JAX sees, e.g. 'cpu x8 (TFRT_CPU_0 ...)'."""
    devs = jax.devices()
    kinds = sorted({d.device_kind for d in devs})
    return f"{devs[0].platform} x{len(devs)} ({', '.join(kinds)})"


def list_devices() -> list[str]:
    """Every device JAX sees, one description each."""
    return [f"{d.platform}:{d.id} {d.device_kind}" for d in jax.devices()]


def device_kind() -> str:
    """The device kind string of the first device (e.g. 'NVIDIA H200', 'TPU v2', 'cpu')."""
    return jax.devices()[0].device_kind


def set_precision(precision: str) -> None:
    """Process default for float32 matmul/conv: 'default' (backend's choice) or 'highest' (fp32)."""
    jax.config.update("jax_default_matmul_precision", None if precision == "default" else precision)


def lowered_flops(fn, *args, devices: int = 1) -> tuple[float | None, str]:
    """FLOPs of one call of jitted/pmapped `fn` by XLA's cost analysis (per device, times `devices`)."""
    try:
        ca = fn.lower(*args).cost_analysis()
    except Exception as e:  # best effort: the analytic count stays the primary figure
        return None, f"XLA cost analysis failed ({type(e).__name__})"
    ca = ca[0] if isinstance(ca, (list, tuple)) and ca else ca
    flops = ca.get("flops") if isinstance(ca, dict) else None
    return (flops * devices if flops else None), "XLA cost analysis"


def block(out) -> None:
    """Wait until every leaf of `out` is computed."""
    jax.block_until_ready(out)


def placement(out) -> list[str]:
    """Devices holding the leaves of `out`, as 'platform:id'."""
    devs = {d for leaf in jax.tree.leaves(out) for d in leaf.devices()}
    return sorted(f"{d.platform}:{d.id}" for d in devs)
