"""What a script runs that is itself a script, read as it runs: a string given to ``eval`` or
``bash -c`` (also behind ``srun``), read again as a script; a script file it runs (``bash
launch.sh ARGS``, ``srun train.sh``, ``sbatch job.sh ARGS``, ``./run.sh``), read with its
arguments in a process of its own that sees the exported variables (and, under ``srun`` or
``sbatch``, what Slurm sets from their options); a file written by a heredoc earlier in the
script is read as written. ``source FILE`` of a file that is found is read in the script's
own scope; one that is not found is not read and makes what was set before it unknown.

A file other than the script has no literal ``update`` could edit: its words keep no place
(the line they are given is the line of the command that runs it)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from translator.shell import arrays, slurm
from translator.shell.expand import HERE, SBATCH, THERE
from translator.shell.exports import Exports
from translator.shell.notes import Note
from translator.shell.syntax import ScriptText, repair
from translator.shell.values import (
    ARGS_GIVEN,
    MAX_CALL_DEPTH,
    MAX_EVALS,
    MAX_TEXT,
    OWN,
    SOURCED,
    Env,
    Heredoc,
    Piece,
    Var,
    Word,
    clip,
    pieces_of,
    scalar,
    text_of,
    to_word,
    unknown,
)
from translator.shell.walk import NAME, Catcher, Stop
from translator.words.errors import InputError

#: A value set by the reader itself (markers, the arguments).
MARK = Var(((Piece("1"),),))
#: Shells that run a script file named after their options.
SHELLS = {"bash", "sh", "zsh", "dash"}
#: Names that mark a script file run as a command of its own.
SCRIPT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
#: Markers a script run as a process of its own keeps from the one that runs it.
INHERITED = (SBATCH, SOURCED)
#: Scripts that set up a shell's tools, not a job (a Python environment's activation, conda's
#: and Environment Modules' or Lmod's shell setup), by a pattern of their path: what each sets.
#: Sourcing one changes nothing a job sizes itself with.
SETUP_SCRIPTS = (
    (
        re.compile(r"(?:^|/)bin/activate"),
        "a Python environment's activation",
        (
            "PATH",
            "PS1",
            "VIRTUAL_ENV",
            "VIRTUAL_ENV_PROMPT",
            "CONDA_PREFIX",
            "CONDA_DEFAULT_ENV",
            "CONDA_SHLVL",
            "CONDA_PROMPT_MODIFIER",
        ),
    ),
    (
        re.compile(r"(?:^|/)etc/profile\.d/conda\.sh"),
        "conda's shell setup",
        ("PATH", "CONDA_EXE", "CONDA_PYTHON_EXE", "CONDA_SHLVL", "_CE_M", "_CE_CONDA"),
    ),
    (
        re.compile(
            r"(?:^|/)(?:profile\.d/(?:modules|lmod|z\d+_lmod)\.sh|init/(?:bash|sh|profile\.sh))"
        ),
        "the module command's shell setup",
        ("MODULEPATH", "MODULESHOME", "LOADEDMODULES", "BASH_ENV", "ENV", "MANPATH"),
    ),
)
#: Opens a file the script names (a path relative to where the script starts, or absolute):
#: its text, or ``None`` when it is not there.
Opener = Callable[[str], "str | None"]


class Following(Exports):
    """Strings and files the script runs."""

    def __init__(self, where: str, budget: int, opener: Opener | None = None):
        super().__init__(where, budget)
        self.opener = opener
        self.written: dict[str, Heredoc] = {}
        """Files written by a heredoc so far, by their path from where the script starts."""
        self.reading: list[str] = []
        """The files being read (a script that runs itself is not read again)."""

    def sourced(self, words: list[Word], env: Env) -> None:
        """``source FILE [ARGS]``: a file that is found is read in the script's own scope (with
        ``ARGS`` as ``$@`` while it runs); else it is not read, and may set any variable:
        those set so far become unknown (the ones Slurm sets from ``#SBATCH`` aside)."""
        what = f"{words[0].text} {clip(words[1].text or '?') if len(words) > 1 else ''}"
        found = self.open_script(words[1], env) if len(words) > 1 else None
        if found is not None:
            self.source_file(found, words, env)
            return
        setup = _setup_script(_known_text(words[1])) if len(words) > 1 else None
        if setup is not None:  # not read, and nothing a job sizes itself with is unknown
            kind, names = setup
            for n in names:
                why = f"${n} is set by {what} ({kind}) on line {words[0].line}"
                env.set(n, Var((unknown(why),)))
            return
        self.script.notes.append(Note(words[0].line, f"{what} is not read"))
        env.root().set(SOURCED, MARK)  # names never set may be set by it: not absent now
        for n in env.names():
            old = env.get(n)
            if NAME.fullmatch(n) and not n.startswith(("SLURM_", OWN)) and isinstance(old, Var):
                why = f"${n} may be changed by {what} on line {words[0].line}"
                # a scalar stays one, but its count and indices (an array now?) are unknown
                env.set(n, arrays.vague(why) if old.array else Var((unknown(why),), keys=()))

    def source_file(self, found: tuple, words: list[Word], env: Env) -> None:
        """Read a sourced file in ``env``; ``return`` in it ends it."""
        args = words[2:]
        saved = {k: env.own.get(k) for k in ("@", "#")}
        if args:
            set_args(env, [pieces_of(w) for w in args])
        self.catchers.append(Catcher(frozenset({"return"}), env, None))
        try:
            self.read_file(found, env, words[0].line)
        except Stop as stop:
            if stop.kind != "return":
                raise
        finally:
            self.catchers.pop()
            if args:
                for k, v in saved.items():
                    if v is None:
                        env.own.pop(k, None)
                    else:
                        env.set(k, v)

    def run_string(self, words: list[Word], at: int, inner: Word, env: Env, environment) -> None:
        """``bash -c STRING``: the string runs with the words before ``bash`` as its launcher
        and sees ``environment``; under ``srun``, with what Slurm sets in each task."""
        launch = self.prefix + words[:at]
        scope = env.fork()
        _step(launch, scope)
        outer, self.prefix = self.prefix, launch
        outer_env, self.outer = self.outer, environment
        try:
            self.apart(lambda: self.reparse([inner], env, fork=True, scope=scope))
        finally:
            self.prefix, self.outer = outer, outer_env

    def run_file(self, words: list[Word], env: Env, environment: dict[str, Word]) -> None:
        """A script file the command runs (``bash launch.sh ARGS``, ``srun train.sh``,
        ``sbatch job.sh ARGS``, ``./run.sh``), when it is found: read with its arguments in a
        process of its own that sees ``environment``, the words before it as its launcher."""
        where = _script_of(words)
        found = self.open_script(words[where[2]], env) if where is not None else None
        if where is None or found is None:
            return
        start, end, at = where
        scope = Env()
        for name, word in environment.items():
            scope.set(name, Var((pieces_of(word),)))
            scope.export(name)
        for name in (*INHERITED, FOLDER):
            if env.get(name) is not None:
                scope.set(name, env.get(name))
        if start:  # sbatch: the script's #SBATCH lines, then sbatch's own options
            submit = max(i for i, w in enumerate(words[:start]) if _name(w) == "sbatch")
            slurm.sbatch_variables(found[1], scope, spans=False)
            scope.set(SBATCH, MARK)
            slurm.option_variables(words[submit + 1 : start], scope)
            for name in scope.names():  # the batch script's environment
                if name.startswith("SLURM_"):
                    scope.export(name)
        _step(words[start:end], scope)
        set_args(scope, [pieces_of(w) for w in words[at + 1 :]])
        scope.set(ARGS_GIVEN, MARK)
        outer, self.prefix = self.prefix, self.prefix + words[start:end]
        outer_env, self.outer = self.outer, None
        try:
            self.apart(lambda: self.read_file(found, scope, words[0].line))
        finally:
            self.prefix, self.outer = outer, outer_env

    def run_wrapped(
        self, words: list[Word], inner: Word, env: Env, environment, batch: str | None = None
    ) -> None:
        """``sbatch [OPTIONS] --wrap=STRING``: the string is the batch script (``sh -c``),
        read in a process of its own that sees ``environment`` and what Slurm sets from
        sbatch's options (and from the ``#SBATCH`` lines of ``batch``, a script given on
        sbatch's input)."""
        scope = Env()
        for name, word in environment.items():
            scope.set(name, Var((pieces_of(word),)))
            scope.export(name)
        for name in (*INHERITED, FOLDER):
            if env.get(name) is not None:
                scope.set(name, env.get(name))
        scope.set(SBATCH, MARK)
        if batch is not None:
            slurm.sbatch_variables(batch, scope, spans=False)
        submit = next(i for i, w in enumerate(words) if _name(w) == "sbatch")
        slurm.option_variables(words[submit + 1 :], scope)
        for name in scope.names():
            if name.startswith("SLURM_"):
                scope.export(name)
        outer_env, self.outer = self.outer, None
        try:
            self.apart(lambda: self.reparse([inner], env, fork=False, scope=scope))
        finally:
            self.outer = outer_env

    def open_script(self, word: Word, env: Env) -> tuple | None:
        """``(path, text, pieces, holes)`` of the script file ``word`` names (see
        :func:`_eval_string`), from a heredoc the script wrote, else from the disk; ``None``
        when it is not found, or is being read already."""
        path = word.text if word.text is not None else placed(word)
        if path is None or not path.strip() or path == ".":
            return None
        here = folder_of(env)
        if not path.startswith("/") and here is not None:
            path = posixpath.normpath(posixpath.join(here, path))
        doc = self.written.get(path)
        if doc is not None:
            text, pieces, holes = _eval_string([to_word(doc.pieces, doc.line)])
            return path, text, pieces, holes
        if self.opener is None or path in self.reading:
            return None
        read = self.opener(path)
        if read is None:
            return None
        return path, read.replace("\r\n", "\n"), [], {}

    def read_file(self, found: tuple, scope: Env, line: int) -> None:
        """Read a script file (``found``: see :meth:`open_script`) in ``scope``."""
        path, text, pieces, holes = found
        if path in self.reading or len(self.reading) >= MAX_CALL_DEPTH:
            self.script.notes.append(Note(line, f"{path} runs itself; not read again"))
            return
        self.budget += 20 * len(text)
        self.reading.append(path)
        try:
            self.read_string(text, pieces, holes, scope, line, f"{path} (run on line {line})")
        finally:
            self.reading.pop()

    def reparse(self, words: list[Word], env: Env, fork: bool, scope: Env | None = None) -> None:
        """``eval`` / ``bash -c``: read the string as a script, unknown parts kept unknown
        (in ``scope`` when given)."""
        line = words[0].line if words else 1
        text, pieces, holes = _eval_string(words)
        scope = scope or (env.fork() if fork else env)
        self.read_string(text, pieces, holes, scope, line, "a string run by eval or bash -c")

    def read_string(
        self, text: str, pieces: list, holes: dict, scope: Env, line: int, what: str
    ) -> None:
        """Read ``text`` as a script in ``scope``: its literal stretches are ``pieces`` of the
        file, its unknown ones the variables ``holes``."""
        if self.evals >= MAX_EVALS or len(text) > MAX_TEXT:
            self.script.notes.append(
                Note(line, f"{what}: nests or grows too far to follow; not read")
            )
            return
        try:  # a template's placeholders (``<path>``) read as unknown, as in the script
            data, root, blanks, notes, inserted = repair(text.encode(), text, what)
        except InputError:
            self.script.notes.append(Note(line, f"{what}: does not parse; not read"))
            return
        self.script.notes.extend(Note(line, f"{what}, {n}") for n in notes)
        for hole, piece in holes.items():
            scope.set(hole, Var(((piece,),)))
        self.evals += 1
        src = ScriptText(data, text, line, pieces, inserted)
        src.holes = blanks
        try:
            self.block(root, scope, src)
        finally:
            self.evals -= 1
            for hole in holes:
                scope.own.pop(hole, None)

    def wrote(self, doc: Heredoc, env: Env) -> None:
        """Keep a heredoc written to a file: a script that runs it reads what it wrote."""
        here = folder_of(env)
        if doc.target.text is None or here is None:
            return
        path = doc.target.text
        if not path.startswith("/"):
            path = posixpath.normpath(posixpath.join(here, path))
        self.written[path] = doc


def _step(launch: list[Word], scope: Env) -> None:
    """Under ``srun`` (the last one in ``launch``): what Slurm sets in each task, from the
    allocation and ``srun``'s own options."""
    at = [i for i, w in enumerate(launch) if _name(w) == "srun"]
    if at:
        scope.set(SBATCH, MARK)
        slurm.option_variables(launch[at[-1] + 1 :], scope)


def _name(word: Word) -> str:
    """A command word's name, without its folder."""
    return (word.text or "").rsplit("/", 1)[-1]


def _script_of(words: list[Word]) -> tuple[int, int, int] | None:
    """Where the script file a command runs stands: ``(start, end, at)``, where the words
    ``start:end`` are its launcher (``srun`` and its options; not ``sbatch``, which only
    submits it) and ``at`` is the script; ``None`` when the command runs none."""
    i, start = 0, 0
    while i < len(words):
        name = _name(words[i])
        if name in ("srun", "sbatch"):
            j = slurm.script_at(words[i + 1 :])
            if j is None:
                return None
            if name == "sbatch":
                start = i + 1 + j
            i += 1 + j
            continue
        if name in SHELLS:
            j = i + 1
            while j < len(words) and (words[j].text or "").startswith("-"):
                if _command_option(words[j].text):
                    return None
                j += 1
            return (start, i, j) if j < len(words) else None
        if name.endswith(SCRIPT_SUFFIXES):
            return start, i, i
        return None
    return None


def placed(word: Word, script: str | None = None) -> str | None:
    """The path an unknown word names under the folder the job runs in (``$(pwd)/run.sh``:
    ``run.sh``) or, given the ``script`` it stands in, under that script's own folder
    (``$(dirname "$0")/train.py``: ``jobs/train.py`` for ``jobs/run.sh``), from where the job
    runs (``.`` for the folder itself); ``None`` for any other word."""
    parts = word.parts
    if not parts or parts[0].text is not None or parts[0].why not in (HERE, THERE):
        return None
    if parts[0].why == THERE and script is None:
        return None
    rest = [p.text for p in parts[1:]]
    if None in rest:
        return None
    tail = "".join(t for t in rest if t is not None)
    if tail and not tail.startswith("/"):
        return None
    start = "." if parts[0].why == HERE else posixpath.dirname(script or "") or "."
    return posixpath.normpath(posixpath.join(start, tail.lstrip("/")))


def _eval_string(words: list[Word]) -> tuple[str, list, dict]:
    """The string ``eval`` or ``bash -c`` runs: ``(text, pieces, holes)``; each unknown piece
    stands in the text as ``${__batchspec_unknown_N}``, a variable (in ``holes``) holding
    it; ``pieces`` maps the literal stretches back to the file (see :class:`ScriptText`)."""
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


def wrapped_string(words: list[Word]) -> Word | None:
    """The batch script of ``sbatch [OPTIONS] --wrap=STRING`` (or ``--wrap STRING``)."""
    at = next((i for i, w in enumerate(words) if _name(w) == "sbatch"), None)
    if at is None:
        return None
    for i, word in enumerate(words[at + 1 :], at + 1):
        if word.text == "--wrap" and i + 1 < len(words):
            return words[i + 1]
        parts = word.parts or pieces_of(word)
        if (parts[0].text or "").startswith("--wrap="):
            return _without_prefix(parts, len("--wrap="), word.line)
    return None


def _without_prefix(parts: tuple, n: int, line: int) -> Word:
    """The word of ``parts`` with its first ``n`` characters (in its first piece) left out."""
    first = parts[0]
    span = (first.span[0] + n, first.span[1]) if first.span is not None else None
    sources = frozenset({span}) if span is not None else first.sources
    rest = Piece((first.text or "")[n:], span, None, sources)
    return to_word((rest, *parts[1:]), line)


def shell_string(words: list[Word]) -> tuple[int, Word] | None:
    """Where ``bash`` stands and the string of ``bash -c STRING`` (also behind ``srun``,
    ``env``...)."""
    for i, w in enumerate(words[:-1]):
        if w.text is None or w.text.rsplit("/", 1)[-1] not in ("bash", "sh"):
            continue
        j = i + 1  # its options: bash -x -c, bash -lc, sh -xeuc
        while j < len(words) and (words[j].text or "").startswith("-"):
            if _command_option(words[j].text) and j + 1 < len(words):
                return i, words[j + 1]
            j += 1
    return None


def _command_option(text: str | None) -> bool:
    """Whether a shell's option word holds ``-c`` (``-c``, ``-lc``, ``-xeuc``)."""
    return bool(text) and re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", text or "") is not None


def set_args(env: Env, items: list[tuple]) -> None:
    """``$@`` and ``$#`` of a scope (``$1``... are the items of ``$@``)."""
    env.set("@", Var(tuple(items), True))
    env.set("#", scalar(str(len(items))))


def forget_args(env: Env, why: str) -> None:
    env.set("@", arrays.vague(why))
    env.set("#", Var((unknown(why),)))


#: The variable that holds the folder the script has moved to (``cd``), relative to where
#: it started; in the scope of the ``cd``, so a subshell's stays its own.
FOLDER = "__batchspec_folder"


def folder_of(env: Env) -> str | None:
    """The folder the script runs in now, relative to where it started ("" there); ``None``
    when a ``cd`` went somewhere not known."""
    var = env.get(FOLDER)
    if not isinstance(var, Var):
        return ""
    return text_of(var.scalar)


def _setup_script(path: str) -> tuple[str, tuple[str, ...]] | None:
    """What a sourced file that sets up the shell's tools is, and the names it sets; None
    for any other file (:data:`SETUP_SCRIPTS`)."""
    return next(
        ((kind, names) for pattern, kind, names in SETUP_SCRIPTS if pattern.search(path)), None
    )


def _known_text(word: Word) -> str:
    """A word's text, or the known pieces of it (``$HOME/miniconda3/bin/activate``: the path
    after ``$HOME``)."""
    if word.text is not None:
        return word.text
    return "".join(p.text for p in word.parts if p.text is not None)
