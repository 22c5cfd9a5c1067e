"""Reading and writing the user's files safely.

Reading gives one-line errors that name the file; writing is atomic (a temporary file in the
same folder, then a rename) and never replaces an existing file unless asked to.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from translator.errors import InputError

#: Larger files are refused: no batch config is anywhere near this.
MAX_BYTES = 4 * 1024 * 1024


def read_text(path: str | Path) -> str:
    """The file's text, or an :class:`InputError` naming it (``-`` reads standard input)."""
    if str(path) == "-":
        import sys
        return sys.stdin.read()
    p = Path(path)
    try:
        if p.is_dir():
            raise InputError(f"{path}: is a directory, not a file")
        with p.open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES // (1024 * 1024)} MiB; not a batch config")
    if b"\0" in data:
        raise InputError(f"{path}: binary file, not a text config")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputError(f"{path}: empty file")
    return text


def check_writable(paths: list[Path], force: bool) -> None:
    """Refuse before anything is written if a target exists (without ``force``) or is a folder."""
    for p in paths:
        if p.is_dir():
            raise InputError(f"{p}: is a directory; cannot write a file there")
        if p.exists() and not force:
            raise InputError(f"{p}: exists; use --force to overwrite it")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise
