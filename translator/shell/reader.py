"""The walk over a parsed script: statements in the order bash runs them, each simple command
kept with its expanded words.

Subshells, pipeline elements and a command's own ``X=1 cmd`` environment do not change the
script's variables; ``unset`` does; functions run when called, with their arguments as
``$1``...; ``local`` stays inside the function; ``eval STRING`` and ``bash -c STRING`` (also
behind ``srun``) are parsed again and read; ``source FILE`` is not read and makes what was set
before it unknown. Paths the reader cannot decide between (an ``if`` on an unknown value, a
loop body) are each followed in a fork of the variables.
"""

from __future__ import annotations

from translator.errors import InputError
from translator.reading import Note
from translator.shell import arrays, assign, conditions, flow
from translator.shell.expand import Expander, arith_piece, forget_targets
from translator.shell.merge import agree
from translator.shell.slurm import sbatch_variables
from translator.shell.syntax import Source, check_syntax, tree
from translator.shell.values import (
    MAX_CALL_DEPTH,
    MAX_EVALS,
    MAX_TEXT,
    UNSET,
    Env,
    Piece,
    Script,
    Var,
    Word,
    clip,
    pieces_of,
    text_of,
    to_word,
    unknown,
)

#: Statements that set nothing and run nothing the reader follows.
IGNORED = {"comment", "heredoc_body", "file_redirect", "herestring_redirect", "test_command"}
#: Statements looked for inside a statement of another kind.
NESTED = {
    "command",
    "list",
    "pipeline",
    "subshell",
    "compound_statement",
    "if_statement",
    "redirected_statement",
}
#: Children of a command that are not its words.
NOT_WORDS = {
    "variable_assignment",
    "file_redirect",
    "heredoc_redirect",
    "herestring_redirect",
    "comment",
}
#: Commands that set the variables they name to what only the running script knows.
READERS = {"read", "mapfile", "readarray", "printf", "getopts"}


class Reader:
    """Reads one script; the state of the walk (functions defined, calls and ``eval``
    strings being read, the undecided paths it is in)."""

    def __init__(self, where: str, budget: int):
        self.where = where
        self.script = Script()
        self.ex = Expander()
        self.functions: dict[str, tuple] = {}
        self.calls = 0
        self.evals = 0
        self.steps, self.budget = 0, budget
        self.prefix: list[Word] = []  # the launcher words before ``bash -c`` being read
        self.path: tuple = ()  # the undecided branches the reader is in, see Script.paths
        self.choices = 0
        self.handlers = {
            "variable_assignment": self._assign,
            "variable_assignments": self._assignments,
            "declaration_command": self._declaration,
            "unset_command": self._unset,
            "command": self.command,
            "redirected_statement": self._redirected,
            "negated_command": self._redirected,
            "compound_statement": self._compound,
            "program": self.block,
            "do_group": self.block,
            "subshell": self._subshell,
            "pipeline": self._pipeline,
            "list": self.and_or,
            "if_statement": self.if_statement,
            "case_statement": self.case_statement,
            "while_statement": self.loop,
            "for_statement": self.loop,
            "c_style_for_statement": self.loop,
            "function_definition": self._function,
        }

    def read(self, text: str) -> Script:
        data = text.encode()
        src = Source(data, text, 1, None)
        root = tree(data).root_node
        check_syntax(root, src, self.where)
        env = Env()
        sbatch_variables(text, env)
        self.block(root, env, src)
        for name, var in env.own.items():
            if isinstance(var, Var):
                lines = var.lines or (0,) * len(var.items)
                self.script.variables[name] = [to_word(s, n) for s, n in zip(var.items, lines)]
        return self.script

    # -- statements -----------------------------------------------------------------------------
    def tick(self, node, src: Source) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise InputError(
                f"{self.where}:{src.line(node.start_byte)}: the script runs its "
                "functions or strings too many times to follow; batchspec stops "
                "reading it"
            )

    def block(self, node, env: Env, src: Source) -> None:
        self.block_list(node.named_children, env, src)

    def block_list(self, statements, env: Env, src: Source) -> None:
        for s in statements:
            self.statement(s, env, src)

    def statement(self, node, env: Env, src: Source) -> None:
        self.tick(node, src)
        if node.type not in IGNORED:
            self.handlers.get(node.type, self._inside)(node, env, src)

    def _inside(self, node, env: Env, src: Source) -> None:
        for child in node.named_children:
            if child.type in NESTED:
                self.statement(child, env, src)

    def _assign(self, node, env: Env, src: Source) -> None:
        assign.assign(self.ex, node, env, src)

    def _assignments(self, node, env: Env, src: Source) -> None:
        for child in node.named_children:
            assign.assign(self.ex, child, env, src)

    def _declaration(self, node, env: Env, src: Source) -> None:
        assign.declaration(self.ex, node, env, src)

    def _unset(self, node, env: Env, src: Source) -> None:
        if any(src.spells(c, b"-f") for c in node.children):  # unset -f: functions
            return
        for name in assign.unset_targets(self.ex, node, env, src):
            if "[" not in name:
                env.set(name, UNSET)
                continue
            base = name.split("[", 1)[0]
            k, why = assign.index_of(name, env)
            arrays.unset_element(env, base, k, why)

    def _redirected(self, node, env: Env, src: Source) -> None:
        """A statement with redirections (or ``!``); a heredoc written to a file is kept."""
        body = node.child_by_field_name("body") or (node.named_children or [None])[0]
        if body is not None and body.type not in ("heredoc_redirect", "file_redirect"):
            self.statement(body, env, src)
        for child in node.named_children:
            if child.type == "heredoc_redirect":
                doc = self.ex.heredoc(child, env, src)
                if doc is not None:
                    self.script.heredocs.append(doc)

    def _compound(self, node, env: Env, src: Source) -> None:
        """``{ ...; }``, or ``(( expr ))``: arithmetic, whose assignments change variables."""
        first, last = node.children[:1], node.children[-1:]
        if first and first[0].type == "((" and last[0].type == "))":
            arith_piece(src.data[first[0].end_byte : last[0].start_byte].decode(), env)
            return
        self.block(node, env, src)

    def _subshell(self, node, env: Env, src: Source) -> None:
        self.block(node, env.fork(), src)

    def _pipeline(self, node, env: Env, src: Source) -> None:
        for child in node.named_children:
            self.statement(child, env.fork(), src)

    def _function(self, node, env: Env, src: Source) -> None:
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is not None and body is not None:
            self.functions[src.of(name)] = (body, src)

    # -- simple commands ------------------------------------------------------------------------
    def command(self, node, env: Env, src: Source) -> None:
        if node.child_by_field_name("name") is None:  # only assignments (X=1 Y=2)
            for child in node.named_children:
                if child.type == "variable_assignment":
                    assign.assign(self.ex, child, env, src)
            return
        words = self.command_words(node, env, src)
        if not words:
            return
        name = words[0].text
        if name in self.functions:
            self.call(name, words, env)
            return
        if name == "eval":
            self.reparse(words[1:], env, fork=False)
            return
        if name in ("source", "."):
            self.sourced(words, env)
            return
        if name in READERS:
            assign.unknown_outputs(words, env)
        if name == "let":  # let x=1 y++: each word is arithmetic
            for w in words[1:]:
                if w.text is not None:
                    arith_piece(w.text, env)
                else:  # what it assigns is not known
                    text = "".join(" 0 " if p.text is None else p.text for p in w.parts)
                    forget_targets(text, env, f"let {clip(text)}: {w.why_unknown}")
        self.script.commands.append(self.prefix + words)
        self.script.paths.append(self.path)
        shell = _shell_string(words)
        if shell is not None:  # the string runs with the words before bash as its launcher
            at, inner = shell
            outer, self.prefix = self.prefix, self.prefix + words[:at]
            try:
                self.reparse([inner], env, fork=True)
            finally:
                self.prefix = outer

    def command_words(self, node, env: Env, src: Source) -> list[Word]:
        """The words of a command, its own ``X=1`` environment and redirections left out."""
        words: list[Word] = []
        for child in node.named_children:
            if child.type in NOT_WORDS:
                continue
            if child.type == "command_name":
                child = child.named_children[0] if child.named_children else child
            words.extend(self.ex.words(child, env, src))
        return words

    def sourced(self, words: list[Word], env: Env) -> None:
        """``source FILE`` is not read, and may set any variable: those set so far become
        unknown (the ones Slurm sets from ``#SBATCH`` aside)."""
        what = f"{words[0].text} {clip(words[1].text or '?') if len(words) > 1 else ''}"
        self.script.notes.append(Note(words[0].line, f"{what} is not read"))
        for n in env.names():
            old = env.get(n)
            if not n.startswith(("SLURM_", "__batchspec_")) and isinstance(old, Var):
                why = f"${n} may be changed by {what} on line {words[0].line}"
                # a scalar stays one, but its count and indices (an array now?) are unknown
                env.set(n, arrays.vague(why) if old.array else Var((unknown(why),), keys=()))

    def call(self, name: str, words: list[Word], env: Env) -> None:
        """Run a function the script defined, in a frame of its own: what it assigns reaches
        the caller, its ``local`` names and ``$1``... do not."""
        body, body_src = self.functions[name]
        if self.calls >= MAX_CALL_DEPTH:
            self.script.notes.append(Note(words[0].line, f"{name} calls itself too deep to follow"))
            return
        frame = _frame(env, words)
        self.calls += 1
        try:
            self.statement(body, frame, body_src)
        finally:
            self.calls -= 1
        for key, value in frame.own.items():
            if key not in frame.locals:
                env.set(key, value)

    def reparse(self, words: list[Word], env: Env, fork: bool) -> None:
        """``eval`` / ``bash -c``: read the string as a script, unknown parts kept unknown."""
        line = words[0].line if words else 1
        text, pieces, holes = _eval_string(words)
        if self.evals >= MAX_EVALS or len(text) > MAX_TEXT:
            self.script.notes.append(
                Note(
                    words[0].line if words else 0,
                    "a string run by eval or bash -c nests or grows too far to follow; not read",
                )
            )
            return
        data = text.encode()
        root = tree(data).root_node
        if root.has_error:
            self.script.notes.append(
                Note(line, "a string run by eval or bash -c does not parse; not read")
            )
            return
        scope = env.fork() if fork else env
        for hole, piece in holes.items():
            scope.set(hole, Var(((piece,),)))
        self.evals += 1
        try:
            self.block(root, scope, Source(data, text, line, pieces))
        finally:
            self.evals -= 1
        for hole in holes:
            scope.own.pop(hole, None)

    # -- control flow ---------------------------------------------------------------------------
    def branches(self, env: Env, paths: list, src: Source, line: int, what: str) -> None:
        """Run each possible path in a fork of ``env``; keep a variable only where every path
        agrees. ``paths``: statement lists, ``None`` for a path that runs nothing."""
        deltas = []
        self.choices += 1
        choice = (self.choices, f"{what} on line {line}")
        for k, statements in enumerate(paths):
            branch = env.fork()
            outer, self.path = self.path, self.path + ((choice, k),)
            try:
                self.block_list(statements or (), branch, src)
            finally:
                self.path = outer
            deltas.append(branch.own)
        for name in set().union(*deltas):
            values = [d.get(name, env.get(name)) for d in deltas]
            value = agree(values, name, f"{what} on line {line}")
            if value is not env.get(name) or name in env.own:  # an outer scope's stays its own
                env.set(name, value)

    def follow(self, paths: flow.Paths, env: Env, src: Source, node, what: str) -> None:
        """Run what surely runs, or each path that may."""
        sure, undecided = paths
        if undecided is None:
            self.block_list(sure, env, src)
        else:
            self.branches(env, undecided, src, src.line(node.start_byte), what)

    def if_statement(self, node, env: Env, src: Source) -> None:
        arms, otherwise = flow.if_arms(node)
        paths = flow.if_paths(arms, otherwise, lambda c: conditions.status(self.ex, c, env, src))
        self.follow(paths, env, src, node, "the if")

    def case_statement(self, node, env: Env, src: Source) -> None:
        value = node.child_by_field_name("value")
        subject = self.text(value, env, src) if value is not None else None
        items = [c for c in node.named_children if c.type == "case_item"]
        paths = flow.case_paths(items, subject, lambda ps: [self.text(p, env, src) for p in ps])
        self.follow(paths, env, src, node, "the case")

    def text(self, node, env: Env, src: Source) -> str | None:
        """The text a node expands to as one quoted word (``None`` when not known)."""
        return text_of([p for w in self.ex.words(node, env, src, True) for p in pieces_of(w)])

    def loop(self, node, env: Env, src: Source) -> None:
        """A loop body may run or not (its variable is unknown)."""
        body = node.child_by_field_name("body")
        variable = node.child_by_field_name("variable")
        paths = [[body] if body is not None else None, None]
        if variable is not None:
            name = src.of(variable)
            why = f"${name} (a loop variable)"
            arrays.set_scalar(env, name, unknown(why), False, src.line(node.start_byte))
        self.branches(env, paths, src, src.line(node.start_byte), "the loop")

    def and_or(self, node, env: Env, src: Source) -> None:
        """``a && b``, ``a || b``: ``b`` runs when known values say it does, else maybe."""
        left, op_node, right = node.children[0], node.children[1], node.children[-1]
        op = src.of(op_node)
        first = conditions.status(self.ex, left, env, src)
        self.statement(left, env, src)
        runs = first if op == "&&" else (None if first is None else not first)
        if runs is True:
            self.statement(right, env, src)
        elif runs is None:
            self.branches(env, [[right], None], src, src.line(node.start_byte), f"the {op}")


def _frame(env: Env, words: list[Word]) -> Env:
    """A function's frame: ``$1``...``$9`` and ``$@`` from the call's words."""
    frame = env.fork(function=True)
    frame.locals.update(map(str, range(1, 10)), {"@"})
    for i in range(1, 10):
        value = pieces_of(words[i]) if i < len(words) else (Piece("", None),)
        frame.set(str(i), Var((value,)))
    frame.set("@", Var(tuple(pieces_of(w) for w in words[1:]), True))
    return frame


def _eval_string(words: list[Word]) -> tuple[str, list, dict]:
    """The string ``eval`` or ``bash -c`` runs: ``(text, pieces, holes)``; each unknown piece
    stands in the text as ``${__batchspec_unknown_N}``, a variable (in ``holes``) holding
    it; ``pieces`` maps the literal stretches back to the file (see :class:`Source`)."""
    text_parts, pieces, at = [], [], 0
    holes: dict[str, Piece] = {}
    for i, w in enumerate(words):
        if i:
            text_parts.append(" ")
            at += 1
        for piece in w.parts or pieces_of(w):
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
    return "".join(text_parts), pieces, holes


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


def parse(text: str, where: str) -> Script:
    """The commands and variables of ``text``; an :class:`InputError` naming the line when the
    script is not valid bash (an unterminated quote, array or heredoc)."""
    try:
        return Reader(where, budget=20 * len(text) + 10_000).read(text)
    except RecursionError:
        raise InputError(f"{where}: blocks nested too deeply to follow") from None
