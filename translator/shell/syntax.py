"""The script as tree-sitter-bash parses it: the tree, the map from tree-sitter's byte offsets
to the file's character offsets and lines, and what a syntax error says about the script."""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import replace

from translator.shell.notes import Note
from translator.shell.values import Piece, Span, clip
from translator.words.errors import InputError

_PARSER = None
_NEWLINE = re.compile(b"\n")
_SPLIT_DOLLARS = None
NON_ASCII = re.compile(rb"[\x80-\xff]")


class ScriptText:
    """A text being read (the file, or a string given to ``eval``) and how its offsets map
    back to the file."""

    def __init__(self, data: bytes, text: str, line0: int, pieces: list | None, inserted=()):
        self.data, self.text, self.line0, self.pieces = data, text, line0, pieces
        """``pieces``: for a string re-read by ``eval``, ``(offset, piece)`` for each of its
        stretches that is a literal of the file; ``None`` for the file itself."""
        self.inserted: list[int] = sorted(inserted)
        """Byte offsets of the braces :func:`braced` wrote into ``data``: no character of
        ``text`` stands there."""
        self.holes: dict[int, Piece] = {}
        """For the file: the unknown piece that each ``${__...}`` written over a statement
        bash cannot parse stands for, by the byte offset of its ``$`` (see :func:`repair`)."""
        self.ascii = text.isascii()
        if not self.ascii:
            self._byte_index()
        self.newlines = [m.start() for m in _NEWLINE.finditer(data)]

    def _byte_index(self) -> None:
        starts: list[int] = []
        extra: list[int] = []
        pos = 0
        for ch in self.text:
            n = len(ch.encode())
            if n > 1:
                starts.append(pos + n)
                extra.append((extra[-1] if extra else 0) + n - 1)
            pos += n
        self.wide_starts, self.wide_extra = starts, extra

    def char(self, byte: int) -> int:
        """The character offset of a byte offset."""
        if self.inserted:
            byte -= bisect.bisect_left(self.inserted, byte)
        if self.ascii:
            return byte
        k = bisect.bisect_right(self.wide_starts, byte)
        return byte - (self.wide_extra[k - 1] if k else 0)

    def line(self, byte: int) -> int:
        """The file's line of a byte offset (a re-read string: the line it was on)."""
        if self.pieces is not None:
            return self.line0
        return bisect.bisect_left(self.newlines, byte) + 1

    def span(self, start_byte: int, end_byte: int) -> Span | None:
        """The file span of a verbatim stretch of this source, when there is one."""
        start, end = self.char(start_byte), self.char(end_byte)
        if self.pieces is None:
            return start, end
        for at, piece in self.pieces:  # a string re-read by eval: map through its pieces
            if piece.span and at <= start and end <= at + len(piece.text):
                return piece.span[0] + start - at, piece.span[0] + end - at
        return None

    def of(self, node) -> str:
        """A node's text, as written."""
        return self.data[node.start_byte : node.end_byte].decode()

    def spells(self, node, token: bytes) -> bool:
        """Whether a node is exactly ``token``."""
        return self.data[node.start_byte : node.end_byte] == token


def tree(data: bytes):
    """Parse with tree-sitter. Every byte of a non-ASCII character goes in as ``x``: bash treats
    such characters as plain word characters, byte offsets stay the same, and tree-sitter-bash
    (0.23 to 0.25) crashes the process on some code points (``b{`` then U+100000). A last
    line that ends in ``\\`` continues into the end of the file for bash, but is an error
    for tree-sitter: that backslash goes in as a blank."""
    data = NON_ASCII.sub(b"x", data) if not data.isascii() else data
    end = data.rstrip(b"\n")
    if end.endswith(b"\\") and len(data) - len(end) <= 1 and not end.endswith(b"\\\\"):
        data = end[:-1] + b" " + data[len(end) :]
    return _parser().parse(data)


def _parser():
    global _PARSER, _SPLIT_DOLLARS
    if _PARSER is None:  # imported on first use, so importing batchspec stays fast
        import tree_sitter_bash
        from tree_sitter import Language, Parser, Query, QueryCursor

        bash = Language(tree_sitter_bash.language())
        _PARSER = Parser(bash)
        _SPLIT_DOLLARS = QueryCursor(Query(bash, '(concatenation "$" @dollar)'))
    return _PARSER


def _split_dollars(root) -> list:
    """Each ``$`` that tree-sitter-bash left as a token of its own inside a word (see
    :func:`braced`), found by a query (the walk in Python took a third of a long script's
    read)."""
    _parser()
    assert _SPLIT_DOLLARS is not None
    return _SPLIT_DOLLARS.captures(root).get("dollar", [])


