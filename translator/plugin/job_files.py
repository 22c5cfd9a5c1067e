"""A file a launch names, opened for a framework's reader: where the job runs looked it up, its
text given to the reader's own parser, or a warning that says why its values are unknown (the
file is not there: ``job-file-not-found``; it does not read: ``job-file-unreadable``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from translator.plugin.findings import not_found
from translator.reading import Reading
from translator.words.errors import InputError
from translator.words.files import read_text
from translator.words.findings import finding

T = TypeVar("T")


def read_job_file(
    reading: Reading,
    name: str,
    located: tuple[Path | None, str],
    parse: Callable[[str, str], T],
    *,
    kind: str,
    reads_as: str,
    where: str,
    unreadable: str = "job-file-unreadable",
) -> tuple[Path, T] | str:
    """The file a launch names as ``name``, read: ``(its path, what parse made of its text)``.

    ``located`` is where it was found (``None`` when not) and where it was looked for, as
    ``Call.locate`` answers; ``parse`` takes the text and the path, and raises
    :class:`InputError` on a file it cannot read. A file not found, or one that cannot be read
    or parsed, is a warning on ``reading`` at ``where`` (naming it as ``kind`` ``name``: "the
    torchtune config x.yaml"; one that does not read is the finding ``unreadable``, an error
    where the program stops on it), and the answer is then why its values are unknown:
    ``"unknown: NAME is not found"`` or ``"unknown: NAME does not read as READS_AS"``."""
    found, looked = located
    if found is None:
        reading.findings.append(not_found(f"{kind} {name}", looked, where))
        return f"unknown: {name} is not found"
    try:
        return found, parse(read_text(found), str(found))
    except InputError as exc:
        reading.findings.append(finding(unreadable, str(exc), where=where))
        return f"unknown: {name} does not read as {reads_as}"
