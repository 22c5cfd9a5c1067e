"""The node's launch script composed from a :class:`~translator.job.definitions.runs.Run`: the
variables, then the command, each on the line it has in the definition; and the reading's
literals moved back from that script into the definition, so that what is reported and what
``update`` edits stand in the definition itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

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
    above = [e for e in exports if not wrapped or e not in below]
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
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    moved = {
        (offsets[i] + col, offsets[i] + col + len(e.value)): e.span
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

    def moved(span: tuple[int, int] | None) -> tuple[int, int] | None:
        if span is None or composed is None or span[1] > len(composed.text):
            return None
        if span in composed.moved:
            return composed.moved[span]
        return _same_word(composed.text, text, span)

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
        None if composed is None else _verbatim(composed.text, text, reading.launch_at)
    )
    reading.text = text


def _verbatim(script: str, text: str, at: int | None) -> int | None:
    """Where offset ``at`` of ``script`` stands in ``text``, when its line is written there as
    it is (a line of a ``run: |`` block, of a ``bash -c`` script): a flag added there stays on
    the command; ``None`` otherwise (a word of a list of arguments: a flag added to it would
    become part of that one argument)."""
    if at is None:
        return None
    line = script.count("\n", 0, at)
    start = script.rfind("\n", 0, at) + 1
    written = script[start : script.find("\n", at) % (len(script) + 1)].lstrip()
    lines = text.split("\n")
    if not written or line >= len(lines) or not lines[line].endswith(written):
        return None
    column = at - (start + len(script[start:at]) - len(script[start:at].lstrip()))
    if column < 0:
        return None
    return sum(len(x) + 1 for x in lines[:line]) + len(lines[line]) - len(written) + column


#: What ends a word of a line (a shell word, a YAML list item or quoted scalar).
BOUNDS = " \t\"'[],"


def _same_word(script: str, text: str, span: tuple[int, int]) -> tuple[int, int] | None:
    """Where ``script``'s literal at ``span`` stands in ``text``: in the word around it, the
    same occurrence of that word on the same line there (the k-th ``4`` of a line that
    writes two) when the line holds as many of them, else its one occurrence there."""
    start, end = span
    line = script.count("\n", 0, start)
    line_start = script.rfind("\n", 0, start) + 1
    line_end = script.find("\n", start)
    word_start, word_end = start, end
    while word_start > line_start and script[word_start - 1] not in BOUNDS:
        word_start -= 1
    while word_end < line_end and script[word_end] not in BOUNDS:
        word_end += 1
    word = script[word_start:word_end]
    lines = text.split("\n")
    if line >= len(lines) or not word:
        return None
    mine = _words_at(script[line_start : line_end % (len(script) + 1)], word)
    theirs = _words_at(lines[line], word)
    if len(mine) == len(theirs) and word_start - line_start in mine:
        column = theirs[mine.index(word_start - line_start)]
    elif lines[line].count(word) == 1:  # written otherwise around it (ACCUM=4 for "4")
        column = lines[line].index(word)
    else:
        return None
    at = sum(len(x) + 1 for x in lines[:line]) + column + start - word_start
    return (at, at + end - start) if text[at : at + end - start] == script[start:end] else None


def _words_at(line: str, word: str) -> list[int]:
    """The columns where ``word`` stands whole in ``line`` (bounded by :data:`BOUNDS` or
    the line's ends)."""
    found, at = [], line.find(word)
    while at >= 0:
        before = at == 0 or line[at - 1] in BOUNDS
        after = at + len(word) == len(line) or line[at + len(word)] in BOUNDS
        if before and after:
            found.append(at)
        at = line.find(word, at + 1)
    return found
