"""What a script runs that is itself a script: a string given to ``eval`` or ``bash -c``
(also behind ``srun``), read again as a script; and ``source FILE``, which is not read and
makes what was set before it unknown."""

from __future__ import annotations

from translator.shell import arrays
from translator.shell.exports import Exports
from translator.shell.notes import Note
from translator.shell.syntax import Source, tree
from translator.shell.values import (
    MAX_EVALS,
    MAX_TEXT,
    OWN,
    SOURCED,
    Env,
    Piece,
    Var,
    Word,
    clip,
    pieces_of,
    unknown,
)
from translator.shell.walk import NAME

#: A value set by the reader itself (markers, the arguments).
MARK = Var(((Piece("1"),),))


class Following(Exports):
    """Strings and files the script runs."""

    def sourced(self, words: list[Word], env: Env) -> None:
        """``source FILE`` is not read, and may set any variable: those set so far become
        unknown (the ones Slurm sets from ``#SBATCH`` aside)."""
        what = f"{words[0].text} {clip(words[1].text or '?') if len(words) > 1 else ''}"
        self.script.notes.append(Note(words[0].line, f"{what} is not read"))
        env.root().set(SOURCED, MARK)  # names never set may be set by it: not absent now
        for n in env.names():
            old = env.get(n)
            if NAME.fullmatch(n) and not n.startswith(("SLURM_", OWN)) and isinstance(old, Var):
                why = f"${n} may be changed by {what} on line {words[0].line}"
                # a scalar stays one, but its count and indices (an array now?) are unknown
                env.set(n, arrays.vague(why) if old.array else Var((unknown(why),), keys=()))

    def reparse(self, words: list[Word], env: Env, fork: bool) -> None:
        """``eval`` / ``bash -c``: read the string as a script, unknown parts kept unknown."""
        line = words[0].line if words else 1
        text, pieces, holes = _eval_string(words)
        if self.evals >= MAX_EVALS or len(text) > MAX_TEXT:
            self.script.notes.append(
                Note(
                    words[0].line if words else 0,
                    "a string run by eval or bash -c nests or grows too far to follow; not read",
                )
            )
            return
        data = text.encode()
        root = tree(data).root_node
        if root.has_error:
            self.script.notes.append(
                Note(line, "a string run by eval or bash -c does not parse; not read")
            )
            return
        scope = env.fork() if fork else env
        for hole, piece in holes.items():
            scope.set(hole, Var(((piece,),)))
        self.evals += 1
        try:
            self.block(root, scope, Source(data, text, line, pieces))
        finally:
            self.evals -= 1
            for hole in holes:
                scope.own.pop(hole, None)


def _eval_string(words: list[Word]) -> tuple[str, list, dict]:
    """The string ``eval`` or ``bash -c`` runs: ``(text, pieces, holes)``; each unknown piece
    stands in the text as ``${__batchspec_unknown_N}``, a variable (in ``holes``) holding
    it; ``pieces`` maps the literal stretches back to the file (see :class:`Source`)."""
    text_parts, pieces, at = [], [], 0
    holes: dict[str, Piece] = {}
    for i, w in enumerate(words):
        if i:
            text_parts.append(" ")
            at += 1
        for piece in w.parts or pieces_of(w):
            if piece.text is None:
                hole = f"__batchspec_unknown_{len(holes)}"
                holes[hole] = piece
                part = "${" + hole + "}"
            else:
                part = piece.text
                if piece.span is not None:
                    pieces.append((at, Piece(piece.text, piece.span)))
            text_parts.append(part)
            at += len(part)
    return "".join(text_parts), pieces, holes


def shell_string(words: list[Word]) -> tuple[int, Word] | None:
    """Where ``bash`` stands and the string of ``bash -c STRING`` (also behind ``srun``,
    ``env``...)."""
    for i, w in enumerate(words[:-1]):
        if (
            w.text is not None
            and w.text.rsplit("/", 1)[-1] in ("bash", "sh")
            and words[i + 1].text in ("-c", "-lc", "-xc", "-ec")
            and i + 2 < len(words)
        ):
            return i, words[i + 2]
    return None
