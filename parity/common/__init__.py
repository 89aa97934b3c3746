"""What every part of the harness and every workload shares: the frameworks table, the float64 reference arithmetic,
the tolerances derived from it, the CPU's facts."""
