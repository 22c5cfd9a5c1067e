"""Read a launch script the way bash would run it, without running anything.

The script is parsed with tree-sitter's bash grammar (every construct parses, with exact
positions) and then walked by a small evaluator that has no side effects:

- variables, arrays, ``${X:-d}``, ``${X:=d}``, ``${X:+w}``, ``${#X}``, ``$((...))`` (bash's
  64-bit arithmetic, :mod:`translator.shell_arith`), quotes, word splitting of unquoted
  expansions (word by word: a known word is read even when its neighbour is not);
- ``if``/``elif``/``case`` whose condition is decided by known values are followed; an
  assignment under a condition that is not decided (or in a loop body, after ``cond &&``)
  makes the variable unknown unless every path gives it the same value;
- subshells, pipeline elements and a command's own ``X=1 cmd`` environment do not change the
  script's variables; ``unset`` does; functions run when called, with their arguments as
  ``$1``...; ``local`` stays inside the function;
- ``eval STRING`` and ``bash -c STRING`` (also behind ``srun``) are parsed again and read;
- ``#SBATCH`` lines set what Slurm would set (``SLURM_NNODES``, ``SLURM_GPUS_PER_NODE``...).

Anything that would need running (``$1``, ``$(command)``, a variable the script never sets)
is *unknown*: kept with the reason, never guessed. Values grow to a fixed size at most, then
become unknown, so reading time and memory stay linear in the script.
"""

from __future__ import annotations

import bisect
import fnmatch
import re
from dataclasses import dataclass, field

from translator import shell_arith
from translator.errors import InputError
from translator.reading import Note

Span = tuple[int, int]
#: Limits that keep reading linear: past them a value becomes unknown.
MAX_TEXT = 64 * 1024
MAX_ITEMS = 10_000
MAX_PIECES = 1024
MAX_SOURCES = 64
MAX_DEPTH = 100
MAX_CALL_DEPTH = 16
MAX_EVALS = 8
MAX_CHOICES = 32
#: A source set that stands for "more places than we keep" (update refuses to edit those).
MANY: Span = (-1, -1)
UNSET = "unset"
#: Nodes that start with ``$`` (and may carry blanks before it, inside a string).
EXPANSIONS = {
    "simple_expansion",
    "expansion",
    "command_substitution",
    "arithmetic_expansion",
    "process_substitution",
}
#: Stands for an unknown stretch in the alternatives of an undecided value.
UNKNOWN_MARK = "\0"
LEADING_BLANKS = re.compile(r"(?:\s|\\\n)*")
SHELLS = {"bash", "sh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/usr/bin/env"}


@dataclass(frozen=True)
class Piece:
    """A stretch of a word's text and where it came from."""

    text: str | None
    """``None`` when unknown."""
    span: Span | None = None
    """Character offsets of the literal this text is, verbatim, when there is one."""
    why: str | None = None
    """For unknown text: what stood there."""
    sources: frozenset = frozenset()
    """Every literal this text was computed from (for an edit's side effects)."""
    maybe: tuple[tuple[str, ...], ...] | None = None
    """For an unknown value that is one of a few (an ``if`` the reader cannot decide set it
    either way): each possible value's items, unknown stretches as ``UNKNOWN_MARK``."""


@dataclass(frozen=True)
class Word:
    """One shell word after expansion."""

    text: str | None
    """The expanded text; ``None`` when it depends on something we cannot know."""
    line: int
    """1-based line the word stands on."""
    span: Span | None = None
    """Character offsets of the literal that gave the whole word, when there is one (for a
    ``$VAR`` word: the literal in the variable's assignment)."""
    why_unknown: str | None = None
    """What made it unknown (``$1``, ``$(...)``, an unset variable)."""
    sources: frozenset = frozenset()
    """The literals (spans) the word's text was computed from."""
    parts: tuple[Piece, ...] = ()
    """For an unknown word: its pieces, known and unknown (a string given to ``eval`` or
    ``bash -c`` is read again with only the unknown pieces left as holes)."""
    maybe: tuple[tuple[str, ...], ...] | None = None
    """For an unknown word that is all one undecided value: the items of each value it may
    have, unknown stretches as ``UNKNOWN_MARK``."""


@dataclass
class Script:
    """Commands and variables of a script, in order."""

    commands: list[list[Word]] = field(default_factory=list)
    """Each simple command's words, assignments removed, in the order they would run."""
    variables: dict[str, list[Word]] = field(default_factory=dict)
    """Scalars (one word) and arrays, as they stand at the end of the script."""
    notes: list[Note] = field(default_factory=list)
    """What the reader did not follow (``line 3: source env.sh is not read``)."""
    paths: list[tuple] = field(default_factory=list)
    """For each command: the undecided branches it runs under, as ``((choice, what), path)``
    pairs (``what`` such as ``the if on line 12``); two commands on different paths of one
    choice never both run."""
    heredocs: list[Heredoc] = field(default_factory=list)
    """Here-documents written to a file (``cat <<EOT > $config_json``), expanded."""


@dataclass(frozen=True)
class Heredoc:
    """A here-document that a command writes to a file."""

    target: Word
    """The file it is written to (``> FILE`` after the ``<<EOT``)."""
    pieces: tuple[Piece, ...]
    """The body after expansion, piece by piece (unknown pieces have ``text`` ``None``)."""
    line: int
    """Line of the ``<<`` that opens it."""


def _merge_sources(pieces) -> frozenset:
    out: set = set()
    for p in pieces:
        out |= p.sources
        if len(out) > MAX_SOURCES:
            return frozenset({MANY})
    return frozenset(out)


def _unknown(why: str, sources=frozenset()) -> tuple[Piece, ...]:
    return (Piece(None, None, why, sources),)


def _text_of(pieces) -> str | None:
    if any(p.text is None for p in pieces):
        return None
    return "".join(p.text for p in pieces)


def _why(pieces) -> str | None:
    return next((p.why for p in pieces if p.text is None), None)


def _bounded(pieces: tuple) -> tuple:
    """A value past the size limits becomes unknown (or loses its per-piece spans)."""
    text = _text_of(pieces)
    if text is not None and len(text) > MAX_TEXT:
        return _unknown("a value longer than 64 KiB", _merge_sources(pieces))
    if len(pieces) > MAX_PIECES:  # runs of known text become one piece each (no span)
        runs, known = [], []
        for p in pieces + (None,):
            if p is not None and p.text is not None:
                known.append(p)
                continue
            if known:
                runs.append(Piece(_text_of(known), None, None, _merge_sources(known)))
                known = []
            if p is not None:
                runs.append(p)
        if len(runs) > MAX_PIECES:
            return _unknown(_why(pieces), _merge_sources(pieces))
        return tuple(runs)
    return pieces


@dataclass
class _Var:
    """A variable's value: one scalar (a tuple of pieces) or an array of them."""

    items: tuple
    """Tuple of scalars; a scalar variable has one item."""
    array: bool = False
    lines: tuple | list = ()
    """For an array: the line each item is written on."""
    overflow: bool = False
    """The array grew past MAX_ITEMS: unknown from then on."""

    @property
    def scalar(self) -> tuple:
        return self.items[0] if self.items else (Piece("", None),)


class _Env:
    """Variables in layers: a fork sees its parent and keeps its own changes apart."""

    def __init__(self, parent: _Env | None = None, function: bool = False):
        self.parent, self.own = parent, {}
        self.locals: set[str] | None = set() if function else None
        """For a function's frame: the names declared ``local`` in it."""

    def get(self, name: str):
        env = self
        while env is not None:
            if name in env.own:
                return env.own[name]
            env = env.parent
        return None

    def set(self, name: str, value) -> None:
        self.own[name] = value

    def fork(self, function: bool = False) -> _Env:
        return _Env(self, function)

    def declare_local(self, name: str) -> None:
        """``local NAME``: the name belongs to the innermost function frame."""
        env = self
        while env is not None and env.locals is None:
            env = env.parent
        if env is not None:
            env.locals.add(name)


class _Source:
    """A text being read (the file, or a string given to ``eval``) and how its offsets map
    back to the file."""

    def __init__(self, data: bytes, text: str, line0: int, pieces: list | None):
        self.data, self.text, self.line0, self.pieces = data, text, line0, pieces
        self.ascii = text.isascii()
        if not self.ascii:
            self.wide = [(len(text[:i].encode()), i) for i in range(0)]  # filled lazily below
            self._byte_index()
        self.newlines = [i for i, b in enumerate(data) if b == 10] if b"\n" in data else []

    def _byte_index(self) -> None:
        starts, extra, pos = [], [], 0
        for ch in self.text:
            n = len(ch.encode())
            if n > 1:
                starts.append(pos + n)
                extra.append((extra[-1] if extra else 0) + n - 1)
            pos += n
        self.wide_starts, self.wide_extra = starts, extra

    def char(self, byte: int) -> int:
        if self.ascii:
            return byte
        k = bisect.bisect_right(self.wide_starts, byte)
        return byte - (self.wide_extra[k - 1] if k else 0)

    def line(self, byte: int) -> int:
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


_PARSER = None
NON_ASCII = re.compile(rb"[\x80-\xff]")


def _tree(data: bytes):
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
    if _PARSER is None:
        import tree_sitter_bash
        from tree_sitter import Language, Parser

        _PARSER = Parser(Language(tree_sitter_bash.language()))
    return _PARSER


class _Reader:
    def __init__(self, where: str, budget: int):
        self.where = where
        self.script = Script()
        self.functions: dict[str, tuple] = {}
        self.calls = 0
        self.evals = 0
        self.steps, self.budget = 0, budget
        self.prefix: list[Word] = []  # the launcher words before ``bash -c`` being read
        self.path: tuple = ()  # the undecided branches the reader is in, see Script.paths
        self.choices = 0
        self.depth = 0

    # -- entry points ---------------------------------------------------------------------------
    def read(self, text: str) -> Script:
        data = text.encode()
        src = _Source(data, text, 1, None)
        tree = _tree(data)
        self.check_syntax(tree.root_node, src)
        env = _Env()
        self.slurm(text, env)
        self.block(tree.root_node, env, src)
        for name, var in env.own.items():
            if isinstance(var, _Var):
                lines = var.lines or (0,) * len(var.items)
                self.script.variables[name] = [self.to_word(s, n) for s, n in zip(var.items, lines)]
        return self.script

    def check_syntax(self, root, src: _Source) -> None:
        if not root.has_error:
            return
        stack = [root]
        while stack:
            node = stack.pop()
            if node.is_missing:
                opener = node.parent
                line = (
                    src.line(opener.start_byte) if opener is not None else src.line(node.start_byte)
                )
                raise InputError(f"{self.where}:{line}: {_missing(node.type, opener, src)}")
            if node.type == "ERROR":
                text = src.data[node.start_byte : node.end_byte].decode(errors="replace").strip()
                raise InputError(f"{self.where}:{src.line(node.start_byte)}: {_error(text)}")
            if node.has_error:
                stack.extend(reversed(node.children))

    def slurm(self, text: str, env: _Env) -> None:
        """``#SBATCH`` lines before the first command: the variables Slurm sets from them."""
        pos = 0
        for line in text.splitlines(keepends=True):
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                break
            m = re.match(r"\s*#SBATCH\s+(.*)", line)
            if m:
                self.sbatch_option(m.group(1), pos + m.start(1), env)
            pos += len(line)

    def sbatch_option(self, rest: str, at: int, env: _Env) -> None:
        m = re.match(r"(--[a-z-]+|-[A-Za-z])(?:[= ]\s*)(\S+)", rest)
        if not m:
            return
        option, value, vat = m.group(1), m.group(2), at + m.start(2)
        names = {
            "--nodes": ["SLURM_NNODES", "SLURM_JOB_NUM_NODES"],
            "-N": ["SLURM_NNODES", "SLURM_JOB_NUM_NODES"],
            "--ntasks-per-node": ["SLURM_NTASKS_PER_NODE"],
            "--ntasks": ["SLURM_NTASKS", "SLURM_NPROCS"],
            "-n": ["SLURM_NTASKS", "SLURM_NPROCS"],
            "--gpus-per-node": ["SLURM_GPUS_PER_NODE"],
            "--gres": ["SLURM_GPUS_ON_NODE"],
            "--cpus-per-task": ["SLURM_CPUS_PER_TASK"],
        }
        if option not in names:
            return
        count = (
            re.search(r"(\d+)$", value)
            if option in ("--gres", "--gpus-per-node")
            else re.fullmatch(r"\d+", value)
        )
        if option == "--gres" and not value.startswith("gpu"):
            return
        if count is None:
            return
        span = (
            vat + count.start(1 if count.re.groups else 0),
            vat + count.end(1 if count.re.groups else 0),
        )
        piece = Piece(count.group(1 if count.re.groups else 0), span, None, frozenset({span}))
        for name in names[option]:
            env.set(name, _Var(((piece,),)))

    # -- statements -----------------------------------------------------------------------------
    def tick(self, node, src) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise InputError(
                f"{self.where}:{src.line(node.start_byte)}: the script runs its "
                "functions or strings too many times to follow; batchspec stops "
                "reading it"
            )

    def block(self, node, env: _Env, src: _Source) -> None:
        for child in node.named_children:
            self.statement(child, env, src)

    def statement(self, node, env: _Env, src: _Source) -> None:
        self.tick(node, src)
        kind = node.type
        if kind in ("comment", "heredoc_body", "file_redirect", "herestring_redirect"):
            return
        if kind == "variable_assignment":
            self.assign(node, env, src)
        elif kind == "variable_assignments":
            for child in node.named_children:
                self.assign(child, env, src)
        elif kind == "declaration_command":
            self.declaration(node, env, src)
        elif kind == "unset_command":
            if not any(src.data[c.start_byte : c.end_byte] == b"-f" for c in node.children):
                for child in node.named_children:
                    for w in self.words(child, env, src):
                        if w.text:
                            env.set(w.text, UNSET)
        elif kind == "command":
            self.command(node, env, src)
        elif kind in ("redirected_statement", "negated_command"):
            body = node.child_by_field_name("body") or (node.named_children or [None])[0]
            if body is not None and body.type not in ("heredoc_redirect", "file_redirect"):
                self.statement(body, env, src)
            for child in node.named_children:
                if child.type == "heredoc_redirect":
                    self.heredoc(child, env, src)
        elif kind in ("compound_statement", "program", "do_group"):
            self.block(node, env, src)
        elif kind == "subshell":
            self.block(node, env.fork(), src)
        elif kind == "pipeline":
            for child in node.named_children:
                self.statement(child, env.fork(), src)
        elif kind == "list":
            self.and_or(node, env, src)
        elif kind == "if_statement":
            self.if_statement(node, env, src)
        elif kind == "case_statement":
            self.case_statement(node, env, src)
        elif kind in ("while_statement", "for_statement", "c_style_for_statement"):
            self.loop(node, env, src)
        elif kind == "function_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            if name is not None and body is not None:
                self.functions[src.data[name.start_byte : name.end_byte].decode()] = (body, src)
        elif kind == "test_command":
            return
        else:
            for child in node.named_children:
                if child.type in (
                    "command",
                    "list",
                    "pipeline",
                    "subshell",
                    "compound_statement",
                    "if_statement",
                    "redirected_statement",
                ):
                    self.statement(child, env, src)

    def heredoc(self, node, env: _Env, src: _Source) -> None:
        """Keep a here-document that goes to a file, expanded unless its marker is quoted."""
        target = next((c for c in node.named_children if c.type == "file_redirect"), None)
        body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
        start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
        if target is None or body is None or start is None:
            return
        destination = target.child_by_field_name("destination") or target.named_children[-1]
        words = self.words(destination, env, src, quoted=True)
        if src.data[start.start_byte : start.end_byte][:1] in (b"'", b'"', b"\\"):
            pieces = _literal(src, body.start_byte, body.end_byte)
        else:
            pieces, at = [], body.start_byte
            for child in body.named_children:
                if child.type == "heredoc_content":
                    continue
                pieces += _literal(src, at, child.start_byte)
                pieces += _joined(self.expand(child, env, src, quoted=True))
                at = child.end_byte
            pieces += _literal(src, at, body.end_byte)
        self.script.heredocs.append(Heredoc(words[0], tuple(pieces), src.line(node.start_byte)))

    def assign(self, node, env: _Env, src: _Source, integer: bool = False) -> None:
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name_node is None:
            return
        name = src.data[name_node.start_byte : name_node.end_byte].decode()
        if name_node.type == "subscript":  # A[3]=x: the array is no longer one we know
            base = name.split("[", 1)[0]
            env.set(base, _Var((_unknown(f"{base}[...] set element by element"),), True))
            return
        append = any(src.data[c.start_byte : c.end_byte] == b"+=" for c in node.children)
        line = src.line(node.start_byte)
        if value is not None and value.type == "array":
            fields = [
                f
                for child in value.named_children
                if child.type != "comment"
                for f in self.fields(child, env, src)
            ]
            self.set_array(env, name, [p for p, _ in fields], [n for _, n in fields], append, line)
            return
        else:
            if value is None:
                pieces = (Piece("", src.span(node.end_byte, node.end_byte)),)
            else:
                pieces = _joined(self.expand(value, env, src, quoted=True))
            if integer:
                pieces = self.arith_pieces(_text_of(pieces), env, pieces, line)
            old = env.get(name)
            if append and isinstance(old, _Var):
                pieces = old.scalar + pieces
            if isinstance(old, _Var) and old.array:  # A=x sets ${A[0]}, the rest stays
                self.set_array(
                    env,
                    name,
                    [_bounded(pieces)] + list(old.items[1:]),
                    [line] + list(old.lines[1:]),
                    False,
                    line,
                )
                return
            env.set(name, _Var((_bounded(pieces),)))

    def set_array(
        self, env: _Env, name: str, items: list, lines: list, append: bool, line: int
    ) -> None:
        """Assign or extend an array; past MAX_ITEMS it is unknown for good. Extending an
        array this scope owns happens in place, so a long run of ``A+=(x)`` stays linear."""
        old = env.get(name)
        if append and isinstance(old, _Var) and old.array:
            if old.overflow:
                return
            if env.own.get(name) is not old:
                old = _Var(list(old.items), True, list(old.lines))
                env.set(name, old)
            old.items.extend(items)
            old.lines.extend(lines)
            var = old
        else:
            var = _Var(items, True, lines)
            env.set(name, var)
        if len(var.items) > MAX_ITEMS:
            env.set(
                name,
                _Var(
                    [_unknown(f"${{{name}[@]}} grows past {MAX_ITEMS} items")],
                    True,
                    [line],
                    overflow=True,
                ),
            )

    def declaration(self, node, env: _Env, src: _Source) -> None:
        keyword = src.data[node.children[0].start_byte : node.children[0].end_byte].decode()
        options = [
            src.data[c.start_byte : c.end_byte].decode()
            for c in node.named_children
            if c.type == "word"
        ]
        integer = any(o.startswith("-") and "i" in o for o in options)
        for child in node.named_children:
            if child.type not in ("variable_assignment", "variable_name"):
                continue
            if keyword in ("local", "declare", "typeset"):
                name = child.child_by_field_name("name") if child.type != "variable_name" else child
                if name is not None:
                    env.declare_local(src.data[name.start_byte : name.end_byte].decode())
            if child.type == "variable_assignment":
                self.assign(child, env, src, integer)

    # -- simple commands ------------------------------------------------------------------------
    def command(self, node, env: _Env, src: _Source) -> None:
        name_node = node.child_by_field_name("name")
        if name_node is None:  # only assignments (X=1 Y=2)
            for child in node.named_children:
                if child.type == "variable_assignment":
                    self.assign(child, env, src)
            return
        words: list[Word] = []
        for child in node.named_children:
            if child.type in (
                "variable_assignment",
                "file_redirect",
                "heredoc_redirect",
                "herestring_redirect",
                "comment",
            ):
                continue
            if child.type == "command_name":
                child = child.named_children[0] if child.named_children else child
            words.extend(self.words(child, env, src))
        if not words:
            return
        name = words[0].text
        if name in self.functions:
            self.call(name, words, env, src)
            return
        if name == "eval":
            self.reparse(words[1:], env, src, fork=False)
            return
        if name in ("source", "."):
            self.sourced(words, env)
            return
        if name in ("read", "mapfile", "readarray", "printf", "getopts"):
            self.unknown_outputs(words, env)
        shell = _shell_string(words)
        self.script.commands.append(self.prefix + words)
        self.script.paths.append(self.path)
        if shell is not None:  # the string runs with the words before bash as its launcher
            at, inner = shell
            outer, self.prefix = self.prefix, self.prefix + words[:at]
            try:
                self.reparse([inner], env, src, fork=True)
            finally:
                self.prefix = outer

    def sourced(self, words: list[Word], env: _Env) -> None:
        """``source FILE`` is not read, and may set any variable: those set so far become
        unknown (the ones Slurm sets from ``#SBATCH`` aside)."""
        what = f"{words[0].text} {_clip(words[1].text or '?') if len(words) > 1 else ''}"
        self.script.notes.append(Note(words[0].line, f"{what} is not read"))
        scope, names = env, set()
        while scope is not None:
            names |= scope.own.keys()
            scope = scope.parent
        for n in names:
            if not n.startswith(("SLURM_", "__batchspec_")) and isinstance(env.get(n), _Var):
                env.set(
                    n, _Var((_unknown(f"${n} may be changed by {what} on line {words[0].line}"),))
                )

    def unknown_outputs(self, words: list[Word], env: _Env) -> None:
        """``read X``, ``printf -v X``...: the named variables get values we cannot know."""
        name = words[0].text
        targets = []
        if name == "printf":
            targets = [words[i + 1].text for i, w in enumerate(words[:-1]) if w.text == "-v"]
        else:
            targets = [
                w.text for w in words[1:] if w.text and re.fullmatch(r"[A-Za-z_]\w*", w.text)
            ]
        for t in targets:
            if t:
                env.set(t, _Var((_unknown(f"${t} (read when the script runs)"),)))

    def call(self, name: str, words: list[Word], env: _Env, src: _Source) -> None:
        body, body_src = self.functions[name]
        if self.calls >= MAX_CALL_DEPTH:
            self.script.notes.append(Note(words[0].line, f"{name} calls itself too deep to follow"))
            return
        frame = env.fork(function=True)
        frame.locals.update(map(str, range(1, 10)), {"@"})
        args = [(w,) for w in words[1:]]
        for i in range(1, 10):
            if i < len(words):
                w = words[i]
                frame.set(str(i), _Var(((Piece(w.text, w.span, w.why_unknown, w.sources),),)))
            else:
                frame.set(str(i), _Var(((Piece("", None),),)))
        frame.set(
            "@",
            _Var(tuple((Piece(w.text, w.span, w.why_unknown, w.sources),) for (w,) in args), True),
        )
        self.calls += 1
        try:
            self.statement(body, frame, body_src)
        finally:
            self.calls -= 1
        # Assignments inside the function reach the caller; ``local`` ones and $1... do not.
        for key, value in frame.own.items():
            if key not in frame.locals:
                env.set(key, value)

    def reparse(self, words: list[Word], env: _Env, src: _Source, fork: bool) -> None:
        """``eval`` / ``bash -c``: read the string as a script, unknown parts kept unknown."""
        text_parts, pieces, at = [], [], 0
        holes = {}
        for i, w in enumerate(words):
            if i:
                text_parts.append(" ")
                at += 1
            for piece in w.parts or _pieces(w):
                if piece.text is None:
                    hole = f"__batchspec_unknown_{len(holes)}"
                    holes[hole] = piece
                    part = "${" + hole + "}"
                else:
                    part = piece.text
                    if piece.span is not None:
                        pieces.append((at, Piece(piece.text, piece.span)))
                text_parts.append(part)
                at += len(part)
        text = "".join(text_parts)
        if self.evals >= MAX_EVALS or len(text) > MAX_TEXT:
            self.script.notes.append(
                Note(
                    words[0].line if words else 0,
                    "a string run by eval or bash -c nests or grows too far to follow; not read",
                )
            )
            return
        data = text.encode()
        inner = _Source(data, text, words[0].line if words else 1, pieces)
        tree = _tree(data)
        if tree.root_node.has_error:
            self.script.notes.append(
                Note(inner.line0, "a string run by eval or bash -c does not parse; not read")
            )
            return
        scope = env.fork() if fork else env
        for hole, piece in holes.items():
            scope.set(hole, _Var(((piece,),)))
        self.evals += 1
        try:
            self.block(tree.root_node, scope, inner)
        finally:
            self.evals -= 1
        for hole in holes:
            scope.own.pop(hole, None)

    # -- control flow ---------------------------------------------------------------------------
    def status(self, node, env: _Env, src: _Source) -> bool | None:
        """Whether a condition succeeds, when known values decide it."""
        kind = node.type
        if kind == "test_command":
            inner = node.named_children
            return self.test(inner[0], env, src) if len(inner) == 1 else None
        if kind == "command":
            words = (
                self.words(node.child_by_field_name("name"), env, src)
                if node.child_by_field_name("name") is not None
                else []
            )
            name = words[0].text if words else None
            if name in ("true", ":"):
                return True
            if name == "false":
                return False
            if name in ("test", "[") and node.named_children:
                args = [w.text for c in node.named_children[1:] for w in self.words(c, env, src)]
                if args and args[-1] == "]":
                    args = args[:-1]
                return _test_words(args)
            return None
        if kind == "negated_command":
            inner = self.status(node.named_children[0], env, src) if node.named_children else None
            return None if inner is None else not inner
        return None

    def test(self, node, env: _Env, src: _Source) -> bool | None:
        kind = node.type
        if kind == "parenthesized_expression" and node.named_children:
            return self.test(node.named_children[0], env, src)
        if kind == "unary_expression":
            op = src.data[node.children[0].start_byte : node.children[0].end_byte].decode()
            if op == "!":
                inner = self.test(node.named_children[-1], env, src)
                return None if inner is None else not inner
            args = [
                w.text
                for c in node.named_children
                if c.type != "test_operator"
                for w in self.words(c, env, src, True)
            ]
            return _test_words([op, *args])
        if kind == "binary_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            op_node = node.child_by_field_name("operator")
            if left is None or right is None or op_node is None:
                return None
            op = src.data[op_node.start_byte : op_node.end_byte].decode()
            if op in ("&&", "-a", "||", "-o"):
                a, b = self.test(left, env, src), self.test(right, env, src)
                if op in ("&&", "-a"):
                    return False if False in (a, b) else None if None in (a, b) else True
                return True if True in (a, b) else None if None in (a, b) else False
            lt = _text_of([p for w in self.words(left, env, src, True) for p in _pieces(w)])
            rt = _text_of([p for w in self.words(right, env, src, True) for p in _pieces(w)])
            return _test_words([lt, op, rt])
        words = [w.text for w in self.words(node, env, src, True)]
        return _test_words(words)

    def branches(self, env: _Env, paths: list, src: _Source, line: int, what: str) -> None:
        """Run each possible path in a fork of ``env``; keep a variable only where every path
        agrees. ``paths``: statement lists, ``None`` for a path that runs nothing."""
        deltas = []
        self.choices += 1
        choice = (self.choices, f"{what} on line {line}")
        for k, statements in enumerate(paths):
            branch = env.fork()
            outer, self.path = self.path, self.path + ((choice, k),)
            try:
                for s in statements or ():
                    self.statement(s, branch, src)
            finally:
                self.path = outer
            deltas.append(branch.own)
        for name in set().union(*deltas):
            values = [d.get(name, env.get(name)) for d in deltas]
            env.set(name, _agree(values, name, f"{what} on line {line}"))

    def if_statement(self, node, env: _Env, src: _Source) -> None:
        arms, cond, body = [], None, []
        otherwise = None
        for child in node.children:
            if child.type in ("if", "then", "fi", ";", "&", "\n"):
                continue
            if child.type == "elif_clause":
                arms.append((cond, body))
                cond, body = _clause(child)
            elif child.type == "else_clause":
                otherwise = [c for c in child.named_children]
            elif cond is None and child.is_named and child.type != "comment":
                cond = child
            elif child.is_named:
                body.append(child)
        arms.append((cond, body))
        line = src.line(node.start_byte)
        undecided: list = []
        for cond, body in arms:
            decided = self.status(cond, env, src) if cond is not None else None
            if decided is False and not undecided:
                continue
            if decided is True and not undecided:
                self.block_list(body, env, src)
                return
            undecided.append(body)
            if decided is True:
                break
        else:
            undecided.append(otherwise)
            if not undecided[:-1]:
                self.block_list(otherwise or [], env, src)
                return
        self.branches(env, undecided, src, line, "the if")

    def block_list(self, statements, env, src) -> None:
        for s in statements:
            self.statement(s, env, src)

    def case_statement(self, node, env: _Env, src: _Source) -> None:
        value_node = node.child_by_field_name("value")
        subject = (
            _text_of([p for w in self.words(value_node, env, src, True) for p in _pieces(w)])
            if value_node is not None
            else None
        )
        items = [c for c in node.named_children if c.type == "case_item"]
        possible = []
        for item in items:
            patterns, body = [], []
            for child in item.named_children:
                if (
                    child.end_byte <= (item.child_by_field_name("value") or child).end_byte
                    or child.type in ("extglob_pattern",)
                    and not body
                ):
                    patterns.append(child)
                else:
                    body.append(child)
            texts = [
                _text_of([p for w in self.words(p_node, env, src, True) for p in _pieces(w)])
                for p_node in patterns
            ]
            if subject is None or any(t is None for t in texts):
                possible.append(body)
                continue
            if any(fnmatch.fnmatchcase(subject, t) for t in texts):
                if not possible:
                    self.block_list(body, env, src)
                    return
                possible.append(body)
                break
        else:
            possible.append(None)
        self.branches(env, possible, src, src.line(node.start_byte), "the case")

    def loop(self, node, env: _Env, src: _Source) -> None:
        body = node.child_by_field_name("body")
        variable = node.child_by_field_name("variable")
        scope_paths = [[body] if body is not None else None, None]
        if variable is not None:
            name = src.data[variable.start_byte : variable.end_byte].decode()
            env.set(name, _Var((_unknown(f"${name} (a loop variable)"),)))
        self.branches(env, scope_paths, src, src.line(node.start_byte), "the loop")

    def and_or(self, node, env: _Env, src: _Source) -> None:
        left, op_node, right = node.children[0], node.children[1], node.children[-1]
        op = src.data[op_node.start_byte : op_node.end_byte].decode()
        first = self.status(left, env, src)
        self.statement(left, env, src)
        runs = first if op == "&&" else (None if first is None else not first)
        if runs is True:
            self.statement(right, env, src)
        elif runs is None:
            self.branches(env, [[right], None], src, src.line(node.start_byte), f"the {op}")

    # -- words ----------------------------------------------------------------------------------
    def words(self, node, env: _Env, src: _Source, quoted: bool = False) -> list[Word]:
        """The fields one argument node expands to."""
        if node is None:
            return []
        line = src.line(node.start_byte)
        if quoted:
            return [self.to_word(_joined(self.expand(node, env, src, True)), line)]
        return [self.to_word(f, n) for f, n in self.fields(node, env, src)]

    def fields(self, node, env: _Env, src: _Source) -> list[tuple]:
        """Expand and split one unquoted argument, as bash does (arrays give one field per
        item; an unknown piece joins the field it touches): ``(pieces, line)`` per field, the
        line being where an array item was written, else where the argument stands."""
        segments = self.expand(node, env, src, quoted=False)
        fields, current, has = [], [], False
        line = here = src.line(node.start_byte)

        def close():
            fields.append((tuple(current), line))

        for seg in segments:
            if isinstance(seg, _At):
                line = seg.line
                continue
            if seg is _BREAK:
                if current or has:
                    close()
                current, has, line = [], False, here
                continue
            piece, split = seg if isinstance(seg, tuple) else (seg, False)
            if split and piece.text is None and piece.maybe is not None:
                # an undecided tail (`opts="$opts --x"` on one path): when every alternative
                # starts (ends) with a blank, it starts (ends) a word of its own
                alternatives = [" ".join(a) for a in piece.maybe]
                if current and all(a[:1].isspace() or not a for a in alternatives):
                    close()
                    current, has, line = [], False, here
                current.append(piece)
                has = True
                if all(a[-1:].isspace() or not a for a in alternatives):
                    close()
                    current, has, line = [], False, here
                continue
            if not split or piece.text is None:
                current.append(piece)
                has = True
                continue
            text, start = piece.text, 0
            for m in re.finditer(r"[ \t\n]+", text):
                if m.start() > start:
                    current.append(_sub(piece, start, m.start()))
                if current:
                    close()
                current, has, start = [], False, m.end()
            if start < len(text):
                current.append(_sub(piece, start, len(text)))
        if current or has:
            close()
        return fields

    def expand(self, node, env: _Env, src: _Source, quoted: bool) -> list:
        """Segments of a word: pieces (``(piece, splittable)`` when unquoted) and ``_BREAK``
        between array items."""
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                return [Piece(None, None, f"expansions nested more than {MAX_DEPTH} deep")]
            return self._expand(node, env, src, quoted)
        finally:
            self.depth -= 1

    def _expand(self, node, env: _Env, src: _Source, quoted: bool) -> list:
        kind = node.type
        raw = src.data[node.start_byte : node.end_byte].decode(errors="replace")
        lead = LEADING_BLANKS.match(raw).end()
        if lead and kind in EXPANSIONS:
            # tree-sitter-bash puts the blanks before a ``$`` inside a string into the
            # expansion's node (``"$X $Y"``): they are text of the string.
            return _literal(src, node.start_byte, node.start_byte + lead) + self._expand_at(
                node, kind, raw[lead:], env, src, quoted
            )
        return self._expand_at(node, kind, raw, env, src, quoted)

    def _expand_at(self, node, kind: str, raw: str, env: _Env, src: _Source, quoted: bool) -> list:
        if kind in (
            "word",
            "number",
            "extglob_pattern",
            "special_variable_name",
            "variable_name",
            "regex",
        ):
            if "\\" in raw:
                return [
                    Piece(
                        re.sub(r"\\\n|\\(.)", lambda m: m.group(1) or "", raw, flags=re.S),
                        None,
                        None,
                        frozenset(),
                    )
                ]
            span = src.span(node.start_byte, node.end_byte)
            return [Piece(raw, span, None, frozenset({span}) if span else frozenset())]
        if kind == "raw_string":
            span = src.span(node.start_byte + 1, node.end_byte - 1)
            return [Piece(raw[1:-1], span, None, frozenset({span}) if span else frozenset())]
        if kind == "ansi_c_string":
            return [Piece(_ansi_c(raw[2:-1]))]
        if kind in ("string", "translated_string"):
            return self.string(node, env, src)
        if kind == "concatenation":
            out = []
            for child in node.children:
                out.extend(self.expand(child, env, src, quoted))
            return out
        if kind == "simple_expansion":
            return self.parameter(raw[1:], [], env, src, quoted, node)
        if kind == "expansion":
            return self.braced(node, raw, env, src, quoted)
        if kind == "arithmetic_expansion" or (
            kind == "command_substitution" and raw.startswith("$((") and raw.endswith("))")
        ):
            inner = raw[3:-2] if raw.startswith("$((") else raw[2:-1]
            return [self.arith(inner, env, src.line(node.start_byte))]
        if kind == "command_substitution":
            return [Piece(None, None, f"{_clip(raw)} is not run")]
        if kind == "process_substitution":
            return [Piece(None, None, f"{_clip(raw)} is not run")]
        if kind == "brace_expression":
            return [Piece(None, None, f"{raw} (brace expansion)")]
        if not node.named_children:
            span = src.span(node.start_byte, node.end_byte)
            return [Piece(raw, span, None, frozenset({span}) if span else frozenset())]
        out = []
        for child in node.named_children:
            out.extend(self.expand(child, env, src, quoted))
        return out

    def string(self, node, env: _Env, src: _Source) -> list:
        """A double-quoted string: its text, expansions inside kept unsplit."""
        out, pos = (
            [],
            node.start_byte
            + 1
            + (1 if src.data[node.start_byte : node.start_byte + 1] == b"$" else 0),
        )
        end = node.end_byte - 1
        for child in node.named_children:
            if child.start_byte > pos:
                out.extend(_literal(src, pos, child.start_byte))
            if child.type == "string_content":
                out.extend(_literal(src, child.start_byte, child.end_byte))
            else:
                out.extend(
                    seg[0] if isinstance(seg, tuple) else seg
                    for seg in self.expand(child, env, src, quoted=True)
                )
            pos = child.end_byte
        if end > pos:
            out.extend(_literal(src, pos, end))
        return out or [Piece("", src.span(node.start_byte + 1, node.start_byte + 1))]

    def braced(self, node, raw: str, env: _Env, src: _Source, quoted: bool) -> list:
        body = raw[2:-1]
        m = re.match(r"(#?)([A-Za-z_]\w*|[0-9]+|[@*#?$!-])(\[(@|\*|-?[0-9]+)\])?(.*)", body, re.S)
        if not m:
            return [Piece(None, None, f"{_clip(raw)} (set when the script runs)")]
        length, name, _, index, rest = m.groups()
        if length:
            if rest:
                return [Piece(None, None, f"{_clip(raw)} is not evaluated")]
            var = env.get(name)
            if not isinstance(var, _Var):
                return [Piece(None, None, f"{_clip(raw)} (${name} is not set in the script)")]
            if index in ("@", "*"):
                return [Piece(str(len(var.items)))]
            text = _text_of(var.scalar)
            return [
                Piece(
                    None if text is None else str(len(text)),
                    None,
                    None if text is not None else _why(var.scalar),
                )
            ]
        op = re.match(r"(:?[-=+?])", rest)
        if rest and not op:
            return [Piece(None, None, f"{_clip(raw)} is not evaluated")]
        if not op:
            return self.parameter(name, [index] if index else [], env, src, quoted, node)
        operator = op.group(1)
        colon, kind = operator.startswith(":"), operator[-1]
        var = env.get(name)
        if var is None and (name.isdigit() or name in "@*#?$!-"):
            return [Piece(None, None, f"{_clip(raw)} (${name} is set when the script runs)")]
        if var is None or var == UNSET:
            state = "notset" if var is None else "unset"
        elif not var.array and _text_of(var.scalar) is None:
            state = "unknown"
        else:
            state = "empty" if not var.array and _text_of(var.scalar) == "" else "set"
        missing = state in ("notset", "unset") or (colon and state == "empty")
        if state == "unknown" and (colon or kind == "+"):
            return [Piece(None, None, f"{_clip(raw)} (${name} is not known)")]
        if kind == "+":
            if state == "notset":  # the environment may set it
                return [Piece(None, None, f"{_clip(raw)} (${name} is not set in the script)")]
            if missing:
                return [Piece("")]
        elif kind == "?":
            if missing:
                return [Piece(None, None, f"{_clip(raw)} stops the script")]
            return self.parameter(name, [], env, src, quoted, node)
        elif not missing:
            return self.parameter(name, [index] if index else [], env, src, quoted, node)
        after = [
            c
            for c in node.children
            if c.start_byte >= node.start_byte + 2 + len(body) - len(rest) + len(operator)
            and c.end_byte <= node.end_byte - 1
        ]
        pieces: list = []
        for child in after:
            pieces.extend(self.expand(child, env, src, quoted=True))
        pieces = list(_joined(pieces)) or [Piece("")]
        if kind == "=":
            env.set(name, _Var((_bounded(tuple(pieces)),)))
        return [(p, not quoted) for p in pieces]

    def parameter(
        self, name: str, index: list, env: _Env, src: _Source, quoted: bool, node
    ) -> list:
        var = env.get(name)
        if name in ("@", "*") and var is None:
            return [Piece(None, None, f"${name} (the script's arguments)")]
        if var is None:
            if name.isdigit() or name in "#?$!-0":
                return [Piece(None, None, f"${name} (set when the script runs)")]
            return [Piece(None, None, f"${name} (not set in the script)")]
        if var == UNSET:
            return [Piece("")]
        if index and index[0] in ("@", "*") or (name in ("@", "*")):
            out: list = []
            for i, item in enumerate(var.items):
                if i and (quoted and index[:1] != ["*"] or not quoted):
                    out.append(_BREAK)
                elif i:
                    out.append(Piece(" "))
                if i < len(var.lines):
                    out.append(_At(var.lines[i]))
                out.extend((p, not quoted) for p in item)
            return out
        if index:
            k = int(index[0])
            if not var.array and k == 0:
                return [(p, not quoted) for p in var.scalar]
            if 0 <= k < len(var.items):
                return [(p, not quoted) for p in var.items[k]]
            return [Piece("")]
        return [(p, not quoted) for p in var.scalar]

    def arith(self, expr: str, env: _Env, line: int) -> Piece:
        sources: set = set()

        def get(name: str) -> str:
            var = env.get(name)
            if var == UNSET:
                return ""
            if var is None:
                raise shell_arith.Unknown(f"${name} (not set in the script)")
            text = _text_of(var.scalar)
            sources.update(_merge_sources(var.scalar))
            if text is None:
                raise shell_arith.Unknown(_why(var.scalar))
            return text

        def put(name: str, value: int) -> None:
            env.set(name, _Var(((Piece(str(value), None, None, frozenset(sources)),),)))

        try:
            text = self.dollar_refs(expr, env)
            value = shell_arith.Evaluator(get, put).evaluate(text)
        except shell_arith.Unknown as exc:
            return Piece(None, None, f"$(({_clip(expr.strip())})): {exc}", frozenset(sources))
        except shell_arith.ArithError as exc:
            return Piece(
                None,
                None,
                f"$(({_clip(expr.strip())})) is an error in bash ({exc})",
                frozenset(sources),
            )
        return Piece(
            str(value), None, None, _merge_sources([Piece("", None, None, frozenset(sources))])
        )

    def arith_pieces(self, text, env, pieces, line) -> tuple:
        if text is None:
            return pieces
        return (self.arith(text, env, line),)

    def dollar_refs(self, expr: str, env: _Env) -> str:
        """``$X``, ``${X}`` and ``${X:-n}`` inside arithmetic become their text (bash expands
        them before it evaluates); anything else in ``$`` form is unknown."""

        def value(m: re.Match) -> str:
            name = m.group(1) or m.group(2) or m.group(3)
            default = m.group(4)
            var = env.get(name)
            if (
                var is None
                or var == UNSET
                or (isinstance(var, _Var) and _text_of(var.scalar) == "")
            ):
                if default is not None:
                    return f"({default})"
                if var is None:
                    raise shell_arith.Unknown(f"${name} (not set in the script)")
                return "0"
            text = _text_of(var.scalar)
            if text is None:
                raise shell_arith.Unknown(_why(var.scalar))
            return f"({text})" if text.strip() else "0"

        out = re.sub(
            r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)|\$\{([A-Za-z_]\w*):?-([^{}$]*)\}", value, expr
        )
        if "$" in out:
            raise shell_arith.Unknown(f"{_clip(expr)} needs the running script")
        return out

    def to_word(self, pieces: tuple, line: int) -> Word:
        pieces = tuple(pieces)
        text = _text_of(pieces)
        sources = _merge_sources(pieces)
        if text is None:
            unknown = [p for p in pieces if p.text != ""]
            maybe = unknown[0].maybe if len(unknown) == 1 else None
            return Word(None, line, None, _why(pieces), sources, parts=pieces, maybe=maybe)
        meaningful = [p for p in pieces if p.text]
        span = meaningful[0].span if len(meaningful) == 1 else None
        if not meaningful and len(pieces) == 1:
            span = pieces[0].span
        return Word(text, line, span, None, sources)


class _Break:
    """Between two array items: a field ends here even inside quotes."""


_BREAK = _Break()


@dataclass(frozen=True)
class _At:
    """The line an array item was written on."""

    line: int


def _joined(segments) -> tuple:
    """Segments as one string's pieces: array items joined by a space, as in ``"${A[@]}"``
    assigned to a scalar."""
    return tuple(
        Piece(" ") if seg is _BREAK else seg[0] if isinstance(seg, tuple) else seg
        for seg in segments
        if not isinstance(seg, _At)
    )


def _pieces(word: Word) -> tuple:
    return (Piece(word.text, word.span, word.why_unknown, word.sources),)


def _sub(piece: Piece, start: int, end: int) -> Piece:
    span = (piece.span[0] + start, piece.span[0] + end) if piece.span else None
    return Piece(piece.text[start:end], span, None, piece.sources)


def _literal(src: _Source, start: int, end: int) -> list:
    raw = src.data[start:end].decode(errors="replace")
    if "\\" in raw:
        text = re.sub(r'\\\n|\\([$`"\\])', lambda m: m.group(1) or "", raw)
        if text != raw:
            return [Piece(text)]
    span = src.span(start, end)
    return [Piece(raw, span, None, frozenset({span}) if span else frozenset())]


def _choices(pieces) -> list[str]:
    """The texts a value may have: an undecided piece gives each of its alternatives, any
    other unknown piece ``UNKNOWN_MARK`` (past MAX_CHOICES texts, marks only)."""
    out = [""]
    for p in pieces:
        options = (
            [p.text]
            if p.text is not None
            else [" ".join(a) for a in p.maybe]
            if p.maybe
            else [UNKNOWN_MARK]
        )
        if len(out) * len(options) > MAX_CHOICES:
            options = [UNKNOWN_MARK]
        out = [o + x for o in out for x in options]
    return out


def _alternatives(items_per_path: list) -> tuple:
    """``maybe`` for a value that differs between paths: each path's items, with undecided
    pieces inside spread into their own alternatives."""
    out = []
    for items in items_per_path:
        combos = [()]
        for item in items:
            choices = _choices(item)
            if len(combos) * len(choices) > MAX_CHOICES:
                choices = [UNKNOWN_MARK]
            combos = [c + (x,) for c in combos for x in choices]
        out.extend(combos)
    return tuple(dict.fromkeys(out))[:MAX_CHOICES]


def _agree(values: list, name: str, where: str):
    """One value when every path gives the same text, else unknown."""
    texts = [
        (
            "unset"
            if v == UNSET
            else None
            if v is None
            else (v.array, tuple(_text_of(i) for i in v.items))
        )
        for v in values
    ]
    if (
        all(t == texts[0] for t in texts)
        and texts[0] is not None
        and (texts[0] == "unset" or all(x is not None for x in texts[0][1]))
    ):
        first = values[0]
        spans = {tuple(p.span for i in v.items for p in i) for v in values if isinstance(v, _Var)}
        if isinstance(first, _Var) and len(spans) > 1:  # same text from different literals
            return _Var(
                tuple(
                    (
                        Piece(
                            _text_of(i),
                            None,
                            None,
                            _merge_sources([p for v in values for it in v.items for p in it]),
                        ),
                    )
                    for i in first.items
                ),
                first.array,
            )
        return first
    if all(isinstance(v, _Var) and v.array for v in values):
        head = _common_prefix([tuple(v.items) for v in values], words=False)
        if head:
            n = len(head)
            tails = [it for v in values for it in v.items[n:]]
            rest = (
                _unknown_of([], name, where, [_Var(tuple(v.items[n:]), True) for v in values])
                if tails
                else ()
            )
            return _Var(
                tuple(head) + ((rest,) if rest else ()),
                True,
                tuple(values[0].lines[:n]) + ((0,) if rest else ()),
            )
    shared = _shared(values)
    if shared is not None:
        befores, core, afters = shared
        return _Var((_unknown_of(befores, name, where) + core + _unknown_of(afters, name, where),))
    return _Var(
        (
            _unknown_of(
                [it for v in values if isinstance(v, _Var) for it in v.items], name, where, values
            ),
        )
    )


def _shared(values: list) -> tuple[list, tuple, list] | None:
    """``(befores, core, afters)`` when every path's scalar value is ``before + core + after``
    with word boundaries around ``core``: ``opts="$opts --x"`` or ``cmd="nsys $cmd"`` on one
    path only keeps what ``$opts`` or ``$cmd`` held. ``None`` when the paths share nothing."""
    if not all(isinstance(v, _Var) and not v.array for v in values):
        return None
    scalars = [v.scalar for v in values]
    for core in (min(scalars, key=len), _common_prefix(scalars)):
        if not core:
            continue
        found = [_find(s, core) for s in scalars]
        if None not in found:
            return (
                [s[:i] for s, i in zip(scalars, found)],
                core,
                [s[i + len(core) :] for s, i in zip(scalars, found)],
            )
    return None


def _common_prefix(sequences: list, words: bool = True) -> tuple:
    """What every sequence starts with (pieces of scalars, cut at a blank when ``words``; or
    the items of arrays)."""
    head = 0
    while head < min(map(len, sequences)) and all(s[head] == sequences[0][head] for s in sequences):
        head += 1
    while words and head and not all(_blank_between(s, head) for s in sequences):
        head -= 1
    return tuple(sequences[0][:head])


def _find(pieces: tuple, core: tuple) -> int | None:
    """Where ``core`` stands in ``pieces`` as whole words."""
    n = len(core)
    for i in range(len(pieces) - n + 1):
        if (
            pieces[i : i + n] == core
            and _blank_between(pieces, i)
            and _blank_between(pieces, i + n)
        ):
            return i
    return None


def _blank_between(pieces: tuple, at: int) -> bool:
    """Whether a word boundary lies between ``pieces[at - 1]`` and ``pieces[at]``."""
    if at <= 0 or at >= len(pieces):
        return True
    return (pieces[at - 1].text or "x")[-1:] in (" ", "\t", "\n") or (pieces[at].text or "x")[
        :1
    ] in (" ", "\t", "\n")


def _unknown_of(items: list, name: str, where: str, values: list | None = None) -> tuple:
    """One unknown piece for a value that differs between paths, with its alternatives (no
    piece when every path has nothing there)."""
    if values is None and not any(items):
        return ()
    sources = _merge_sources([p for it in items for p in it])
    # The alternatives; where this script's own variable is left unset, it expands to nothing.
    if values is None:  # the tails of scalars
        maybe = _alternatives([(it,) for it in items])
    else:
        maybe = _alternatives([v.items if isinstance(v, _Var) else () for v in values])
    return (Piece(None, None, f"${name} depends on {where}", sources, maybe),)


def _clause(node) -> tuple:
    cond, body = None, []
    for child in node.children:
        if child.type in ("elif", "then", ";", "&"):
            continue
        if cond is None and child.is_named and child.type != "comment":
            cond = child
        elif child.is_named:
            body.append(child)
    return cond, body


def _test_words(args: list) -> bool | None:
    """``test``/``[`` on known words; None when a word is unknown or the test needs the
    running system (files, environment)."""
    if any(a is None for a in args):
        return None
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2:
        op, value = args
        if op == "-z":
            return value == ""
        if op == "-n":
            return value != ""
        if op == "!":
            return value == ""
        return None
    if len(args) == 3:
        a, op, b = args
        if op in ("=", "=="):
            return fnmatch.fnmatchcase(a, b) if any(c in b for c in "*?[") else a == b
        if op == "!=":
            return a != b
        ints = {
            "-eq": "__eq__",
            "-ne": "__ne__",
            "-lt": "__lt__",
            "-le": "__le__",
            "-gt": "__gt__",
            "-ge": "__ge__",
        }
        if op in ints:
            try:
                return getattr(int(a), ints[op])(int(b))
            except ValueError:
                return None
        return None
    if args[0] == "!":
        inner = _test_words(args[1:])
        return None if inner is None else not inner
    return None


def _shell_string(words: list[Word]) -> tuple[int, Word] | None:
    """Where ``bash`` stands and the string of ``bash -c STRING`` (also behind ``srun``,
    ``env``...)."""
    for i, w in enumerate(words[:-1]):
        if (
            w.text is not None
            and w.text.rsplit("/", 1)[-1] in ("bash", "sh")
            and words[i + 1].text in ("-c", "-lc", "-xc", "-ec")
            and i + 2 < len(words)
        ):
            return i, words[i + 2]
    return None


def _missing(kind: str, opener, src: _Source) -> str:
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
    names = {
        '"': "unterminated double quote",
        "'": "unterminated single quote",
        ")": "unterminated ( (no closing parenthesis)",
        "}": "unterminated ${ or {",
        "))": "unterminated $(( arithmetic",
        "fi": "if without fi",
        "done": "loop without done",
        "esac": "case without esac",
    }
    return names.get(kind, f"bash syntax error: {kind} missing")


def _error(text: str) -> str:
    """A stretch tree-sitter could not parse, described by how it starts."""
    for opener, what in (
        ("'", "unterminated single quote"),
        ('"', "unterminated double quote"),
        ("${", "unterminated ${"),
        ("$((", "unterminated $(( arithmetic"),
        ("$(", "unterminated $("),
        ("`", "unterminated backquote"),
    ):
        if (
            text.startswith(opener)
            or re.match(r"\S*\s*" + re.escape(opener), text)
            and text.count(opener[0]) % 2
        ):
            return what
    return f"bash cannot parse this: {_clip(text)}"


def _clip(text: str, limit: int = 40) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ansi_c(body: str) -> str:
    table = {
        "n": "\n",
        "t": "\t",
        "\\": "\\",
        "'": "'",
        '"': '"',
        "a": "\a",
        "e": "\x1b",
        "r": "\r",
        "0": "\0",
    }
    return re.sub(r"\\(.)", lambda m: table.get(m.group(1), "\\" + m.group(1)), body)


def evaluate(expr: str) -> int:
    """Integer arithmetic as bash does it; :class:`shell_arith.ArithError` or
    :class:`shell_arith.Unknown` when bash fails or a value is not fixed."""
    return shell_arith.evaluate(expr)


def parse(text: str, where: str) -> Script:
    """The commands and variables of ``text``; an :class:`InputError` naming the line when the
    script is not valid bash (an unterminated quote, array or heredoc)."""
    try:
        return _Reader(where, budget=20 * len(text) + 10_000).read(text)
    except RecursionError:
        raise InputError(f"{where}: blocks nested too deeply to follow") from None
