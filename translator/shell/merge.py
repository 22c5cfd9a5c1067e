"""What a variable holds after paths the reader cannot decide between (an ``if`` on a value it
does not know, a loop body that may not run): the value when every path agrees; else what
the paths share (``opts="$opts --x"`` on one path keeps what ``$opts`` held) around an
unknown piece that lists the values it may have."""

from __future__ import annotations

from translator.shell.arrays import known_keys
from translator.shell.values import (
    MAX_CHOICES,
    UNKNOWN_MARK,
    UNSET,
    Piece,
    Var,
    merge_sources,
    text_of,
)


def agree(values: list, name: str, where: str):
    """One value for ``name`` out of each path's (``where``: the choice, for messages): the
    value itself when every path gives the same text, else unknown, keeping what the paths
    share."""
    if _same_text(values):
        return _same(values)
    if any(isinstance(v, Var) and v.array for v in values):
        return _arrays(values, name, where)
    shared = _shared(values)
    if shared is not None:
        befores, core, afters = shared
        return Var((_unknown_of(befores, name, where) + core + _unknown_of(afters, name, where),))
    every = [it for v in values if isinstance(v, Var) for it in v.items]
    return Var((_unknown_of(every, name, where, values),))


def _same_text(values: list) -> bool:
    """Every path leaves the variable unset, or gives it the same known text."""
    texts = [
        "unset"
        if v == UNSET
        else None
        if v is None
        else (v.array, tuple(map(text_of, v.items)), tuple(known_keys(v)), v.assoc)
        for v in values
    ]
    return (
        all(t == texts[0] for t in texts)
        and texts[0] is not None
        and (texts[0] == "unset" or all(x is not None for x in texts[0][1]))
    )


def _same(values: list):
    """The value every path gives; when the paths wrote it in different literals, it is no
    one literal (an edit of one would not change the others)."""
    first = values[0]
    spans = {tuple(p.span for i in v.items for p in i) for v in values if isinstance(v, Var)}
    if not isinstance(first, Var) or len(spans) <= 1:
        return first
    sources = merge_sources([p for v in values for it in v.items for p in it])
    items = tuple((Piece(text_of(i), None, None, sources),) for i in first.items)
    return Var(items, first.array, keys=first.keys, assoc=first.assoc)


def _arrays(values: list, name: str, where: str) -> Var:
    """Paths of which one at least leaves an array (a scalar counts as its element 0, a name
    left unset as no element): the elements every path has at the same index, in the same
    order from the start, then one vague item for what differs (its count and indices are
    not known)."""
    views = [_as_array(v) for v in values]
    pairs = [tuple(zip(known_keys(v), v.items)) for v in views]
    head = _common_prefix(pairs, words=False)
    n = len(head)
    keys, lines = [k for k, _ in head], tuple(views[0].lines[:n]) + (0,) * (n - len(views[0].lines))
    rests = [tuple(v.items[n:]) for v in views]
    if not any(rests):
        return Var(tuple(i for _, i in head), True, lines, keys=_dense_or(keys))
    if all(r == rests[0] for r in rests) and all(len(known_keys(v)) == n for v in views):
        return Var(
            tuple(i for _, i in head) + rests[0],
            True,
            lines + (0,) * len(rests[0]),
            keys=tuple(keys),
        )
    # the sources, as before: those of every item when the paths share nothing
    every = [] if n else [it for v in values if isinstance(v, Var) for it in v.items]
    rest = _unknown_of(every, name, where, [Var(r, True) for r in rests])
    return Var(tuple(i for _, i in head) + (rest,), True, lines + (0,), keys=tuple(keys))


def _as_array(value) -> Var:
    """What a path leaves, as an array."""
    if not isinstance(value, Var):
        return Var((), True)
    return value if value.array else Var(value.items, True, value.lines, keys=value.keys)


def _dense_or(keys: list) -> tuple | None:
    """``None`` for keys 0, 1, 2... (every item in place), else the keys."""
    return None if keys == list(range(len(keys))) else tuple(keys)


