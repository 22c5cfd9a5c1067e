"""A program's command line as argparse-style parsers split it (HfArgumentParser, Fire,
click): ``--flag value``, ``--flag=value``, bare switches and positional words; one scanner
for every framework that reads such a line."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass

from translator.shell.values import Word


@dataclass(frozen=True)
class Arg:
    """One argument of a command line."""

    kind: str
    """``flag``, ``positional``, or ``unknown`` (a word whose text is not known, which may
    hold flags of its own)."""
    word: Word
    """The word it starts at (the flag's own word for a flag)."""
    name: str | None = None
    """A flag's name as written, without ``--`` (dashes kept)."""
    value: Word | None = None
    """A flag's value: the inline text after ``=`` or the next word; ``None`` for a switch."""
    stood: tuple[Word, ...] = ()
    """The words it stood as (the flag's and its value's)."""


def scan(words: list[Word], switches: Collection[str] = frozenset()) -> Iterator[Arg]:
    """Each argument of ``words``: a ``--flag`` takes the next word as its value unless that
    is another ``--flag``, or the flag is one of ``switches`` (dashes as underscores) or a
    ``--no-`` one where ``switches`` are given."""
    i = 0
    while i < len(words):
        word = words[i]
        text = word.text
        i += 1
        if text is None:
            head = word.parts[0].text if word.parts and word.parts[0].text else ""
            if head.startswith("--") and "=" in head:  # --flag=$X
                unknown = Word(None, word.line, why_unknown=word.why_unknown)
                yield Arg("flag", word, head[2:].split("=", 1)[0], unknown, (word,))
            elif _no_flag(word, head):
                yield Arg("positional", word, stood=(word,))
            elif not word.absent:
                yield Arg("unknown", word, stood=(word,))
            continue
        if not text.startswith("--") or len(text) == 2:
            yield Arg("positional", word, stood=(word,))
            continue
        name, eq, inline = text[2:].partition("=")
        if eq:
            span = None if word.span is None else (word.span[1] - len(inline), word.span[1])
            yield Arg(
                "flag", word, name, Word(inline, word.line, span, sources=word.sources), (word,)
            )
            continue
        following = words[i] if i < len(words) else None
        switch = name.replace("-", "_") in switches or (bool(switches) and name.startswith("no-"))
        if following is not None and not switch and not (following.text or "-").startswith("--"):
            yield Arg("flag", word, name, following, (word, following))
            i += 1
        else:
            yield Arg("flag", word, name, None, (word,))


def _no_flag(word: Word, head: str) -> bool:
    """Whether an unknown word is one argument that is no flag, whatever its unknown text:
    a template's placeholder (``<PATH>``), or quoted text that starts otherwise
    (``"VALID: 1 $DATA"``)."""
    unknown = [p for p in word.parts if p.text is None]
    if unknown and all(p.placeholder for p in unknown):
        return True
    return bool(head) and not head.startswith("-") and not any(p.splits for p in unknown)


def flag_of(word: Word) -> str:
    """The flag a word writes, without its value (``--save`` of ``--save=$DIR``: an unknown
    word's known start)."""
    start = (word.parts[0].text or "") if word.parts else ""
    return (word.text or start).split("=")[0]
