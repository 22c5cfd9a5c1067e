"""Control flow: ``if``, ``case``, loops and ``&&``/``||``. What known values decide runs;
paths the reader cannot decide between are each followed in a fork of the variables, and
only what every path agrees on is kept (:mod:`translator.shell.merge`). A ``while``/``until``
loop whose condition known values decide runs for real, up to MAX_LOOPS rounds."""

from __future__ import annotations

from translator.shell import arrays, conditions, flow
from translator.shell.merge import agree
from translator.shell.syntax import ScriptText
from translator.shell.values import Env, Var, run_text, unknown
from translator.shell.walk import LOOP, Catcher, Stop, Walk

#: Times one ``while`` loop whose condition is decided runs for real (then: may run or not),
#: and such runs in the whole reading.
MAX_LOOPS = 100
MAX_ITERATIONS = 2000


class Control(Walk):
    """The statements that choose what runs."""

    def branches(self, env: Env, paths: list, src: ScriptText, line: int, what: str) -> None:
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
            except Stop as stop:  # this path goes on elsewhere, or not at all
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

    def follow(self, paths: flow.Paths, env: Env, src: ScriptText, node, what: str) -> None:
        """Run what surely runs, or each path that may."""
        sure, undecided = paths
        if undecided is None:
            self.block_list(sure, env, src)
        else:
            self.branches(env, undecided, src, src.line(node.start_byte), what)

    def if_statement(self, node, env: Env, src: ScriptText) -> None:
        arms, otherwise = flow.if_arms(node)
        paths = flow.if_paths(arms, otherwise, lambda c: conditions.status(self.ex, c, env, src))
        self.follow(paths, env, src, node, "the if")

    def case_statement(self, node, env: Env, src: ScriptText) -> None:
        value = node.child_by_field_name("value")
        subject = self.text(value, env, src) if value is not None else None
        items = [c for c in node.named_children if c.type == "case_item"]
        paths = flow.case_paths(items, subject, lambda ps: [self.text(p, env, src) for p in ps])
        self.follow(paths, env, src, node, "the case")

    def text(self, node, env: Env, src: ScriptText) -> str | None:
        """The text a node expands to as one quoted word, run as read (``None`` when not
        known)."""
        texts = [run_text(w) for w in self.ex.words(node, env, src, True)]
        return None if None in texts else "".join(t for t in texts if t is not None)

    def loop(self, node, env: Env, src: ScriptText) -> None:
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
        items = self._items(node, env, src) if node.type == "for_statement" else None
        if variable is not None and items is not None:
            self.for_rounds(src.of(variable), items, body, env, src, line)
            return
        if variable is not None:
            name = src.of(variable)
            why = f"${name} (a loop variable)"
            arrays.set_scalar(env, name, unknown(why), False, line)
        self.maybe_loop(env, body, src, line)

    def _no_items(self, node, env: Env, src: ScriptText) -> bool:
        """Whether a ``for`` loop's words are none when run as read (``"$@"`` with no
        arguments, ``$X`` never set)."""
        values = _values(node)
        if not values:
            args = env.get("@")  # no ``in``: ``"$@"``
            return args is None or isinstance(args, Var) and arrays.count(args) == 0
        words = [w for v in values for w in self.ex.words(v, env, src)]
        return all(w.absent for w in words)

    def _items(self, node, env: Env, src: ScriptText) -> list[tuple] | None:
        """The words a ``for ... in WORDS`` loop goes over, each as ``(pieces, line)``, when
        every one is known and so is their count (at most MAX_LOOPS); else ``None``."""
        values = _values(node)
        if not values:
            return None
        items: list[tuple] = []
        for value in values:
            fields, spread = self.ex.counted_fields(value, env, src)
            if spread or any(p.text is None for pieces, _ in fields for p in pieces):
                return None
            items += fields
        return items if len(items) <= MAX_LOOPS else None

    def for_rounds(self, name: str, items: list[tuple], body, env: Env, src, line: int) -> None:
        """``for NAME in WORDS``, its words known: a round for each, run for real, as bash
        runs them (past MAX_ITERATIONS rounds in all, or once a path may leave the loop and
        another go on, what is left may run or not)."""
        for pieces, at in items:
            if self.iterations >= MAX_ITERATIONS or self.steps > self.budget // 2 or body is None:
                break
            self.iterations += 1
            arrays.set_scalar(env, name, tuple(pieces), False, at)
            ends = self.round(body, env, src, line)
            if ends == {"break"}:
                return
            if ends & {"break", "stopped"}:
                break
        else:
            return
        arrays.set_scalar(env, name, unknown(f"${name} (a loop variable)"), False, line)
        self.maybe_loop(env, body, src, line)

    def maybe_loop(self, env: Env, body, src: ScriptText, line: int) -> None:
        """A loop body that may run or not."""
        catcher = Catcher(LOOP, env, [])
        self.catchers.append(catcher)
        try:
            self.branches(env, [[body] if body is not None else None, None], src, line, "the loop")
        finally:
            self.catchers.pop()
        if catcher.pending:
            self.settle(env, [{}] + [st for _, st in catcher.pending], f"the loop on line {line}")

    def while_loop(self, node, body, env: Env, src: ScriptText, line: int) -> None:
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

    def round(self, body, env: Env, src: ScriptText, line: int) -> set:
        """One round of a loop body, run for real in a fork of ``env`` (what it sets is kept
        after it); how its paths ended (``"end"``, ``"break"``, ``"continue"``...)."""
        inner = env.fork()
        catcher = Catcher(LOOP, env, [])
        self.catchers.append(catcher)
        stop = None
        try:
            self.statement(body, inner, src)
        except Stop as s:
            stop = s
        finally:
            self.catchers.pop()
        return self.caught(env, inner, stop, catcher, f"the loop on line {line}", LOOP)

    def and_or(self, node, env: Env, src: ScriptText) -> None:
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


def _values(node) -> list:
    """The words of a ``for NAME in WORDS`` loop, as nodes (none: the loop has no ``in``)."""
    return [
        c
        for i, c in enumerate(node.children)
        if node.field_name_for_child(i) == "value" and c.is_named
    ]
