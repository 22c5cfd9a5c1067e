"""What a framework prints while batchspec runs its code (``validate --with-framework``):
import banners, progress bars (``Writing model shards``), torch's and torchao's warnings. It is
kept off batchspec's output, caught both in Python (``print``, ``warnings``, a logging handler
made now) and at the file descriptors (a C extension, a logging handler that holds the real
stderr); with ``--debug`` it goes to stderr, where it can be read."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TextIO

#: Where the chatter goes: opened once and never closed, for a logging handler or a progress
#: bar made while it was stdout or stderr may write to it again later.
_sink: TextIO | None = None


def _devnull() -> TextIO:
    global _sink
    if _sink is None:
        _sink = open(os.devnull, "w")  # never closed: see _sink
    return _sink


@contextlib.contextmanager
def framework_output(shown: bool) -> Iterator[None]:
    """Run the block with the frameworks' printing silenced, or, when ``shown``, sent to
    stderr (stdout belongs to ``--json`` alone)."""
    streams: list[contextlib.AbstractContextManager]
    fds: tuple[int, ...]
    if shown:
        streams = [contextlib.redirect_stdout(sys.stderr)]
        target, fds = 2, (1,)
    else:
        sink = _devnull()
        streams = [contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink)]
        target, fds = sink.fileno(), (1, 2)
    _flush()
    saved = _redirect_descriptors(target, fds)
    try:
        with contextlib.ExitStack() as stack:
            for stream in streams:
                stack.enter_context(stream)
            yield
    finally:
        _flush()
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)


def _redirect_descriptors(target: int, fds: tuple[int, ...]) -> list[tuple[int, int]]:
    """Point the file descriptors ``fds`` at ``target``; ``(descriptor, its copy)`` for each
    one there was to point (a process may run without them)."""
    saved = []
    for fd in fds:
        try:
            copy = os.dup(fd)
        except OSError:
            continue
        os.dup2(target, fd)
        saved.append((fd, copy))
    return saved


def _flush() -> None:
    """Flush Python's streams, then C's, so that nothing written before the switch lands on
    the other side of it."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)
