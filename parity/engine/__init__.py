"""The engine: what a run is asked to do, its schedule of worker rounds, the worker processes, the one timing
core."""
