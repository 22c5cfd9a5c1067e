"""Parsing config text safely, with errors that name the file and line: YAML and JSON.

Both give a :class:`Document`: the data, where each key stands (and the span of its value when
that is a scalar), and the keys a mapping sets more than once; a YAML text is also given as the
node graphs of its documents (:func:`compose_yaml`), for readers that follow a node to its line.
Hostile input is refused with an :class:`InputError` (exit 2): YAML aliases that expand past
:data:`ALIAS_BUDGET` nodes, recursive aliases, integers longer than :data:`MAX_INT_CHARS`, tags
that do not construct, nesting deeper than :data:`MAX_DEPTH` (YAML or JSON), and strings whose
escapes give a lone surrogate (``"\\ud800"``): not Unicode text, so they could be neither
printed nor written as UTF-8. Files are decoded as strict UTF-8 and escapes are decoded here, so
with this check nothing downstream meets a surrogate.
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import re
import reprlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import yaml

from translator.words import collector
from translator.words.errors import InputError

#: Nodes that aliases may add to a YAML document, all aliases together ("billion laughs").
ALIAS_BUDGET = 10_000
#: Characters of a scalar that count as one node in that budget (so a long string repeated by
#: aliases cannot get round it).
SCALAR_CHARS = 80
#: Longest integer literal read; longer ones cost quadratic time to convert (and to print).
MAX_INT_CHARS = 1000
#: Longest rendering of a value in a message.
BRIEF_CHARS = 60

#: A surrogate code point: what a ``\\uD800``-``\\uDFFF`` escape gives when nothing pairs it.
_SURROGATE = re.compile("[\ud800-\udfff]")
#: A JSON escape that may give a surrogate (a cheap test before any string is decoded).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_STRING = r'"(?:[^"\\]|\\.)*"'
_JSON_STRING = re.compile(_STRING)
_LITERAL = re.compile(_STRING + r"|-?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|Infinity)|NaN|true|false|null")
_JSON_TOKEN = re.compile(rf"({_STRING})(\s*:\s*)?|[{{}}\[\]]")


@dataclass(frozen=True)
class Duplicate:
    """A key set twice in one mapping; the later one is the one loaders keep."""

    path: str
    """Dotted path of the key (``deepspeed.train_batch_size``)."""
    first: int
    """1-based line of the first occurrence."""
    again: int
    """1-based line of the later occurrence."""
    same: bool
    """Whether both give the same scalar value."""


@dataclass
class Document:
    """What a config file holds, and where."""

    data: object
    """As ``yaml.safe_load`` / ``json.loads`` give it (the last of duplicate keys wins)."""
    positions: dict[str, tuple[int, tuple[int, int] | None]] = field(default_factory=dict)
    """Dotted key path (through mappings only) -> 1-based line and the character span of its
    value when that is a scalar; for a duplicated key, the later one."""
    duplicates: list[Duplicate] = field(default_factory=list)
    """Keys set more than once, in the order the later occurrences appear."""


def brief(value: object, quote: str = '"') -> str:
    """``value`` for a message: its ``repr`` (a string between ``quote`` marks), cut to a short
    length without ever rendering it whole (an expanded alias never reaches a message)."""
    if isinstance(value, str):
        text = f"{quote}{value[: BRIEF_CHARS + 1]}{quote}"
    else:
        text = _REPR.repr(value)
    return text if len(text) <= BRIEF_CHARS else text[: BRIEF_CHARS - 1] + "…"


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = BRIEF_CHARS


def _surrogate(decoded: str, why: str) -> str | None:
    """Why a decoded string that holds a surrogate is refused (``why``: what became of its
    pair), or ``None`` when it holds none. The surrogate is shown as its escape, never itself."""
    found = _SURROGATE.search(decoded)
    if found is None:
        return None
    return (
        f"a string escapes \\u{ord(found.group()):04x}, a surrogate {why}: not text "
        "(write the character itself); refused"
    )


# YAML ------------------------------------------------------------------------------------------


class _Refused(Exception):
    """A YAML document refused while composing; ``line`` is 1-based."""

    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line


#: Deepest nesting of collections read (PyYAML's own composer stops near 300, on recursion).
MAX_DEPTH = 200
#: An anchor: ``&name``.
_ANCHOR = re.compile(r"&([^\s,\[\]{}]+)")


class _Constructing(yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """Constructing safely: constructor crashes (``!!int 'abc'``, a 13th month) become YAML
    errors at the node's line. What aliases expand to is checked on the composed graph
    (:func:`_check_graph`) before anything is constructed."""

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"cannot read {node.tag.rsplit(':', 1)[-1]} {brief(node.value)}: "
                f"{type(exc).__name__}",
                node.start_mark,
            ) from None

    def construct_scalar(self, node):
        if isinstance(node, yaml.ScalarNode):
            refusal = _surrogate(node.value, "(YAML never pairs them)")
            if refusal is not None:
                raise _Refused(node.start_mark.line + 1, refusal)
        return super().construct_scalar(node)

    def construct_yaml_int(self, node):
        if len(node.value) > MAX_INT_CHARS:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {len(node.value)} characters; refused", node.start_mark
            )
        return super().construct_yaml_int(node)


_Constructing.add_constructor("tag:yaml.org,2002:int", _Constructing.construct_yaml_int)  # type: ignore[type-var]


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _Constructing,
):
    """PyYAML's own scanner and composer: for a text with ``\\u`` escapes, whose lone
    surrogates libyaml refuses with a vaguer message than :func:`_surrogate`'s."""

    def __init__(self, text: str):
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _Constructing.__init__(self)


