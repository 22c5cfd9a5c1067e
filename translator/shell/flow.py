"""Which statements of an ``if`` or a ``case`` run: the one arm that runs for sure when known
values decide it, else every arm that may run (the reader then follows each path apart and
keeps what they agree on, :mod:`translator.shell.merge`).

A condition or pattern is decided through a callback, only when the arms before it leave it
to decide: expanding one may change variables (``${X:=1}``), as in bash.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

#: ``(statements that run for sure, None)``, or ``(None, each path that may run)`` where a
#: path is a list of statements, ``None`` for one that runs nothing.
Paths = tuple[list | None, list | None]


def if_arms(node) -> tuple[list[tuple], list | None]:
    """``([(condition, statements)...], else statements)`` of an ``if``; the else part is
    ``None`` when there is none."""
    arms: list[tuple] = []
    cond = None
    body: list = []
    otherwise = None
    for child in node.children:
        if child.type in ("if", "then", "fi", ";", "&", "\n"):
            continue
        if child.type == "elif_clause":
            arms.append((cond, body))
            cond, body = _clause(child)
        elif child.type == "else_clause":
            otherwise = list(child.named_children)
        elif cond is None and child.is_named and child.type != "comment":
            cond = child
        elif child.is_named:
            body.append(child)
    arms.append((cond, body))
    return arms, otherwise


def _clause(node) -> tuple:
    """``(condition, statements)`` of an ``elif``."""
    cond, body = None, []
    for child in node.children:
        if child.type in ("elif", "then", ";", "&"):
            continue
        if cond is None and child.is_named and child.type != "comment":
            cond = child
        elif child.is_named:
            body.append(child)
    return cond, body


def if_paths(arms: list[tuple], otherwise: list | None, decide: Callable) -> Paths:
    """What an ``if`` runs; ``decide(condition)`` is True, False or None (not known). Once
    one arm is undecided, every later arm up to one that surely holds may run."""
    undecided: list = []
    for cond, body in arms:
        decided = decide(cond) if cond is not None else None
        if decided is False and not undecided:
            continue
        if decided is True and not undecided:
            return body, None
        undecided.append(body)
        if decided is True:
            break
    else:
        undecided.append(otherwise)
        if not undecided[:-1]:
            return otherwise or [], None
    return None, undecided


def case_paths(items: list, subject: str | None, texts: Callable) -> Paths:
    """What a ``case`` on ``subject`` (``None``: not known) runs; ``texts(patterns)`` gives
    the text of each pattern node (``None`` when not known)."""
    possible: list = []
    for item in items:
        patterns, body = _case_item(item)
        known = texts(patterns)
        if subject is None or any(t is None for t in known):
            possible.append(body)
            continue
        if any(fnmatch.fnmatchcase(subject, t) for t in known):
            if not possible:
                return body, None
            possible.append(body)
            break
    else:
        possible.append(None)
    return None, possible


def _case_item(item) -> tuple[list, list]:
    """``(pattern nodes, statements)`` of one ``pattern) statements ;;``."""
    patterns: list = []
    body: list = []
    value = item.child_by_field_name("value")
    for child in item.named_children:
        if (
            child.end_byte <= (value or child).end_byte
            or child.type in ("extglob_pattern",)
            and not body
        ):
            patterns.append(child)
        else:
            body.append(child)
    return patterns, body
