"""Segments, what expanding one argument gives, and how bash splits them into words.

A segment is a :class:`Piece` (text that stays in the word it is in), a ``(piece, split)``
pair (an unquoted expansion: ``split`` when blanks in it separate words), :data:`BREAK`
(between two array items: a word ends even inside quotes) or :class:`At` (the line the
next array item was written on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from translator.shell.values import Piece

BLANKS = re.compile(r"[ \t\n]+")


class _Break:
    """Between two array items: a field ends here even inside quotes."""


BREAK = _Break()


@dataclass(frozen=True)
class At:
    """The line an array item was written on."""

    line: int
    """1-based line of the item."""


def joined(segments) -> tuple:
    """Segments as one string's pieces: array items joined by a space, as in ``"${A[@]}"``
    assigned to a scalar."""
    out = []
    for seg in segments:
        kind = type(seg)
        if kind is Piece:
            out.append(seg)
        elif kind is tuple:
            out.append(seg[0])
        elif seg is BREAK:
            out.append(Piece(" "))
    return tuple(out)


def sub(piece: Piece, text: str, start: int, end: int) -> Piece:
    """A stretch of a known piece (whose ``text`` it is), with its part of the span."""
    span = (piece.span[0] + start, piece.span[0] + end) if piece.span else None
    return Piece(text[start:end], span, None, piece.sources)


def split_fields(segments, line: int) -> list[tuple]:
    """The fields bash makes of one unquoted argument (arrays give one field per item; an
    unknown piece joins the field it touches): ``(pieces, line)`` per field, the line being
    where an array item was written, else ``line``, where the argument stands."""
    out = _Fields(line)
    for seg in segments:
        kind = type(seg)
        if kind is At:
            out.line = seg.line
        elif seg is BREAK:
            out.end()
        else:
            piece, split = seg if kind is tuple else (seg, False)
            if split and piece.text is None and piece.maybe is not None:
                out.undecided(piece, piece.maybe)
            elif not split or piece.text is None:
                out.add(piece)
            else:
                out.split(piece, piece.text)
    if out.current or out.started:
        out.close()
    return out.fields


class _Fields:
    """The fields made so far and the one being built."""

    def __init__(self, line: int):
        self.fields: list[tuple] = []
        self.here = line
        """Line of the argument."""
        self.current: list[Piece] = []
        self.started = False
        """The current field exists even while it has no piece (``""`` is a field)."""
        self.line = line
        """Line of the current field."""

    def close(self) -> None:
        self.fields.append((tuple(self.current), self.line))

    def end(self) -> None:
        """End the current field, if there is one, and start afresh on the argument's line."""
        if self.current or self.started:
            self.close()
        self.current, self.started, self.line = [], False, self.here

    def add(self, piece: Piece) -> None:
        """A piece that stays in the field it is in."""
        self.current.append(piece)
        self.started = True

    def undecided(self, piece: Piece, maybe: tuple[tuple[str, ...], ...]) -> None:
        """An undecided tail (``opts="$opts --x"`` on one path; ``maybe``: its alternatives):
        when every alternative starts (ends) with a blank, it starts (ends) a field of its
        own."""
        alternatives = [" ".join(a) for a in maybe]
        if self.current and all(a[:1].isspace() or not a for a in alternatives):
            self.end()
        self.add(piece)
        if all(a[-1:].isspace() or not a for a in alternatives):
            self.end()

    def split(self, piece: Piece, text: str) -> None:
        """Known text (``text``, the piece's) of an unquoted expansion: its blanks end fields
        (an array item's fields all keep the item's line)."""
        start = 0
        for m in BLANKS.finditer(text):
            if m.start() > start:
                self.current.append(sub(piece, text, start, m.start()))
            if self.current:
                self.close()
            self.current, self.started, start = [], False, m.end()
        if start < len(text):
            self.current.append(sub(piece, text, start, len(text)))
