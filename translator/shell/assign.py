"""Assignments as bash makes them: ``X=v``, ``X+=v``, ``A=(...)``, ``A+=(...)``, ``A[3]=v``,
``declare -i`` / ``local`` / ``export``, and the commands that set variables to what only the
running script knows (``read X``, ``printf -v X``)."""

from __future__ import annotations

import re

from translator.shell.expand import Expander, arith_piece
from translator.shell.fields import joined
from translator.shell.syntax import Source
from translator.shell.values import MAX_ITEMS, Env, Piece, Var, Word, bounded, text_of, unknown


def assign(ex: Expander, node, env: Env, src: Source, integer: bool = False) -> None:
    """One ``NAME=value`` (``integer``: under ``declare -i``, the value is arithmetic)."""
    name_node = node.child_by_field_name("name")
    value = node.child_by_field_name("value")
    if name_node is None:
        return
    name = src.of(name_node)
    if name_node.type == "subscript":  # A[3]=x: the array is no longer one we know
        base = name.split("[", 1)[0]
        env.set(base, Var((unknown(f"{base}[...] set element by element"),), True))
        return
    append = any(src.spells(c, b"+=") for c in node.children)
    line = src.line(node.start_byte)
    if value is not None and value.type == "array":
        fields = [
            f
            for child in value.named_children
            if child.type != "comment"
            for f in ex.fields(child, env, src)
        ]
        set_array(env, name, [p for p, _ in fields], [n for _, n in fields], append, line)
        return
    if value is None:
        pieces = (Piece("", src.span(node.end_byte, node.end_byte)),)
    else:
        pieces = joined(ex.expand(value, env, src, quoted=True))
    text = text_of(pieces)
    if integer and text is not None:
        pieces = (arith_piece(text, env),)
    _set_scalar(env, name, pieces, append, line)


def _set_scalar(env: Env, name: str, pieces: tuple, append: bool, line: int) -> None:
    old = env.get(name)
    if append and isinstance(old, Var):
        pieces = old.scalar + pieces
    if isinstance(old, Var) and old.array:  # A=x sets ${A[0]}, the rest stays
        items = [bounded(pieces)] + list(old.items[1:])
        set_array(env, name, items, [line] + _lines(old)[1:], False, line)
        return
    env.set(name, Var((bounded(pieces),)))


def set_array(env: Env, name: str, items: list, lines: list, append: bool, line: int) -> None:
    """Assign or extend an array (``X+=(v)`` on a scalar makes it the array's first item, as
    bash does); past MAX_ITEMS it is unknown for good. Extending an array this scope owns
    happens in place, so a long run of ``A+=(x)`` stays linear."""
    old = env.get(name)
    if append and isinstance(old, Var):
        if old.overflow:
            return
        # Grown in place only when this scope made the lists; a value from an outer scope, or
        # made whole elsewhere (a scalar, ``A[3]=v``, a merge of paths: tuples), is copied first.
        grown, grown_lines = old.items, old.lines
        if (
            env.own.get(name) is not old
            or not isinstance(grown, list)
            or not isinstance(grown_lines, list)
        ):
            grown, grown_lines = list(old.items), _lines(old)
            old = Var(grown, True, grown_lines)
            env.set(name, old)
        grown.extend(items)
        grown_lines.extend(lines)
        var = old
    else:
        var = Var(items, True, lines)
        env.set(name, var)
    if len(var.items) > MAX_ITEMS:
        grown = [unknown(f"${{{name}[@]}} grows past {MAX_ITEMS} items")]
        env.set(name, Var(grown, True, [line], overflow=True))


def _lines(var: Var) -> list:
    """A fresh list with the line of each of ``var``'s items: 0 for those it keeps no line for
    (a scalar, ``A[3]=v`` and merged paths keep fewer lines than items, or none)."""
    return list(var.lines[: len(var.items)]) + [0] * (len(var.items) - len(var.lines))


def declaration(ex: Expander, node, env: Env, src: Source) -> None:
    """``declare``, ``typeset``, ``local``, ``export``, ``readonly``: their assignments, and
    the names ``local`` (or ``declare`` in a function) keeps in the function."""
    keyword = src.of(node.children[0])
    options = [src.of(c) for c in node.named_children if c.type == "word"]
    integer = any(o.startswith("-") and "i" in o for o in options)
    for child in node.named_children:
        if child.type not in ("variable_assignment", "variable_name"):
            continue
        if keyword in ("local", "declare", "typeset"):
            name = child.child_by_field_name("name") if child.type != "variable_name" else child
            if name is not None:
                env.declare_local(src.of(name))
        if child.type == "variable_assignment":
            assign(ex, child, env, src, integer)


def unknown_outputs(words: list[Word], env: Env) -> None:
    """``read X``, ``printf -v X``...: the named variables get values we cannot know."""
    if words[0].text == "printf":
        targets = [words[i + 1].text for i, w in enumerate(words[:-1]) if w.text == "-v"]
    else:
        targets = [w.text for w in words[1:] if w.text and re.fullmatch(r"[A-Za-z_]\w*", w.text)]
    for t in targets:
        if t:
            env.set(t, Var((unknown(f"${t} (read when the script runs)"),)))
