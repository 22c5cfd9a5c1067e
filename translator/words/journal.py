"""The journal of a multi-file write, so that a killed write leaves every file all old or all new.

:func:`~translator.words.files.write_files` writes each new file beside its original first (a
fsynced temporary file). Before it renames the first one into place it writes this journal, the
same in every folder the write touches (``.batchspec-journal.json``), and holds an exclusive
lock on it for as long as it renames; once every file is in place and the old ones' kept-aside
names are gone, it removes the journal. A journal left unlocked was left by a killed run: the
next run that reads or writes in its folder (:func:`recover`) rolls it forward when every new
file is still there to move (or already moved), else back to every old file, and removes it.
SIGINT and SIGTERM wait while the renames run (:func:`signals_held`)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from translator.words.errors import InputError

#: The journal's name in each folder a multi-file write touches.
JOURNAL = ".batchspec-journal.json"
#: The signals that wait while files are renamed into place.
HELD = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class Entry:
    """One file of the write, as the journal records it."""

    target: str
    """The file replaced or created (a symlink's target when the write went through one)."""
    tmp: str
    """The temporary file holding the new bytes, until it is renamed to ``target``."""
    kept: str | None
    """The old file's second name, until the write is done; None for a file created."""
    digest: str
    """The SHA-256 of the new bytes: a target that has them was already renamed."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Journal:
    """The journal of one write, held (locked) in each of its folders until :meth:`close`."""

    def __init__(self, entries: Sequence[Entry]):
        self.entries = list(entries)
        folders = dict.fromkeys(str(Path(e.target).parent) for e in self.entries)
        self.paths = [Path(f) / JOURNAL for f in folders]
        self._fds: list[int] = []

    def open(self) -> None:
        """Write and lock the journal in every folder; refuse a folder another run writes in."""
        text = json.dumps(
            {
                "folders": [str(p.parent) for p in self.paths],
                "entries": list(map(asdict, self.entries)),
            }
        ).encode()
        try:
            for path in self.paths:
                fd = _create(path)
                self._fds.append(fd)
                os.write(fd, text)
                os.fsync(fd)
                fsync_dir(path.parent)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Remove the journal everywhere and let go of its locks (the write is over)."""
        for path in self.paths:
            with contextlib.suppress(OSError):
                os.unlink(path)
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        for path in self.paths:
            fsync_dir(path.parent)


def _create(path: Path) -> int:
    """The journal at ``path``, created and locked; one a killed run left is recovered first,
    one a live run holds is refused."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            if not recover(path.parent):
                raise InputError(
                    f"{path.parent}: another batchspec run is writing files here (it holds "
                    f"{path.name}); nothing written: run again when it has finished"
                ) from None
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd
    raise InputError(f"{path}: cannot be created; nothing written")


def recover(folder: Path | str) -> bool:
    """Finish a write a killed run left in ``folder`` (forward or back, see the module); False
    when a live run holds its journal, True when there is none (any more)."""
    path = Path(folder) / JOURNAL
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(
                f"{path}: is a symlink; batchspec's journal never is: remove it"
            ) from None
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not os.path.exists(path):  # the run that held it finished meanwhile
            return True
        recorded = _load(fd)
        if recorded is not None:
            entries, folders = recorded
            _finish(entries)
            for other in folders:
                with contextlib.suppress(OSError):
                    os.unlink(Path(other) / JOURNAL)
        with contextlib.suppress(OSError):
            os.unlink(path)
        fsync_dir(Path(folder))
        return True
    finally:
        os.close(fd)


def _load(fd: int) -> tuple[list[Entry], list[str]] | None:
    """The journal's entries and folders; None for one cut short while it was written (no
    file was renamed yet then: its temporary files are left to age out)."""
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    try:
        data = json.loads(b"".join(chunks))
        return [Entry(**e) for e in data["entries"]], [str(f) for f in data["folders"]]
    except (ValueError, TypeError, KeyError):
        return None


def _finish(entries: list[Entry]) -> None:
    """Every file new when each new one is still there to move or already moved, else every
    file old; the temporary files and kept-aside names removed."""
    forward = all(os.path.exists(e.tmp) or _holds(e.target, e.digest) for e in entries)
    for e in entries:
        if forward and os.path.exists(e.tmp):
            os.replace(e.tmp, e.target)
        elif not forward:
            if e.kept is not None and os.path.exists(e.kept):
                os.replace(e.kept, e.target)
            elif e.kept is None and _holds(e.target, e.digest):
                os.unlink(e.target)
        for leftover in (e.tmp, e.kept):
            if leftover is not None:
                with contextlib.suppress(OSError):
                    os.unlink(leftover)


def _holds(path: str, wanted: str) -> bool:
    """Whether the file at ``path`` has the bytes whose digest is ``wanted``."""
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest() == wanted
    except OSError:
        return False


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is left (then act as they would have): files
    are renamed into place all together, not cut short between two. Off the main thread,
    where signals are not delivered, it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def fsync_dir(folder: Path) -> None:
    """Make the renames durable; some file systems cannot sync a folder, which is fine."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
