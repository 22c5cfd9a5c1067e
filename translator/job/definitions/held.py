"""Files a job definition holds in its own text: a key of a ConfigMap of the file, mounted
into a container, is the file the command finds at that path (an accelerate config at
``/etc/accelerate/config.yaml``). Each is read as that file, on the lines the definition
writes it on, and ``update`` edits it there: its new text is written back into the
definition's block, indented as it was.
"""

from __future__ import annotations

import posixpath

import yaml

from translator.job.definitions import nodes as n
from translator.job.definitions.lines import Lines
from translator.plugin.findings import cannot_edit
from translator.reading import Held, Reading


def files(
    path: str, lines: Lines, mounted: dict[str, tuple[str, str, yaml.Node]]
) -> dict[str, Held]:
    """The container's files the definition at ``path`` (its text as ``lines``) holds: its
    path there -> :class:`Held`, for each ConfigMap key ``mounted`` puts there as text."""
    out = {}
    for at, (configmap, key, node) in mounted.items():
        if isinstance(node, yaml.ScalarNode):
            out[at] = _held(path, lines, configmap, key, posixpath.basename(at), node)
    return out


def _held(path: str, lines: Lines, configmap: str, key: str, name: str, node) -> Held:
    """The ConfigMap ``configmap``'s ``key`` (its value ``node``), mounted as ``name``, as a
    file read under a name of its own beside the definition at ``path``."""
    rows = _rows(node.value)
    first = n.body_line(node) - 1
    indent = _indent(lines, first, rows) if node.style == "|" else None
    where = configmap if name == key else f"{configmap}/{key}"
    return Held(
        f"{path}[{where}]/{name}",
        node.value if indent is None else "\n" * first + node.value,
        f"ConfigMap {configmap}'s {key}",
        first,
        len(rows),
        indent,
    )


def _rows(value: str) -> list[str]:
    """The lines of a value as a block writes them (the last line's break ends it)."""
    rows = value.split("\n")
    return rows[:-1] if rows and rows[-1] == "" else rows


def _indent(lines: Lines, first: int, rows: list[str]) -> int | None:
    """The columns a literal block's ``rows`` are indented by on the definition's lines from
    ``first``, when each line is its row so indented (a blank row: a line of spaces);
    ``None`` otherwise."""
    written = [line.rstrip("\r") for line in lines.lines[first : first + len(rows)]]
    shown = next((i for i, row in enumerate(rows) if row), None)
    if len(written) != len(rows) or shown is None:
        return None
    indent = len(written[shown]) - len(rows[shown])
    for line, row in zip(written, rows):
        if line != " " * indent + row and (row or line.strip(" ")):
            return None
    return indent


def rewritten(reading: Reading, held_path: str, new: str, text: str) -> str | None:
    """``text`` (the definition's new text) with the file it holds at ``held_path`` made
    ``new`` where it writes it; ``None`` when ``held_path`` is no file it holds. Refused where
    the file is not written there as it reads (a quoted value, a Helm template's), or its
    block cannot be found again."""
    definition = reading.definition
    held = next((h for h in definition.held if h.path == held_path), None) if definition else None
    if held is None:
        return None
    where = f"{reading.path}:{held.first + 1}"
    above = "\n" * held.first
    lines = Lines(reading.text)
    if held.indent is None or _indent(lines, held.first, _rows(held.text[len(above) :])) is None:
        raise cannot_edit(
            where,
            f"{held.what} is not written as a literal block (|) of the text it reads as, so "
            "update cannot write its new text there; edit it by hand",
        )
    if not new.startswith(above):
        raise cannot_edit(where, f"the edit of {held.what} adds lines above it; edit it by hand")
    start = lines.starts[held.first]
    block = reading.text[start : min(lines.starts[held.first + held.lines], len(reading.text))]
    ending = "\r\n" if block.split("\n", 1)[0].endswith("\r") else "\n"
    again = "".join(
        (" " * held.indent + row if row else "") + ending for row in _rows(new[len(above) :])
    )
    if not block.endswith("\n"):  # the definition's last line, without its line break
        again = again[: -len(ending)]
    return _replaced_once(text, reading.text, block, start, again, where, held.what)


def _replaced_once(
    text: str, old: str, block: str, start: int, again: str, where: str, what: str
) -> str:
    """``text`` with the occurrence of ``block`` that stands at ``start`` in ``old`` replaced
    by ``again``: the same occurrence, counted from the top, where ``text`` holds it as often
    as ``old`` did."""

    def starts(within: str) -> list[int]:
        found, at = [], within.find(block)
        while at >= 0:
            found.append(at)
            at = within.find(block, at + len(block))
        return found

    mine, theirs = starts(old), starts(text)
    if start not in mine or len(mine) != len(theirs):
        raise cannot_edit(where, f"{what} is written otherwise after the edit; edit it by hand")
    at = theirs[mine.index(start)]
    return text[:at] + again + text[at + len(block) :]
