"""Bash's indexed arrays as the reader keeps them: sparse, each item at its index.

A :class:`~translator.shell.values.Var` holds its items in index order. ``keys`` gives the
index of each of the first items (``None``: every item, at 0, 1, 2...). When there are fewer
keys than items, the items past them are *vague*: they stand for elements the reader cannot
count or place (``A=($(ls))``, an undecided ``if`` that set the array two ways), every one at
an index past the last key. Of a vague array the reader knows the elements before that
*floor*; an element at or past it, the count and the indices are unknown, never guessed.
"""

from __future__ import annotations

import bisect

from translator.shell.values import (
    MAX_ITEMS,
    Env,
    Piece,
    Var,
    bounded,
    merge_sources,
    unknown,
    why,
)

#: What :func:`element` says of an index: the element is there, is not, or cannot be told.
SET, ABSENT, UNKNOWN = "set", "absent", "unknown"


def known_keys(var: Var) -> list | range | tuple:
    """The indices of the items the reader can place (all of them for an exact array)."""
    return range(len(var.items)) if var.keys is None else var.keys


def exact(var: Var) -> bool:
    """Whether the items are exactly the array's elements (none vague)."""
    return not var.assoc and (var.keys is None or len(var.keys) == len(var.items))


def floor(var: Var) -> int:
    """The lowest index a vague item may stand at."""
    keys = known_keys(var)
    return keys[-1] + 1 if len(keys) else 0


def count(var: Var) -> int | None:
    """``${#A[@]}``: how many elements, ``None`` when not known."""
    return len(var.items) if exact(var) else None


def resolve(var: Var, k: int) -> int | None:
    """The index ``k`` stands for: a negative one counts back from the end (``A[-1]``);
    ``None`` when that end is not known or the index falls before the first element (bash's
    "bad array subscript")."""
    if k >= 0:
        return k
    if not exact(var):
        return None
    keys = known_keys(var)
    k += keys[-1] + 1 if len(keys) else 0
    return k if k >= 0 else None


def element(var: Var, k: int | None) -> tuple[str, tuple | None]:
    """``${A[k]}``: ``(SET, item)``, ``(ABSENT, None)`` or ``(UNKNOWN, None)``."""
    k = None if k is None else resolve(var, k)
    if k is None or var.assoc:
        return UNKNOWN, None
    keys = known_keys(var)
    at = bisect.bisect_left(keys, k)
    if at < len(keys) and keys[at] == k:
        return SET, var.items[at]
    return (ABSENT, None) if exact(var) or k < floor(var) else (UNKNOWN, None)


def _own(env: Env, name: str, var: Var) -> Var:
    """``var`` with lists this scope owns, so that it can change in place (a value from an
    outer scope, or one built of tuples elsewhere, is copied first)."""
    if env.own.get(name) is var and isinstance(var.items, list) and isinstance(var.lines, list):
        if var.keys is None or isinstance(var.keys, list):
            return var
    lines = list(var.lines[: len(var.items)]) + [0] * (len(var.items) - len(var.lines))
    keys = None if var.keys is None else list(var.keys)
    copy = Var(list(var.items), True, lines, var.overflow, keys, var.assoc)
    env.set(name, copy)
    return copy


def as_array(env: Env, name: str) -> Var | None:
    """The array ``name`` holds, owned by this scope, to change in place: a scalar becomes
    its element 0, a name unset or never set an empty array; ``None`` for one that is
    unknown for good (past MAX_ITEMS, or associative)."""
    old = env.get(name)
    if isinstance(old, Var) and (old.overflow or old.assoc):
        return None
    if not isinstance(old, Var):
        old = Var([], True, [])
        env.set(name, old)
    return _own(env, name, old)


def put(var: Var, k: int, item: tuple, line: int) -> None:
    """Set element ``k`` (already resolved, not negative) of an owned array."""
    keys = known_keys(var)
    if not exact(var) and k >= floor(var):
        _put_past_floor(var, k, item, line)
        return
    at = bisect.bisect_left(keys, k)
    if at < len(keys) and keys[at] == k:
        var.items[at], var.lines[at] = item, line
        return
    if var.keys is None and k == len(var.items):
        var.items.append(item)
        var.lines.append(line)
        return
    if var.keys is None:
        var.keys = list(keys)
    var.items.insert(at, item)
    var.lines.insert(at, line)
    var.keys.insert(at, k)


def _put_past_floor(var: Var, k: int, item: tuple, line: int) -> None:
    """An element at or past a vague array's floor: it may replace a vague element, and its
    place among them is not known. At the floor itself (``A=y`` after an ``if`` that set
    ``A=(p q)``) it is the lowest of them, and kept; past it, it is lost among them."""
    _blur(var)
    if k == floor(var):
        n = len(known_keys(var))
        var.items.insert(n, item)
        var.lines.insert(n, line)
        var.keys.append(k)


def _blur(var: Var) -> None:
    """A vague array's vague items become one unknown item (which of them an element set or
    unset by index replaced is not known), its alternatives dropped."""
    n = len(known_keys(var))
    tail = [p for it in var.items[n:] for p in it]
    var.items[n:] = [
        (Piece(None, None, why(tail) or "elements set by index", merge_sources(tail)),)
    ]
    var.lines[n:] = [0]


def _element_at(env: Env, name: str, k: int | None, why_: str) -> tuple[Var, int] | None:
    """The array ``name`` (this scope's own) and element ``k`` resolved; None when there is no
    array to change, or when the index cannot be known (``why_`` says why), which leaves the
    whole array unknown."""
    var = as_array(env, name)
    if var is None:
        return None
    k = None if k is None else resolve(var, k)
    if k is None:
        env.set(name, vague(why_))
        return None
    return var, k


def set_element(env: Env, name: str, k: int | None, pieces: tuple, line: int, why_: str) -> None:
    """``A[k]=v``; an index the reader cannot know (``why_`` says why) leaves the whole array
    unknown."""
    found = _element_at(env, name, k, why_)
    if found is None:
        return
    var, k = found
    put(var, k, bounded(pieces), line)
    check_size(env, name, var, line)


def unset_element(env: Env, name: str, k: int | None, why_: str) -> None:
    """``unset 'A[k]'``."""
    old = env.get(name)
    if not isinstance(old, Var):
        return
    found = _element_at(env, name, k, why_)
    if found is None:
        return
    var, k = found
    keys = known_keys(var)
    at = bisect.bisect_left(keys, k)
    if at < len(keys) and keys[at] == k:
        if var.keys is None:
            var.keys = list(keys)
        del var.items[at], var.lines[at], var.keys[at]
    elif not exact(var) and k >= floor(var):
        _blur(var)  # one of the vague elements may be gone


def set_scalar(env: Env, name: str, pieces: tuple, append: bool, line: int) -> None:
    """``X=v`` and ``X+=v``: on an array, element 0 only (the rest stays, as in bash)."""
    old = env.get(name)
    if isinstance(old, Var) and old.array:
        if append:
            state, item = element(old, 0)
            head: tuple = (
                item
                if state == SET and item is not None
                else ()
                if state == ABSENT
                else unknown(f"${name} (element 0 not known)")
            )
            pieces = head + tuple(pieces)
        set_element(env, name, 0, pieces, line, f"${name}")
        return
    if append and isinstance(old, Var):
        pieces = old.scalar + pieces
    env.set(name, Var((bounded(pieces),)))


def check_size(env: Env, name: str, var: Var, line: int) -> None:
    """Past MAX_ITEMS an array is unknown for good."""
    if len(var.items) > MAX_ITEMS:
        grown = [unknown(f"${{{name}[@]}} grows past {MAX_ITEMS} items")]
        env.set(name, Var(grown, True, [line], overflow=True, keys=[]))


def vague(why_: str, sources=frozenset()) -> Var:
    """An array the reader knows nothing of: one vague item."""
    return Var((unknown(why_, sources),), True, (0,), keys=())


def associative(name: str) -> Var:
    """``declare -A NAME``: an associative array, not followed."""
    return Var(
        (unknown(f"${name} is an associative array (not followed)"),),
        True,
        (0,),
        keys=(),
        assoc=True,
    )
