"""Assignments as bash makes them: ``X=v``, ``X+=v``, ``A=(...)``, ``A+=(...)``, ``A[3]=v``,
``declare -i`` / ``local`` / ``export``, and the commands that set variables to what only the
running script knows (``read X``, ``printf -v X``)."""

from __future__ import annotations

import re

from translator.shell import arrays
from translator.shell.expand import Expander, arith_piece, subscript
from translator.shell.fields import joined
from translator.shell.syntax import ScriptText
from translator.shell.values import Env, Piece, Var, Word, bounded, clip, text_of, unknown

#: ``[k]=v`` and ``[k]+=v`` in ``A=(...)``.
KEYED = re.compile(r"\[([^\]]*)\](\+?)=")
#: What :func:`_entry` gives for a field at the next index, or at one not known.
NEXT, VAGUE = "next", "vague"
#: A name a command such as ``read`` sets (``NAME`` or ``NAME[index]``).
TARGET = re.compile(r"[A-Za-z_]\w*(\[[^\]]*\])?")


def assign(ex: Expander, node, env: Env, src: ScriptText, integer: bool = False) -> None:
    """One ``NAME=value`` (``integer``: under ``declare -i``, the value is arithmetic)."""
    name_node = node.child_by_field_name("name")
    value = node.child_by_field_name("value")
    if name_node is None:
        return
    name = src.of(name_node)
    append = any(src.spells(c, b"+=") for c in node.children)
    line = src.line(node.start_byte)
    if value is not None and value.type == "array" and name_node.type != "subscript":
        entries = [
            e
            for c in value.named_children
            if c.type != "comment"
            for e in _entry(ex, c, env, src, name)
        ]
        assign_array(env, name, entries, append, line)
        return
    if value is None:
        pieces = (Piece("", src.span(node.end_byte, node.end_byte)),)
    else:
        pieces = joined(ex.expand(value, env, src, quoted=True))
    text = text_of(pieces)
    if integer and text is not None:
        pieces = (arith_piece(text, env),)
    if name_node.type == "subscript":  # A[3]=x
        base = src.of(name_node.child_by_field_name("name") or name_node).split("[", 1)[0]
        k, why_ = index_of(name, env)
        if append:
            pieces = _element_text(env, base, k) + tuple(pieces)
        arrays.set_element(env, base, k, pieces, line, why_)
        return
    arrays.set_scalar(env, name, pieces, append, line)


def index_of(target: str, env: Env) -> tuple[int | None, str]:
    """The index of ``NAME[index]`` (bash's arithmetic) and, for one not known, why."""
    base, _, rest = target.partition("[")
    index = rest[:-1] if rest.endswith("]") else rest
    why_ = f"{base}[{clip(index)}] set at an index not known"
    k = subscript(index, env)
    return (None, why_) if isinstance(k, Piece) or k in ("@", "*") else (k, why_)


def _element_text(env: Env, name: str, k: int | None) -> tuple:
    """What ``A[k]+=v`` appends to."""
    var = env.get(name)
    if not isinstance(var, Var):
        return ()
    state, item = arrays.element(var, k)
    if state == arrays.UNKNOWN:
        return unknown(f"${{{name}[{k}]}} (an element the reader cannot place)")
    return tuple(item or ())


def _entry(ex: Expander, node, env: Env, src: ScriptText, name: str) -> list[tuple]:
    """One word of ``A=(...)``: ``(index, append, pieces, line)`` for ``[k]=v`` (index
    ``None`` when not known, then ``pieces`` is why), else ``(NEXT, False, pieces, line)`` per
    field, ``VAGUE`` for an index where bash may make more or fewer fields."""
    line = src.line(node.start_byte)
    raw = src.data[node.start_byte : node.end_byte].decode(errors="replace")
    keyed = KEYED.match(raw) if node.type == "concatenation" else None
    if keyed is None:
        fields, spread = ex.counted_fields(node, env, src)
        return [(VAGUE if spread else NEXT, False, f, n) for f, n in fields]
    k, why_ = index_of(f"{name}[{keyed.group(1)}]", env)
    eq = node.start_byte + len(keyed.group(0).encode())
    pieces: list = []
    for child in node.children:
        if child.end_byte <= eq:
            continue
        if child.start_byte < eq:  # the word the ``=`` stands in
            pieces.append(_word_after(src, eq, child.end_byte))
        else:
            pieces.extend(joined(ex.expand(child, env, src, quoted=True)))
    if k is None:
        return [(None, False, why_, line)]
    return [(k, keyed.group(2) == "+", tuple(pieces) or (Piece(""),), line)]


def _word_after(src: ScriptText, start: int, end: int) -> Piece:
    """The unquoted text between two byte offsets, with its span when it is verbatim."""
    raw = src.data[start:end].decode(errors="replace")
    if "\\" in raw:
        return Piece(re.sub(r"\\(.)", r"\1", raw))
    span = src.span(start, end)
    return Piece(raw, span, None, frozenset({span}) if span else frozenset())


