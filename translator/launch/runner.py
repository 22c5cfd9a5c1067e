"""Run a command in its own process group and make sure nothing of it is left behind.

``--timeout`` and Ctrl-C end the whole group: SIGTERM, then SIGKILL after a grace period. Each
line of the ranks' output goes to ``on_line`` (:meth:`translator.launch.progress.Progress.steps`
reads the optimizer steps of rank 0 from it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

#: Seconds between SIGTERM and SIGKILL.
GRACE_SECONDS = 5.0


@dataclass
class Launched:
    returncode: int | None
    """The command's exit status (None when it was stopped)."""
    stopped: str | None
    """``timeout`` or ``interrupted`` when batchspec ended it, else None."""
    log_tail: list[str]
    """The last lines it printed."""
    seconds: float
    """Wall time."""


def run(
    argv: list[str],
    env: dict,
    timeout: float | None,
    on_line: Callable[[str], None] = lambda line: None,
) -> Launched:
    """Run ``argv`` (a list, no shell) in a new session; stop its group on timeout or Ctrl-C."""
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    tail: deque[str] = deque(maxlen=40)

    def pump():
        assert proc.stdout is not None  # stdout=PIPE
        for line in proc.stdout:
            tail.append(line.rstrip("\n"))
            on_line(line.rstrip("\n"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    stopped = None
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stopped = "timeout"
        stop_group(proc)
    except KeyboardInterrupt:
        stopped = "interrupted"
        stop_group(proc)
    if group_alive(proc.pid):  # a rank that outlived torchrun: leave nothing behind
        _kill_stragglers(proc.pid)
    reader.join(timeout=2)
    return Launched(
        None if stopped else proc.returncode, stopped, list(tail), time.monotonic() - start
    )


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group, then SIGKILL whatever is still there."""
    for sig, wait in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, GRACE_SECONDS)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        if not group_alive(proc.pid):
            break
    _kill_stragglers(proc.pid)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _kill_stragglers(pgid: int) -> None:
    """Children that outlive their parent keep the group id; make sure they are gone."""
    deadline = time.monotonic() + GRACE_SECONDS
    while group_alive(pgid) and time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.1)
