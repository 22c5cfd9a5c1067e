"""Reading and writing the user's files safely.

Reading takes regular files only (a FIFO or a device would block or never end), at most
:data:`MAX_BYTES`, standard input included, and gives one-line errors that name the file.

Writing is one transaction, :func:`write_files`: every file goes to a temporary file in its
own folder first (written as bytes, so line endings stay exactly as given, and fsynced); only
when all of them are ready are they moved into place, each replaced file kept aside under a
second name until the last is in place, so that a failure on the way puts every one back. A
write of several files is journaled (:mod:`translator.words.journal`): a kill between two
renames is rolled forward or back by the next run, and SIGINT and SIGTERM wait for the renames.
A file batchspec read is replaced only while it is as it was read (inode, size, modification
time): another process's change since is refused, not overwritten. Nothing but a regular file
is ever replaced, and an existing one only when asked to (``force``); a file created here is
created exclusively, so no other process can slip one in between the check and the write. A
replaced file keeps its mode, owner and group; a symlink is written through to the file it
points to, unless the files go into a folder the user named (``--out DIR``) and the link leads
out of it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from translator.words.errors import InputError
from translator.words.journal import (
    JOURNAL,
    Entry,
    Journal,
    digest,
    fsync_dir,
    recover,
    signals_held,
)

#: Larger files are refused: no batch config is anywhere near this.
MAX_BYTES = 4 * 1024 * 1024
#: A temporary file of ours older than this was left by a killed run and is removed.
STALE_SECONDS = 10 * 60
#: What each file read was when it was read (its :func:`_place` -> device, inode, size,
#: modification time), so that a write refuses to replace a file another process changed since.
_SEEN: dict[tuple[int, int, str], tuple[int, int, int, int]] = {}
#: Texts :func:`read_text` gives in place of files' own, by real path (:func:`reading_as`).
_READ_AS: ContextVar[Mapping[str, str] | None] = ContextVar("read_as", default=None)


@contextmanager
def reading_as(texts: Mapping[str, str]) -> Iterator[None]:
    """Within it, :func:`read_text` gives ``texts`` (path -> text) for those files instead of
    what they hold: a change to several files is read back whole before any is written. Inside
    another, the outer texts are given too (a job read back whole reads the files its
    definition holds)."""
    outer = _READ_AS.get() or {}
    token = _READ_AS.set({**outer, **{os.path.realpath(p): t for p, t in texts.items()}})
    try:
        yield
    finally:
        _READ_AS.reset(token)


def is_given(path: str | Path) -> bool:
    """Whether :func:`read_text` gives ``path`` a text of :func:`reading_as` (a file a job
    definition holds, or a new text read back before it is written)."""
    given = _READ_AS.get()
    return given is not None and os.path.realpath(path) in given


def suffix_of(path: str | Path) -> str:
    """The file name's extension, lower-cased (``Path(path).suffix.lower()``, without building
    a ``Path``: every file read asks it several times)."""
    return os.path.splitext(os.fspath(path).rstrip("/"))[1].lower()


def read_text(path: str | Path) -> str:
    """The file's text, or an :class:`InputError` naming it (``-`` reads standard input).

    Only a regular file is opened (a FIFO, a device or a socket is refused before it is
    opened), and no more than ``MAX_BYTES + 1`` bytes are read from any input.
    """
    if str(path) == "-":
        stream = getattr(sys.stdin, "buffer", None)
        try:
            data = (
                stream.read(MAX_BYTES + 1)
                if stream is not None
                else sys.stdin.read(MAX_BYTES + 1).encode("utf-8", "surrogateescape")
            )
        except OSError as exc:
            raise InputError(f"<stdin>: cannot read: {exc.strerror or exc}") from None
        return _decode("<stdin>", data)
    given = _READ_AS.get()
    if given and (real := os.path.realpath(path)) in given:
        return given[real]
    file = _target(path)
    folder = os.path.dirname(file) or "."
    if os.path.lexists(os.path.join(folder, JOURNAL)):
        recover(folder)
    try:
        _require_regular(path, os.stat(path))
        # O_NONBLOCK: should a FIFO take the file's place after the check, opening it must not
        # wait for a writer; fstat on what was opened then refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            _require_regular(path, st)
            data = _read_at_most(fd, MAX_BYTES + 1)
            _SEEN[_place_of(file)] = _identity(st)
        finally:
            os.close(fd)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return _decode(str(path), data)


def _read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of an open file, to its end (no file object: one per read of a
    small file costs more than the read)."""
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _require_regular(path, st: os.stat_result) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: is {_kind(st.st_mode)}, not a regular file; refusing to read it")


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _decode(name: str, data: bytes) -> str:
    """The same checks for every input: size, NUL bytes, UTF-8, not empty."""
    if len(data) > MAX_BYTES:
        raise InputError(
            f"{name}: larger than {MAX_BYTES // (1024 * 1024)} MiB; not a batch config"
        )
    if b"\0" in data:
        raise InputError(f"{name}: binary file, not a text config")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{name}:{line}: not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputError(f"{name}: empty file")
    return text


