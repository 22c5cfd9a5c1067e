"""Whether a condition (``[ ... ]``, ``[[ ... ]]``, ``test``, ``true``, ``!``, ``(( ... ))``)
succeeds, when the script's known values decide it; ``None`` when it needs the running system
(files) or a value the reader does not know. Read as run, a name the script never sets (an
argument not given) is empty: ``[ -z "$X" ]`` holds, ``[ $# -gt 0 ]`` does not."""

from __future__ import annotations

import fnmatch
import operator
import re

from translator.shell.expand import Expander, arith_piece
from translator.shell.syntax import ScriptText
from translator.shell.values import Env, Word, run_text

#: Nodes that quote what they hold (an empty word from them stays a word).
QUOTING = {"string", "raw_string", "ansi_c_string", "translated_string"}

#: ``test``'s integer comparisons.
INTEGER_TESTS = {
    "-eq": operator.eq,
    "-ne": operator.ne,
    "-lt": operator.lt,
    "-le": operator.le,
    "-gt": operator.gt,
    "-ge": operator.ge,
}


def status(ex: Expander, node, env: Env, src: ScriptText) -> bool | None:
    """Whether the condition ``node`` succeeds, when known values decide it."""
    kind = node.type
    if kind == "test_command":
        inner = node.named_children
        if node.children and node.children[0].type == "[":  # test's words, as bash splits them
            return test_words([a for c in inner for a in _flat(ex, c, env, src)])
        return test(ex, inner[0], env, src) if len(inner) == 1 else None
    if kind == "command":
        return _command_status(ex, node, env, src)
    if kind == "negated_command":
        inner = status(ex, node.named_children[0], env, src) if node.named_children else None
        return None if inner is None else not inner
    if kind == "compound_statement" and node.children and node.children[0].type == "((":
        first, last = node.children[0], node.children[-1]
        piece = arith_piece(src.data[first.end_byte : last.start_byte].decode(), env)
        return None if piece.text is None else piece.text != "0"
    return None


def _command_status(ex: Expander, node, env: Env, src: ScriptText) -> bool | None:
    name_node = node.child_by_field_name("name")
    words = ex.words(name_node, env, src) if name_node is not None else []
    name = words[0].text if words else None
    if name in ("true", ":"):
        return True
    if name == "false":
        return False
    if name in ("test", "[") and node.named_children:
        args = [
            run_text(w)
            for c in node.named_children[1:]
            for w in ex.words(c, env, src)
            if not (w.absent and _vanishes(c))  # unquoted and empty: no word at all
        ]
        if args and args[-1] == "]":
            args = args[:-1]
        return test_words(args)
    return None


def _flat(ex: Expander, node, env: Env, src: ScriptText) -> list:
    """The words ``[ ... ]`` gives ``test`` for ``node``, run as read: an unquoted expansion
    that is empty is no word (``[ -n $X ]`` is ``[ -n ]``)."""
    kind = node.type
    if kind == "binary_expression":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        op = node.child_by_field_name("operator")
        if left is None or right is None or op is None:
            return [None]
        return _flat(ex, left, env, src) + [src.of(op)] + _flat(ex, right, env, src)
    if kind == "unary_expression" and node.children:
        rest = [
            a
            for c in node.named_children
            if c.type != "test_operator"
            for a in _flat(ex, c, env, src)
        ]
        return [src.of(node.children[0]), *rest]
    if kind == "parenthesized_expression":
        return ["(", *(a for c in node.named_children for a in _flat(ex, c, env, src)), ")"]
    return [run_text(w) for w in ex.words(node, env, src) if not (w.absent and _vanishes(node))]


def test(ex: Expander, node, env: Env, src: ScriptText) -> bool | None:
    """The expression inside ``[[ ... ]]``. Its words and operators are taken in order and
    parsed again with bash's precedence (``||`` below ``&&`` below ``!`` below comparisons):
    tree-sitter-bash reads ``[[ $V = "" || $W = y ]]`` as ``$V = ("" || $W) = y``."""
    tokens = _tokens(ex, node, env, src)
    try:
        value, at = _or(tokens, 0)
    except IndexError:
        return None
    return value if at == len(tokens) else None


class _Op(str):
    """An operator of ``[[ ... ]]`` as the tree has it (an operand's text is a plain str)."""


def _tokens(ex: Expander, node, env: Env, src: ScriptText) -> list:
    """The operands (their text run as read, unsplit) and operators of a ``[[`` expression."""
    kind = node.type
    if kind == "binary_expression":
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        op = node.child_by_field_name("operator")
        if left is None or right is None or op is None:
            return [None]
        run = _word_after(node, op)
        if src.of(op) in ("==", "=", "!=") and run:
            return [*_tokens(ex, left, env, src), _Op(src.of(op)), _pattern(ex, run, env, src)]
        return [*_tokens(ex, left, env, src), _Op(src.of(op)), *_tokens(ex, right, env, src)]
    if kind == "unary_expression" and node.children:
        rest = [
            t
            for c in node.named_children
            if c.type != "test_operator"
            for t in _tokens(ex, c, env, src)
        ]
        return [_Op(src.of(node.children[0])), *rest]
    if kind == "parenthesized_expression":
        inner = [t for c in node.named_children for t in _tokens(ex, c, env, src)]
        return [_Op("("), *inner, _Op(")")]
    return [_text(ex.words(node, env, src, True))]