def _shared(values: list) -> tuple[list, tuple, list] | None:
    """``(befores, core, afters)`` when every path's scalar value is ``before + core + after``
    with word boundaries around ``core``: ``opts="$opts --x"`` or ``cmd="nsys $cmd"`` on one
    path only keeps what ``$opts`` or ``$cmd`` held. ``None`` when the paths share nothing."""
    if not all(isinstance(v, Var) and not v.array for v in values):
        return None
    scalars = [v.scalar for v in values]
    for core in (min(scalars, key=len), _common_prefix(scalars)):
        if not core:
            continue
        found = [i for i in (_find(s, core) for s in scalars) if i is not None]
        if len(found) == len(scalars):
            return (
                [s[:i] for s, i in zip(scalars, found)],
                core,
                [s[i + len(core) :] for s, i in zip(scalars, found)],
            )
    return None


def _common_prefix(sequences: list, words: bool = True) -> tuple:
    """What every sequence starts with (pieces of scalars, cut at a blank when ``words``; or
    the items of arrays)."""
    head = 0
    while head < min(map(len, sequences)) and all(s[head] == sequences[0][head] for s in sequences):
        head += 1
    while words and head and not all(_blank_between(s, head) for s in sequences):
        head -= 1
    return tuple(sequences[0][:head])


def _find(pieces: tuple, core: tuple) -> int | None:
    """Where ``core`` stands in ``pieces`` as whole words."""
    n = len(core)
    for i in range(len(pieces) - n + 1):
        if (
            pieces[i : i + n] == core
            and _blank_between(pieces, i)
            and _blank_between(pieces, i + n)
        ):
            return i
    return None


def _blank_between(pieces: tuple, at: int) -> bool:
    """Whether a word boundary lies between ``pieces[at - 1]`` and ``pieces[at]``."""
    if at <= 0 or at >= len(pieces):
        return True
    before, after = pieces[at - 1].text or "x", pieces[at].text or "x"
    return before[-1:] in (" ", "\t", "\n") or after[:1] in (" ", "\t", "\n")


def _unknown_of(items: list, name: str, where: str, values: list | None = None) -> tuple:
    """One unknown piece for a value that differs between paths, with its alternatives (no
    piece when every path has nothing there)."""
    if values is None and not any(items):
        return ()
    sources = merge_sources([p for it in items for p in it])
    # The alternatives; where this script's own variable is left unset, it expands to nothing.
    if values is None:  # the tails of scalars
        maybe = _alternatives([(it,) for it in items])
    else:
        maybe = _alternatives([v.items if isinstance(v, Var) else () for v in values])
    return (Piece(None, None, f"${name} depends on {where}", sources, maybe),)


def _alternatives(items_per_path: list) -> tuple:
    """``maybe`` for a value that differs between paths: each path's items, with undecided
    pieces inside spread into their own alternatives."""
    out = []
    for items in items_per_path:
        combos: list[tuple[str, ...]] = [()]
        for item in items:
            choices = _choices(item)
            if len(combos) * len(choices) > MAX_CHOICES:
                choices = [UNKNOWN_MARK]
            combos = [c + (x,) for c in combos for x in choices]
        out.extend(combos)
    return tuple(dict.fromkeys(out))[:MAX_CHOICES]


def _choices(pieces) -> list[str]:
    """The texts a value may have: an undecided piece gives each of its alternatives, any
    other unknown piece ``UNKNOWN_MARK`` (past MAX_CHOICES texts, marks only)."""
    out = [""]
    for p in pieces:
        if p.text is not None:
            options = [p.text]
        elif p.maybe:
            options = [" ".join(a) for a in p.maybe]
        else:
            options = [UNKNOWN_MARK]
        if len(out) * len(options) > MAX_CHOICES:
            options = [UNKNOWN_MARK]
        out = [o + x for o in out for x in options]
    return out
