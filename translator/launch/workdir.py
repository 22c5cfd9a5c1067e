"""Work folders: where a run keeps its files by default, which one a run takes, how a new one
is made (holding a ``.gitignore`` of ``*``, so that nothing in it is ever committed) and how
files are written into it: never through a symlink (:mod:`translator.words.contained`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from translator.words.contained import refuse_links
from translator.words.files import write_atomic, write_files


def default(command: str, framework: str) -> Path:
    """``.batchspec-<command>/<framework>`` in the current folder, as ``--workdir``'s help says
    (``framework``: the engine that runs, chosen or the config's own)."""
    return Path(f".batchspec-{command}") / framework


def chosen(given: Path | str | None, command: str, framework: str) -> Path:
    """The work folder a run takes: ``given`` (``--workdir``), else :func:`default`, as an
    absolute path. Refused when it is a symlink or, named relative to the current folder (which
    may be a cloned repository), when a folder on the way to it is one."""
    folder = Path(given) if given is not None else default(command, framework)
    if folder.is_absolute():
        refuse_links(folder)
    else:
        refuse_links(Path(), [folder])
    return folder.resolve()


def make(folder: Path) -> None:
    """Make ``folder`` (with its parents) unless it is there; a folder made here gets a
    ``.gitignore`` of ``*``. One that exists is left as it is: it may be the user's own."""
    refuse_links(folder)
    if folder.is_dir():
        return
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / ".gitignore", "*\n")


def write(folder: Path, files: Mapping[Path, str | bytes]) -> None:
    """``files`` (path inside ``folder`` -> text) written, replacing those there (the folders
    they need made); nothing at all when a symlink is on the way to one of them."""
    refuse_links(folder, files)
    write_files(list(files.items()), force=True)