def assign_array(env: Env, name: str, entries: list, append: bool, line: int) -> None:
    """``A=(...)`` or ``A+=(...)`` with the words already expanded (``X+=(v)`` on a scalar
    makes it the array's first item, as bash does); past MAX_ITEMS it is unknown for good.
    An array this scope owns changes in place, so a long run of ``A+=(x)`` stays linear."""
    if not append and not getattr(env.get(name), "assoc", False):
        env.set(name, Var([], True, []))
    var = arrays.as_array(env, name)
    if var is None:
        return
    at = arrays.floor(var) if arrays.exact(var) else None  # the next item's index
    for k, plus, pieces, n in entries:
        if k is None:  # [k]=v at an index not known
            env.set(name, arrays.vague(pieces))
            return
        if k == VAGUE or (k == NEXT and at is None):
            if var.keys is None:
                var.keys = list(range(len(var.items)))
            var.items.append(bounded(pieces))
            var.lines.append(n)
            at = None
            continue
        k = at if k == NEXT else arrays.resolve(var, k)
        if k is None:
            env.set(name, arrays.vague(f"{name}[...] set at an index before its first"))
            return
        if plus:
            pieces = _element_text(env, name, k) + pieces
        arrays.put(var, k, bounded(pieces), n)
        at = k + 1
    arrays.check_size(env, name, var, line)


def declaration(ex: Expander, node, env: Env, src: ScriptText) -> None:
    """``declare``, ``typeset``, ``local``, ``export``, ``readonly``: their assignments, and
    the names ``local`` (or ``declare`` in a function) keeps in the function."""
    keyword = src.of(node.children[0])
    options = [src.of(c) for c in node.named_children if c.type == "word"]
    integer = any(o.startswith("-") and "i" in o for o in options)
    associative = any(o.startswith("-") and "A" in o for o in options)
    exports = _exports(keyword, options)
    for child in node.named_children:
        if child.type not in ("variable_assignment", "variable_name"):
            continue
        name = child.child_by_field_name("name") if child.type != "variable_name" else child
        if keyword in ("local", "declare", "typeset") and name is not None:
            env.declare_local(src.of(name))
        if child.type == "variable_assignment":
            assign(ex, child, env, src, integer)
        if associative and name is not None:  # -A: not followed
            base = src.of(name).split("[", 1)[0]
            env.set(base, arrays.associative(base))
        if exports is not None and name is not None and name.type == "variable_name":
            env.export(src.of(name), exports)


def _exports(keyword: str, options: list[str]) -> bool | None:
    """Whether a declaration exports its names (``export``, ``declare -x``), stops exporting
    them (``export -n``, ``declare +x``), or neither (``None``)."""
    if any(o.startswith("-") and "f" in o for o in options):
        return None  # functions
    if keyword == "export":
        return not any(o.startswith("-") and "n" in o for o in options)
    if any(o.startswith("-") and "x" in o for o in options):
        return True
    if any(o.startswith("+") and "x" in o for o in options):
        return False
    return None


def unknown_outputs(words: list[Word], env: Env) -> None:
    """``read X``, ``printf -v X``, ``mapfile A``...: the named variables get values we cannot
    know (``read -a``, ``mapfile`` and ``readarray`` fill arrays, of a count not known)."""
    line = words[0].line
    if words[0].text == "printf":
        targets = [words[i + 1].text for i, w in enumerate(words[:-1]) if w.text == "-v"]
    else:
        targets = [w.text for w in words[1:] if w.text and TARGET.fullmatch(w.text)]
    many = words[0].text in ("mapfile", "readarray") or (
        words[0].text == "read" and any(re.fullmatch(r"-\w*a\w*", w.text or "") for w in words[1:])
    )
    for t in targets:
        if not t or not TARGET.fullmatch(t):
            continue
        why_ = f"${t} (read when the script runs)"
        if "[" in t:
            base = t.split("[", 1)[0]
            arrays.set_element(env, base, index_of(t, env)[0], unknown(why_), line, why_)
        elif many:
            env.set(t, arrays.vague(f"${{{t}[@]}} (read when the script runs)"))
        else:
            arrays.set_scalar(env, t, unknown(why_), False, line)


def unset_targets(ex: Expander, node, env: Env, src: ScriptText) -> list[str]:
    """The names ``unset`` is given (``A[1]`` unquoted is two nodes: one word); an index
    that is not known is left empty (``A[]``: not known)."""
    words: list[list] = []
    end = None
    for child in node.named_children:
        texts = [_name_of(w) for w in ex.words(child, env, src)] or [""]
        if end == child.start_byte and words:
            words[-1].extend(texts)
        else:
            words.append(texts)
        end = child.end_byte
    out = []
    for parts in words:
        if parts[0] is None or parts[0].startswith("-"):
            continue
        if None in parts:
            out.append(parts[0].split("[", 1)[0] + "[]")
        else:
            out.append("".join(parts))
    return out


def _name_of(word: Word) -> str | None:
    """A word naming a variable; for one not known, ``NAME[`` when that much is."""
    if word.text is not None or not word.parts or word.parts[0].text is None:
        return word.text
    m = re.match(r"[A-Za-z_]\w*\[", word.parts[0].text)
    return m.group(0) if m else None