@dataclass(frozen=True)
class Written:
    """One file :func:`write_files` wrote."""

    path: Path
    """The path asked for."""
    target: Path
    """Where the bytes went: ``path`` itself, or the file a symlink at ``path`` points to."""

    def describe(self) -> str:
        """``path``, and where a symlink led the write."""
        return (
            str(self.path)
            if self.target == self.path
            else f"{self.path} (a symlink; wrote its target {self.target})"
        )


@dataclass
class _Plan:
    path: Path
    target: Path
    data: bytes
    existing: os.stat_result | None
    tmp: Path | None = None
    """The temporary file, until it is moved into place."""
    created: bool = False
    """Whether this run created the file at ``target`` (so that a failure removes it)."""
    kept: Path | None = None
    """The file that was at ``target`` before it was replaced, under a temporary name, until
    every file is in place (so that a failure puts it back)."""


def write_files(
    files: list[tuple[Path, str | bytes]], force: bool, within: Path | str | None = None
) -> list[Written]:
    """Write every ``(path, text)`` or none of them; an :class:`InputError` names what failed.

    Without ``force`` no existing file is replaced. Even with it, only regular files are: a
    folder, a device, a FIFO, a socket or a dangling symlink at a path is refused. A symlink
    to a regular file is written through to that file, but with ``within`` (the folder the
    user named for the files, ``--out DIR``) only when that file lies inside the folder: the
    user named the folder, not wherever its links lead, so a link out of it is refused. A file
    with several hard links is refused (replacing it would split it from its other names).
    Folders are created.
    """
    inside = None if within is None else Path(os.path.realpath(within))
    for folder in dict.fromkeys(Path(os.path.realpath(p)).parent for p, _ in files):
        if os.path.lexists(folder / JOURNAL):
            recover(folder)  # what a killed run left, before anything is judged here
    plans = [_plan(Path(p), text, force, inside) for p, text in files]
    seen = set()
    for p in plans:
        real = os.path.realpath(p.target)
        if real in seen:
            raise InputError(f"{p.path}: the same file would be written twice")
        seen.add(real)
        _require_unchanged(p)
    new_folders = _missing_folders(p.target.parent for p in plans)
    current = plans[0].path if plans else None
    journal = None
    try:
        for p in plans:
            current = p.path
            p.target.parent.mkdir(parents=True, exist_ok=True)
            _clean_stale(p.target)
            p.tmp = _write_temporary(p)
        if len(plans) > 1:
            journal = _journal(plans)
        with signals_held():
            _move_into_place(plans)
            if journal is not None:
                journal.close()
    except BaseException as exc:
        _undo(plans)
        if journal is not None:
            journal.close()
        _remove_folders(new_folders)
        if isinstance(exc, OSError):
            raise InputError(f"{current}: cannot write: {exc.strerror or exc}") from None
        raise
    for folder in dict.fromkeys(p.target.parent for p in plans):
        fsync_dir(folder)
    for p in plans:
        with contextlib.suppress(OSError):
            _SEEN[_place(p.target)] = _identity(os.stat(p.target))
    return [Written(p.path, p.target) for p in plans]


def _journal(plans: list[_Plan]) -> Journal:
    """The journal of a write of several files, open: each replaced file's kept-aside name
    chosen (made when it is replaced)."""
    for p in plans:
        if p.existing is not None:
            p.kept = p.target.with_name(f".{p.target.name}.{secrets.token_hex(4)}.kept")
    journal = Journal(
        [
            Entry(
                str(p.target), str(p.tmp), None if p.kept is None else str(p.kept), digest(p.data)
            )
            for p in plans
        ]
    )
    journal.open()
    return journal