def literal(src: ScriptText, start: int, end: int) -> list[Piece]:
    """The text between two byte offsets as it stands in a double-quoted string or heredoc:
    one piece, with its span when no backslash had to be removed."""
    raw = src.data[start:end].decode(errors="replace")
    if "\\" in raw:
        text = re.sub(r'\\\n|\\([$`"\\])', lambda m: m.group(1) or "", raw)
        if text != raw:
            return [Piece(text)]
    span = src.span(start, end)
    return [Piece(raw, span, None, frozenset({span}) if span else frozenset())]


#: A template's placeholder (``<Specify path>``, ``--port=<your_port>``, ``<DIR>/train``),
#: which bash would take for redirections: ``<`` starting a word, closed by a ``>`` right
#: after its last character.
PLACEHOLDER = re.compile(rb"(?<![^\s=:,])<[^\s<>()&|;][^<>\n]*?(?<=[^\s\\])>(?![>&|(])")
#: Where a ``<...>`` is text, not code.
TEXT_NODES = {
    "string",
    "raw_string",
    "ansi_c_string",
    "translated_string",
    "comment",
    "heredoc_body",
    "heredoc_content",
    "heredoc_redirect",
    "arithmetic_expansion",
    "test_command",
}
#: ``NAME=`` (``export NAME=``...) at the start of a line.
ASSIGNMENT = re.compile(
    rb"[ \t]*(?:(?:export|local|readonly|declare|typeset)[ \t]+(?:-\w+[ \t]+)*)?"
    rb"[A-Za-z_]\w*\+?="
)
#: Rounds of repair before a script that still does not parse is refused.
MAX_REPAIRS = 50


#: Most digits a number in a launch file may have: more is a typo or an attack, never a size
#: (Python refuses to convert past 4,300 digits anyway).
MAX_DIGITS = 1000
_LONG_NUMBER = re.compile(rf"\d{{{MAX_DIGITS + 1},}}")


def refuse_long_numbers(text: str, where: str, line: bool = True) -> None:
    """An :class:`InputError` naming the line (``line``; else ``where`` alone: a value given
    on the command line) of a number longer than :data:`MAX_DIGITS`."""
    found = _LONG_NUMBER.search(text)
    if found is not None:
        at = f":{text.count(chr(10), 0, found.start()) + 1}" if line else ""
        raise InputError(f"{where}{at}: a number of {len(found.group())} digits; refused")


#: A name right after a ``$`` that tree-sitter-bash left as text.
NAME_AFTER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def braced(data: bytes, root) -> tuple:
    """``(data, root, inserted)``: ``data`` with each name that tree-sitter-bash splits from
    its ``$`` written in braces, and its tree. Unquoted, ``$A/$B/c`` parses as the word
    ``$A/$`` and a word ``B/c`` (tree-sitter-bash issue 315), where bash expands ``$B``;
    ``${B}`` parses as it runs. ``inserted``: the byte offsets of the braces in the new
    data (see :class:`ScriptText`)."""
    inserted: list[int] = []
    for _ in range(MAX_REPAIRS):
        sites = []
        for node in _split_dollars(root):
            name = NAME_AFTER.match(data, node.end_byte)
            if name is not None:
                sites.append((node.end_byte, name.end()))
        if not sites:
            break
        for start, end in sorted(sites, reverse=True):
            data = data[:start] + b"{" + data[start:end] + b"}" + data[end:]
            inserted = [i + (i >= start) + (i >= end) for i in inserted]
            inserted += [start, end + 1]
        root = tree(data).root_node
    return data, root, sorted(inserted)


def repair(data: bytes, text: str, where: str) -> tuple:
    """:func:`repaired`: each text is parsed once (a job's script is read again by the engine
    check, a sourced file by each script that sources it); every caller gets its own holes,
    notes and offsets."""
    out, root, holes, notes, inserted = repaired(data, text, where)
    return out, root, dict(holes), list(notes), list(inserted)


def clear_cache() -> None:
    """Forget the texts parsed so far (a benchmark's cold reads)."""
    repaired.cache_clear()


@functools.lru_cache(maxsize=16)
def repaired(data: bytes, text: str, where: str) -> tuple:
    """What tree-sitter is given for a script whose templates hold statements bash cannot
    parse (``DATA_PATH=<Specify path>``, ``--data-path <path> \\`` in a continued command):
    ``(data, root, holes, notes)``. Each placeholder ``<...>`` is written over with a
    reference ``${__}`` of the same length, standing for an unknown piece (``holes``, by the
    byte offset of its ``$``); each statement that still does not parse is written over
    with spaces (a name it assigns, ``NAME=${__}``: unknown from there on), up to
    MAX_REPAIRS rounds. Every offset stays the same, so the spans of the other literals are
    exact; ``notes`` say what was read as unknown. An :class:`InputError` for a real error
    (an unterminated quote, ``if`` without ``fi``, an unclosed heredoc or array)."""
    data, root, inserted = braced(data, tree(data).root_node)
    if root.has_error and SUBSTRING.search(data):
        data, root = _substrings(data, root)
    holes: dict[int, Piece] = {}
    notes: dict[int, Note] = {}
    if not root.has_error and b"<" not in data:
        return data, root, holes, [], inserted
    buf = bytearray(data)
    orig = ScriptText(data, text, 1, None, inserted)
    changed = False
    for m in PLACEHOLDER.finditer(data):
        if _is_code(root, m.start()):
            changed |= _write_hole(buf, m.start(), m.end(), orig, holes, notes)
    for _ in range(MAX_REPAIRS):
        if changed:
            root = tree(bytes(buf)).root_node
        if not root.has_error:
            break
        errors = _errors(root, ScriptText(bytes(buf), text, 1, None, inserted), where)
        changed = False
        for node in errors:
            changed |= _blank(buf, node, orig, holes, notes)
        if not changed:
            break
    out = bytes(buf)
    if root.has_error:
        check_syntax(root, ScriptText(out, text, 1, None, inserted), where)
    return out, root, holes, sorted(notes.values(), key=lambda n: n.line or 0), inserted


#: ``${X:$N+1}``: a substring at an offset bash computes, which tree-sitter-bash cannot parse.
SUBSTRING = re.compile(rb"\$\{[A-Za-z_]\w*:(\$)")
#: Where a ``$`` is text that no expansion reads.
QUOTED_NODES = {"raw_string", "ansi_c_string", "comment"}


def _substrings(data: bytes, root) -> tuple:
    """``data`` with the ``$`` that starts each ``${X:$N...}`` offset written as a blank, and
    its tree: the offset is arithmetic either way (``$N+1`` is ``N+1``), the reader leaves
    substrings unknown, and every other offset stays."""
    buf = bytearray(data)
    for m in SUBSTRING.finditer(data):
        node = root.descendant_for_byte_range(m.start(), m.start() + 1)
        while node is not None and node.type not in QUOTED_NODES:
            node = node.parent
        if node is None:
            buf[m.start(1)] = ord(" ")
    out = bytes(buf)
    return out, tree(out).root_node


def _is_code(root, at: int) -> bool:
    """Whether the byte at ``at`` stands in code (not in a string, comment or heredoc)."""
    node = root.descendant_for_byte_range(at, at + 1)
    while node is not None:
        if node.type in TEXT_NODES:
            return False
        node = node.parent
    return True


def _statement(src: ScriptText, start: int, end: int) -> str:
    """The text of the lines from byte ``start`` to byte ``end``, for messages."""
    a = src.data.rfind(b"\n", 0, start) + 1
    b = src.data.find(b"\n", end)
    line = src.data[a : b if b >= 0 else len(src.data)].decode(errors="replace").strip()
    return line[:-1].rstrip() if line.endswith("\\") else line


def _unparsed(src: ScriptText, start: int, end: int, notes: dict) -> Piece:
    """The unknown piece for a statement bash cannot parse, and its note."""
    line = src.line(start)
    what = clip(_statement(src, start, end))
    notes.setdefault(
        line, Note(line, f"bash cannot parse this statement (`{what}`); read as unknown")
    )
    return Piece(None, None, f"line {line}: bash cannot parse this statement ({what})")


def _write_hole(buf: bytearray, start: int, end: int, src: ScriptText, holes, notes) -> bool:
    """Write ``${__}`` over ``buf[start:end]`` (a reference to an unknown piece)."""
    ref = _reference(end - start, bytes(buf[end : end + 1]))
    if ref is None:
        return False
    buf[start:end] = ref
    holes[start] = replace(_unparsed(src, start, end, notes), placeholder=True)
    return True


def _reference(n: int, after: bytes) -> bytes | None:
    """A variable reference ``n`` bytes long (``${___}``, or ``$__`` before a character that
    cannot continue a name); ``None`` when none fits."""
    if n >= 4:
        return b"${" + b"_" * (n - 3) + b"}"
    if n >= 2 and not re.match(rb"\w", after):
        return b"$" + b"_" * (n - 1)
    return None


def _errors(root, src: ScriptText, where: str) -> list:
    """The statements tree-sitter could not parse, outermost ones; an :class:`InputError` for
    a construct left open (a token tree-sitter had to invent, an unterminated quote)."""
    out = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing:
            opener = node.parent
            line = src.line(opener.start_byte) if opener is not None else src.line(node.start_byte)
            raise InputError(f"{where}:{line}: {_missing(node.type, opener, src)}")
        if node.type == "ERROR":
            text = src.data[node.start_byte : node.end_byte].decode(errors="replace").strip()
            what = _error(text)
            if not what.startswith("bash cannot parse"):
                raise InputError(f"{where}:{src.line(node.start_byte)}: {what}")
            out.append(node)
            continue
        if node.has_error:
            stack.extend(reversed(node.children))
    return out


def _blank(buf: bytearray, node, src: ScriptText, holes, notes) -> bool:
    """Write spaces over a statement that does not parse (``src``: the file as written); in a
    continued command (``\\`` lines), only from the error to its line's end, backslash kept.
    Whether anything changed."""
    start, end = node.start_byte, max(node.end_byte, node.start_byte + 1)
    first = buf.rfind(b"\n", 0, start) + 1
    eol = buf.find(b"\n", start)
    eol = len(buf) if eol < 0 else eol
    continues = buf[first:eol].rstrip().endswith(b"\\")
    continued = first >= 2 and buf[: first - 1].rstrip(b" \t").endswith(b"\\")
    if continues or continued:
        stop = eol - (len(buf[first:eol]) - len(buf[first:eol].rstrip()))
        stop -= 1 if continues else 0
        return _spaces(buf, start, stop, src, notes) is not None
    last = buf.find(b"\n", end - 1)
    last = len(buf) if last < 0 else last
    assignment = ASSIGNMENT.match(buf, first, eol)
    head = bytes(buf[first : assignment.end()]) if assignment is not None else b""
    piece = _spaces(buf, first, last, src, notes)
    if piece is None:
        return False
    ref = _reference(min(eol - assignment.end(), 4), b" ") if assignment is not None else None
    if assignment is not None and ref is not None:
        at = assignment.end()
        buf[first:at] = head
        buf[at : at + len(ref)] = ref
        holes[at] = piece
    return True


def _spaces(buf: bytearray, start: int, stop: int, src: ScriptText, notes) -> Piece | None:
    """Write spaces over ``buf[start:stop]``, newlines and line-ending backslashes kept; the
    unknown piece of the statement, ``None`` when nothing changed."""
    old = bytes(buf[start:stop])
    lines = old.split(b"\n")
    new = b"\n".join(
        b" " * (len(ln) - 1) + b"\\" if ln.endswith(b"\\") else b" " * len(ln) for ln in lines
    )
    if new == old:
        return None
    buf[start:stop] = new
    return _unparsed(src, start, stop, notes)


def check_syntax(root, src: ScriptText, where: str) -> None:
    """An :class:`InputError` naming the line of the first syntax error, if there is one."""
    if not root.has_error:
        return
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing:
            opener = node.parent
            line = src.line(opener.start_byte) if opener is not None else src.line(node.start_byte)
            raise InputError(f"{where}:{line}: {_missing(node.type, opener, src)}")
        if node.type == "ERROR":
            text = src.data[node.start_byte : node.end_byte].decode(errors="replace").strip()
            raise InputError(f"{where}:{src.line(node.start_byte)}: {_error(text)}")
        if node.has_error:
            stack.extend(reversed(node.children))


#: The tokens tree-sitter invents to close a construct, and what their absence means.
MISSING = {
    '"': "unterminated double quote",
    "'": "unterminated single quote",
    ")": "unterminated ( (no closing parenthesis)",
    "}": "unterminated ${ or {",
    "))": "unterminated $(( arithmetic",
    "fi": "if without fi",
    "done": "loop without done",
    "esac": "case without esac",
}
#: How a stretch tree-sitter could not parse starts, and what that says.
OPENERS = (
    ("'", "unterminated single quote"),
    ('"', "unterminated double quote"),
    ("${", "unterminated ${"),
    ("$((", "unterminated $(( arithmetic"),
    ("$(", "unterminated $("),
    ("`", "unterminated backquote"),
)


def _missing(kind: str, opener, src: ScriptText) -> str:
    """What a token tree-sitter had to invent says about the script."""
    if opener is not None and opener.type == "array":
        assignment = opener.parent
        head = (
            src.data[assignment.start_byte : opener.start_byte + 1].decode(errors="replace")
            if assignment is not None
            else "("
        )
        return f"unterminated array {head} (no closing parenthesis)"
    if kind == "heredoc_end" and opener is not None:
        start = next((c for c in opener.children if c.type == "heredoc_start"), None)
        marker = (
            src.data[start.start_byte : start.end_byte].decode(errors="replace").strip("'\"")
            if start is not None
            else "its marker"
        )
        return f"heredoc not closed by {marker}"
    return MISSING.get(kind, f"bash syntax error: {kind} missing")


def _error(text: str) -> str:
    """A stretch tree-sitter could not parse, described by how it starts."""
    for opener, what in OPENERS:
        if (
            text.startswith(opener)
            or re.match(r"\S*\s*" + re.escape(opener), text)
            and text.count(opener[0]) % 2
        ):
            return what
    return f"bash cannot parse this: {clip(text)}"
