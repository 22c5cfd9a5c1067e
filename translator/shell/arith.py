"""Bash arithmetic (``$(( ... ))``) as bash computes it, without running anything.

64-bit signed integers that wrap, ``/`` truncating toward zero, ``%`` with the sign of the
dividend (C), ``**``, shifts, comparisons, logic, ``?:``, ``,``, and assignments
(``=``, ``+=``, ``++``, ``--``...) that change the variable as bash would. Numbers are decimal,
``0x`` hex, ``0`` octal or ``BASE#digits``; anything else (``1_6``, ``08``) is an error, as
in bash. A name's value is read and evaluated as an expression itself (bash's rule); a name
the script does not set is unknown, never 0.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

TOKEN = re.compile(
    r"""\s+|(?P<num>[0-9][0-9A-Za-z_@#]*)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op>\*\*=?|<<=?|>>=?|&&|\|\||\+\+|--|[<>=!]=|[-+*/%&^|]=|[-+*/%<>&^|!~?:,=()])""",
    re.X,
)
NUMBER = re.compile(r"0[xX][0-9A-Fa-f]+|[0-9]+#[0-9A-Za-z@_]+|[0-9]+")
#: Binary operators by precedence, loosest first (bash's table, less ``=`` and ``,``).
LEVELS = [
    ("||",),
    ("&&",),
    ("|",),
    ("^",),
    ("&",),
    ("==", "!="),
    ("<", ">", "<=", ">="),
    ("<<", ">>"),
    ("+", "-"),
    ("*", "/", "%"),
]
#: Each binary operator's level in :data:`LEVELS`.
PRECEDENCE = {op: level for level, ops in enumerate(LEVELS) for op in ops}


def _precedence(t: list[tuple[str, str]], i: int) -> int | None:
    """The level of the binary operator at ``t[i]``; None for anything else."""
    return PRECEDENCE.get(t[i][1]) if i < len(t) and t[i][0] == "op" else None


#: Digits of ``BASE#digits`` numbers, in order of value (bash's, up to base 64).
DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ@_"
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "^=", "|=", "**="}
#: Prefix operators, as parsed (``("u-", operand)``), and what they compute.
UNARY = {
    "u-": lambda v: wrap(-v),
    "u+": lambda v: v,
    "u!": lambda v: int(not v),
    "u~": lambda v: wrap(~v),
}
MAX_DEPTH = 40
MAX_EXPRESSION = 10_000


class Unknown(Exception):
    """The value depends on something the script does not fix."""


class ArithError(Exception):
    """Bash itself would stop here (a syntax error, division by zero, a bad number)."""


def wrap(n: int) -> int:
    """Reduce to bash's signed 64-bit range."""
    n &= (1 << 64) - 1
    return n - (1 << 64) if n >> 63 else n


def number(text: str) -> int:
    """A bash integer constant."""
    if not NUMBER.fullmatch(text):
        raise ArithError(f"{text[:40]}: not a number bash accepts")
    try:
        if "#" in text:
            return wrap(_based(text))
        if text[:2] in ("0x", "0X"):
            return wrap(int(text[2:], 16))
        if len(text) > 1 and text[0] == "0":
            return wrap(int(text[1:], 8))
        if len(text) > 40:
            raise ArithError(f"{text[:20]}...: too large for bash's 64-bit integers")
        return wrap(int(text, 10))
    except ValueError:
        raise ArithError(f"{text[:40]}: not a number bash accepts") from None


def _based(text: str) -> int:
    """``BASE#digits`` (``ValueError`` when the base or a digit is out of range)."""
    base_text, digits = text.split("#", 1)
    base = int(base_text)
    if not 2 <= base <= 64 or not digits:
        raise ValueError
    if base <= 36:
        digits = digits.lower()
    value = 0
    for d in digits:
        k = DIGITS.index(d)
        if k >= base:
            raise ValueError
        value = value * base + k
    return value


#: The binary operators with no rule of bash's own (``/``, ``%``, ``**`` and shifts have one).
PLAIN_OPERATORS: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
}


def _binary(op: str, a: int, b: int) -> int:
    if op in ("/", "%"):
        if b == 0:
            raise ArithError("division by 0")
        q = abs(a) // abs(b)
        q = q if (a >= 0) == (b >= 0) else -q
        return wrap(q) if op == "/" else wrap(a - b * q)
    if op == "**":
        if b < 0:
            raise ArithError("exponent less than 0")
        return wrap(pow(a, b, 1 << 64))
    if op in ("<<", ">>"):
        if not 0 <= b < 64:
            raise Unknown(f"shift by {b}")
        return wrap(a << b) if op == "<<" else a >> b
    return wrap(PLAIN_OPERATORS[op](a, b))


class Evaluator:
    """Evaluates one expression against the script's variables.

    ``get(name)`` returns the variable's text (``""`` when unset in the script for sure) or
    raises :class:`Unknown`; ``put(name, value)`` records an assignment.
    """

    def __init__(self, get: Callable[[str], str], put: Callable[[str, int], None]):
        self.get, self.put = get, put
        self.depth = 0

    def evaluate(self, text: str) -> int:
        if len(text) > MAX_EXPRESSION:
            raise Unknown("an arithmetic expression longer than 10,000 characters")
        tokens = self.tokens(text)
        if not tokens:
            return 0
        try:
            tree, rest = self.comma(tokens, 0)
            if rest != len(tokens):
                raise ArithError(f"syntax error near {tokens[rest][1]!r}")
            return self.run(tree, True)
        except RecursionError:
            raise Unknown("an arithmetic expression nested too deeply") from None

    @staticmethod
    def tokens(text: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        while pos < len(text):
            m = TOKEN.match(text, pos)
            if not m:
                raise ArithError(f"syntax error near {text[pos : pos + 10]!r}")
            pos = m.end()
            if m.lastgroup:
                out.append((m.lastgroup, m.group(m.lastgroup)))
        return out

    # Parsing into tuples; prefix chains and left-associative runs are built in loops, so a
    # long input does not nest Python calls.
    def comma(self, t, i):
        node, i = self.assignment(t, i)
        while i < len(t) and t[i] == ("op", ","):
            right, i = self.assignment(t, i + 1)
            node = (",", node, right)
        return node, i

    def assignment(self, t, i):
        if i + 1 < len(t) and t[i][0] == "name" and t[i + 1][0] == "op" and t[i + 1][1] in ASSIGN:
            value, j = self.assignment(t, i + 2)
            return ("set", t[i][1], t[i + 1][1], value), j
        return self.conditional(t, i)

    def conditional(self, t, i):
        cond, i = self.binary(t, i, 0)
        if i < len(t) and t[i] == ("op", "?"):
            yes, i = self.comma(t, i + 1)
            if i >= len(t) or t[i] != ("op", ":"):
                raise ArithError("'?' without ':'")
            no, i = self.conditional(t, i + 1)
            return ("?", cond, yes, no), i
        return cond, i

    def binary(self, t, i, level):
        """The operators of ``level`` and tighter, by precedence climbing: a run of one
        level's operators is one ``("chain", first, [(op, operand), ...])``."""
        first, i = self.power(t, i)
        return self._climb(first, t, i, level)

    def _climb(self, first, t, i, level):
        while (p := _precedence(t, i)) is not None and p >= level:
            rest = []
            while _precedence(t, i) == p:
                op = t[i][1]
                right, i = self.power(t, i + 1)
                tighter = _precedence(t, i)
                if tighter is not None and tighter > p:
                    right, i = self._climb(right, t, i, p + 1)
                rest.append((op, right))
            first = ("chain", first, rest)
        return first, i

    def power(self, t, i):
        base, i = self.unary(t, i)
        if i < len(t) and t[i] == ("op", "**"):
            exponent, i = self.power(t, i + 1)  # right-associative
            return ("**", base, exponent), i
        return base, i

    def unary(self, t, i):
        prefix = []
        while i < len(t) and t[i][0] == "op" and t[i][1] in ("-", "+", "!", "~", "++", "--"):
            prefix.append(t[i][1])
            i += 1
        node, i = self.postfix(t, i)
        for op in reversed(prefix):
            if op in ("++", "--"):
                if node[0] != "name":
                    raise ArithError(f"{op} needs a variable")
                node = ("set", node[1], "+=" if op == "++" else "-=", ("num", 1))
            else:
                node = ("u" + op, node)
        return node, i

    def postfix(self, t, i):
        if i >= len(t):
            raise ArithError("expression ends too early")
        kind, text = t[i]
        if kind == "num":
            node, i = ("num", number(text)), i + 1
        elif kind == "name":
            node, i = ("name", text), i + 1
            if i < len(t) and t[i][0] == "op" and t[i][1] in ("++", "--"):
                return ("post", text, t[i][1]), i + 1
        elif text == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise Unknown(f"arithmetic nested more than {MAX_DEPTH} deep")
            node, i = self.comma(t, i + 1)
            self.depth -= 1
            if i >= len(t) or t[i] != ("op", ")"):
                raise ArithError("missing ')'")
            i += 1
        else:
            raise ArithError(f"syntax error near {text!r}")
        return node, i

    # Evaluation; ``live`` is False in a branch bash skips (no side effects, no errors there).
    def run(self, node, live: bool) -> int:
        kind = node[0]
        if kind == "num":
            return node[1]
        if kind == "name":
            return self.variable(node[1]) if live else 0
        if kind in UNARY:
            return UNARY[kind](self.run(node[1], live))
        if kind == "set":
            return self.assign(node, live)
        if kind == "post":
            return self.step(node, live)
        if kind == "?":
            return self.choose(node, live)
        if kind == ",":
            self.run(node[1], live)
            return self.run(node[2], live)
        if kind == "chain":
            return self.chain(node, live)
        left, right = self.run(node[1], live), self.run(node[2], live)  # ``**``
        return _binary(kind, left, right) if live else 0

    def assign(self, node, live: bool) -> int:
        """``NAME = value``, ``NAME += value``..."""
        _, name, op, value = node
        new = self.run(value, live)
        if not live:
            return 0
        if op != "=":
            new = _binary(op[:-1], self.variable(name), new)
        self.put(name, new)
        return new

    def step(self, node, live: bool) -> int:
        """``NAME++`` / ``NAME--``: the old value, the variable changed."""
        _, name, op = node
        old = self.variable(name) if live else 0
        if live:
            self.put(name, wrap(old + (1 if op == "++" else -1)))
        return old

    def choose(self, node, live: bool) -> int:
        """``cond ? yes : no``: both sides are walked, only the chosen one live."""
        cond = self.run(node[1], live)
        yes = self.run(node[2], live and bool(cond))
        no = self.run(node[3], live and not cond)
        return yes if cond else no

    def chain(self, node, live: bool) -> int:
        """A left-associative run, in a loop so a long one does not recurse; ``&&`` and ``||``
        walk their right side dead when the left decides."""
        acc = self.run(node[1], live)
        for op, right in node[2]:
            if op == "&&":
                acc = int(bool(self.run(right, live and bool(acc))) and bool(acc))
            elif op == "||":
                acc = int(bool(self.run(right, live and not acc)) or bool(acc))
            else:
                value = self.run(right, live)
                acc = _binary(op, acc, value) if live else 0
        return acc

    def variable(self, name: str) -> int:
        text = self.get(name).strip()
        if not text:
            return 0
        self.depth += 1
        if self.depth > 32:
            raise Unknown(f"{name} refers to itself")
        try:
            return self.evaluate(text)
        finally:
            self.depth -= 1


def evaluate(expr: str, variables: dict[str, str] | None = None) -> int:
    """Evaluate ``expr`` with plain variables (``ArithError``/``Unknown`` when bash would fail
    or the value is not fixed)."""
    values = dict(variables or {})

    def get(name: str) -> str:
        if name not in values:
            raise Unknown(f"${name} (not set in the script)")
        return values[name]

    return Evaluator(get, lambda name, v: values.__setitem__(name, str(v))).evaluate(expr)
