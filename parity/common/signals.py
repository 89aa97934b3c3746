"""Signals for a command from its first line to its last: SIGTERM raised as Terminated and SIGINT as
KeyboardInterrupt (whatever the command inherited: a background job of a non-interactive shell starts with SIGINT
ignored), so that every command unwinds, removes what it staged and exits 143 or 130 with one line; and a window
in which neither is delivered, while a set of files is renamed into place."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

STOPPING = (signal.SIGINT, signal.SIGTERM)


class Terminated(BaseException):
    """SIGTERM (kill PID, a CI cancel, parity.launch stopping a run): unwound like Ctrl-C, so that workers are
    stopped and temporary files removed on the way out."""


def _terminate(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGTERM -> Terminated and SIGINT -> KeyboardInterrupt inside the block, the previous handlers restored after;
    outside the main thread (where Python delivers no signal) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _terminate), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back inside the block (a few renames) and acted on, as the handlers before it would
    have, when it ends: a set of files is installed whole or not at all."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: came.append(signum)) for s in STOPPING}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if came:
            signal.raise_signal(came[0])  # now, to the handler the command had


def guarded(command: str, body: Callable[[], int], stopped: str) -> int:
    """`body()`'s exit status, run with the signals handled(): Ctrl-C is 130 and SIGTERM 143, each said in one line
    ending in `stopped` (what was left behind); an exception escaping `body` is a bug, exit 3 with one line naming
    it and where it was raised (1 and 2 keep their documented meanings)."""
    import sys
    import traceback

    from parity.common.safe import text

    with handled():
        try:
            return body()
        except KeyboardInterrupt:
            print(f"interrupted; {stopped}", file=sys.stderr)
            return 130
        except Terminated:
            print(f"terminated (SIGTERM); {stopped}", file=sys.stderr)
            return 143
        except Exception as e:
            at = traceback.extract_tb(e.__traceback__)[-1]
            said = text(f"{type(e).__name__}: {e}", limit=300)
            where = f"{at.filename}:{at.lineno}"
            print(f"error: internal error in {command} ({said} at {where}); {stopped}", file=sys.stderr)
            return 3
