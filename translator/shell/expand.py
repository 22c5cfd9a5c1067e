"""Expansion of one argument as bash does it, without running anything: quotes, ``$X``,
``${X:-d}``, ``${X:=d}``, ``${X:+w}``, ``${X?}``, ``${#X}``, arrays, ``$((...))`` and
heredoc bodies. What needs running (``$(...)``) is an unknown piece that says why; a name
the script never sets, or an argument not given, is an *absent* one: empty when the script
runs as read (``${X:-d}`` takes ``d``, and records it as a :class:`Default`), unknown as a
value."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace

from translator.shell import arith, arrays, pipes
from translator.shell.fields import BREAK, At, joined, split_fields
from translator.shell.syntax import ScriptText, literal
from translator.shell.values import (
    ARGS_GIVEN,
    MAX_DEPTH,
    NODE_GPUS,
    OPEN_ENV,
    SOURCED,
    UNSET,
    VISIBLE,
    Default,
    Env,
    Heredoc,
    Piece,
    Var,
    Word,
    as_run,
    clip,
    listed_devices,
    merge_sources,
    text_of,
    to_word,
    unknown,
    why,
)

#: Nodes that start with ``$`` (and may carry blanks before it, inside a string).
EXPANSIONS = {
    "simple_expansion",
    "expansion",
    "command_substitution",
    "arithmetic_expansion",
    "process_substitution",
}
#: ``${X#p}``, ``${X##p}``, ``${X%p}``, ``${X%%p}`` with a pattern of plain characters.
TRIM = re.compile(r"(##?|%%?)([^$`'\"\\]*)", re.S)
#: The longest value trimmed (each cut is matched apart).
MAX_TRIM = 4096
#: Nodes whose text is the word's text, backslashes aside.
PLAIN = {"word", "number", "extglob_pattern", "special_variable_name", "variable_name", "regex"}
LEADING_BLANKS = re.compile(r"(?:\s|\\\n)*")
#: ``${...}``: an optional ``#`` (length) or ``!`` (indices), the name, an optional
#: ``[index]``, the rest.
BRACED = re.compile(r"([#!]?)([A-Za-z_]\w*|[0-9]+|[@*#?$!-])(\[([^\]]*)\])?(.*)", re.S)
#: Expansions whose unknown value, unquoted, may split into any number of fields.
SPLITS = {"simple_expansion", "expansion", "command_substitution", "brace_expression"}
#: Characters that make an unquoted word a glob pattern.
GLOB = re.compile(r"[*?\[]")
#: A backslash and the character it escapes.
ESCAPED = re.compile(r"\\.")
#: ``$X``, ``${X}`` and ``${X:-n}`` inside arithmetic.
#: ``$#``, ``$1`` and ``${12}`` inside arithmetic.
PARAMETER_REFS = re.compile(r"\$(#|[1-9])|\$\{(#|[1-9][0-9]*)\}")
ARITH_REFS = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)|\$\{([A-Za-z_]\w*):?-([^{}$]*)\}")
#: An arithmetic assignment (``=``, ``+=``..., ``++``, ``--``) and a subscript (``A[``).
ARITH_TARGET = re.compile(
    r"(?:\+\+|--)\s*([A-Za-z_]\w*)"
    r"|([A-Za-z_]\w*)(?=\s*(?:\[[^\]]*\]\s*)?(?:(?:[-+*/%&^|]|<<|>>|\*\*)?=(?!=)|\+\+|--))"
)
ARITH_SUBSCRIPT = re.compile(r"[A-Za-z_]\w*\s*\[")
#: An index that is its own value (no leading zero: ``010`` is octal).
DECIMAL = re.compile(r"0|[1-9][0-9]{0,17}")
#: What ``$(pwd)``, `` `pwd` `` and ``$PWD`` stand for: a path the reader does not know, but
#: a script named under it is the one named from there (see ``Following.open_script``).
HERE = "$(pwd) (the folder the job runs in)"
PWD = re.compile(r"\$\(\s*pwd\s*\)|`\s*pwd\s*`")
#: What the script's own folder stands for (``$(dirname "$0")``): a path the reader does not
#: know, but a program named under it is the one in the script's folder here.
THERE = "$(dirname $0) (the script's own folder)"
_SELF = r"\$\{?(?:0|BASH_SOURCE(?:\[0\])?)\}?"
_DIRNAME = rf"""dirname\s+"?(?:{_SELF}|\$\(\s*(?:realpath|readlink\s+-f)\s+"?{_SELF}"?\s*\))"?"""
#: ``$(dirname "$0")``, ``$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)``, ``$(realpath
#: $(dirname $0))``...: the folder of the script itself.
SCRIPT_FOLDER = re.compile(
    rf"""\$\(\s*(?:{_DIRNAME}|cd\s+"?\$\(\s*{_DIRNAME}\s*\)"?\s*(?:&&|;)\s*pwd(?:\s+-P)?"""
    rf"""|(?:realpath|readlink\s+-f)\s+"?\$\(\s*{_DIRNAME}\s*\)"?)\s*\)"""
)
#: The nodes a command of a printed substitution may hold: its name and plain words (no
#: ``X=1`` prefix, no redirection, no substitution inside).
PRINTED_WORDS = frozenset(
    {"command_name", "word", "string", "raw_string", "simple_expansion", "expansion"}
    | {"concatenation", "number"}
)
#: Variables bash itself sets (``env -i bash`` has them): never absent.
BASH_SETS = frozenset(
    "PATH PWD OLDPWD HOSTNAME HOSTTYPE SHELL TERM RANDOM SRANDOM SHLVL IFS OPTIND OPTERR PS1 PS2 "
    "PS4 UID EUID PPID BASH BASH_VERSION BASH_VERSINFO OSTYPE MACHTYPE LINENO SECONDS "
    "BASH_SOURCE BASH_LINENO FUNCNAME BASHPID BASH_SUBSHELL BASH_COMMAND BASH_ARGV BASH_ARGC "
    "BASH_ARGV0 BASHOPTS SHELLOPTS GROUPS EPOCHSECONDS EPOCHREALTIME PIPESTATUS DIRSTACK "
    "HISTCMD COLUMNS LINES OPTARG _".split()
)
#: Set in the outermost scope when the script has ``#SBATCH`` lines: Slurm then sets
#: ``SLURM_*`` names the reader does not know (plain unknown, not absent).
SBATCH = "__batchspec_sbatch"
ANSI_C = {
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


class Expander:
    """Expands argument nodes against the script's variables (``${X:=d}`` and arithmetic
    assignments change them, as in bash)."""

    def __init__(self):
        self.depth = 0
        """How deep expansions nest at the moment (past MAX_DEPTH: unknown)."""
        self.spread = False
        """Set when a field expanded may stand for any number of fields (an unquoted
        ``$(...)``, a glob, a vague array's items): an array's count is then unknown."""
        self.defaults: dict[tuple, Default] = {}
        """The defaults taken because a name was not set, each once (see
        :attr:`~translator.shell.values.Script.defaults`)."""
        self.handlers = {
            "raw_string": self._raw_string,
            "ansi_c_string": self._ansi_c_string,
            "string": self._string,
            "translated_string": self._string,
            "concatenation": self._concatenation,
            "simple_expansion": self._simple,
            "expansion": self._braced,
            "arithmetic_expansion": self._arithmetic,
            "command_substitution": self._substitution,
            "process_substitution": self._not_run,
            "brace_expression": self._brace,
        }

    def words(self, node, env: Env, src: ScriptText, quoted: bool = False) -> list[Word]:
        """The fields one argument node expands to (one word when ``quoted``)."""
        if node is None:
            return []
        line = src.line(node.start_byte)
        if quoted:
            return [to_word(joined(self.expand(node, env, src, True)), line)]
        return [to_word(f, n) for f, n in self.fields(node, env, src)]

    def fields(self, node, env: Env, src: ScriptText) -> list[tuple]:
        """Expand and split one unquoted argument: ``(pieces, line)`` per field."""
        return split_fields(self.expand(node, env, src, quoted=False), src.line(node.start_byte))

    def counted_fields(self, node, env: Env, src: ScriptText) -> tuple[list[tuple], bool]:
        """:meth:`fields`, and whether bash may make more or fewer fields of ``node`` than
        these (an array item's count and index are then unknown)."""
        outer, self.spread = self.spread, False
        try:
            return self.fields(node, env, src), self.spread
        finally:
            self.spread = outer

    def expand(self, node, env: Env, src: ScriptText, quoted: bool) -> list:
        """The segments of a word (see :mod:`translator.shell.fields`)."""
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                return [Piece(None, None, f"expansions nested more than {MAX_DEPTH} deep")]
            return self._expand(node, env, src, quoted)
        finally:
            self.depth -= 1

    def _expand(self, node, env: Env, src: ScriptText, quoted: bool) -> list:
        kind = node.type
        raw = src.data[node.start_byte : node.end_byte].decode(errors="replace")
        lead = 0
        if raw[:1].isspace() or raw[:1] == "\\":
            blanks = LEADING_BLANKS.match(raw)  # always matches (perhaps the empty string)
            lead = blanks.end() if blanks else 0
        if src.holes and kind in ("expansion", "simple_expansion"):
            hole = src.holes.get(node.start_byte + lead)  # a statement bash cannot parse
            if hole is not None:
                return literal(src, node.start_byte, node.start_byte + lead) + [hole]
        if lead and kind in EXPANSIONS:
            # tree-sitter-bash puts the blanks before a ``$`` inside a string into the
            # expansion's node (``"$X $Y"``): they are text of the string.
            return literal(src, node.start_byte, node.start_byte + lead) + self._expand_at(
                node, kind, raw[lead:], env, src, quoted
            )
        return self._expand_at(node, kind, raw, env, src, quoted)

    def _expand_at(
        self, node, kind: str, raw: str, env: Env, src: ScriptText, quoted: bool
    ) -> list:
        if kind in PLAIN:
            if not quoted and GLOB.search(raw) and GLOB.search(ESCAPED.sub("", raw)):
                self.spread = True
            if "\\" in raw:
                text = re.sub(r"\\\n|\\(.)", lambda m: m.group(1) or "", raw, flags=re.S)
                return [Piece(text, None, None, frozenset())]
            return [_verbatim(src, node.start_byte, node.end_byte, raw)]
        handler = self.handlers.get(kind)
        if handler is not None:
            out = handler(node, raw, env, src, quoted)
            if not quoted and kind in SPLITS:
                ifs = env.get("IFS") is not None  # the script's own IFS: not followed
                self.spread |= any(_may_split(seg, ifs) for seg in out)
                return [_splitting(seg) for seg in out]
            return out
        if not node.named_children:
            return [_verbatim(src, node.start_byte, node.end_byte, raw)]
        return self._all(node.named_children, env, src, quoted)

    def _all(self, nodes, env: Env, src: ScriptText, quoted: bool) -> list:
        out = []
        for child in nodes:
            out.extend(self.expand(child, env, src, quoted))
        return out

    def _raw_string(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        return [_verbatim(src, node.start_byte + 1, node.end_byte - 1, raw[1:-1])]

    def _ansi_c_string(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        body = raw[2:-1]
        return [Piece(re.sub(r"\\(.)", lambda m: ANSI_C.get(m.group(1), "\\" + m.group(1)), body))]

    def _concatenation(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        return self._all(node.children, env, src, quoted)

    def _simple(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        return self.parameter(raw[1:], None, env, quoted)

    def _arithmetic(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        inner = 3 if raw.startswith("$((") else 2
        expr = raw[inner : len(raw) - inner + 1]
        found: list = []
        piece = arith_piece(expr, env, found)
        if found:  # ${X:-n} inside, X not set: where n stands, as bytes of the source
            at = node.end_byte - len(raw.encode()) + len(raw[:inner].encode())
            for name, start, end in found:
                if start is None:
                    self.default(name, src, node, None)
                    continue
                b0 = at + len(expr[:start].encode())
                self.default(name, src, node, b0, b0 + len(expr[start:end].encode()))
        return [piece]

    def default(self, name: str, src: ScriptText, node, start: int | None, end: int = 0) -> None:
        """Record a default taken for ``name`` (not set), its text between the bytes ``start``
        and ``end`` of ``src`` when it is one literal there (``start`` ``None``: it is not)."""
        span = src.span(start, end) if start is not None and end > start else None
        entry = Default(name, src.line(node.start_byte), span)
        self.defaults.setdefault((entry.name, entry.line, entry.span), entry)

    def _substitution(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        if raw.startswith("$((") and raw.endswith("))"):  # tree-sitter's reading of $(( (...) ))
            return self._arithmetic(node, raw, env, src, quoted)
        printed = self._printed(node, env, src)
        if printed is not None:
            return [(Piece(printed), not quoted)]
        return self._not_run(node, raw, env, src, quoted)

    def _printed(self, node, env: Env, src: ScriptText) -> str | None:
        """What a substitution of text tools prints (``$(echo "$IPS" | wc -l)``), when every
        word of it is known: see :mod:`translator.shell.pipes`."""
        inner = node.named_children
        if len(inner) != 1 or inner[0].type not in ("pipeline", "command"):
            return None
        commands = [inner[0]] if inner[0].type == "command" else inner[0].named_children
        texts: list[list[str]] = []
        for command in commands:
            if command.type != "command" or any(
                c.type not in PRINTED_WORDS for c in command.named_children
            ):
                return None
            words = [w for c in command.named_children for w in self.words(c, env, src)]
            if any(w.text is None for w in words):
                return None
            texts.append([w.text for w in words if w.text is not None])
        gpus = _count(env, NODE_GPUS) or _count(env, "SLURM_GPUS_ON_NODE")
        var = env.get(VISIBLE)
        if var is None:
            visible = gpus
        else:
            listed = text_of(var.scalar) if isinstance(var, Var) else None
            visible = (listed_devices(listed) or None) if listed is not None else None
        return pipes.output(texts, gpus, visible)

    def _not_run(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        if PWD.fullmatch(raw):
            return [Piece(None, None, HERE)]
        if SCRIPT_FOLDER.fullmatch(raw):
            if env.get(SBATCH) is not None:  # sbatch runs a copy in its spool folder
                return [Piece(None, None, f"{clip(raw)} (Slurm's copy of the script)")]
            return [Piece(None, None, THERE)]
        return [Piece(None, None, f"{clip(raw)} is not run")]

    def _brace(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        return [Piece(None, None, f"{raw} (brace expansion)")]

    def _string(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        """A double-quoted string: its text, expansions inside kept unsplit."""
        pos = (
            node.start_byte
            + 1
            + (1 if src.data[node.start_byte : node.start_byte + 1] == b"$" else 0)
        )
        end = node.end_byte - 1
        out = []
        for child in node.named_children:
            if child.start_byte > pos:
                out.extend(literal(src, pos, child.start_byte))
            if child.type == "string_content":
                out.extend(literal(src, child.start_byte, child.end_byte))
            else:  # array items stay apart (``"${A[@]}"``): no joined() here
                out += [
                    seg[0] if type(seg) is tuple else seg
                    for seg in self.expand(child, env, src, quoted=True)
                ]
            pos = child.end_byte
        if end > pos:
            out.extend(literal(src, pos, end))
        if not out and node.named_children and all(map(_all_items, node.named_children)):
            return []  # "${A[@]}" of no items is no word at all
        return out or [Piece("", src.span(node.start_byte + 1, node.start_byte + 1))]

    # -- ${...} ---------------------------------------------------------------------------------
    def _braced(self, node, raw: str, env: Env, src: ScriptText, quoted: bool) -> list:
        body = raw[2:-1]
        m = BRACED.match(body)
        if not m:
            return [Piece(None, None, f"{clip(raw)} (set when the script runs)")]
        prefix, name, bracket, index, rest = m.groups()
        sub = subscript(index, env) if bracket else None
        if prefix == "!":
            return self._indices(raw, name, sub, rest, env, quoted)
        if prefix:
            return _length(raw, name, sub, rest, env)
        op = re.match(r"(:?[-=+?])", rest)
        trim = TRIM.fullmatch(rest) if rest and not op else None
        if trim is not None:
            return self._trim(raw, name, sub, trim.group(1), trim.group(2), env, quoted)
        if rest and not op:
            return [Piece(None, None, f"{clip(raw)} is not evaluated")]
        if not op:
            return self.parameter(name, sub, env, quoted)
        # where the word after the operator starts, as an offset into the node
        after = 2 + len(body) - len(rest) + len(op.group(1))
        return self._operator(node, raw, (name, sub, op.group(1), after), env, src, quoted)

    def _trim(
        self, raw: str, name: str, sub, op: str, pattern: str, env: Env, quoted: bool
    ) -> list:
        """``${X#p}``, ``${X##p}``, ``${X%p}``, ``${X%%p}``: the value without its shortest
        (longest) prefix (suffix) that matches the pattern ``p``."""
        if sub in ("@", "*") or name in ("@", "*"):
            return [Piece(None, None, f"{clip(raw)} is not evaluated")]
        pieces = joined(self.parameter(name, sub, env, True))
        text = text_of(pieces)
        if text is None:
            if as_run(pieces) == "":  # nothing to trim, run as read; still no value
                return [(p, not quoted) for p in pieces]
            return [Piece(None, None, f"{clip(raw)} ({why(pieces)})", merge_sources(pieces))]
        if len(text) > MAX_TRIM:
            return [Piece(None, None, f"{clip(raw)} (a value too long to trim)")]
        start, end = _trimmed(text, op, pattern)
        one = pieces[0] if len(pieces) == 1 else None
        span = (one.span[0] + start, one.span[0] + end) if one and one.span else None
        sources = merge_sources(pieces)
        return [(Piece(text[start:end], span, None, sources), not quoted)]

    def _operator(
        self, node, raw: str, form: tuple, env: Env, src: ScriptText, quoted: bool
    ) -> list:
        """``${X-w}``, ``${X:=w}``, ``${X:+w}``, ``${X?}``...: ``form`` is ``(name, index,
        operator, offset of the word after it)``."""
        name, sub, operator, after = form
        colon, kind = operator.startswith(":"), operator[-1]
        var = lookup(env, name)
        if var is None and name in ("0", "?", "$", "!", "-"):
            return [Piece(None, None, f"{clip(raw)} (${name} is set when the script runs)")]
        if kind == "=" and (sub in ("@", "*") or isinstance(sub, Piece)):
            return [Piece(None, None, f"{clip(raw)} assigns to an index bash refuses or not known")]
        if kind == "=" and (name.isdigit() or name in ("@", "*", "#")):
            return [Piece(None, None, f"{clip(raw)} assigns to a parameter: an error in bash")]
        state = _state(var, name if name in ("@", "*") else sub)
        if state == "notset" and kind == "+" and not _absent(name, env):
            state = "unknown"  # the environment (or a file sourced) may set it
        missing = state in ("notset", "unset") or (colon and state == "empty")
        decided = _without_word(raw, name, kind, colon, state, missing)
        if decided is not None:
            return decided
        if kind == "?" or kind != "+" and not missing:
            return self.parameter(name, sub, env, quoted)
        return self._alternative(
            node,
            after,
            (name, sub) if kind == "=" else None,
            env,
            src,
            quoted,
            name if state == "notset" and sub is None else None,
        )

    def _alternative(
        self, node, after: int, target: tuple | None, env, src, quoted, default=None
    ) -> list:
        """The word after the operator, which ``${X:=w}`` also assigns to ``target`` (``(name,
        index)``); ``default``: the name not set whose default it is (recorded)."""
        words = [
            c
            for c in node.children
            if c.start_byte >= node.start_byte + after and c.end_byte <= node.end_byte - 1
        ]
        pieces = list(joined(self._all(words, env, src, quoted=True))) or [Piece("")]
        if default is not None:
            self._default_of(default, node, pieces, src)
        if target is not None:
            name, sub = target
            if sub is None:
                arrays.set_scalar(env, name, tuple(pieces), False, 0)
            else:
                arrays.set_element(env, name, sub, tuple(pieces), 0, f"${{{name}[...]}}")
        return [(p, not quoted) for p in pieces]

    def _default_of(self, name: str, node, pieces: list, src: ScriptText) -> None:
        """Record the default ``pieces`` taken for ``name``, with the span of its literal when
        it is one literal inside ``node``."""
        spans = [p.span for p in pieces if p.text]
        span = spans[0] if len(spans) == 1 and len(pieces) == 1 else None
        outer = src.span(node.start_byte, node.end_byte)
        if span is not None and outer is not None and outer[0] <= span[0] <= span[1] <= outer[1]:
            entry = Default(name, src.line(node.start_byte), span)
        else:
            entry = Default(name, src.line(node.start_byte), None)
        self.defaults.setdefault((entry.name, entry.line, entry.span), entry)

    def parameter(self, name: str, sub, env: Env, quoted: bool) -> list:
        """``$NAME``, ``${NAME[k]}``, ``${NAME[@]}``: the value's segments. ``sub``: ``None``
        (no index), ``"@"``, ``"*"``, an index, or the unknown piece an index gave."""
        var = lookup(env, name)
        every = sub in ("@", "*") or name in ("@", "*")
        one_word = quoted and "*" in (sub, name)  # "${A[*]}": one word whatever the count
        if var is None:
            self.spread |= every and not one_word
            return [_not_set(name, env)]
        if isinstance(sub, Piece):
            return [sub]
        if every:
            self.spread |= not arrays.exact(var) and not one_word
            return [] if var == UNSET else _items(var, [sub or name], quoted)
        if var == UNSET:
            return [(Piece(""), not quoted)]
        state, item = arrays.element(var, sub or 0)
        if state == arrays.UNKNOWN and sub is None:
            item = var.scalar  # the vague first item, with its reasons
        elif state == arrays.UNKNOWN:
            return [Piece(None, None, f"${{{name}[{sub}]}} (an element the reader cannot place)")]
        return [(p, not quoted) for p in item or (Piece(""),)]

    def _indices(self, raw: str, name: str, sub, rest: str, env: Env, quoted: bool) -> list:
        """``${!A[@]}``: the indices of ``A``'s elements (``${!X}``, indirection, is not
        followed)."""
        var = env.get(name)
        if sub not in ("@", "*") or rest:
            return [Piece(None, None, f"{clip(raw)} is not evaluated")]
        if var == UNSET:
            return []
        if not isinstance(var, Var) or not arrays.exact(var):
            self.spread |= not quoted or sub == "@"
            return [Piece(None, None, f"{clip(raw)} (the indices of ${name} are not known)")]
        keys = [(Piece(str(k)),) for k in arrays.known_keys(var)]
        return _items(Var(keys, True), [sub], quoted)

    # -- heredocs -------------------------------------------------------------------------------
    def heredoc(self, node, env: Env, src: ScriptText, beside=None) -> Heredoc | None:
        """A here-document that goes to a file (``<<EOT > FILE``, or ``beside``: the
        ``> FILE`` of its command, ``cat > FILE <<EOT``), expanded unless its marker is
        quoted; ``None`` for one that does not go to a file."""
        inner = next((c for c in node.named_children if c.type == "file_redirect"), None)
        target = inner or beside
        body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
        start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
        if target is None or body is None or start is None:
            return None
        destination = target.child_by_field_name("destination") or target.named_children[-1]
        words = self.words(destination, env, src, quoted=True)
        return Heredoc(words[0], self.heredoc_text(node, env, src), src.line(node.start_byte))

    def heredoc_text(self, node, env: Env, src: ScriptText) -> tuple[Piece, ...]:
        """What a here-document gives, expanded unless its marker is quoted."""
        body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
        start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
        if body is None or start is None:
            return ()
        if src.data[start.start_byte : start.end_byte][:1] in (b"'", b'"', b"\\"):
            return tuple(literal(src, body.start_byte, body.end_byte))
        pieces, at = [], body.start_byte
        for child in body.named_children:
            if child.type == "heredoc_content":
                continue
            pieces += literal(src, at, child.start_byte)
            pieces += joined(self.expand(child, env, src, quoted=True))
            at = child.end_byte
        pieces += literal(src, at, body.end_byte)
        return tuple(pieces)


def _verbatim(src: ScriptText, start: int, end: int, text: str) -> Piece:
    """Text that stands in the source as written, with its span when there is one."""
    span = src.span(start, end)
    return Piece(text, span, None, frozenset({span}) if span else frozenset())


def _trimmed(text: str, op: str, pattern: str) -> tuple[int, int]:
    """Where ``text`` starts and ends once ``${X#p}`` (``##``, ``%``, ``%%``) trims it."""
    n = len(text)
    if op[0] == "#":
        cuts = range(n + 1) if op == "#" else range(n, -1, -1)
        return next(((i, n) for i in cuts if fnmatch.fnmatchcase(text[:i], pattern)), (0, n))
    cuts = range(n, -1, -1) if op == "%" else range(n + 1)
    return next(((0, i) for i in cuts if fnmatch.fnmatchcase(text[i:], pattern)), (0, n))


def _length(raw: str, name: str, sub, rest: str, env: Env) -> list:
    """``${#NAME}``, ``${#NAME[k]}`` and ``${#NAME[@]}``."""
    if rest:
        return [Piece(None, None, f"{clip(raw)} is not evaluated")]
    var = lookup(env, name)
    if var == UNSET:
        return [Piece("0")]
    if not isinstance(var, Var):
        return [Piece(None, None, f"{clip(raw)} (${name} is not set in the script)")]
    if isinstance(sub, Piece):
        return [sub]
    if sub in ("@", "*"):
        n = arrays.count(var)
        if n is None:
            return [Piece(None, None, f"{clip(raw)} (the count of ${name}'s items is not known)")]
        return [Piece(str(n))]
    state, item = arrays.element(var, sub or 0)
    if state == arrays.ABSENT:
        return [Piece("0")]
    text = None if item is None else text_of(item)
    if text is None:
        return [Piece(None, None, why(item) if item else f"{clip(raw)} (an element not known)")]
    return [Piece(str(len(text)))]


def _state(var, sub=None) -> str:
    """What ``${X-w}`` and its kind look at (``sub``: the index, as :meth:`Expander.parameter`
    takes it): ``notset`` (never set by the script), ``unset``, ``unknown``, ``empty`` or
    ``set``."""
    if var is None:
        return "notset"
    if var == UNSET:
        return "unset"
    if isinstance(sub, Piece):
        return "unknown"
    if sub in ("@", "*"):  # bash tests the items joined: none, or one that is empty, is null
        n = arrays.count(var)
        if n is None or n > 1:
            return "unknown" if n is None else "set"
        item = var.items[0] if n else None
    else:
        state, item = arrays.element(var, sub or 0)
        if state == arrays.UNKNOWN:
            return "unknown"
    if item is None:
        return "unset"
    text = as_run(item)  # a value the environment alone gives is empty, run as read
    return "unknown" if text is None else "empty" if text == "" else "set"


def _without_word(raw: str, name: str, kind: str, colon: bool, state: str, missing: bool):
    """What ``${X:+w}``, ``${X+w}``, ``${X?}``... give when neither the value nor the word
    after the operator is used (the value is unknown, the script stops...); else ``None``."""
    if state == "unknown" and (colon or kind == "+"):
        return [Piece(None, None, f"{clip(raw)} (${name} is not known)")]
    if kind == "+" and missing:  # nothing: unquoted, no word at all
        return [(Piece(""), True)]
    if kind == "?" and missing:
        return [Piece(None, None, f"{clip(raw)} stops the script")]
    return None


def subscript(index: str, env: Env):
    """What ``[index]`` gives :meth:`Expander.parameter`: ``"@"``, ``"*"``, the index (bash
    evaluates it as arithmetic), or an unknown piece that says why it is not known."""
    if index in ("@", "*"):
        return index
    if not index.strip():
        return Piece(None, None, "[] (an empty index: an error in bash)")
    if DECIMAL.fullmatch(index):
        return int(index)
    piece = arith_piece(index, env)
    return piece if piece.text is None else int(piece.text)


def _may_split(segment, ifs: bool) -> bool:
    """Whether an unquoted segment may give bash more or fewer fields than the reader makes
    of it: unknown text, text with a glob character, or any text once the script sets
    ``IFS`` (the reader splits at blanks)."""
    if isinstance(segment, tuple):
        piece, split = segment
        if not split:
            return False
        return piece.text is None or bool(GLOB.search(piece.text)) or (ifs and piece.text != "")
    return isinstance(segment, Piece) and segment.text is None


def _count(env: Env, name: str) -> int | None:
    """A variable's value when it is a count."""
    var = env.get(name)
    text = text_of(var.scalar) if isinstance(var, Var) else None
    return (
        int(text) if text is not None and text.isascii() and text.isdigit() and int(text) else None
    )


def _splitting(segment):
    """An unquoted expansion's segment, its unknown text marked as text bash may split."""
    if type(segment) is Piece and segment.text is None:
        return replace(segment, splits=True)
    if type(segment) is tuple and segment[0].text is None:
        return replace(segment[0], splits=True), segment[1]
    return segment


def _all_items(node) -> bool:
    """Whether ``node`` is ``$@``, ``${@}`` or ``${A[@]}`` (quoted, a word per item)."""
    return node.type in ("simple_expansion", "expansion") and bool(
        re.fullmatch(rb"\$(@|\{@\}|\{[A-Za-z_]\w*\[@\]\})", node.text)
    )


def lookup(env: Env, name: str):
    """What ``$name`` reads (as :meth:`Env.get`): ``$1``... are the items of ``$@`` (the
    script's arguments, or a function's), ``$*`` is ``$@``. Past the last argument: ``None``
    (not set) for the script's, the empty string for a function's."""
    if name == "*":
        return env.get("@")
    if not name.isdigit() or name == "0":
        return env.get(name)
    args = env.get("@")
    if not isinstance(args, Var):
        return None
    state, item = arrays.element(args, int(name) - 1)
    if state == arrays.SET:
        return Var((item,))
    if state == arrays.UNKNOWN:
        return Var((unknown(f"${name} (the arguments are not known)"),))
    return Var(((Piece(""),),)) if _in_function(env) else None


def _in_function(env: Env) -> bool:
    """Whether ``env`` is inside a function's frame."""
    layer: Env | None = env
    while layer is not None:
        if layer.function:
            return True
        layer = layer.parent
    return False


def _absent(name: str, env: Env) -> bool:
    """Whether a name the script never set is empty when the script runs as read: not after
    a ``source`` (the file may set it), nor for what bash, or Slurm under ``#SBATCH``, sets."""
    if name.isdigit() and name != "0" or name in ("@", "*"):
        return True
    if name in BASH_SETS or not (name[:1].isalpha() or name[:1] == "_"):
        return False
    if name.startswith("SLURM_") and env.get(SBATCH) is not None:
        return False
    return env.get(SOURCED) is None and env.get(OPEN_ENV) is None


def _not_set(name: str, env: Env) -> Piece:
    """The value of a name the script never sets: absent (empty when run as read, unknown as a
    value) or, for what the running system sets, unknown."""
    if name[:1].isalpha() or name[:1] == "_":
        if name == "PWD" or (name == "SLURM_SUBMIT_DIR" and env.get(SBATCH) is not None):
            return Piece(None, None, HERE)  # sbatch is run where the job runs
        if name in BASH_SETS:
            return Piece(None, None, f"${name} (set by bash when the script runs)")
        if name.startswith("SLURM_") and env.get(SBATCH) is not None:
            return Piece(None, None, f"${name} (set by Slurm when the job runs)")
        if env.get(SOURCED) is not None:
            return Piece(
                None, None, f"${name} (not set in the script; a file it sources may set it)"
            )
        if env.get(OPEN_ENV) is not None:
            return Piece(
                None, None, f"${name} (not set in the script; the environment is not known)"
            )
        return Piece(None, None, NOT_SET.format(name), absent=True)
    given = "not given" if env.get(ARGS_GIVEN) is not None else "none given"
    if name in ("@", "*"):
        return Piece(None, None, f"${name} (the script's arguments; {given})", absent=True)
    if name.isdigit() and name != "0":
        return Piece(None, None, f"${name} (an argument of the script; {given})", absent=True)
    return Piece(None, None, f"${name} (set when the script runs)")


#: Why a name the script never sets is not known as a value.
NOT_SET = "${} (not set in the script: only the environment can set it)"


def _items(var: Var, index: list, quoted: bool) -> list:
    """``${A[@]}`` (a word per item, even quoted) and ``${A[*]}`` (quoted: one word, items
    joined by a space)."""
    out: list = []
    for i, item in enumerate(var.items):
        if i and (quoted and index[:1] != ["*"] or not quoted):
            out.append(BREAK)
        elif i:
            out.append(Piece(" "))
        if i < len(var.lines):
            out.append(At(var.lines[i]))
        out.extend((p, not quoted) for p in item)
    return out


# -- $((...)) -----------------------------------------------------------------------------------
def arith_piece(expr: str, env: Env, found: list | None = None) -> Piece:
    """``$((expr))``: its value, or an unknown piece that says why (a value the script does
    not fix, or an error bash would stop on). Assignments in it change ``env``. A name not
    set (nor given) is unknown, not 0: only the environment supplies it. ``found`` gets
    ``(name, start, end)`` for each ``${X:-n}`` inside whose default ``n`` (at those offsets
    of ``expr``) is taken."""
    sources: set = set()

    def get(name: str) -> str:
        var = env.get(name)
        if var == UNSET:
            return ""
        if var is None:
            raise arith.Unknown(
                NOT_SET.format(name) if _absent(name, env) else f"${name} (not set in the script)"
            )
        text = text_of(var.scalar)
        sources.update(merge_sources(var.scalar))
        if text is None:
            raise arith.Unknown(why(var.scalar))
        return text

    def put(name: str, value: int) -> None:
        arrays.set_scalar(env, name, (Piece(str(value), None, None, frozenset(sources)),), False, 0)

    try:
        value = arith.Evaluator(get, put).evaluate(dollar_refs(expr, env, found))
    except (arith.Unknown, arith.ArithError) as exc:
        return _arith_failed(expr, exc, env, frozenset(sources))
    return Piece(str(value), None, None, merge_sources([Piece("", None, None, frozenset(sources))]))


def _arith_failed(expr: str, exc: Exception, env: Env, sources: frozenset) -> Piece:
    """The unknown piece of an arithmetic the reader could not finish; what it assigns (as
    far as it got, in bash) is unknown from then on: ``$((G = N * 2))`` with ``N`` not known
    leaves ``G`` unknown, ``$((A[1] = 5))`` the array ``A``."""
    what = f"$(({clip(expr.strip())}))"
    if isinstance(exc, arith.Unknown):
        why_ = f"{what}: {exc}"
    elif ARITH_SUBSCRIPT.search(expr):
        why_ = f"{what}: array elements in arithmetic are not followed"
    else:
        why_ = f"{what} is an error in bash ({exc})"
    forget_targets(expr, env, why_, sources)
    return Piece(None, None, why_, sources)


def forget_targets(expr: str, env: Env, why_: str, sources=frozenset()) -> None:
    """What the arithmetic ``expr`` assigns becomes unknown (``why_``)."""
    for m in ARITH_TARGET.finditer(expr):
        name = m.group(1) or m.group(2)
        if expr[m.end() :].lstrip().startswith("["):
            if isinstance(env.get(name), Var):
                env.set(name, arrays.vague(f"${{{name}[@]}} ({why_})", sources))
        else:
            arrays.set_scalar(env, name, (Piece(None, None, why_, sources),), False, 0)


def dollar_refs(expr: str, env: Env, found: list | None = None) -> str:
    """``$X``, ``${X}`` and ``${X:-n}`` inside arithmetic become their text (bash expands them
    before it evaluates); anything else in ``$`` form is unknown. ``found``: see
    :func:`arith_piece`."""

    def value(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        default = m.group(4)
        var = env.get(name)
        empty = var is None or var == UNSET or as_run(var.scalar) == ""
        if empty and default is not None:
            if var is None and found is not None:  # (offsets into expr, when they are)
                found.append((name, None if quoted else m.start(4), m.end(4)))
            return f"({default})"
        if var is None:
            raise arith.Unknown(
                NOT_SET.format(name) if _absent(name, env) else f"${name} (not set in the script)"
            )
        if var == UNSET or text_of(var.scalar) == "":
            return "0"
        text = text_of(var.scalar)
        if text is None:
            raise arith.Unknown(why(var.scalar))
        return f"({text})" if text.strip() else "0"

    def parameter(m: re.Match) -> str:  # $#, $1, ${12}
        name = m.group(1) or m.group(2)
        var = lookup(env, name)
        if var is None:
            raise arith.Unknown(_not_set(name, env).why or name)
        text = text_of(var.scalar) if isinstance(var, Var) else ""
        if text is None:
            raise arith.Unknown(why(var.scalar))
        return f"({text})" if text.strip() else "0"

    quoted = '"' in expr
    out = ARITH_REFS.sub(value, expr.replace('"', "") if quoted else expr)  # (( "$#" ))
    if "$" in out:
        out = PARAMETER_REFS.sub(parameter, out)
    if "$" in out:
        raise arith.Unknown(f"{clip(expr)} needs the running script")
    return out