if yaml.__with_libyaml__:

    class _CLoader(yaml.cyaml.CParser, _Constructing):  # type: ignore[name-defined]
        """libyaml's scanner and composer with :class:`_Constructing`'s construction."""

        def __init__(self, text: str):
            yaml.cyaml.CParser.__init__(self, text)  # type: ignore[attr-defined]
            _Constructing.__init__(self)


def _loader(text: str):
    """libyaml's scanner and composer (C: the same node graph and line marks, several times
    faster than PyYAML's) unless PyYAML lacks libyaml, ``text`` escapes a character by code
    (see :class:`_Loader`), or it may nest deeper than :data:`MAX_DEPTH`: libyaml's composer
    recurses on the C stack, where a deep enough document crashes the process, while
    PyYAML's stops with a RecursionError. A text that starts with a byte-order mark is
    PyYAML's too: libyaml's character positions leave the mark out, which would put every
    edit one character early."""
    if text.startswith("\ufeff"):
        return _Loader(text)
    if not yaml.__with_libyaml__ or "\\u" in text or "\\U" in text or _may_be_deep(text):
        return _Loader(text)
    return _CLoader(text)


_BRACKETS = re.compile(r"[\[\]{}]")
#: What a line starts with before its content: indentation, and the indicators of block
#: entries that open a collection on the same line (``- - - x`` nests three sequences).
_LEAD = re.compile(r"(?:\s|[-?:](?=\s|$))*")


def _may_be_deep(text: str) -> bool:
    """Whether ``text`` may nest collections deeper than :data:`MAX_DEPTH` (an over-estimate:
    brackets in strings count too, and so do indentation and block indicators)."""
    leads = (m.end() for m in map(_LEAD.match, text.splitlines()) if m)
    if max(leads, default=0) > MAX_DEPTH:
        return True
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    depth = deepest = 0
    for bracket in _BRACKETS.finditer(text):
        depth += 1 if bracket.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest > MAX_DEPTH


def _check_graph(root: yaml.Node, text: str) -> None:
    """Refuse a graph whose aliases expand past :data:`ALIAS_BUDGET` nodes, that holds itself
    (a recursive alias), or that nests deeper than :data:`MAX_DEPTH`, naming the line of the
    alias's key (or of the sequence that holds it). The
    graph is walked in document order: the first meeting of a node is its anchor, each further
    one an alias, costing what the node expands to."""
    expanded = 0
    sizes: dict[int, int] = {}
    met: set[int] = set()
    holding: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, root.start_mark.line + 1, False)]
    while stack:
        node, line, leaving = stack.pop()
        if leaving:
            holding.discard(id(node))
            continue
        if id(node) in holding:
            anchor = _ANCHOR.search(text.splitlines()[node.start_mark.line])
            name = f"*{brief(anchor.group(1), '')}" if anchor else "an alias"
            raise _Refused(
                line, f"alias {name} refers to itself (a recursive structure); not a config"
            )
        if id(node) in met:
            expanded += _size(node, sizes)
            if expanded > ALIAS_BUDGET:
                raise _Refused(
                    line,
                    f"aliases expand to more than {ALIAS_BUDGET} nodes (an alias bomb?); refused",
                )
            continue
        met.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            continue
        holding.add(id(node))
        if len(holding) > MAX_DEPTH:
            raise RecursionError
        stack.append((node, line, True))
        # An alias stands on its key's line in a mapping; in a sequence, on the sequence's
        # (the composed graph keeps no mark of the alias itself).
        here = node.start_mark.line + 1
        children = (
            [(child, here) for child in node.value]
            if isinstance(node, yaml.SequenceNode)
            else [(c, k.start_mark.line + 1) for k, v in node.value for c in (k, v)]
        )
        stack.extend((child, line, False) for child, line in reversed(children))


