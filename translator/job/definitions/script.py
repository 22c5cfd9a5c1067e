"""The node's launch script composed from a :class:`~translator.job.definitions.runs.Run`: the
variables, then the command, each on the line it has in the definition; and the reading's
literals moved back from that script into the definition, so that what is reported and what
``update`` edits stand in the definition itself.
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass
from itertools import accumulate

from translator.job.definitions.lines import BOUNDS, Lines
from translator.job.definitions.runs import Export, Run
from translator.reading import Reading

#: The function the node's command is wrapped in when variables are set below it.
NODE = "batchspec_node"
#: A span of the composed script -> the span of the definition's literal it stands for.
Moved = dict[tuple[int, int], tuple[int, int]]


@dataclass(frozen=True)
class Composed:
    """The node's launch script, and where its literals stand in the definition."""

    text: str
    """The script."""
    moved: Moved
    """Each variable's value that is a literal of the definition (``num_nodes: 2``): its
    span in the script -> its span in the definition (the command's own words are found by
    their line, which the script keeps)."""


def compose(run: Run) -> Composed:
    """The node's launch script: the variables, then the command, each on the line it has in
    the definition where the lines allow it. Variables the definition sets below the command
    (a container's ``env`` after its ``args``) stand on their own lines there, and the command
    is wrapped in a function called after them; where no line is free, they are gathered just
    above the command."""
    pieces = sorted(run.body, key=lambda p: p[0])
    # in the order of their lines: a reference (``$(X)``) names a variable set above it
    exports = sorted(run.exports, key=lambda e: e.line or 0)
    start = pieces[0][0] if pieces else 1
    end = (pieces[-1][0] + pieces[-1][1].count("\n")) if pieces else 1
    below = [e for e in exports if e.line is not None and e.line > end + 1]
    wrapped = bool(below) and start > 2
    above = [e for e in exports if not wrapped or e.line is None or e.line <= end + 1]
    lines: list[str] = []
    placed: list[tuple[int, int, Export]] = []  # (line index, column of the value, export)
    _place(above, lines, placed, start - 1 - wrapped)
    if wrapped:
        lines.extend([""] * (start - 2 - len(lines)))
        lines.append(f"{NODE}() {{")
    for at, text in pieces:
        lines.extend([""] * (at - 1 - len(lines)))
        lines.extend(text.split("\n"))
    if wrapped:
        lines.append("}")
        _place(below, lines, placed, None)
        lines.append(f'{NODE} "$@"')
    offsets = list(accumulate(map(len, lines), initial=0))  # + the newlines before each line
    moved = {
        (offsets[i] + i + col, offsets[i] + i + col + len(e.value)): e.span
        for i, col, e in placed
        if e.span is not None
    }
    return Composed("\n".join(lines) + "\n", moved)


def _place(
    exports: list[Export],
    lines: list[str],
    placed: list[tuple[int, int, Export]],
    last: int | None,
) -> None:
    """An ``export`` for each variable added to ``lines``, each on its line where it is free
    and no later than ``last`` (``None``: no end), the rest gathered on one line; where each
    value stands goes on ``placed``."""
    for i, export in enumerate(exports):
        statement = f"export {export.name}={export.value}"
        value_at = len(statement) - len(export.value)
        want = max(export.line or 0, len(lines) + 1)
        if last is not None:
            want = min(want, last - (len(exports) - i) + 1)  # a line left for each after it
        if want <= len(lines) and lines and lines[-1].startswith("export "):
            placed.append((len(lines) - 1, len(lines[-1]) + 2 + value_at, export))
            lines[-1] += f"; {statement}"
            continue
        lines.extend([""] * (want - 1 - len(lines)))
        placed.append((len(lines), value_at, export))
        lines.append(statement)


def in_definition(reading: Reading, composed: Composed | None, text: str) -> None:
    """The reading's literals moved from the composed script to the definition ``text``
    (which becomes the reading's text): a variable's value to the literal it stands for, a
    word of the command to the same word on the same line of the definition; a literal found
    in neither, or any when there is no ``composed`` script to go by, has no span there
    (``update`` does not edit it)."""
    script = Lines(composed.text if composed is not None else "")
    definition = Lines(text)

    def moved(span: tuple[int, int] | None) -> tuple[int, int] | None:
        if span is None or composed is None or span[1] > len(composed.text):
            return None
        if span in composed.moved:
            return composed.moved[span]
        return _same_word(script, definition, span)

    for key, value in list(reading.values.items()):
        if value.file is None and value.span is not None:
            reading.values[key] = dataclasses.replace(value, span=moved(value.span))
    reading.uses = {
        at: uses for span, uses in reading.uses.items() if (at := moved(span)) is not None
    }
    reading.arguments = [
        dataclasses.replace(
            word,
            span=moved(word.span),
            sources=frozenset(a for s in word.sources if (a := moved(s)) is not None),
        )
        for word in reading.arguments
    ]
    reading.launch_at = (
        None if composed is None else _verbatim(script, definition, reading.launch_at)
    )
    reading.text = text


def _verbatim(script: Lines, text: Lines, at: int | None) -> int | None:
    """Where offset ``at`` of ``script`` stands in ``text``, when its line is written there as
    it is (a line of a ``run: |`` block, of a ``bash -c`` script): a flag added there stays on
    the command; ``None`` otherwise (a word of a list of arguments: a flag added to it would
    become part of that one argument)."""
    if at is None:
        return None
    line = script.number(at)
    written = script.lines[line].lstrip()
    if not written or line >= len(text.lines) or not text.lines[line].endswith(written):
        return None
    column = len(script.text[script.starts[line] : at].lstrip())
    return text.starts[line] + len(text.lines[line]) - len(written) + column


def _same_word(script: Lines, text: Lines, span: tuple[int, int]) -> tuple[int, int] | None:
    """Where ``script``'s literal at ``span`` stands in ``text``: in the word around it, the
    same occurrence of that word on the same line there (the k-th ``4`` of a line that
    writes two) when the line holds as many of them, else its one occurrence there."""
    start, end = span
    line = script.number(start)
    line_start, line_end = script.starts[line], script.starts[line] + len(script.lines[line])
    word_start, word_end = start, end
    while word_start > line_start and script.text[word_start - 1] not in BOUNDS:
        word_start -= 1
    while word_end < line_end and script.text[word_end] not in BOUNDS:
        word_end += 1
    word = script.text[word_start:word_end]
    if line >= len(text.lines) or not word:
        return None
    mine = script.columns(line, word)
    theirs = text.columns(line, word)
    k = bisect.bisect_left(mine, word_start - line_start)
    if len(mine) == len(theirs) and k < len(mine) and mine[k] == word_start - line_start:
        column = theirs[k]
    elif (once := text.once(line, word)) is not None:  # written otherwise (ACCUM=4 for "4")
        column = once
    else:
        return None
    at = text.starts[line] + column + start - word_start
    found = (at, at + end - start)
    return found if text.text[at : found[1]] == script.text[start:end] else None
