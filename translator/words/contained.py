"""Files written only inside the folder batchspec keeps them in (a run's work folder): no write
and no removal there follows a symlink, since a cloned repository can plant one where batchspec
writes (``.batchspec-smoke/torch/spec.json -> ~/.bashrc``, ``results -> ~/anywhere``). A link
found is refused with an error naming it, before anything is written.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from translator.words.errors import InputError


def refuse_links(folder: Path, paths: Iterable[Path] = ()) -> None:
    """An :class:`InputError` naming the first symlink at ``folder``, or on the way from it to
    each of ``paths`` (paths inside it, each itself included); what is not there yet is none."""
    folder = Path(folder)
    _refuse_link(folder)
    for path in paths:
        current = folder
        for part in Path(path).relative_to(folder).parts:
            current = current / part
            if not _refuse_link(current):
                break  # nothing below a missing name


def refuse_links_below(folder: Path) -> None:
    """An :class:`InputError` naming a symlink at ``folder`` or anywhere under it (a folder
    batchspec writes into, and the programs it starts write into, as a whole)."""
    if not _refuse_link(Path(folder)):
        return
    for root, folders, files in os.walk(folder):  # does not descend into a linked folder
        for name in [*folders, *files]:
            _refuse_link(Path(root) / name)


def replace_unfollowed(path: Path, data: bytes) -> None:
    """``data`` as ``path``, through a temporary file beside it (``path`` with ``.tmp``) that is
    opened without following a symlink, then renamed over ``path``: a link planted at either
    name is replaced or refused, never written through."""
    tmp = Path(path).with_suffix(".tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{tmp}: {_LINK}") from None
        raise
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


_LINK = (
    "is a symlink where batchspec writes its own files; refusing to write through it (remove "
    "the link, or give another --workdir)"
)


def _refuse_link(path: Path) -> bool:
    """Whether ``path`` is there; an :class:`InputError` when it is a symlink."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise InputError(f"{path}: {_LINK}")
    return True