def _move_into_place(plans: list[_Plan]) -> None:
    """Every temporary file renamed into place, new files first; each replaced one kept aside
    until all are in place, and checked unchanged since it was read just before."""
    for p in sorted(plans, key=lambda p: p.existing is not None):
        assert p.tmp is not None
        _require_unchanged(p)
        if p.kept is not None:
            _keep_aside(p.target, p.kept)
        _commit(p, p.tmp)
    for p in plans:
        if p.kept is not None:
            _unlink(p.kept)
            p.kept = None


def _target(path: str | Path) -> str:
    """The file ``path`` names: through a link at ``path`` itself, the link's target (a link
    among its folders leads to the same folder either way)."""
    return os.path.realpath(path) if os.path.islink(path) else os.fspath(path)


def _place(path: str | Path) -> tuple[int, int, str]:
    """Which file ``path`` is, however its folder is reached (a link to it, ``..``): the
    folder's device and inode and the file's name (through a link at ``path`` itself, its
    target's). A stat or two, where ``os.path.realpath`` takes one per folder of the path."""
    return _place_of(_target(path))


def _place_of(file: str) -> tuple[int, int, str]:
    """:func:`_place` of a path that is no link itself (:func:`_target`'s answer)."""
    folder = os.stat(os.path.dirname(file) or ".")
    return folder.st_dev, folder.st_ino, os.path.basename(file)


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _require_unchanged(p: _Plan) -> None:
    """Refuse to replace a file batchspec read that another process has changed since."""
    if p.existing is None:
        return
    was = _SEEN.get(_place(p.target))
    try:
        now = _identity(os.stat(p.target))
    except OSError:
        now = None
    if was is not None and now != was:
        raise InputError(
            f"{p.path}: changed since batchspec read it (by another program?); nothing "
            "written: run the command again"
        )


def _undo(plans: list[_Plan]) -> None:
    """Every file as it was before :func:`write_files` began; each step tried whatever the one
    before it met."""
    for p in plans:
        with contextlib.suppress(OSError):
            if p.tmp is not None:
                _unlink(p.tmp)
            if p.created:
                _unlink(p.target)
            if p.kept is not None and os.path.exists(p.kept):
                os.replace(p.kept, p.target)
        if p.kept is not None:
            _unlink(p.kept)  # still there when the rename found the same file


def _remove_folders(new_folders: list[Path]) -> None:
    """The folders :func:`write_files` made, gone again (each only when empty)."""
    for folder in new_folders:
        try:
            folder.rmdir()
        except OSError:
            pass


def _keep_aside(target: Path, kept: Path) -> None:
    """A second name, ``kept``, for the file at ``target`` (a hard link, else a copy), under
    which it survives being replaced."""
    import shutil

    try:
        os.link(target, kept)
    except OSError:  # no hard links here: a copy, with the mode and times
        shutil.copy2(target, kept)


def check_writable(paths: list[Path], force: bool, within: Path | str | None = None) -> None:
    """Refuse now, writing nothing, what :func:`write_files` would refuse for ``paths`` (for a
    command that writes only after a long run)."""
    inside = None if within is None else Path(os.path.realpath(within))
    for path in paths:
        plan = _plan(Path(path), b"", force, inside)
        folder = plan.target.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # the folder the write would create its own in
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InputError(
                f"{path}: its folder {folder} is not writable; nothing was run: make it "
                "writable, or write elsewhere"
            )


def write_atomic(path: Path, text: str) -> None:
    """Write one file, replacing a regular file already there (see :func:`write_files`)."""
    write_files([(path, text)], force=True)


def _bytes(text: str | bytes) -> bytes:
    return text.encode("utf-8") if isinstance(text, str) else text


