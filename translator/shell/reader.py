"""The walk over a parsed script: statements in the order bash runs them, each simple command
kept with its expanded words and the environment its process sees.

The script runs as read: with the arguments and environment :func:`parse` is given (none by
default) and what ``#SBATCH`` sets. Subshells, pipeline elements and a command's own ``X=1
cmd`` environment do not change the script's variables; ``unset`` does; functions run when
called, with their arguments as ``$1``...; ``local`` stays inside the function; ``shift`` and
``set --`` move the arguments; ``eval STRING`` and ``bash -c STRING`` (also behind ``srun``)
are parsed again and read; ``source FILE`` is not read and makes what was set before it
unknown. A ``while``/``until`` loop whose condition known values decide runs for real (up
to MAX_LOOPS times); ``break``, ``continue``, ``return`` and ``exit`` end what they end.
Paths the reader cannot decide between (an ``if`` on an unknown value, a loop body that may
run or not) are each followed in a fork of the variables.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from translator.errors import InputError
from translator.shell import arrays, assign, conditions, flow
from translator.shell.expand import SBATCH, Expander, arith_piece, forget_targets
from translator.shell.merge import agree
from translator.shell.notes import Note
from translator.shell.slurm import sbatch_variables
from translator.shell.syntax import Source, refuse_long_numbers, repair, tree
from translator.shell.values import (
    ARGS_GIVEN,
    MANY,
    MAX_CALL_DEPTH,
    MAX_EVALS,
    MAX_TEXT,
    OWN,
    SOURCED,
    UNSET,
    Env,
    Piece,
    Script,
    Var,
    Word,
    clip,
    pieces_of,
    run_text,
    scalar,
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
#: Commands that end what runs: the loop's body, the function, the script.
STOPS = frozenset({"break", "continue", "return", "exit"})
LOOP = frozenset({"break", "continue"})
#: Times one ``while`` loop whose condition is decided runs for real (then: may run or not),
#: and such runs in the whole reading.
MAX_LOOPS = 100
MAX_ITERATIONS = 2000
#: Exported variables kept in one command's environment.
MAX_EXPORTS = 256
NAME = re.compile(r"[A-Za-z_]\w*")
#: A value set by the reader itself (markers, the arguments).
MARK = Var(((Piece("1"),),))


class _Stop(Exception):
    """``break``, ``continue``, ``return`` or ``exit`` ran: what follows it does not.
    ``recorded``: what the paths that stopped set is already kept by the statement that
    catches them (every path of an undecided choice stopped)."""

    def __init__(self, kind: str, line: int, recorded: bool = False):
        super().__init__(kind)
        self.kind, self.line, self.recorded = kind, line, recorded


@dataclass
class _Catcher:
    """A statement that catches stops (a loop: ``break``, ``continue``; a function call:
    ``return``; a subshell: all of them; the script: ``exit``)."""

    kinds: frozenset
    env: Env | None
    """The scope it runs in: what a path that stopped set is kept relative to it."""
    pending: list | None
    """``(kind, variables)`` of each path that stopped inside an undecided choice; ``None``
    where they do not matter (a subshell, the script's end)."""


class Reader:
    """Reads one script; the state of the walk (functions defined, calls and ``eval``
    strings being read, the undecided paths it is in)."""

    def __init__(
        self,
        where: str,
        budget: int,
        args: list[str] | None = None,
        environment: dict[str, str] | None = None,
    ):
        self.where = where
        self.args, self.environment_given = args, environment or {}
        self.script = Script()
        self.ex = Expander()
        self.functions: dict[str, tuple] = {}
        self.calls = 0
        self.evals = 0
        self.steps, self.budget = 0, budget
        self.prefix: list[Word] = []  # the launcher words before ``bash -c`` being read
        self.outer: dict[str, Word] | None = None  # and the environment it gives the string
        self.path: tuple = ()  # the undecided branches the reader is in, see Script.paths
        self.choices = 0
        self.catchers: list[_Catcher] = []
        self.iterations = 0
        self.newlines: list[int] | None = None  # character offsets of the text's newlines
        self.file_text = ""
        self._exports: tuple | None = None  # (scope, Env.version, environment) last computed
        self._words: dict[int, tuple] = {}  # id of an exported Var -> (Var, its word)
        self._many_exports = False
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
        self.file_text = text
        if "\r\n" in text:
            text = _without_carriage_returns(text)
            self.script.notes.append(
                Note(
                    None,
                    "the file has Windows line endings (CRLF), on which bash stops ($'\\r': "
                    "command not found); read as if each line ended in a plain newline "
                    "(dos2unix fixes the file)",
                )
            )
        data, root, holes, notes = repair(text.encode(), text, self.where)
        src = Source(data, text, 1, None)
        src.holes = holes
        self.script.notes.extend(notes)
        env = self.outermost(text)
        self.catchers.append(_Catcher(frozenset({"exit"}), env, None))
        try:
            self.block(root, env, src)
        except _Stop as stop:
            self.script.notes.append(
                Note(stop.line, "the script exits here when run as read; what follows is not read")
            )
        self.script.defaults = list(self.ex.defaults.values())
        for name, var in env.own.items():
            if isinstance(var, Var) and NAME.fullmatch(name) and not name.startswith(OWN):
                lines = var.lines or (0,) * len(var.items)
                self.script.variables[name] = [to_word(s, n) for s, n in zip(var.items, lines)]
        return self.script

    def outermost(self, text: str) -> Env:
        """The scope the script starts in: what ``#SBATCH`` sets, the environment and the
        arguments given (values that are no literal of the file: nothing edits them)."""
        env = Env()
        if sbatch_variables(text, env):
            env.set(SBATCH, MARK)
        for name, value in self.environment_given.items():
            if not NAME.fullmatch(name) or name.startswith(OWN):
                raise InputError(f"{self.where}: {name!r} is not a variable name bash accepts")
            env.set(name, Var(((Piece(value),),)))
        for name in list(env.own):
            if not name.startswith(OWN):
                env.export(name)
        if self.args is None:
            env.set("#", scalar("0"))
        else:
            env.set(ARGS_GIVEN, MARK)
            _set_args(env, [(Piece(a),) for a in self.args])
        return env

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
                if name in env.exported():
                    env.export(name, False)
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
        self.apart(lambda: self.block(node, env.fork(), src))

    def _pipeline(self, node, env: Env, src: Source) -> None:
        for child in node.named_children:
            self.apart(lambda: self.statement(child, env.fork(), src))  # noqa: B023

    def apart(self, run) -> None:
        """Run what a process of its own runs (a subshell): an ``exit``, ``break``... in it
        ends it only."""
        self.catchers.append(_Catcher(STOPS, None, None))
        try:
            run()
        except _Stop:
            pass
        finally:
            self.catchers.pop()

    def _function(self, node, env: Env, src: Source) -> None:
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is not None and body is not None:
            self.functions[src.of(name)] = (body, src)

    # -- simple commands ------------------------------------------------------------------------
    def command(self, node, env: Env, src: Source) -> None:
        name_node = node.child_by_field_name("name")
        if name_node is None:  # only assignments (X=1 Y=2)
            for child in node.named_children:
                if child.type == "variable_assignment":
                    assign.assign(self.ex, child, env, src)
            return
        for child in _own_line(node, name_node, src):  # X=1 Y=2, then a command below
            assign.assign(self.ex, child, env, src)
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
        if name == "let":
            _let(words, env)
        environment = self.environment(node, env, src)
        self.script.commands.append(self.prefix + words)
        self.script.environments.append(environment)
        self.script.folders.append(_folder(env))
        self.script.paths.append(self.path)
        self.builtin(name, words, env)
        shell = _shell_string(words)
        if shell is not None:  # the string runs with the words before bash as its launcher
            at, inner = shell
            outer, self.prefix = self.prefix, self.prefix + words[:at]
            outer_env, self.outer = self.outer, environment
            try:
                self.apart(lambda: self.reparse([inner], env, fork=True))
            finally:
                self.prefix, self.outer = outer, outer_env

    def builtin(self, name: str | None, words: list[Word], env: Env) -> None:
        """``shift``, ``set --``, and the commands that stop what runs."""
        if name == "shift":
            _shift(words, env)
        elif name == "cd":
            _cd(words, env)
        elif name == "set":
            _set(words, env)
        elif name in STOPS and self.catcher(name) is not None:
            raise _Stop(name, words[0].line)

    # -- the environment of a command -----------------------------------------------------------
    def environment(self, node, env: Env, src: Source) -> dict[str, Word]:
        """The variables the process of the command ``node`` sees: the exported ones, then
        its own ``X=1 cmd`` prefix (assigned in a fork: the script's variables stay)."""
        base = self.exported(env)
        name_node = node.child_by_field_name("name")
        alone = _own_line(node, name_node, src) if name_node is not None else []
        prefix = [
            c for c in node.named_children if c.type == "variable_assignment" and c not in alone
        ]
        if not prefix and self.outer is None:
            return base
        out = dict(base)
        out.update(self.outer or {})
        scope = env.fork()
        for child in prefix:
            name_node = child.child_by_field_name("name")
            if name_node is None or name_node.type == "subscript":
                continue
            assign.assign(self.ex, child, scope, src)
            name = src.of(name_node)
            var = scope.get(name)
            if isinstance(var, Var):
                out[name] = to_word(var.scalar, src.line(child.start_byte))
        return out

    def exported(self, env: Env) -> dict[str, Word]:
        """The exported scalars of ``env`` as words (the same dict while nothing changed; on
        the same scope, only the names changed since are looked at again)."""
        cached = self._exports
        if cached is not None and cached[0] is env and cached[1] == Env.version:
            return cached[2]
        if cached is not None and cached[0] is env:
            out = dict(cached[2])
            names: Iterable[str] = [n for n in env.dirty if env.is_exported(n)]
            for name in env.dirty:
                out.pop(name, None)
        else:
            out = {}
            names = [n for n, on in env.exported().items() if on]
        env.dirty.clear()
        for name in names:
            var = env.get(name)
            if not isinstance(var, Var) or var.array:
                continue
            if len(out) >= MAX_EXPORTS:
                if not self._many_exports:
                    self._many_exports = True
                    self.script.notes.append(
                        Note(None, f"over {MAX_EXPORTS} exported variables: the rest not kept")
                    )
                break
            out[name] = self.exported_word(var)
        self._exports = (env, Env.version, out)
        return out

    def exported_word(self, var: Var) -> Word:
        """An exported variable's value as a word, on the line of its literal."""
        hit = self._words.get(id(var))
        if hit is not None and hit[0] is var:
            return hit[1]
        pieces = var.scalar
        spans = [p.span for p in pieces if p.span is not None and p.span != MANY]
        spans += sorted(s for p in pieces for s in p.sources if s != MANY)
        word = to_word(pieces, self.line_of(spans[0][0]) if spans else 0)
        self._words[id(var)] = (var, word)
        return word

    def line_of(self, char: int) -> int:
        """The line of a character offset of the file."""
        if self.newlines is None:
            self.newlines = [i for i, c in enumerate(self.file_text) if c == "\n"]
        return bisect.bisect_left(self.newlines, char) + 1

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
        env.root().set(SOURCED, MARK)  # names never set may be set by it: not absent now
        for n in env.names():
            old = env.get(n)
            if NAME.fullmatch(n) and not n.startswith(("SLURM_", OWN)) and isinstance(old, Var):
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
        catcher = _Catcher(frozenset({"return"}), env, [])
        self.catchers.append(catcher)
        self.calls += 1
        stop = None
        try:
            self.statement(body, frame, body_src)
        except _Stop as s:
            stop = s
        finally:
            self.calls -= 1
            self.catchers.pop()
        self.caught(env, frame, stop, catcher, f"a return in {name}", ("return",))

    def caught(self, env: Env, inner: Env, stop, catcher: _Catcher, what: str, kinds) -> set:
        """After a statement that catches ``kinds`` ran in the fork ``inner`` of ``env``:
        keep what the paths that go on after it set (the one that ran to its end or was
        stopped by one of ``kinds``, and those kept in ``catcher``); a stop it does not catch
        goes on, unless some path does. The kinds that ended the paths kept (``"end"``)."""
        states, ends = [], set()
        if stop is None or stop.kind in kinds and not stop.recorded:
            states.append(_flatten(inner, env))
            ends.add("end" if stop is None else stop.kind)
            self._commit_exports(env, inner)
        elif not stop.recorded:
            self.pend(stop.kind, inner)
        for kind, state in catcher.pending or ():
            states.append(state)
            ends.add(kind)
        if not states:
            assert stop is not None
            raise _Stop(stop.kind, stop.line, recorded=True)
        if stop is not None and stop.kind not in kinds:
            ends.add("stopped")
        self.settle(env, states, what)
        return ends

    def _commit_exports(self, env: Env, inner: Env) -> None:
        layer: Env | None = inner
        found = []
        while layer is not None and layer is not env:
            found.append(layer.exports)
            layer = layer.parent
        for exports in reversed(found):
            for name, on in exports.items():
                env.export(name, on)

    def settle(self, env: Env, states: list[dict], what: str) -> None:
        """Set in ``env`` what paths that all go on from here set (``states``: each path's
        variables, relative to ``env``); a variable the paths disagree on is unknown."""
        if len(states) == 1:
            for name, value in states[0].items():
                env.set(name, value)
            return
        for name in set().union(*states):
            values = [s.get(name, env.get(name)) for s in states]
            value = agree(values, name, what)
            if value is not env.get(name) or name in env.own:
                env.set(name, value)

    def catcher(self, kind: str) -> _Catcher | None:
        """The innermost statement that catches ``kind``."""
        for c in reversed(self.catchers):
            if kind in c.kinds:
                return c
        return None

    def pend(self, kind: str, env: Env) -> None:
        """A path stopped by ``kind`` in ``env``: keep what it set for the statement that
        catches it."""
        c = self.catcher(kind)
        if c is not None and c.pending is not None and c.env is not None:
            c.pending.append((kind, _flatten(env, c.env)))

    def innermost(self, stops: list[_Stop]) -> _Stop:
        """Of stops that ended every path of a choice, the one caught first."""

        def depth(stop: _Stop) -> int:
            for i in range(len(self.catchers) - 1, -1, -1):
                if stop.kind in self.catchers[i].kinds:
                    return i
            return -1

        first = max(stops, key=depth)
        return _Stop(first.kind, first.line, recorded=True)

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
        deltas, exports, stops = [], [], []
        self.choices += 1
        choice = (self.choices, f"{what} on line {line}")
        for k, statements in enumerate(paths):
            branch = env.fork()
            outer, self.path = self.path, self.path + ((choice, k),)
            try:
                self.block_list(statements or (), branch, src)
            except _Stop as stop:  # this path goes on elsewhere, or not at all
                if not stop.recorded:
                    self.pend(stop.kind, branch)
                stops.append(stop)
                continue
            finally:
                self.path = outer
            deltas.append(branch.own)
            exports.append(branch.exports)
        if not deltas:
            raise self.innermost(stops)
        for name in {n for e in exports for n in e}:
            env.export(name, any(e.get(name, False) for e in exports))
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
        """The text a node expands to as one quoted word, run as read (``None`` when not
        known)."""
        texts = [run_text(w) for w in self.ex.words(node, env, src, True)]
        return None if None in texts else "".join(t for t in texts if t is not None)

    def loop(self, node, env: Env, src: Source) -> None:
        """A ``while``/``until`` loop runs for real while known values decide its condition;
        else, as a ``for`` loop, its body may run or not (its variable is unknown)."""
        body = node.child_by_field_name("body")
        variable = node.child_by_field_name("variable")
        line = src.line(node.start_byte)
        if node.type == "while_statement":
            self.while_loop(node, body, env, src, line)
            return
        if node.type == "for_statement" and variable is not None and self._no_items(node, env, src):
            return  # for x in $NEVER_SET: no round when run as read
        if variable is not None:
            name = src.of(variable)
            why = f"${name} (a loop variable)"
            arrays.set_scalar(env, name, unknown(why), False, line)
        self.maybe_loop(env, body, src, line)

    def _no_items(self, node, env: Env, src: Source) -> bool:
        """Whether a ``for`` loop's words are none when run as read (``"$@"`` with no
        arguments, ``$X`` never set)."""
        values = [
            c
            for i, c in enumerate(node.children)
            if node.field_name_for_child(i) == "value" and c.is_named
        ]
        if not values:
            args = env.get("@")  # no ``in``: ``"$@"``
            return args is None or isinstance(args, Var) and arrays.count(args) == 0
        words = [w for v in values for w in self.ex.words(v, env, src)]
        return all(w.absent for w in words)

    def maybe_loop(self, env: Env, body, src: Source, line: int) -> None:
        """A loop body that may run or not."""
        catcher = _Catcher(LOOP, env, [])
        self.catchers.append(catcher)
        try:
            self.branches(env, [[body] if body is not None else None, None], src, line, "the loop")
        finally:
            self.catchers.pop()
        if catcher.pending:
            self.settle(env, [{}] + [st for _, st in catcher.pending], f"the loop on line {line}")

    def while_loop(self, node, body, env: Env, src: Source, line: int) -> None:
        """``while``/``until``: each round decides the condition again; decided false, the
        loop ends; undecided (or past MAX_LOOPS rounds), the rest may run or not."""
        cond = [
            c
            for i, c in enumerate(node.children)
            if node.field_name_for_child(i) == "condition" and c.is_named and c.type != "comment"
        ]
        until = node.children[0].type == "until"
        for _ in range(MAX_LOOPS if len(cond) == 1 and body is not None else 0):
            if self.iterations >= MAX_ITERATIONS or self.steps > self.budget // 2:
                break
            holds = conditions.status(self.ex, cond[0], env, src)
            if holds is not None and until:
                holds = not holds
            if holds is False:
                return
            if holds is None:
                break
            self.iterations += 1
            ends = self.round(body, env, src, line)
            if ends == {"break"}:
                return
            if ends & {"break", "stopped"}:
                break  # some paths leave the loop, others go on
        self.maybe_loop(env, body, src, line)

    def round(self, body, env: Env, src: Source, line: int) -> set:
        """One round of a loop body, run for real in a fork of ``env`` (what it sets is kept
        after it); how its paths ended (``"end"``, ``"break"``, ``"continue"``...)."""
        inner = env.fork()
        catcher = _Catcher(LOOP, env, [])
        self.catchers.append(catcher)
        stop = None
        try:
            self.statement(body, inner, src)
        except _Stop as s:
            stop = s
        finally:
            self.catchers.pop()
        return self.caught(env, inner, stop, catcher, f"the loop on line {line}", LOOP)

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
    """A function's frame: ``$@`` (so ``$1``...) and ``$#`` from the call's words."""
    frame = env.fork(function=True)
    frame.locals.update({"@", "#"})
    _set_args(frame, [pieces_of(w) for w in words[1:]])
    return frame


def _own_line(node, name_node, src: Source) -> list:
    """The assignments of a command that stand on lines of their own before it:
    tree-sitter-bash reads ``X=1 Y=2``, a newline, then ``echo`` as one command (bash: two)."""
    assignments = [
        c
        for c in node.named_children
        if c.type == "variable_assignment" and c.end_byte <= name_node.start_byte
    ]
    ends = [c.start_byte for c in assignments[1:]] + [name_node.start_byte]
    alone = 0
    for i, (c, end) in enumerate(zip(assignments, ends)):
        if b"\n" in src.data[c.end_byte : end].replace(b"\\\n", b""):
            alone = i + 1
    return assignments[:alone]


def _let(words: list[Word], env: Env) -> None:
    """``let x=1 y++``: each word is arithmetic."""
    for w in words[1:]:
        if w.text is not None:
            arith_piece(w.text, env)
        else:  # what it assigns is not known
            text = "".join(" 0 " if p.text is None else p.text for p in w.parts)
            forget_targets(text, env, f"let {clip(text)}: {w.why_unknown}")


def _set_args(env: Env, items: list[tuple]) -> None:
    """``$@`` and ``$#`` of a scope (``$1``... are the items of ``$@``)."""
    env.set("@", Var(tuple(items), True))
    env.set("#", scalar(str(len(items))))


def _forget_args(env: Env, why: str) -> None:
    env.set("@", arrays.vague(why))
    env.set("#", Var((unknown(why),)))


def _shift(words: list[Word], env: Env) -> None:
    """``shift [n]``: the arguments move down ``n`` places (none when fewer are left, as in
    bash)."""
    n = 1
    if len(words) > 1:
        text = words[1].text
        if text is None or not text.isdigit():
            _forget_args(
                env, f"the arguments after shift {clip(text or '?')} (line {words[0].line})"
            )
            return
        n = int(text)
    args = env.get("@")
    if args is None:  # none given
        return
    if not isinstance(args, Var) or not arrays.exact(args):
        _forget_args(
            env, f"the arguments after a shift of arguments not known (line {words[0].line})"
        )
        return
    if n <= len(args.items):
        _set_args(env, list(args.items[n:]))


def _set(words: list[Word], env: Env) -> None:
    """``set -- ARGS``: the arguments become ``ARGS``."""
    texts = [w.text for w in words]
    if "--" not in texts:
        return
    rest = words[texts.index("--") + 1 :]
    if all(w.text is not None for w in rest):
        _set_args(env, [pieces_of(w) for w in rest])
    else:
        _forget_args(env, f"the arguments set on line {words[0].line} (not all known)")


def _flatten(env: Env, upto: Env | None) -> dict:
    """What the layers from ``env`` up to ``upto`` (not included) set, innermost first: a
    path's variables relative to ``upto`` (a function's ``local`` names left out)."""
    out: dict = {}
    layer: Env | None = env
    while layer is not None and layer is not upto:
        for name, value in layer.own.items():
            if name not in out:
                out[name] = _frozen(value)
        if layer.function:
            for name in layer.locals:
                out.pop(name, None)
        layer = layer.parent
    return out


def _frozen(value):
    """A value that its scope may no longer change in place (an array's lists copied)."""
    if isinstance(value, Var) and isinstance(value.items, list):
        keys = None if value.keys is None else tuple(value.keys)
        return Var(
            tuple(value.items), value.array, tuple(value.lines), value.overflow, keys, value.assoc
        )
    return value


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


#: The variable that holds the folder the script has moved to (``cd``), relative to where
#: it started; in the scope of the ``cd``, so a subshell's stays its own.
FOLDER = "__batchspec_folder"


def _cd(words: list[Word], env: Env) -> None:
    """``cd DIR``: where the commands after it run (``cd`` alone, ``cd -`` or a folder that
    is not known: somewhere the reader cannot say)."""
    target = words[1].text if len(words) > 1 else None
    here = _folder(env)
    if target is None or target in ("-", "~") or target.startswith("~") or here is None:
        why = f"cd {clip(target or words[1].why_unknown or '') if len(words) > 1 else ''}"
        env.set(FOLDER, Var((unknown(f"{why.strip()} on line {words[0].line}"),)))
        return
    moved = target if target.startswith("/") else posixpath.join(here, target)
    env.set(FOLDER, Var(((Piece(posixpath.normpath(moved) if moved else ""),),)))


def _folder(env: Env) -> str | None:
    """The folder the script runs in now, relative to where it started ("" there); ``None``
    when a ``cd`` went somewhere not known."""
    var = env.get(FOLDER)
    if not isinstance(var, Var):
        return ""
    return text_of(var.scalar)


def _without_carriage_returns(text: str) -> str:
    """``text`` with each CRLF line end read as LF, every offset kept: a continuation's
    ``\\`` CR LF becomes space ``\\`` LF, any other CR a space."""
    return text.replace("\\\r\n", " \\\n").replace("\r\n", " \n")


def parse(
    text: str,
    where: str,
    args: list[str] | None = None,
    environment: dict[str, str] | None = None,
) -> Script:
    """The commands and variables of ``text`` as it runs with the arguments ``args`` (``None``:
    none given) in an environment that sets only ``environment`` (NAME -> value, what the
    user sets) and what the script's ``#SBATCH`` lines set. An :class:`InputError` naming the
    line when the script is not valid bash (an unterminated quote, array or heredoc);
    statements bash cannot parse (a template's ``<Specify path>``) are read as unknown, with
    a note."""
    refuse_long_numbers(text, where)
    try:
        reader = Reader(where, 20 * len(text) + 10_000, args, environment)
        return reader.read(text)
    except RecursionError:
        raise InputError(f"{where}: blocks nested too deeply to follow") from None
