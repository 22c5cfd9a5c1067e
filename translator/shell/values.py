"""What reading a script yields: pieces of text that remember the literal they come from, the
words made of them, the variables (scalars and arrays) in their scopes, and the limits that
keep reading linear in the script's size."""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field

from translator.shell.notes import Note

Span = tuple[int, int]
#: Limits that keep reading linear: past them a value becomes unknown.
MAX_TEXT = 64 * 1024
MAX_ITEMS = 10_000
MAX_PIECES = 1024
MAX_SOURCES = 64
MAX_DEPTH = 100
MAX_CALL_DEPTH = 16
MAX_EVALS = 8
MAX_CHOICES = 32
#: A source set that stands for "more places than we keep" (update refuses to edit those).
MANY: Span = (-1, -1)
#: The value of a variable the script ``unset`` (unlike a name it never set: that one the
#: environment may set).
UNSET = "unset"
#: Stands for an unknown stretch in the alternatives of an undecided value.
UNKNOWN_MARK = "\0"
#: Set in the outermost scope once the script sources a file: a name the script never sets
#: may then have been set by that file (plain unknown from then on, not absent).
SOURCED = "__batchspec_sourced"
#: Set in the outermost scope when the script is read with its environment not known (it
#: stops when run with none): a name it never sets is plain unknown, not absent.
OPEN_ENV = "__batchspec_open_env"
#: Set in the outermost scope when the script is read with arguments (``parse(args=...)``).
ARGS_GIVEN = "__batchspec_args"
#: Names the reader keeps for itself start so (left out of :attr:`Script.variables`).
OWN = "__batchspec_"
#: The variable that lists the GPUs a process sees.
VISIBLE = "CUDA_VISIBLE_DEVICES"


def listed_devices(text: str) -> int:
    """How many GPUs a :data:`VISIBLE` value lists (``0,1,3``: 3; empty: none)."""
    return len([x for x in text.split(",") if x.strip()])


#: Set in the environment to the GPUs the job's node has, when its definition or the user
#: says (what ``nvidia-smi -L`` lists there).
NODE_GPUS = "__batchspec_node_gpus"


@dataclass(frozen=True)
class Piece:
    """A stretch of a word's text and where it came from."""

    text: str | None
    """``None`` when unknown."""
    span: Span | None = None
    """Character offsets of the literal this text is, verbatim, when there is one."""
    why: str | None = None
    """For unknown text: what stood there."""
    sources: frozenset = frozenset()
    """Every literal this text was computed from (for an edit's side effects)."""
    maybe: tuple[tuple[str, ...], ...] | None = None
    """For an unknown value that is one of a few (an ``if`` the reader cannot decide set it
    either way): each possible value's items, unknown stretches as ``UNKNOWN_MARK``."""
    absent: bool = False
    """For unknown text: what a name the script never sets (or an argument not given) gives.
    Run as read, with nothing set, it is empty (conditions and ``${X:-d}`` take it so); as a
    batch value it stays unknown, since only the environment or an argument supplies it."""
    splits: bool = False
    """For unknown text: it stands unquoted (``$EXTRA``, ``$(cat args)``), so bash may split it
    into several words; quoted (``"x=$EXTRA"``) it stays inside its one word."""
    placeholder: bool = False
    """For unknown text: a template's placeholder (``<PATH TO DATA>``), which stands for one
    value to fill in, never for flags."""