def _size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """Nodes in ``node`` with every alias expanded (memoised: shared nodes cost once); a long
    scalar counts as one node per :data:`SCALAR_CHARS` characters."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    if isinstance(node, yaml.ScalarNode):
        size = 1 + len(node.value) // SCALAR_CHARS
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_size(child, sizes) for child in node.value)
    else:
        size = 1 + sum(_size(k, sizes) + _size(v, sizes) for k, v in node.value)
    sizes[id(node)] = size
    return size


#: What a parser hands out that nothing changes in place: shared, not copied.
_ATOMS = frozenset(
    {str, int, float, bool, type(None), bytes, datetime.date, datetime.datetime, datetime.time}
)


def copied(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """A copy of parsed data that a reader may change: each dict and list new, what is shared
    or refers to itself (YAML's aliases) kept so, as ``copy.deepcopy`` does, several times
    faster on these trees (each reader asks for its own copy of a text parsed once)."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is not dict and kind is not list:
        return copy.deepcopy(value)
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]
    if kind is dict:
        out: dict[Any, Any] = {}
        memo[id(value)] = out
        out.update((k, copied(v, memo)) for k, v in value.items())
        return out
    items: list[Any] = []
    memo[id(value)] = items
    items.extend(copied(v, memo) for v in value)
    return items


def load_mapping(text: str, where: str, what: str) -> Document:
    """A JSON object (text starting with ``{``) or a YAML mapping; anything else is refused as
    not ``what`` (``TrainingArguments``, ``an accelerate config``)."""
    doc = load_json(text, where) if text.lstrip().startswith("{") else load_yaml(text, where)
    if not isinstance(doc.data, dict):
        raise InputError(f"{where}: {what} must be a mapping, not {type(doc.data).__name__}")
    return doc


def load_yaml(text: str, where: str) -> Document:
    """The YAML document in ``text``, safely loaded (no tags, no code), with key positions and
    duplicate keys. A text is parsed once: detection, the spec check and the reader all ask
    for it, and each is handed its own copy of what the first parse found."""
    with _yaml_errors(where):
        found = _parsed(text)
    return Document(copied(found.data), dict(found.positions), list(found.duplicates))


def compose_yaml(text: str, where: str) -> tuple[yaml.Node, ...]:
    """The YAML documents of ``text`` (``---``) as node graphs, refused as :func:`load_yaml`
    refuses a text (alias bombs, deep nesting, invalid YAML). A node's marks give its line
    and its character offsets in ``text`` (not the text itself: libyaml's marks hold none).
    A text is composed once, and its graphs shared: they are read, never changed."""
    with _yaml_errors(where):
        return _composed(text)


@contextmanager
def _yaml_errors(where: str) -> Iterator[None]:
    """YAML that cannot be read, as an :class:`InputError` naming ``where`` and the line."""
    try:
        yield
    except _Refused as exc:
        raise InputError(f"{where}:{exc.line}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{at}: not valid YAML: {problem}") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply") from None


@functools.lru_cache(maxsize=8)
def _composed(text: str) -> tuple[yaml.Node, ...]:
    loader = _loader(text)
    docs = []
    with collector.paused():
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is not None:
                    _check_graph(node, text)
                    docs.append(node)
        finally:
            loader.dispose()
        collector.settle()
    return tuple(docs)


def clear_cache() -> None:
    """Forget the texts parsed so far, YAML, JSON and TOML (a benchmark's cold reads; the
    shell's own is :func:`translator.shell.syntax.clear_cache`)."""
    _parsed.cache_clear()
    _composed.cache_clear()
    _parsed_json.cache_clear()
    _parsed_toml.cache_clear()


def load_toml(text: str) -> dict:
    """``tomllib.loads(text)`` (its ``TOMLDecodeError`` raised), parsed once per text as
    :func:`load_yaml` does: the reader and the model lookup both ask for it."""
    return copied(_parsed_toml(text))


@functools.lru_cache(maxsize=64)
def _parsed_toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


@functools.lru_cache(maxsize=64)
def _parsed(text: str) -> Document:
    """``text`` parsed (errors are raised, never kept): the one copy :func:`load_yaml` hands
    out copies of."""
    loader = _loader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_graph(node, text)
        data = None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()
    doc = Document(data)
    if node is not None:
        _walk_yaml(node, doc)
    return doc


