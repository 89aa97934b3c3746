"""Profiling for Keras on JAX: JAX's profiler and its ops mapped back to the layers through the compiled program's
HLO (jax_impl.profile): Keras's layer name scopes are JAX named scopes on this backend, so the same layer names."""

from jax_impl.profile import trace, trace_ops  # noqa: F401 (re-exported: the same runtime and profiler)
