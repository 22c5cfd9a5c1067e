"""The environment a command's process sees: the script's exported variables (kept as words
on the lines of their literals, computed again only after one changed), the environment of a
``bash -c`` string's launcher, and the command's own ``X=1 cmd`` prefix."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable

from translator.shell import assign
from translator.shell.control import Control
from translator.shell.notes import Note
from translator.shell.syntax import ScriptText
from translator.shell.values import MANY, Env, Var, Word, to_word

#: Exported variables kept in one command's environment.
MAX_EXPORTS = 256


class Exports(Control):
    """What each command's process sees."""

    def __init__(self, where: str, budget: int):
        super().__init__(where, budget)
        self.newlines: list[int] | None = None  # character offsets of the text's newlines
        self.file_text = ""
        self._exports: tuple | None = None  # (scope, Env.version, environment) last computed
        self._words: dict[int, tuple] = {}  # id of an exported Var -> (Var, its word)
        self._many_exports = False

    def environment(self, node, env: Env, src: ScriptText) -> dict[str, Word]:
        """The variables the process of the command ``node`` sees: the exported ones, then
        its own ``X=1 cmd`` prefix (assigned in a fork: the script's variables stay)."""
        base = self.exported(env)
        name_node = node.child_by_field_name("name")
        alone = own_line(node, name_node, src) if name_node is not None else []
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
            self.newlines = [m.start() for m in re.finditer("\n", self.file_text)]
        return bisect.bisect_left(self.newlines, char) + 1


def own_line(node, name_node, src: ScriptText) -> list:
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