@dataclass(frozen=True)
class Word:
    """One shell word after expansion."""

    text: str | None
    """The expanded text; ``None`` when it depends on something we cannot know."""
    line: int
    """1-based line the word stands on."""
    span: Span | None = None
    """Character offsets of the literal that gave the whole word, when there is one (for a
    ``$VAR`` word: the literal in the variable's assignment)."""
    why_unknown: str | None = None
    """What made it unknown (``$1``, ``$(...)``, an unset variable)."""
    sources: frozenset = frozenset()
    """The literals (spans) the word's text was computed from."""
    parts: tuple[Piece, ...] = ()
    """For an unknown word: its pieces, known and unknown (a string given to ``eval`` or
    ``bash -c`` is read again with only the unknown pieces left as holes)."""
    maybe: tuple[tuple[str, ...], ...] | None = None
    """For an unknown word that is all one undecided value: the items of each value it may
    have, unknown stretches as ``UNKNOWN_MARK``."""
    absent: bool = False
    """For an unknown word: it is made only of absent pieces (a name the script never sets, an
    argument not given) and empty text, so run as read it is empty. ``--micro-batch-size
    $MBS`` then has no value when run as-is, and a lone ``$EXTRA_ARGS`` adds nothing; the
    word's ``text`` stays ``None`` (the environment may give it a value)."""


@dataclass
class Script:
    """Commands and variables of a script, in order."""

    commands: list[list[Word]] = field(default_factory=list)
    """Each simple command's words, assignments removed, in the order they would run."""
    variables: dict[str, list[Word]] = field(default_factory=dict)
    """Scalars (one word) and arrays, as they stand at the end of the script."""
    notes: list[Note] = field(default_factory=list)
    """What the reader did not follow (``line 3: source env.sh is not read``)."""
    paths: list[tuple] = field(default_factory=list)
    """For each command: the undecided branches it runs under, as ``((choice, what), path)``
    pairs (``what`` such as ``the if on line 12``); two commands on different paths of one
    choice never both run."""
    heredocs: list[Heredoc] = field(default_factory=list)
    """Here-documents written to a file (``cat <<EOT > $config_json``), expanded."""
    copies: dict[str, str] = field(default_factory=dict)
    """Files a ``cp SOURCE TARGET`` made: the target -> its source, both relative to where
    the script started (the job's later commands read the copy, which is the source)."""
    defaults: list[Default] = field(default_factory=list)
    """Each default the script takes because a name is not set (``${GPUS_PER_NODE:-8}``,
    ``${1:-4}`` with no argument given), once each, in the order first taken: what the batch
    rests on when the environment (``--env``) or the arguments do not set the name."""
    folders: list[str | None] = field(default_factory=list)
    """For each command (parallel to :attr:`commands`): the folder it runs in, relative to
    where the script started (``""``: there; ``None``: a ``cd`` went somewhere not known)."""
    environments: list[dict[str, Word]] = field(default_factory=list)
    """For each command (parallel to :attr:`commands`): the variables its process sees, each
    as a word with the line and span of its literal: the script's exported variables, the
    user's environment, what ``#SBATCH`` sets, and the command's own ``X=1 cmd`` prefix.
    Commands that see the same variables may share one dict: do not change them."""


@dataclass(frozen=True)
class Default:
    """A default taken because a name is not set: ``${X:-d}``, ``${X-d}``, ``${X:=d}``,
    ``${1:-d}``."""

    name: str
    """The name not set (``GPUS_PER_NODE``, ``1``)."""
    line: int
    """1-based line of the ``${...}``."""
    span: Span | None
    """Character offsets of the literal default text ``d`` in the file; ``None`` when the
    default is not one literal (``${X:-$Y}``, ``${X:-}``)."""


@dataclass(frozen=True)
class Heredoc:
    """A here-document that a command writes to a file."""

    target: Word
    """The file it is written to (``> FILE`` after the ``<<EOT``)."""
    pieces: tuple[Piece, ...]
    """The body after expansion, piece by piece (unknown pieces have ``text`` ``None``)."""
    line: int
    """Line of the ``<<`` that opens it."""


