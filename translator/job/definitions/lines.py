"""A text's lines, indexed once: the line an offset stands on, and the columns where a word
stands whole on a line. A reading's literals are moved from the node's composed script to the
definition one by one (thousands, for a container of long ``args``): each look-up costs a
search, never a pass over the text."""

from __future__ import annotations

import bisect
import re
from itertools import accumulate

#: What ends a word of a line (a shell word, a YAML list item or quoted scalar).
BOUNDS = " \t\"'[],"
#: A word bounded by :data:`BOUNDS` (or the line's ends).
_WORD = re.compile(r"[^ \t\"'\[\],]+")


class Lines:
    """``text`` split into lines, each line's words indexed when first asked for."""

    def __init__(self, text: str):
        self.text = text
        """The text."""
        self.lines = text.split("\n")
        """Its lines, without their newlines."""
        self.starts = list(accumulate((len(line) + 1 for line in self.lines), initial=0))
        """The offset each line starts at (and, last, one past the text's end)."""
        self._words: dict[int, dict[str, list[int]]] = {}
        self._columns: dict[tuple[int, str], list[int]] = {}
        self._once: dict[tuple[int, str], int | None] = {}

    def number(self, at: int) -> int:
        """The 0-based line offset ``at`` stands on."""
        return bisect.bisect_right(self.starts, at) - 1

    def columns(self, line: int, word: str) -> list[int]:
        """The columns, in order, where ``word`` stands whole on ``line`` (bounded by
        :data:`BOUNDS` or the line's ends)."""
        if _WORD.fullmatch(word):
            if line not in self._words:
                found: dict[str, list[int]] = {}
                for m in _WORD.finditer(self.lines[line]):
                    found.setdefault(m.group(), []).append(m.start())
                self._words[line] = found
            return self._words[line].get(word, [])
        if (line, word) not in self._columns:  # a word holding a bound: a quoted "a b"
            self._columns[line, word] = _whole(self.lines[line], word)
        return self._columns[line, word]

    def once(self, line: int, word: str) -> int | None:
        """The column of ``word`` on ``line`` when it is written there once (whole or not)."""
        if (line, word) not in self._once:
            text = self.lines[line]
            at = text.find(word)
            self._once[line, word] = at if at >= 0 and text.find(word, at + len(word)) < 0 else None
        return self._once[line, word]


def _whole(line: str, word: str) -> list[int]:
    """The columns where ``word`` stands whole in ``line``."""
    found, at = [], line.find(word)
    while at >= 0:
        before = at == 0 or line[at - 1] in BOUNDS
        after = at + len(word) == len(line) or line[at + len(word)] in BOUNDS
        if before and after:
            found.append(at)
        at = line.find(word, at + 1)
    return found
