"""The command line: every flag of `python -m parity.run` with its help, and the types that bound them."""
