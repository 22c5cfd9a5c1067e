"""Work folders: where a run keeps its files by default, and how a new one is made (holding a
``.gitignore`` of ``*``, so that nothing in it is ever committed)."""

from __future__ import annotations

from pathlib import Path

from translator.words.files import write_atomic


def default(command: str, framework: str) -> Path:
    """``.batchspec-<command>/<framework>`` in the current folder, as ``--workdir``'s help says
    (``framework``: the engine that runs, chosen or the config's own)."""
    return Path(f".batchspec-{command}") / framework


def make(folder: Path) -> None:
    """Make ``folder`` (with its parents) unless it is there; a folder made here gets a
    ``.gitignore`` of ``*``. One that exists is left as it is: it may be the user's own."""
    if folder.is_dir():
        return
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / ".gitignore", "*\n")
