"""What several benchmark scripts share (not a script: benchmarks/*.py are the scripts)."""
