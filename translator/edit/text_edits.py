"""Editing a file's text in place: each key's literal replaced at the exact span it was read
from, a missing key written where its framework says, a key removed with its line; every
other byte stays. What ``update`` (and ``render --into``) change in every file they touch."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from translator.plugin.contract import Framework
from translator.plugin.findings import cannot_edit
from translator.reading import Reading, Value


@dataclass(frozen=True)
class Edit:
    """The text an update changed for one key: where, and the word before and after."""

    line: int
    """1-based line of the edit (in the file as it was; an added line: where it goes)."""
    old: str | None
    """The word as it was written (``NUM_NODES=1``); ``None`` for an added line."""
    new: str | None
    """The word as it is now (``NUM_NODES=2``); ``None`` for a removed line."""

    def as_dict(self) -> dict:
        return {"line": self.line, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class Change:
    """One edit of the file."""

    key: str
    """The framework key or flag."""
    old: object
    """Its value before (``None`` when it was not in the file)."""
    new: object
    """Its value after (``None`` when the key was removed)."""
    line: int | None
    """Where the key is (or was) in the file: for a flag, the line of the flag."""
    read_by: str | None = None
    """The launcher whose sizing flag this is (``torchrun``), else ``None``."""
    edit: Edit | None = None
    """The text changed for it, which may stand elsewhere than the key (the variable behind a
    flag); ``None`` when the file computes the value from one that was edited."""

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "old": self.old,
            "new": self.new,
            "line": self.line,
            "read_by": self.read_by,
            "edit": None if self.edit is None else self.edit.as_dict(),
        }

    def describe(self, path: object) -> str:
        """One line of the change report: the key and its line, and where it was edited when
        that is another line (``--nnodes (torchrun, line 40) ← NUM_NODES=1 → 2 (line 12)``)."""
        if self.edit is None:
            return f"{path}:{self.line}: {self.key} {self.old} → {self.new} (computed by the file)"
        if self.old is None and self.read_by and self.edit.old is None:
            return f"{path}:{self.edit.line}: {self.edit.new} (added to the {self.read_by} line)"
        if self.line is None or self.edit.line == self.line or self.edit.old is None:
            return f"{path}:{self.line or '+'}: {self.key} {self.old} → {self.new}"
        by = f"{self.read_by}, " if self.read_by else ""
        return (
            f"{path}: {self.key} ({by}line {self.line}) ← {self.edit.old} → {self.new} "
            f"(line {self.edit.line})"
        )


def edit_text(
    framework: Framework,
    reading: Reading,
    edits: dict,
    launch: frozenset[str] = frozenset(),
    elsewhere: dict[str, dict[str, object]] | None = None,
    literals: Sequence[tuple[str, Value, object]] = (),
    copies: Callable[[dict[tuple[int, int], str]], dict[tuple[int, int], str]] | None = None,
) -> tuple[str, list[Change]]:
    """``reading``'s text with ``edits`` (key -> new value, ``None`` removes it) made, and the
    changes; every other byte unchanged. ``launch``: the keys that are the launcher's sizing
    words (one the line lacks is added after the launcher's name). A value read from another
    file of the job goes to ``elsewhere`` (that file -> key -> new value) when given, else it
    is refused. A value the file computes (``$((TOTAL / NUM_GPUS))``) is not edited: its
    change has no :class:`Edit`, and the caller checks that the file computes the new value.
    ``literals``: values edited where they stand beside the keys (a job definition's node
    count: name, value read, new value); ``copies``: the replacements with the copies other
    parts of the file need (a PyTorchJob's Workers repeat the Master's container)."""
    replacements: dict[tuple[int, int], str] = {}
    changes = []
    text = reading.text
    planned = [(key, reading.values.get(key), new) for key, new in edits.items()]
    for key, old, new in planned + list(literals):
        if _as_asked(text, replacements, old, new, key in edits):
            continue
        if old is not None and old.file is not None and elsewhere is not None:
            elsewhere.setdefault(old.file, {})[key] = new
            continue
        _refuse_shared(reading, key, old, edits)
        edit: Edit | None
        if old is None and key in launch and reading.launch_at is not None:
            at = (reading.launch_at, reading.launch_at)
            replacements[at] = f" {key} {new}"
            edit = Edit(_line_of(text, at[0]), None, f"{key} {new}")
        elif old is None:
            if new is None:
                continue
            at, replacements[at], written = _added(framework, reading, key, new)
            edit = Edit(_line_of(text, at[0]), None, written)
        elif old.file is not None:
            change = f"delete {key}" if new is None else f"to {new}"
            raise cannot_edit(
                reading.where(key),
                f"{key} is set in {old.file}, not in {reading.path}; update that file ({change})",
            )
        elif new is None:
            at = _line_span(text, old.span, reading.path, key)
            replacements[at] = ""
            edit = Edit(_line_of(text, at[0]), text[at[0] : at[1]].strip(), None)
        elif old.span is None and old.why_unknown:
            raise cannot_edit(
                reading.where(key),
                f"cannot change {key}: its value is {old.why_unknown}; set it to {new} by hand",
            )
        elif old.span is None:
            edit = None
        elif replacements.get(_without_line_end(text, old.span), str(new)) != str(new):
            raise cannot_edit(
                reading.where(key),
                f"{key} shares its value with another key that needs a different one; "
                "edit it by hand",
            )
        else:
            at = _without_line_end(text, old.span)
            replacements[at] = str(new)
            edit = Edit(_line_of(text, at[0]), *_written_as(text, at, str(new)))
        changes.append(
            Change(
                key,
                None if old is None else old.value,
                new,
                None if old is None else old.line,
                reading.launcher if key in reading.launch_keys.values() or key in launch else None,
                edit,
            )
        )
    return _replaced(text, copies(replacements) if copies else replacements), changes


def _replaced(text: str, replacements: dict[tuple[int, int], str]) -> str:
    """``text`` with each span replaced, the last first (so the others stay where they are)."""
    for (start, end), new_text in sorted(replacements.items(), reverse=True):
        text = text[:start] + new_text + text[end:]
    return text


def _added(
    framework: Framework, reading: Reading, key: str, new: object
) -> tuple[tuple[int, int], str, str]:
    """Where a key the file lacks goes, the text put there, and the entry it writes (its own
    line(s), as the framework writes them)."""
    text = reading.text
    at = _insertion(framework, reading, key)
    written = (
        f"{key}: {new}" if framework.inserted is None else framework.inserted(reading, key, new)
    )
    ending = _line_ending(text, at[0])
    lead = ""
    if at[0] == len(text) and text and not text.endswith("\n"):
        # After a last line without its newline: end that line first, as the file does.
        ending = lead = "\r\n" if "\r\n" in text else "\n"
    return at, lead + ending.join(written.split("\n")) + ending, written


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


#: What stands before a literal that is a named value: a variable's (``NUM_NODES=``,
#: ``N=${N:-``, ``N="``) or an option's written with ``=`` (``#SBATCH --nodes=``).
ASSIGNMENT = re.compile(
    r"(?:--?[A-Za-z][A-Za-z0-9_-]*|[A-Za-z_][A-Za-z0-9_]*)="
    r"[\"']?(?:\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=][\"']?)?"
)


def _written_as(text: str, span: tuple[int, int], new: str) -> tuple[str, str]:
    """The word that holds the literal at ``span``, before and after it becomes ``new``: a
    whole assignment (``NUM_NODES=1``, ``N=${N:-8}``, ``--nodes=2``), else the literal alone."""
    start, end = span
    line_start = text.rfind("\n", 0, start) + 1
    word_start = max(text.rfind(c, line_start, start) for c in " \t;") + 1
    word_start = max(word_start, line_start)
    if not ASSIGNMENT.fullmatch(text, word_start, start):
        return text[start:end], new
    word_end = end
    while word_end < len(text) and text[word_end] not in " \t;\r\n":
        word_end += 1
    before, after = text[word_start:start], text[end:word_end]
    return before + text[start:end] + after, before + new + after


def _insertion(framework: Framework, reading: Reading, key: str) -> tuple[int, int]:
    """Where a key the file lacks goes: where its framework says (``insertion``), if it can."""
    if framework.insertion is None:
        raise cannot_edit(reading.path, f"{key} is not in the file; add it by hand")
    return framework.insertion(reading, key)


def _line_ending(text: str, pos: int) -> str:
    """The line ending of the line before ``pos`` (so an inserted line matches its neighbour)."""
    return "\r\n" if text[max(pos - 2, 0) : pos] == "\r\n" else "\n"


def _as_asked(text: str, replacements: dict, old: Value | None, new: object, key: bool) -> bool:
    """Whether a value needs no edit: it is already ``new``, or (not a ``key`` but a literal
    beside them) an edit of a key that reads it writes ``new`` there already (a launch word
    that reads a job definition's node count)."""
    if old is not None and old.value == new:
        return True
    if key or old is None or old.span is None:
        return False
    return replacements.get(_without_line_end(text, old.span)) == str(new)


def _refuse_shared(reading: Reading, key: str, old, edits: dict) -> None:
    """Refuse to edit a literal that also feeds words other than ``key`` (one variable behind
    ``--micro-batch-size $N --seq-length $N``): the edit would change them silently."""
    if old is None or old.span is None:
        return
    mine = {_flag_name(k) for k in edits}
    others = {
        str(u)
        for u in reading.uses.get(old.span, [])
        if _flag_name(u.word) != _flag_name(key) and _flag_name(u.word) not in mine
    }
    if others:
        raise cannot_edit(
            reading.where(key),
            f"the value of {key} ({old.value}) is written once and also used by "
            f"{', '.join(sorted(others))}; changing it would change those too. Give {key} a "
            "value of its own, then update",
        )


def _flag_name(word: str) -> str:
    """A key or the flag that sets it, one way (``--per-device-x`` is ``per_device_x``)."""
    return word.lstrip("-").replace("-", "_")


def _without_line_end(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """``span`` short of a carriage return a reader took into the value (a CRLF file)."""
    start, end = span
    while end > start and text[end - 1] == "\r":
        end -= 1
    return start, end


def _line_span(text: str, span, path: str, key: str) -> tuple[int, int]:
    """The whole line(s) of a top-level ``key: scalar`` entry."""
    if span is None:
        raise cannot_edit(path, f"cannot remove {key}: its value is not a plain scalar")
    start = text.rfind("\n", 0, span[0]) + 1
    end = text.find("\n", span[1])
    return start, len(text) if end < 0 else end + 1
