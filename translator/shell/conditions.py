"""Whether a condition (``[ ... ]``, ``[[ ... ]]``, ``test``, ``true``, ``!``) succeeds, when
the script's known values decide it; ``None`` when it needs the running system (files, the
environment) or a value the reader does not know."""

from __future__ import annotations

import fnmatch
import operator

from translator.shell.expand import Expander
from translator.shell.syntax import Source
from translator.shell.values import Env, pieces_of, text_of

#: ``test``'s integer comparisons.
INTEGER_TESTS = {
    "-eq": operator.eq,
    "-ne": operator.ne,
    "-lt": operator.lt,
    "-le": operator.le,
    "-gt": operator.gt,
    "-ge": operator.ge,
}


def status(ex: Expander, node, env: Env, src: Source) -> bool | None:
    """Whether the condition ``node`` succeeds, when known values decide it."""
    kind = node.type
    if kind == "test_command":
        inner = node.named_children
        return test(ex, inner[0], env, src) if len(inner) == 1 else None
    if kind == "command":
        return _command_status(ex, node, env, src)
    if kind == "negated_command":
        inner = status(ex, node.named_children[0], env, src) if node.named_children else None
        return None if inner is None else not inner
    return None


def _command_status(ex: Expander, node, env: Env, src: Source) -> bool | None:
    name_node = node.child_by_field_name("name")
    words = ex.words(name_node, env, src) if name_node is not None else []
    name = words[0].text if words else None
    if name in ("true", ":"):
        return True
    if name == "false":
        return False
    if name in ("test", "[") and node.named_children:
        args = [w.text for c in node.named_children[1:] for w in ex.words(c, env, src)]
        if args and args[-1] == "]":
            args = args[:-1]
        return test_words(args)
    return None


def test(ex: Expander, node, env: Env, src: Source) -> bool | None:
    """The expression inside ``[[ ... ]]`` (or a one-expression ``[ ... ]``)."""
    kind = node.type
    if kind == "parenthesized_expression" and node.named_children:
        return test(ex, node.named_children[0], env, src)
    if kind == "unary_expression":
        op = src.of(node.children[0])
        if op == "!":
            inner = test(ex, node.named_children[-1], env, src)
            return None if inner is None else not inner
        args = [
            w.text
            for c in node.named_children
            if c.type != "test_operator"
            for w in ex.words(c, env, src, True)
        ]
        return test_words([op, *args])
    if kind == "binary_expression":
        return _binary_test(ex, node, env, src)
    return test_words([w.text for w in ex.words(node, env, src, True)])


def _binary_test(ex: Expander, node, env: Env, src: Source) -> bool | None:
    left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
    op_node = node.child_by_field_name("operator")
    if left is None or right is None or op_node is None:
        return None
    op = src.of(op_node)
    if op in ("&&", "-a", "||", "-o"):
        a, b = test(ex, left, env, src), test(ex, right, env, src)
        if op in ("&&", "-a"):
            return False if False in (a, b) else None if None in (a, b) else True
        return True if True in (a, b) else None if None in (a, b) else False
    lt = text_of([p for w in ex.words(left, env, src, True) for p in pieces_of(w)])
    rt = text_of([p for w in ex.words(right, env, src, True) for p in pieces_of(w)])
    return test_words([lt, op, rt])


def test_words(args: list) -> bool | None:
    """``test``/``[`` on known words; None when a word is unknown or the test needs the
    running system (files, environment)."""
    if any(a is None for a in args):
        return None
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2:
        return _unary(*args)
    if len(args) == 3:
        return _binary(*args)
    if args[0] == "!":
        inner = test_words(args[1:])
        return None if inner is None else not inner
    return None


def _unary(op: str, value: str) -> bool | None:
    if op == "-z":
        return value == ""
    if op == "-n":
        return value != ""
    if op == "!":
        return value == ""
    return None


def _binary(a: str, op: str, b: str) -> bool | None:
    if op in ("=", "=="):
        return fnmatch.fnmatchcase(a, b) if any(c in b for c in "*?[") else a == b
    if op == "!=":
        return a != b
    if op in INTEGER_TESTS:
        try:
            return INTEGER_TESTS[op](int(a), int(b))
        except ValueError:
            return None
    return None
