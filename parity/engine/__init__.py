"""The engine: what a run is asked to do, its schedule of worker rounds, the worker processes and the one timing core."""
