"""Read the subset of bash that launch scripts are written in, without running anything.

Understood: comments, quotes, backslash-newline continuations, ``NAME=value`` (with
``export``/``declare``/``local``), arrays ``NAME=( ... )`` and ``NAME+=( ... )``, ``$NAME``,
``${NAME}``, ``${NAME:-default}``, ``${NAME[@]}``, ``$((arithmetic))`` and heredocs (skipped).
Anything else that would need running (``$1``, ``$(command)``, a variable never set) makes
the word *unknown*: it is reported as such, never guessed.
"""

from __future__ import annotations

import ast
import bisect
import operator
import re
from dataclasses import dataclass, field

from translator.errors import InputError

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
DECLARERS = {"export", "declare", "typeset", "local", "readonly"}
OPERATORS = ";&|"


@dataclass(frozen=True)
class Word:
    """One shell word after expansion."""

    text: str | None
    """The expanded text; ``None`` when it depends on something we cannot know."""
    line: int
    """1-based line the word stands on."""
    span: tuple[int, int] | None = None
    """Character offsets of the literal that gave the whole word, when there is one (for a
    ``$VAR`` word: the literal in the variable's assignment)."""
    why_unknown: str | None = None
    """What made it unknown (``$1``, ``$(...)``, an unset variable)."""


@dataclass
class Script:
    """Commands and variables of a script, in order."""

    commands: list[list[Word]] = field(default_factory=list)
    """Each simple command's words, assignments removed."""
    variables: dict[str, list[Word]] = field(default_factory=dict)
    """Scalars (one word) and arrays, as last assigned."""