def _or(tokens: list, at: int) -> tuple:
    value, at = _and(tokens, at)
    while at < len(tokens) and isinstance(tokens[at], _Op) and tokens[at] == "||":
        other, at = _and(tokens, at + 1)
        value = _both(value, "-o", other)
    return value, at


def _and(tokens: list, at: int) -> tuple:
    value, at = _not(tokens, at)
    while at < len(tokens) and isinstance(tokens[at], _Op) and tokens[at] == "&&":
        other, at = _not(tokens, at + 1)
        value = _both(value, "-a", other)
    return value, at


def _not(tokens: list, at: int) -> tuple:
    if isinstance(tokens[at], _Op) and tokens[at] == "!":
        value, at = _not(tokens, at + 1)
        return (None if value is None else not value), at
    return _primary(tokens, at)


def _primary(tokens: list, at: int) -> tuple:
    first = tokens[at]
    if isinstance(first, _Op) and first == "(":
        value, at = _or(tokens, at + 1)
        if not (isinstance(tokens[at], _Op) and tokens[at] == ")"):
            raise IndexError("no )")
        return value, at + 1
    if isinstance(first, _Op):  # -z X, -f X...
        return test_words([first, tokens[at + 1]]), at + 2
    nxt = tokens[at + 1] if at + 1 < len(tokens) else None
    if isinstance(nxt, _Op) and nxt not in ("||", "&&", ")"):
        return test_words([first, nxt, tokens[at + 2]]), at + 3
    return test_words([first]), at + 1


#: Nodes that are one operand, not an expression of ``[[ ]]``.
EXPRESSIONS = {"binary_expression", "unary_expression", "parenthesized_expression"}


def _word_after(node, op) -> list:
    """The nodes of the one word right of ``op``, which the tree may split (``*"--help"*``
    is three nodes with nothing between them); empty when an expression stands there."""
    after = node.children[node.children.index(op) + 1 :]
    run = after[:1]
    for child in after[1:]:
        if child.start_byte != run[-1].end_byte:
            break
        run.append(child)
    return [] if not run or any(n.type in EXPRESSIONS for n in run) else run


def _pattern(ex: Expander, nodes: list, env: Env, src: ScriptText) -> str | None:
    """The pattern right of ``==`` in ``[[ ]]``, which the tree may split in several nodes
    (``*"--help"*``): one text, its quoted parts matching only themselves."""
    parts = []
    for n in nodes:
        text = _text(ex.words(n, env, src, True))
        if text is None:
            return None
        parts.append(re.sub(r"([*?[])", r"[\\1]", text) if n.type in QUOTING else text)
    return "".join(parts)


def _text(words: list[Word]) -> str | None:
    """The words of one quoted operand as one text, run as read."""
    texts = [run_text(w) for w in words]
    return None if None in texts else "".join(t for t in texts if t is not None)


def _vanishes(node) -> bool:
    """Whether an argument has no quotes in it: unquoted, an empty expansion is no word."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in QUOTING:
            return False
        stack.extend(n.children)
    return True


def test_words(args: list) -> bool | None:
    """``test``/``[`` on known words; None when a word is unknown or the test needs the
    running system (files, environment)."""
    if any(a is None for a in args):
        return None
    if not args:  # [ ] (or [ $X ] with X empty): false
        return False
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2:
        return _unary(*args)
    if len(args) == 3 and args[1] in ("-a", "-o"):
        return _both(args[0] != "", args[1], args[2] != "")
    if len(args) == 3 and args[0] == "(" and args[2] == ")":
        return args[1] != ""
    if len(args) == 3 and args[0] == "!" and args[1] not in BINARY:
        inner = _unary(args[1], args[2])
        return None if inner is None else not inner
    if len(args) == 3:
        return _binary(*args)
    for joint in ("-o", "-a"):  # more words: -o binds loosest, then -a
        if joint in args[1:-1]:
            at = len(args) - 1 - args[::-1].index(joint)
            return _both(test_words(args[:at]), joint, test_words(args[at + 1 :]))
    if args[0] == "!":
        inner = test_words(args[1:])
        return None if inner is None else not inner
    if args[0] == "(" and args[-1] == ")":
        return test_words(args[1:-1])
    return None


def _both(a: bool | None, joint: str, b: bool | None) -> bool | None:
    """``a -a b`` / ``a -o b`` with either side perhaps not known."""
    if joint == "-a":
        return False if False in (a, b) else None if None in (a, b) else True
    return True if True in (a, b) else None if None in (a, b) else False


#: ``test``'s unary operators that ask the running system (files, terminals, variables).
SYSTEM_TESTS = set("abcdefghkprstuwxGLNOSov") | {"R"}


def _unary(op: str, value: str) -> bool | None:
    if op == "-z":
        return value == ""
    if op == "-n":
        return value != ""
    if op == "!":
        return value == ""
    if op[:1] == "-" and op[1:] in SYSTEM_TESTS:
        return None
    return False  # not an operator (``[ = fp16 ]``, $X empty): an error, status 2


#: ``test``'s binary operators.
BINARY = {"=", "==", "!=", "<", ">", "-nt", "-ot", "-ef", *INTEGER_TESTS}


def _binary(a: str, op: str, b: str) -> bool | None:
    if op in ("=", "==", "!="):
        same = fnmatch.fnmatchcase(a, b) if any(c in b for c in "*?[") else a == b
        return same if op != "!=" else not same
    if op in INTEGER_TESTS:
        try:
            return INTEGER_TESTS[op](int(a), int(b))
        except ValueError:
            return None
    return None