@dataclass
class Var:
    """A variable's value: one scalar (a tuple of pieces) or an array of them."""

    items: tuple | list
    """The scalars; a scalar variable has one item (a list while an array grows in place)."""
    array: bool = False
    """Declared as an array (``A=(...)``), even with one item."""
    lines: tuple | list = ()
    """For an array: the line each item is written on."""
    overflow: bool = False
    """The array grew past MAX_ITEMS: unknown from then on."""
    keys: tuple | list | None = None
    """For an array: the index of each of the first items (bash's arrays are sparse:
    ``A[5]=c`` on ``(a b)`` gives indices 0 1 5). ``None``: every item, at 0, 1, 2...
    Fewer keys than items: the items past them are *vague*, standing for elements the reader
    cannot count or place (``A=($(ls))``, paths that disagree), all at indices past the last
    key; see :mod:`translator.shell.arrays`."""
    assoc: bool = False
    """Declared ``-A`` (an associative array): not followed, its elements are unknown."""

    @property
    def scalar(self) -> tuple:
        """What ``$NAME`` gives: element 0 (the empty string when there is none); when every
        item is vague, the first one if it is unknown (else an unknown piece)."""
        if self.keys is None or not self.array:
            return self.items[0] if self.items else (Piece("", None),)
        if self.keys:
            return self.items[0] if self.keys[0] == 0 else (Piece("", None),)
        first = self.items[0] if self.items else (Piece("", None),)
        return (
            first
            if text_of(first) is None
            else unknown("an array's element 0 (its items are not counted)")
        )


class Env:
    """Variables in layers: a fork sees its parent and keeps its own changes apart."""

    version = 0
    """Counts every change to an exported name's value or to what is exported, in any scope
    (a command's environment is computed again only after one)."""

    def __init__(self, parent: Env | None = None, function: bool = False):
        self.parent = parent
        self.own: dict[str, Var | str] = {}
        """This layer's variables: a :class:`Var`, or ``UNSET`` for one unset here."""
        self.function = function
        """A function's frame: ``local`` names belong to the innermost one."""
        self.locals: set[str] = set()
        """For a function's frame: the names declared ``local`` in it (else empty)."""
        self.exports: dict[str, bool] = {}
        """Names exported (``True``) or no longer exported (``False``) in this layer."""
        self.watch: builtins.set[str] = parent.watch if parent is not None else set()
        """Every name exported so far in any scope of the reading (shared by all of them)."""
        self.dirty: builtins.set[str] = parent.dirty if parent is not None else set()
        """The names of :attr:`watch` set or exported since the reader last looked (shared)."""

    def get(self, name: str):
        """The innermost value of ``name``: a :class:`Var`, ``UNSET``, or ``None`` when the
        script never set it."""
        env: Env | None = self
        while env is not None:
            if name in env.own:
                return env.own[name]
            env = env.parent
        return None

    def set(self, name: str, value) -> None:
        self.own[name] = value
        if name in self.watch:
            self.dirty.add(name)
            Env.version += 1

    def fork(self, function: bool = False) -> Env:
        return Env(self, function)

    def root(self) -> Env:
        """The outermost scope (the script's own, where the environment is)."""
        env = self
        while env.parent is not None:
            env = env.parent
        return env

    def declare_local(self, name: str) -> None:
        """``local NAME``: the name belongs to the innermost function frame."""
        env: Env | None = self
        while env is not None:
            if env.function:
                env.locals.add(name)
                return
            env = env.parent

    def export(self, name: str, on: bool = True) -> None:
        """``export NAME`` (``on``), or ``export -n NAME`` / ``unset NAME`` (not ``on``)."""
        self.exports[name] = on
        self.watch.add(name)
        self.dirty.add(name)
        Env.version += 1

    def is_exported(self, name: str) -> bool:
        env: Env | None = self
        while env is not None:
            if name in env.exports:
                return env.exports[name]
            env = env.parent
        return False

    def exported(self) -> dict[str, bool]:
        """Every name exported (or no longer) in this scope or one around it, the outermost
        first."""
        layers = []
        env: Env | None = self
        while env is not None:
            if env.exports:
                layers.append(env.exports)
            env = env.parent
        out: dict[str, bool] = {}
        for layer in reversed(layers):
            out.update(layer)
        return out

    def names(self) -> builtins.set[str]:  # plain ``set`` here is the method Env.set
        """Every name set in this scope or one around it."""
        out: builtins.set[str] = set()
        env: Env | None = self
        while env is not None:
            out |= env.own.keys()
            env = env.parent
        return out


