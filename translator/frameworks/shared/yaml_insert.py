"""Where ``update`` writes a top-level key a YAML config lacks, for every YAML framework."""

from __future__ import annotations

from translator.reading import Reading
from translator.words.errors import InputError


def after_key(reading: Reading, key: str, after: str) -> tuple[int, int]:
    """Where ``update`` writes a top-level key the YAML lacks: after the line of ``after``
    (else at the end)."""
    anchor = reading.values.get(after)
    if anchor is None or anchor.span is None:
        pos = len(reading.text) if reading.text.endswith("\n") else None
        if pos is None:
            raise InputError(f"{reading.path}: {key} is not in the file; add it by hand")
        return pos, pos
    end = reading.text.find("\n", anchor.span[1])
    pos = len(reading.text) if end < 0 else end + 1
    return pos, pos
