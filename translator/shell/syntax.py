"""The script as tree-sitter-bash parses it: the tree, the map from tree-sitter's byte offsets
to the file's character offsets and lines, and what a syntax error says about the script."""

from __future__ import annotations

import bisect
import re

from translator.errors import InputError
from translator.shell.values import Piece, Span, clip

_PARSER = None
NON_ASCII = re.compile(rb"[\x80-\xff]")


class Source:
    """A text being read (the file, or a string given to ``eval``) and how its offsets map
    back to the file."""

    def __init__(self, data: bytes, text: str, line0: int, pieces: list | None):
        self.data, self.text, self.line0, self.pieces = data, text, line0, pieces
        """``pieces``: for a string re-read by ``eval``, ``(offset, piece)`` for each of its
        stretches that is a literal of the file; ``None`` for the file itself."""
        self.ascii = text.isascii()
        if not self.ascii:
            self._byte_index()
        self.newlines = [i for i, b in enumerate(data) if b == 10] if b"\n" in data else []

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
    global _PARSER
    if _PARSER is None:  # imported on first use, so importing batchspec stays fast
        import tree_sitter_bash
        from tree_sitter import Language, Parser

        _PARSER = Parser(Language(tree_sitter_bash.language()))
    return _PARSER


def literal(src: Source, start: int, end: int) -> list[Piece]:
    """The text between two byte offsets as it stands in a double-quoted string or heredoc:
    one piece, with its span when no backslash had to be removed."""
    raw = src.data[start:end].decode(errors="replace")
    if "\\" in raw:
        text = re.sub(r'\\\n|\\([$`"\\])', lambda m: m.group(1) or "", raw)
        if text != raw:
            return [Piece(text)]
    span = src.span(start, end)
    return [Piece(raw, span, None, frozenset({span}) if span else frozenset())]


def check_syntax(root, src: Source, where: str) -> None:
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


def _missing(kind: str, opener, src: Source) -> str:
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