def merge_sources(pieces) -> frozenset:
    """The literals behind all of ``pieces`` (``{MANY}`` past MAX_SOURCES of them)."""
    out: set = set()
    for p in pieces:
        out |= p.sources
        if len(out) > MAX_SOURCES:
            return frozenset({MANY})
    return frozenset(out)


def unknown(why: str, sources=frozenset()) -> tuple[Piece, ...]:
    """A scalar that is one unknown piece."""
    return (Piece(None, None, why, sources),)


def scalar(text: str, sources=frozenset()) -> Var:
    """A variable holding known text that is no literal of the file (an arithmetic result)."""
    return Var(((Piece(text, None, None, sources),),))


def text_of(pieces) -> str | None:
    """The text of ``pieces``, ``None`` when one is unknown."""
    try:
        return "".join([p.text for p in pieces])
    except TypeError:  # a piece's text is None
        return None


def as_run(pieces) -> str | None:
    """The text of ``pieces`` when the script runs as read: absent pieces (names never set,
    arguments not given) are empty; ``None`` when another piece is unknown."""
    if any(p.text is None and not p.absent for p in pieces):
        return None
    return "".join(p.text or "" for p in pieces)


def run_text(word: Word) -> str | None:
    """A word's text when the script runs as read (see :func:`as_run`)."""
    if word.text is not None:
        return word.text
    if word.absent:
        return ""
    return as_run(word.parts) if word.parts else None


def why(pieces) -> str | None:
    """Why the first unknown piece of ``pieces`` is unknown."""
    return next((p.why for p in pieces if p.text is None), None)


def clip(text: str, limit: int = 40) -> str:
    """``text`` on one line, cut to ``limit`` characters (for messages)."""
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bounded(pieces: tuple) -> tuple:
    """A value past the size limits becomes unknown (or loses its per-piece spans)."""
    text = text_of(pieces)
    if text is not None and len(text) > MAX_TEXT:
        return unknown("a value longer than 64 KiB", merge_sources(pieces))
    if len(pieces) <= MAX_PIECES:
        return pieces
    runs = _known_runs(pieces)
    if len(runs) > MAX_PIECES:
        # Some piece is unknown (known runs are merged into one): its reason is kept.
        return unknown(why(pieces) or f"a value of over {MAX_PIECES} pieces", merge_sources(pieces))
    return runs


def _known_runs(pieces: tuple) -> tuple:
    """``pieces`` with each run of known pieces made one piece (with no span)."""
    runs, known = [], []
    for p in pieces + (None,):
        if p is not None and p.text is not None:
            known.append(p)
            continue
        if known:
            runs.append(Piece(text_of(known), None, None, merge_sources(known)))
            known = []
        if p is not None:
            runs.append(p)
    return tuple(runs)


def pieces_of(word: Word) -> tuple[Piece, ...]:
    """A word as one piece."""
    return (Piece(word.text, word.span, word.why_unknown, word.sources, absent=word.absent),)


def to_word(pieces: tuple, line: int) -> Word:
    """The word ``pieces`` make: known, with the span of its literal when one literal gave
    it all; or unknown, with its pieces."""
    pieces = tuple(pieces)
    if len(pieces) == 1 and pieces[0].text is not None and len(pieces[0].sources) <= MAX_SOURCES:
        only = pieces[0]  # the common word: one known piece
        return Word(only.text, line, only.span, None, frozenset(only.sources))
    text = text_of(pieces)
    sources = merge_sources(pieces)
    if text is None:
        unknowns = [p for p in pieces if p.text != ""]
        maybe = unknowns[0].maybe if len(unknowns) == 1 else None
        absent = all(p.absent for p in unknowns)
        return Word(
            None, line, None, why(pieces), sources, parts=pieces, maybe=maybe, absent=absent
        )
    meaningful = [p for p in pieces if p.text]
    span = meaningful[0].span if len(meaningful) == 1 else None
    if not meaningful and len(pieces) == 1:
        span = pieces[0].span
    return Word(text, line, span, None, sources)