class _Parser:
    def __init__(self, text: str, where: str):
        self.text, self.where, self.i = text, where, 0
        self.script = Script()
        self.newlines = [m.start() for m in re.finditer("\n", text)]

    # -- positions ------------------------------------------------------------------------------
    def line_at(self, pos: int) -> int:
        return bisect.bisect_left(self.newlines, pos) + 1

    def fail(self, pos: int, message: str):
        raise InputError(f"{self.where}:{self.line_at(pos)}: {message}")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def skip_blanks(self, newlines: bool) -> None:
        """Skip spaces, continuations, comments (and newlines when asked)."""
        while self.i < len(self.text):
            c = self.peek()
            if c in " \t" or (c == "\\" and self.peek(1) == "\n"):
                self.i += 2 if c == "\\" else 1
            elif c == "\n" and newlines:
                self.i += 1
            elif c == "#":
                end = self.text.find("\n", self.i)
                self.i = len(self.text) if end < 0 else end
            else:
                return

    # -- script ---------------------------------------------------------------------------------
    def parse(self) -> Script:
        while self.i < len(self.text):
            self.skip_blanks(newlines=True)
            if self.i >= len(self.text):
                break
            if self.peek() in OPERATORS or self.peek() in "(){}":
                self.i += 1
                continue
            self.command()
        return self.script

    def command(self) -> None:
        words: list[Word] = []
        heredoc = None
        assigning, declared = True, False
        while True:
            self.skip_blanks(newlines=False)
            c = self.peek()
            if not c or c == "\n" or c in OPERATORS or c in ")}":
                break
            m = ASSIGN.match(self.text, self.i)
            if assigning and m:
                self.assignment(m)
                continue
            if c == "<" and self.peek(1) == "<" and self.peek(2) != "<":
                heredoc = self.heredoc_marker()
                continue
            start = self.i
            expanded = self.word()
            if self.i == start:  # a character no word starts with, such as "(": step over it
                self.i += 1
                continue
            texts = [w.text for w in expanded]
            if assigning and len(texts) == 1 and (texts[0] in DECLARERS or (
                    declared and (texts[0] or "").startswith("-"))):
                declared = True
                continue
            words.extend(expanded)
            assigning = False
        if heredoc:
            self.skip_heredoc(heredoc)
        if words:
            self.script.commands.append(words)

    def heredoc_marker(self) -> str:
        self.i += 2
        if self.peek() == "-":
            self.i += 1
        self.skip_blanks(newlines=False)
        m = re.compile(r"['\"]?([A-Za-z_0-9]+)['\"]?").match(self.text, self.i)
        if not m:
            self.fail(self.i, "heredoc without a delimiter")
        self.i = m.end()
        return m.group(1)

    def skip_heredoc(self, marker: str) -> None:
        end = re.compile(rf"^\s*{re.escape(marker)}\s*$", re.M).search(self.text, self.i)
        if not end:
            self.fail(self.i, f"heredoc not closed by {marker}")
        self.i = end.end()

    def assignment(self, m: re.Match) -> None:
        name, append = m.group(1), m.group(2) == "+"
        self.i = m.end()
        if self.peek() == "(":
            value = self.array(m.start(), name)
        elif self.peek() in ("", " ", "\t", "\n", ";"):
            value = [Word("", self.line_at(self.i), (self.i, self.i))]
        else:
            value = self.word(split=False)
        old = self.script.variables.get(name, []) if append else []
        self.script.variables[name] = old + value

    def array(self, start: int, name: str) -> list[Word]:
        self.i += 1
        items: list[Word] = []
        while True:
            self.skip_blanks(newlines=True)
            if self.i >= len(self.text):
                self.fail(start, f"unterminated array {name}=( (no closing parenthesis)")
            if self.peek() == ")":
                self.i += 1
                return items
            before = self.i
            items.extend(self.word())
            if self.i == before:  # an operator inside the array: not a word, step over it
                self.i += 1

    # -- words ----------------------------------------------------------------------------------
    def word(self, split: bool = True) -> list[Word]:
        """One word from the text; an unquoted ``$VAR`` alone may expand to several."""
        start, line = self.i, self.line_at(self.i)
        parts: list[tuple[str | None, tuple[int, int] | None, str | None, bool]] = []
        arrays: list[list[Word]] = []
        while self.i < len(self.text):
            c = self.peek()
            if c in " \t\n" or c in OPERATORS or c in "()" or (c == "\\" and self.peek(1) == "\n"):
                break
            if c == "'":
                end = self.text.find("'", self.i + 1)
                if end < 0:
                    self.fail(self.i, "unterminated single quote")
                parts.append((self.text[self.i + 1:end], (self.i + 1, end), None, True))
                self.i = end + 1
            elif c == '"':
                parts.extend(self.double_quoted(arrays))
            elif c == "$":
                text, span, why, words = self.dollar()
                if words is not None:
                    arrays.append(words)
                    parts.append(("\0", None, None, False))
                else:
                    parts.append((text, span, why, False))
            elif c == "\\":
                parts.append((self.peek(1), (self.i + 1, self.i + 2), None, True))
                self.i += 2
            else:
                j = self.i
                while j < len(self.text) and self.text[j] not in " \t\n;&|()'\"$\\":
                    j += 1
                parts.append((self.text[self.i:j], (self.i, j), None, True))
                self.i = j
        return self.join(parts, arrays, line, split and start < self.i)

    @staticmethod
    def join(parts, arrays, line, may_split) -> list[Word]:
        if len(parts) == 1 and arrays:
            return arrays[0]
        unknown = next((why for text, _, why, _ in parts if text is None), None)
        if unknown is not None:
            return [Word(None, line, None, unknown)]
        if arrays:
            flat = iter(" ".join(w.text or "" for w in a) for a in arrays)
            text = "".join(next(flat) if t == "\0" else t for t, _, _, _ in parts)
        else:
            text = "".join(t for t, _, _, _ in parts)
        meaningful = [p for p in parts if p[0] != ""]
        span = meaningful[0][1] if len(meaningful) == 1 else None
        if may_split and len(parts) == 1 and not parts[0][3] and len(text.split()) > 1:
            return [Word(t, line) for t in text.split()]
        return [Word(text, line, span)]

    def double_quoted(self, arrays: list[list[Word]]):
        parts = []
        opened = self.i
        self.i += 1
        while True:
            if self.i >= len(self.text):
                self.fail(opened, "unterminated double quote")
            c = self.peek()
            if c == '"':
                self.i += 1
                return parts or [("", (self.i - 1, self.i - 1), None, True)]
            if c == "$":
                text, span, why, words = self.dollar()
                if words is not None:
                    arrays.append(words)
                    text = "\0"
                parts.append((text, span, why, True))
            elif c == "\\" and self.peek(1) == "\n":
                self.i += 2
            elif c == "\\" and self.peek(1) in '"\\$`':
                parts.append((self.peek(1), (self.i + 1, self.i + 2), None, True))
                self.i += 2
            else:
                j = self.i
                while j < len(self.text) and self.text[j] not in '"$\\':
                    j += 1
                j = max(j, self.i + 1)
                parts.append((self.text[self.i:j], (self.i, j), None, True))
                self.i = j

    def dollar(self):
        """Expand at ``$``: (text, span, why-unknown, array words or None)."""
        t = self.text
        if t.startswith("$((", self.i):
            end = t.find("))", self.i)
            if end < 0:
                self.fail(self.i, "unterminated $(( arithmetic")
            expr = t[self.i + 3:end]
            self.i = end + 2
            value = self.arithmetic(expr)
            why = None if value is not None else f"$(({expr.strip()}))"
            return (None if value is None else str(value)), None, why, None
        if t.startswith("$(", self.i):
            end = self.matching(self.i + 1, "(", ")")
            self.i = end + 1
            return None, None, "a command substitution $(...)", None
        if t.startswith("${", self.i):
            end = self.matching(self.i + 1, "{", "}")
            body = t[self.i + 2:end]
            self.i = end + 1
            return self.parameter(body, self.i - len(body) - 1)
        m = NAME.match(t, self.i + 1)
        if m:
            self.i = m.end()
            return self.variable(m.group(0))
        if self.i + 1 < len(t) and (t[self.i + 1].isdigit() or t[self.i + 1] in "@*#?$!-"):
            name = t[self.i + 1]
            self.i += 2
            return None, None, f"${name} (set when the script runs)", None
        self.i += 1
        return "$", None, None, None

    def matching(self, open_at: int, opening: str, closing: str) -> int:
        depth, j = 0, open_at
        while j < len(self.text):
            c = self.text[j]
            if c == "\\":
                j += 2
                continue
            if c == "'":
                j = self.text.find("'", j + 1)
                if j < 0:
                    break
            elif c == opening:
                depth += 1
            elif c == closing:
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        self.fail(open_at, f"unterminated {self.text[open_at - 1:open_at + 1]}")

    def parameter(self, body: str, body_at: int):
        m = NAME.match(body)
        if not m:
            return None, None, f"${{{body}}} (set when the script runs)", None
        name, rest = m.group(0), body[m.end():]
        if rest in ("[@]", "[*]"):
            words = self.script.variables.get(name)
            if words is None:
                return None, None, f"${{{name}[@]}} (never set)", None
            return None, None, None, words
        if rest == "":
            return self.variable(name)
        op = re.match(r":?[-=]", rest)
        if op:
            text, span, why, _ = self.variable(name)
            if name in self.script.variables:
                return text, span, why, None
            default_at = body_at + m.end() + op.end()
            sub = _Parser(self.text[:default_at + len(rest) - op.end()], self.where)
            sub.script, sub.i, sub.newlines = self.script, default_at, self.newlines
            words = sub.word(split=False) if default_at < len(sub.text) else [Word("", 0)]
            w = words[0] if words else Word("", 0)
            if op.group(0).endswith("="):
                self.script.variables[name] = [w]
            return w.text, w.span, w.why_unknown, None
        return None, None, f"${{{body}}}", None

    def variable(self, name: str):
        words = self.script.variables.get(name)
        if words is None:
            return None, None, f"${name} (not set in the script)", None
        if len(words) != 1:
            return " ".join(w.text or "" for w in words), None, None, None
        w = words[0]
        return w.text, w.span, w.why_unknown, None

    def arithmetic(self, expr: str) -> int | None:
        def lookup(m: re.Match) -> str:
            words = self.script.variables.get(m.group(1) or m.group(2))
            if not words or len(words) != 1 or words[0].text is None:
                raise KeyError(m.group(0))
            return f"({words[0].text})"

        try:
            plain = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?|\b([A-Za-z_][A-Za-z0-9_]*)\b",
                           lookup, expr)
            return evaluate(plain)
        except (KeyError, ValueError, SyntaxError, ZeroDivisionError, RecursionError):
            return None


_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def evaluate(expr: str) -> int:
    """Integer arithmetic as bash does it (``/`` truncates); anything else is a ValueError."""
    tree = ast.parse(expr.replace("/", "//").strip(), mode="eval")

    def walk(node) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            left, right = walk(node.left), walk(node.right)
            if abs(left) > 1 << 62 or abs(right) > 1 << 62:
                raise ValueError("too large")
            return _ARITH[type(node.op)](left, right)
        raise ValueError(f"not integer arithmetic: {ast.dump(node)}")

    return walk(tree.body)


def parse(text: str, where: str) -> Script:
    """The commands and variables of ``text``; an :class:`InputError` naming the line when the
    script cannot be split (an unterminated quote, array or heredoc)."""
    return _Parser(text, where).parse()
