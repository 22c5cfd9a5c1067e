"""Where a reader says a value came from, when it says so while interpreting."""

from __future__ import annotations

from translator.reading import Reading, Source


def list_source(reading: Reading, source: Source) -> None:
    """Add ``source`` to the reading's sources once (a reading may be interpreted again)."""
    if source not in reading.sources:
        reading.sources.append(source)
