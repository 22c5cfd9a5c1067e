"""What a run says on stderr while it runs: plain lines, and how far its optimizer steps are.

On a terminal the steps are one line rewritten in place (``\\r``) every second; anywhere else
(CI logs, pipes) they are plain lines: the first step, then one line at least every
:data:`EVERY` seconds, whether a step closed or not, so a slow step never leaves the log silent.
Standard output is never written, so ``--json`` stays one object there.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from translator.rank.harness import PROGRESS

#: Seconds between plain progress lines off a terminal.
EVERY = 10.0
#: Seconds between redraws of the line on a terminal.
TICK = 1.0
#: The line rank 0 prints when an optimizer step closed (ranks share one output stream, so it
#: may arrive glued to another line).
STEP_LINE = re.compile(rf"{re.escape(PROGRESS)} rank 0 step (\d+)")


def duration(seconds: float) -> str:
    """``12 s``, ``1 min 48 s``, ``2 h 5 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def _seconds(value: float) -> str:
    """A step time to two significant figures or so: ``24 s``, ``2.4 s``, ``0.05 s``."""
    if value >= 10:
        return f"{value:.0f} s"
    return f"{value:.1f} s" if value >= 1 else f"{value:.2g} s"


class Progress:
    """A run's voice on stderr (or ``stream``): call it with a line to say; :meth:`steps` follows
    the optimizer steps of one run."""

    def __init__(
        self,
        stream: TextIO | None = None,
        every: float = EVERY,
        tick: float = TICK,
        quiet: bool = False,
    ):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every
        self.tick = tick
        self.quiet = quiet
        """Say nothing at all."""
        self._lock = threading.Lock()
        self._shown = False
        """Whether the in-place line is on the terminal now."""
        self._run: _Steps | None = None

    def __call__(self, text: str) -> None:
        """Say ``text`` as a line of its own (above the in-place line, on a terminal)."""
        with self._lock:
            self._erase()
            self._write(text + "\n")
            if self._run is not None:
                self._run.said = time.monotonic()
                self._draw()

    @contextlib.contextmanager
    def steps(self, total: int) -> Iterator[Callable[[str], None]]:
        """Follow a run of ``total`` optimizer steps: yields the ``on_line`` that reads the
        ranks' output; at the end, one line says how many steps ran in what time."""
        run = _Steps(total, time.monotonic())
        with self._lock:
            self._run = run
        stop = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(stop,), daemon=True)
        ticker.start()

        def on_line(line: str) -> None:
            for step in STEP_LINE.findall(line):
                with self._lock:
                    run.closed(int(step), time.monotonic())
                    if self.tty:
                        self._draw()
                    elif run.done == 1 or time.monotonic() - run.said >= self.every:
                        self._plain()

        try:
            yield on_line
        finally:
            stop.set()
            ticker.join()
            with self._lock:
                self._erase()
                self._run = None
                self._write(f"  {run.summary(time.monotonic())}\n")

    def _tick(self, stop: threading.Event) -> None:
        while not stop.wait(self.tick):
            with self._lock:
                if self._run is None:
                    return
                if self.tty:
                    self._draw()
                elif time.monotonic() - self._run.said >= self.every:
                    self._plain()

    def _plain(self) -> None:
        assert self._run is not None
        self._write(f"  {self._run.status(time.monotonic())}\n")
        self._run.said = time.monotonic()

    def _draw(self) -> None:
        if not self.tty or self._run is None:
            return
        width = max(shutil.get_terminal_size().columns - 1, 20)
        self._write("\r\033[K" + f"  {self._run.status(time.monotonic())}"[:width])
        self._shown = True

    def _erase(self) -> None:
        if self._shown:
            self._write("\r\033[K")
            self._shown = False

    def _write(self, text: str) -> None:
        if self.quiet:
            return
        self.stream.write(text)
        self.stream.flush()


class _Steps:
    """One run's steps: when it started and when rank 0 closed each step."""

    def __init__(self, total: int, start: float):
        self.total = total
        self.start = start
        self.said = start
        """When the last plain line was written."""
        self.times: list[float] = []
        """When each step closed."""

    @property
    def done(self) -> int:
        return len(self.times)

    def closed(self, step: int, now: float) -> None:
        while self.done < step:  # a line lost in the stream still counts its step
            self.times.append(now)

    def status(self, now: float) -> str:
        line = f"optimizer step {self.done}/{self.total}, {duration(now - self.start)}"
        if not self.times:
            return line + " (start-up and the first step)"
        if self.done >= 2:  # the first step's time holds the start-up: it is left out
            each = (self.times[-1] - self.times[0]) / (self.done - 1)
            line += f"; {_seconds(each)} per step"
            if self.done < self.total:
                line += f", about {duration((self.total - self.done) * each)} left"
        return line + (" (finishing)" if self.done >= self.total else "")

    def summary(self, now: float) -> str:
        return f"{self.done} of {self.total} optimizer steps in {duration(now - self.start)}"