def _walk_yaml(root, doc: Document) -> None:
    """Fill ``doc.positions`` and ``doc.duplicates`` from the composed node graph."""
    seen = set()
    stack: list[tuple[yaml.Node, str | None]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen or isinstance(node, yaml.ScalarNode):
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, None) for child in node.value)
            continue
        first: dict[tuple[str, str], tuple[int, yaml.Node]] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            name = key.value if not path else f"{path}.{key.value}"
            line = key.start_mark.line + 1
            scalar = isinstance(value, yaml.ScalarNode)
            if (key.tag, key.value) in first:
                before_line, before = first[(key.tag, key.value)]
                same = before is value or (
                    scalar
                    and isinstance(before, yaml.ScalarNode)
                    and (before.tag, before.value) == (value.tag, value.value)
                )
                doc.duplicates.append(Duplicate(name, before_line, line, same))
            first[(key.tag, key.value)] = (line, value)
            if path is not None:
                span = (value.start_mark.index, value.end_mark.index) if scalar else None
                doc.positions[name] = (line, span)
            stack.append((value, name if path is not None else None))
    doc.duplicates.sort(key=lambda d: d.again)


# JSON ------------------------------------------------------------------------------------------


class _LongInt(Exception):
    pass


def _parse_int(literal: str) -> int:
    if len(literal) > MAX_INT_CHARS:
        raise _LongInt(literal)
    return int(literal)


def load_json(text: str, where: str) -> Document:
    """``json.loads`` with one-line errors naming the file and line, key positions and
    duplicate keys (found in one pass over the text: linear in its length). A text is parsed
    once, as :func:`load_yaml` does."""
    try:
        found = _parsed_json(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except _LongInt as exc:
        line = text.count("\n", 0, text.find(str(exc))) + 1
        raise InputError(f"{where}:{line}: an integer of {len(str(exc))} digits; refused") from None
    except _Refused as exc:
        raise InputError(f"{where}:{exc.line}: {exc}") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply") from None
    return Document(copied(found.data), dict(found.positions), list(found.duplicates))


@functools.lru_cache(maxsize=64)
def _parsed_json(text: str) -> Document:
    """``text`` parsed (errors are raised, never kept): the one copy :func:`load_json` hands
    out copies of."""
    data = json.loads(text, parse_int=_parse_int)
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(data, MAX_DEPTH):
        raise RecursionError  # what reads it recurses (a deepcopy): refused before
    if _SURROGATE_ESCAPE.search(text):
        _refuse_surrogates(text)
    doc = Document(data)
    _scan_json(text, doc)
    return doc


def _deeper_than(data: object, depth: int) -> bool:
    """Whether ``data`` nests lists and objects more than ``depth`` deep."""
    stack = [(data, 1)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, (dict, list)):
            if at > depth:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, at + 1) for child in children)
    return False


def _refuse_surrogates(text: str) -> None:
    """Refuse a valid JSON ``text`` one of whose strings (key or value) escapes a surrogate
    that no other escape pairs (``json.loads`` joins a pair into its character)."""
    for m in _JSON_STRING.finditer(text):
        if "\\" not in m.group():
            continue
        refusal = _surrogate(json.loads(m.group()), "with no pair")
        if refusal is not None:
            raise _Refused(text.count("\n", 0, m.start()) + 1, refusal)


def _scan_json(text: str, doc: Document) -> None:
    """Positions and duplicates of every key of a valid JSON text, by one scan of its tokens."""
    # per open container: (dotted path, None under arrays; {key: (line, literal)}, None in arrays)
    frames: list[tuple[str | None, dict[str, tuple[int, str | None]] | None]] = []
    line, last, pending = 1, 0, None
    for m in _JSON_TOKEN.finditer(text):
        token = m.group()
        if m.group(2) is None and token[0] == '"':
            continue
        line += text.count("\n", last, m.start())
        last = m.start()
        if token == "{":
            frames.append(("" if not frames else pending, {}))
        elif token == "[":
            frames.append((None, None))
        elif token in "}]":
            frames.pop()
        if token in "{[}]":
            pending = None
            continue
        path, keys = frames[-1]
        if keys is None:  # a key is only ever inside an object
            continue
        raw = m.group(1)
        key = json.loads(raw) if "\\" in raw else raw[1:-1]
        literal = _LITERAL.match(text, m.end())
        value = literal.group() if literal else None
        name = None if path is None else key if not path else f"{path}.{key}"
        shown = name if name is not None else key
        if key in keys:
            before_line, before = keys[key]
            doc.duplicates.append(
                Duplicate(shown, before_line, line, value is not None and value == before)
            )
        keys[key] = (line, value)
        if name is not None:
            doc.positions[name] = (line, literal.span() if literal else None)
        pending = name
