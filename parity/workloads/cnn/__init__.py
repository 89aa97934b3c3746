"""The CNN workload's own code: its parent side (suite: data, shared initial weights, parity rounds), its checks,
its data (Fashion-MNIST, a synthetic stand-in, batch order), its worker-side cases and its float64 oracle. Its
spec is declared in parity.workloads with the others, its tolerances in parity.common.tolerances."""