def _plan(path: Path, text: str | bytes, force: bool, inside: Path | None) -> _Plan:
    """Where ``path``'s bytes go, and what is there now; refusals happen here, before writing.
    ``inside``: the real path of the folder a symlink at ``path`` must not lead out of."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return _Plan(path, path, _bytes(text), None)
    except OSError as exc:
        raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
    target = path
    if stat.S_ISLNK(st.st_mode):
        target = Path(os.path.realpath(path))
        try:
            st = os.stat(target)
        except OSError:
            raise InputError(
                f"{path}: is a symlink to a missing file; refusing to replace it "
                "(remove it, or write elsewhere)"
            ) from None
        if inside is not None and not target.is_relative_to(inside):
            raise InputError(
                f"{path}: is a symlink to {target}, outside {inside}; refusing to write "
                "through it (remove the link, or write elsewhere)"
            )
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a directory; cannot write a file there")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{path}: is {_kind(st.st_mode)}, not a regular file; refusing to replace it"
        )
    if not force:
        raise InputError(f"{path}: exists; use --force to overwrite it")
    if st.st_nlink > 1:
        raise InputError(
            f"{path}: has {st.st_nlink} hard links; replacing it would split them, "
            "so it is left alone: write to a new file (-o/--out) instead"
        )
    return _Plan(path, target, _bytes(text), st)


def _write_temporary(p: _Plan) -> Path:
    """The bytes in a fsynced temporary file beside the target, with the target's mode and owner
    (a new file: the umask's, executable when it starts with ``#!``)."""
    fd, name = tempfile.mkstemp(dir=p.target.parent, prefix=f".{p.target.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(p.data)
            fh.flush()
            if p.existing is None:  # a new script (``#!``) is executable, as shells expect
                mode = 0o777 if p.data.startswith(b"#!") else 0o666
                os.fchmod(fh.fileno(), mode & ~_umask())
            else:
                _keep_owner(fh.fileno(), p, p.existing)
                # After chown, which clears set-user/group-ID bits.
                os.fchmod(fh.fileno(), stat.S_IMODE(p.existing.st_mode))
            os.fsync(fh.fileno())
    except BaseException:
        _unlink(tmp)
        raise
    return tmp


def _keep_owner(fd: int, p: _Plan, existing: os.stat_result) -> None:
    """Give the temporary file the owner and group of ``existing``, the file it replaces."""
    uid, gid = existing.st_uid, existing.st_gid
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) == (uid, gid):
        return
    try:
        os.fchown(fd, uid, gid)
        return
    except PermissionError:
        pass
    if uid != mine.st_uid:
        raise InputError(
            f"{p.path}: owned by user {uid}, and only root can keep that owner on a "
            "replaced file; write to a new file (-o/--out) instead"
        )
    try:  # not root but our own file: keep the group when we are in it
        os.fchown(fd, -1, gid)
    except PermissionError:
        pass


def _commit(p: _Plan, tmp: Path) -> None:
    """Move ``tmp``, the plan's temporary file, into place: replace the existing file, or
    create exclusively."""
    if p.existing is not None:
        os.replace(tmp, p.target)
        p.tmp = None
        return
    try:
        os.link(tmp, p.target)  # fails if anything appeared at the name meanwhile
    except FileExistsError:
        raise _appeared(p) from None
    except OSError as exc:
        if exc.errno not in (
            errno.EPERM,
            errno.EOPNOTSUPP,
            errno.ENOTSUP,
            errno.ENOSYS,
            errno.EXDEV,
            errno.EMLINK,
        ):
            raise
        # No hard links here (some network and FUSE file systems): claim the name
        # exclusively, then rename over our own placeholder.
        try:
            os.close(os.open(p.target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            raise _appeared(p) from None
        p.created = True
        os.replace(tmp, p.target)
        p.tmp = None
        return
    p.created = True
    os.unlink(tmp)
    p.tmp = None


def _appeared(p: _Plan) -> InputError:
    return InputError(
        f"{p.path}: appeared while batchspec was writing it; left alone, nothing written"
    )


#: mkstemp's names: the prefix and suffix we give it around 8 characters of its alphabet.
_TEMP_MIDDLE = r"[a-z0-9_]{8}"


def _clean_stale(target: Path) -> None:
    """Remove temporary files a killed run left for ``target``: ours, by exact name, and old."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.{_TEMP_MIDDLE}\.tmp")
    try:
        entries = os.scandir(target.parent)
    except OSError:
        return
    now = time.time()
    with entries:
        for entry in entries:
            if not pattern.fullmatch(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                if (
                    stat.S_ISREG(st.st_mode)
                    and st.st_uid == os.geteuid()
                    and now - st.st_mtime > STALE_SECONDS
                ):
                    os.unlink(entry.path)
            except OSError:
                pass


def _missing_folders(folders) -> list[Path]:
    """The folders that do not exist yet among ``folders`` and their parents, deepest first."""
    missing: dict[Path, None] = {}
    for folder in folders:
        while not folder.exists() and folder not in missing and folder != folder.parent:
            missing[folder] = None
            folder = folder.parent
    return sorted(missing, key=lambda f: len(f.absolute().parts), reverse=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
