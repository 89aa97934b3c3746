"""Signals for a command from its first line to its last: SIGTERM and SIGHUP (a closed terminal, a lost SSH
session) raised as Terminated and SIGINT as KeyboardInterrupt (whatever the command inherited: a background job of
a non-interactive shell starts with SIGINT ignored), so that every command unwinds, removes what it staged and
exits 143 or 130 with one line; and a window in which none is delivered, while a set of files is renamed into
place. SIGKILL, which nothing can catch, leaves what the command was writing (parity.output.files.KILLED
says what; the next write there removes its staging folder)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TERMINATING = (signal.SIGTERM, signal.SIGHUP)  # each raised as Terminated


class Terminated(BaseException):
    """SIGTERM (kill PID, a CI cancel, parity.launch stopping a run) or SIGHUP (the terminal closed): unwound like
    Ctrl-C, so that workers are stopped and temporary files removed on the way out. Its one argument is the
    signal's name."""

    @property
    def name(self) -> str:
        return self.args[0] if self.args else "SIGTERM"


def _terminate(signum, frame):
    raise Terminated(signal.Signals(signum).name)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGTERM and SIGHUP -> Terminated and SIGINT -> KeyboardInterrupt inside the block, the previous handlers
    restored after; outside the main thread (where Python delivers no signal) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _terminate) for s in TERMINATING}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held back inside the block (a few renames) and acted on, as the handlers before it
    would have, when it ends: a set of files is installed whole or not at all."""
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
    """`body()`'s exit status, run with the signals handled(): Ctrl-C is 130, SIGTERM and SIGHUP 143, each said in
    one line ending in `stopped` (what was left behind); an exception escaping `body` is a bug, exit 3 with one line
    naming it and where it was raised (1 and 2 keep their documented meanings)."""
    import sys
    import traceback

    from parity.common.safe import text

    with handled():
        try:
            return body()
        except KeyboardInterrupt:
            print(f"interrupted; {stopped}", file=sys.stderr)
            return 130
        except Terminated as e:
            print(f"terminated ({e.name}); {stopped}", file=sys.stderr)
            return 143
        except Exception as e:
            at = traceback.extract_tb(e.__traceback__)[-1]
            said = text(f"{type(e).__name__}: {e}", limit=300)
            where = f"{at.filename}:{at.lineno}"
            print(f"error: internal error in {command} ({said} at {where}); {stopped}", file=sys.stderr)
            return 3
