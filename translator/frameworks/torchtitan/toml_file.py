"""A torchtitan TOML job file (``[training]``, ``[parallelism]`` tables): its values as
``tomllib`` reads them, each with its line and, for a plain ``key = literal`` line, the
literal's span (``update`` rewrites it and keeps every other byte)."""

from __future__ import annotations

import re
import tomllib

from translator.reading import Value
from translator.shell.syntax import refuse_long_numbers
from translator.words.errors import InputError
from translator.words.parsing import load_toml

#: A table header (``[training]``, ``[quantize.linear.float8]``, ``[[validation]]``).
_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\]?\s*(#.*)?$")
#: A ``key = value`` line: the bare key, then the literal up to a comment.
_PAIR = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*=\s*([^#\r\n]*?)\s*(#.*)?\r?$")

#: A literal whose value needs no TOML parser: a decimal integer without ``_``, a boolean, a
#: basic string without escapes.
_PLAIN = re.compile(r'0|[1-9][0-9]*|true|false|"[^"\\\x00-\x1f\x7f]*"')


def load(text: str, where: str) -> dict:
    """The parsed document; malformed TOML is an input error naming the file and line."""
    refuse_long_numbers(text, where)
    try:
        return load_toml(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        at = f"{where}:{line.group(1)}" if line else where
        raise InputError(f"{at}: not valid TOML: {str(exc).split(' (at ')[0]}") from None


def positions(text: str) -> dict[str, tuple[int, tuple[int, int] | None]]:
    """``table.key`` -> (line, span of its literal) for each plain ``key = literal`` line."""
    out: dict[str, tuple[int, tuple[int, int] | None]] = {}
    table = ""
    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        header = _HEADER.match(line)
        pair = None if header else _PAIR.match(line)
        if header:
            table = header.group(1).replace('"', "").replace(" ", "")
        elif pair:
            key = f"{table}.{pair.group(1)}" if table else pair.group(1)
            start = offset + pair.start(2)
            out.setdefault(key, (number, (start, start + len(pair.group(2)))))
        offset += len(line)
    return out


def values(
    text: str, data: dict, keys, aliases: dict[str, str]
) -> tuple[dict[str, Value], dict[str, int]]:
    """``(key -> Value for each of keys the document sets, every table key -> its line)``, a key
    of ``aliases`` (old name -> key) under its key unless the key itself is set; a
    span only where the literal reads as the value (``10_000`` does not: it is left alone)."""
    at = positions(text)
    found: dict[str, Value] = {}
    for key in [*aliases, *keys]:
        table, _, name = key.rpartition(".")
        holder = data.get(table) if table else data
        if not isinstance(holder, dict) or name not in holder:
            continue
        line, span = at.get(key, (None, None))
        if span is not None and _literal(text[span[0] : span[1]]) != holder[name]:
            span = None
        found[aliases.get(key, key)] = Value(holder[name], line, span)
    lines = {k: line for k, (line, _) in at.items()}
    return found, lines


def _literal(text: str) -> object:
    """A TOML literal as ``tomllib`` reads it, or the text when it is not one alone."""
    if _PLAIN.fullmatch(text):  # most lines (``8``, ``true``, ``"llama3"``): as tomllib reads them
        if text[0] == '"':
            return text[1:-1]
        return text == "true" if text in ("true", "false") else int(text)
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
