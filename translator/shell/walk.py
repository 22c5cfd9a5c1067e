"""The walk's state and what every statement handler shares: the dispatch from a statement to
its handler, the step budget, and the statements that catch ``break``, ``continue``,
``return`` and ``exit`` (what the paths they end set is kept where the walk goes on)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from translator.shell.expand import Expander
from translator.shell.merge import agree
from translator.shell.syntax import ScriptText
from translator.shell.values import Env, Script, Var, Word
from translator.words.errors import InputError

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
#: Commands that end what runs: the loop's body, the function, the script.
STOPS = frozenset({"break", "continue", "return", "exit"})
LOOP = frozenset({"break", "continue"})
NAME = re.compile(r"[A-Za-z_]\w*")


class Stop(Exception):
    """``break``, ``continue``, ``return`` or ``exit`` ran: what follows it does not.
    ``recorded``: what the paths that stopped set is already kept by the statement that
    catches them (every path of an undecided choice stopped)."""

    def __init__(self, kind: str, line: int, recorded: bool = False):
        super().__init__(kind)
        self.kind, self.line, self.recorded = kind, line, recorded


@dataclass
class Catcher:
    """A statement that catches stops (a loop: ``break``, ``continue``; a function call:
    ``return``; a subshell: all of them; the script: ``exit``)."""

    kinds: frozenset
    env: Env | None
    """The scope it runs in: what a path that stopped set is kept relative to it."""
    pending: list | None
    """``(kind, variables)`` of each path that stopped inside an undecided choice; ``None``
    where they do not matter (a subshell, the script's end)."""


class Walk:
    """The state of the walk over one script (functions defined, calls and ``eval`` strings
    being read, the undecided paths it is in) and the statements every handler runs."""

    def __init__(self, where: str, budget: int):
        self.where = where
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
        self.catchers: list[Catcher] = []
        self.iterations = 0
        self.handlers: dict[str, Callable] = {}
        """Statement type -> the method that runs it (filled by the reader)."""

    def tick(self, node, src: ScriptText) -> None:
        self.steps += 1
        if self.steps > self.budget:
            raise InputError(
                f"{self.where}:{src.line(node.start_byte)}: the script runs its "
                "functions or strings too many times to follow; batchspec stops "
                "reading it"
            )

    def block(self, node, env: Env, src: ScriptText) -> None:
        self.block_list(node.named_children, env, src)

    def block_list(self, statements, env: Env, src: ScriptText) -> None:
        for s in statements:
            self.statement(s, env, src)

    def statement(self, node, env: Env, src: ScriptText) -> None:
        self.tick(node, src)
        if node.type not in IGNORED:
            self.handlers.get(node.type, self._inside)(node, env, src)

    def _inside(self, node, env: Env, src: ScriptText) -> None:
        for child in node.named_children:
            if child.type in NESTED:
                self.statement(child, env, src)

    def apart(self, run) -> None:
        """Run what a process of its own runs (a subshell): an ``exit``, ``break``... in it
        ends it only."""
        self.catchers.append(Catcher(STOPS, None, None))
        try:
            run()
        except Stop:
            pass
        finally:
            self.catchers.pop()

    def caught(self, env: Env, inner: Env, stop, catcher: Catcher, what: str, kinds) -> set:
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
            raise Stop(stop.kind, stop.line, recorded=True)
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

    def catcher(self, kind: str) -> Catcher | None:
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

    def innermost(self, stops: list[Stop]) -> Stop:
        """Of stops that ended every path of a choice, the one caught first."""

        def depth(stop: Stop) -> int:
            for i in range(len(self.catchers) - 1, -1, -1):
                if stop.kind in self.catchers[i].kinds:
                    return i
            return -1

        first = max(stops, key=depth)
        return Stop(first.kind, first.line, recorded=True)


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
