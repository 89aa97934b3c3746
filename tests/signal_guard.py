"""A signal that reaches its default handler during a test fails that test rather than killing pytest."""

import contextlib
import signal


class Unhandled(Exception):
    """The signal reached the default handler: the code under test does not handle it."""


@contextlib.contextmanager
def fails_unhandled(sig: int):
    """Inside: `sig` raises Unhandled unless the code under test installs its own handler."""

    def unhandled(signum, frame):
        raise Unhandled(f"{signal.Signals(signum).name} reached the default handler: the code does not handle it")

    previous = signal.signal(sig, unhandled)
    try:
        yield
    finally:
        signal.signal(sig, previous)
