"""What a reader says beside the values it reads: a note on what it did not follow, and a use of
a literal (the flag a script's variable feeds). The shell reader and every framework's reader
write them; :class:`translator.reading.Reading` keeps them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class Note:
    """Something a reader did not follow or could not decide, with the line it is about."""

    line: int | None
    """1-based line it is about; ``None`` when it is about the whole file."""
    text: str
    """What happened (``source env.sh is not read``)."""

    def __str__(self) -> str:
        return self.text if self.line is None else f"line {self.line}: {self.text}"

    # A note is the text it prints: two notes that print alike are equal, and a note equals
    # that text (lists of notes compare with the strings shown to the user).
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Note | str):
            return str(self) == str(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))


@dataclass(frozen=True)
class Use:
    """One word that a literal feeds (a launch script's variable behind a flag)."""

    word: str
    """The flag the word is the value of (``--seq-length``), else the word itself, quoted."""
    line: int
    """1-based line the word stands on."""

    def __str__(self) -> str:
        return f"{self.word} (line {self.line})"
