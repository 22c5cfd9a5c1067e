"""``read`` given its line by the script itself (``IFS=, read -r TP PP <<< "$config"``): the
fields bash makes of that line, assigned as bash assigns them. Anything else ``read`` reads
(standard input, a file, a terminal) stays unknown (:func:`translator.shell.assign.unknown_outputs`)."""

from __future__ import annotations

from translator.shell import arrays
from translator.shell.assign import TARGET
from translator.shell.values import Env, Piece, Word, merge_sources, text_of

#: What bash's ``IFS`` is when the script does not set it.
DEFAULT_IFS = " \t\n"
#: The blanks among IFS characters: runs of them are one delimiter, and trimmed at the ends.
BLANKS = " \t\n"


def read_names(words: list[Word]) -> list[str] | None:
    """The names ``read`` assigns (``read [-r] NAME...``); ``None`` for any other option (an
    array, a delimiter, a count, a prompt, a time-out: not followed) or a name not known."""
    names: list[str] = []
    for word in words[1:]:
        text = word.text
        if text is None:
            return None
        if not names and text.startswith("-"):
            if text != "-r":
                return None
            continue
        if not TARGET.fullmatch(text) or "[" in text:
            return None
        names.append(text)
    return names or None


def fields(line: str, ifs: str, count: int) -> list[str]:
    """The values of ``count`` names read from ``line`` (bash's ``read -r``): split at IFS
    characters (a run of IFS blanks with at most one other IFS character between is one
    delimiter; IFS blanks trimmed at both ends); the last name gets the rest of the line."""
    blanks = "".join(c for c in ifs if c in BLANKS)
    others = "".join(c for c in ifs if c not in BLANKS)
    rest = line.strip(blanks)
    out: list[str] = []
    while len(out) < count - 1 and rest:
        end = next((i for i, c in enumerate(rest) if c in ifs), len(rest))
        out.append(rest[:end])
        at = end
        while at < len(rest) and rest[at] in blanks:
            at += 1
        if at < len(rest) and rest[at] in others:
            at += 1
            while at < len(rest) and rest[at] in blanks:
                at += 1
        rest = rest[at:] if end < len(rest) else ""
    if len(out) < count:
        out.append(rest)
    return out + [""] * (count - len(out))


def read_herestring(
    words: list[Word], text: tuple[Piece, ...], ifs: str | None, env: Env, line: int
) -> bool:
    """Assign what ``read`` (``words``, as expanded) takes from a here-string of ``text``
    (its pieces, as expanded) under ``ifs`` (the command's ``IFS``; ``None``: bash's default).
    Whether it was followed (``text`` known, options and names plain): else the names stay
    unknown, as for any ``read``."""
    names = read_names(words)
    given = text_of(text)
    if names is None or given is None:
        return False
    sources = merge_sources(text)
    values = fields(given.split("\n", 1)[0], DEFAULT_IFS if ifs is None else ifs, len(names))
    for name, value in zip(names, values):
        arrays.set_scalar(env, name, (Piece(value, None, None, sources),), False, line)
    return True
