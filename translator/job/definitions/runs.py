"""What a system runs on each node of a job definition: the nodes and GPUs it gives the job,
the variables it and the definition set, and the command, as pieces of script text with the
lines they have in the definition. A value the definition leaves to a placeholder (``${TP}``,
``{{ .Values.tp }}``) is a variable no one sets: unknown unless ``--env`` gives it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from translator.reading import Held
from translator.words.errors import InputError
from translator.words.parsing import brief

#: ``$(NAME)``: a Kubernetes reference to a variable set before (in ``env``), or a shell's.
REFERENCE = re.compile(r"\$\(([A-Za-z_]\w*)\)")
#: What stays an expansion in a value written for the shell: ``${NAME...}`` and ``$NAME``.
EXPANSION = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_]\w*")
#: A whole value that is one placeholder: ``${NAME}``, ``$NAME``.
PLACEHOLDER = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")


#: The most nodes, or GPUs on a node, a definition may give: far beyond any cluster (more is a
#: typo or an attack, and the world it makes no batch can be solved on).
MAX_COUNT = 1 << 20


class TooLarge(InputError):
    """A count of the definition larger than :data:`MAX_COUNT`, at ``line`` (the reader of the
    file names it)."""

    def __init__(self, line: int | None, message: str):
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Size:
    """A count the definition gives the system (nodes, GPUs per node), or why it is unknown."""

    value: int | None
    """The count; ``None`` when the definition does not fix it."""
    line: int | None = None
    """Line of the definition that sets it."""
    why: str | None = None
    """Why it is unknown (a placeholder, ``auto``), when it is."""
    span: tuple[int, int] | None = None
    """Character offsets of the number in the definition, when it is written there."""
    key: str | None = None
    """The key that writes it (``num_nodes``, ``limits[nvidia.com/gpu]``)."""
    besides: int = 0
    """What other literals add to the one at ``span`` to make the count (a PyTorchJob's one
    Master beside its Workers' replicas)."""


@dataclass(frozen=True)
class Export:
    """A variable the node's command sees."""

    name: str
    """Its name."""
    value: str
    """Its value written for the shell (quoted; placeholders left as expansions)."""
    line: int | None = None
    """Line of the definition that sets it."""
    span: tuple[int, int] | None = None
    """Character offsets of the literal in the definition that is its value, when one is
    (``update`` edits it there)."""

    @classmethod
    def of(cls, name: str, size: Size) -> Export:
        """The variable a system sets to a size of the definition."""
        return cls(name, str(size.value), size.line, size.span)

    @classmethod
    def unknown(cls, name: str, source: str, line: int | None = None) -> Export:
        """A variable the system sets to a value only it knows (``source`` says where from):
        unknown to the script, as a command's output is, never unset."""
        return cls(name, f'"$({source})"', line)


@dataclass
class Run:
    """What a system runs on each node of one job definition (one container, one task)."""

    kind: str
    """The definition's kind as its users say it (``Kubernetes PyTorchJob``, ``SkyPilot task``)."""
    nodes: Size
    """Nodes (pods, machines) the system starts the command on."""
    gpus_per_node: Size
    """GPUs each of them gets."""
    body: list[tuple[int, str]] = field(default_factory=list)
    """The command as script text, piece by piece, each with the line it starts on."""
    exports: list[Export] = field(default_factory=list)
    """The variables set before the command runs, in order."""
    args: tuple[str, ...] | None = None
    """Arguments of the script (``bash -c SCRIPT NAME ARG...``); ``None``: none."""
    name: str | None = None
    """The container, replicated job or task it is (for messages)."""
    job: str | None = None
    """The training object of the file it belongs to, as messages name it (``PyTorchJob a
    (line 1)``); None where a file defines one job only (a task)."""
    notes: list[str] = field(default_factory=list)
    """What the definition leaves open or the reading assumes (``read as on node 0``)."""
    differs: list[str] = field(default_factory=list)
    """Pods that run another command than the one read (a Worker's written otherwise than
    the Master's): a warning each."""
    run_dir: str | None = None
    """The local folder the command runs in (a SkyPilot ``workdir``), when the definition says."""
    copies: list[tuple[int, int, int | None]] = field(default_factory=list)
    """Spans of the definition that other pods repeat: ``(start, end, where the copy
    starts)``, ``None`` where the other pods' text is written otherwise (a PyTorchJob's
    Worker containers beside the Master's, which is the one read)."""
    files: dict[str, Held] = field(default_factory=dict)
    """The files the definition holds that the command finds: their path where it runs ->
    the file (a ConfigMap's key mounted in the container)."""


def shell_value(value: str, references: bool = False) -> str:
    """``value`` as one double-quoted shell word: ``${X}`` and ``$X`` placeholders stay
    expansions, everything else literal; with ``references``, a Kubernetes ``$(X)`` is one
    too."""
    if references:
        value = REFERENCE.sub(lambda m: "${" + m.group(1) + "}", value)
    out, at = [], 0
    for m in EXPANSION.finditer(value):
        out.append(_quoted(value[at : m.start()]) + m.group(0))
        at = m.end()
    out.append(_quoted(value[at:]))
    return '"' + "".join(out) + '"'


def _quoted(literal: str) -> str:
    return re.sub(r'(["\\`$])', r"\\\1", literal)


def count(
    value: str | None,
    line: int | None,
    what: str,
    env: dict[str, str],
    span: tuple[int, int] | None = None,
) -> Size:
    """A count written in the definition (at ``span``, when it is a literal there): a number,
    a placeholder the environment (``--env``) sets, or unknown with the reason."""
    if value is None:
        return Size(None, line, f"{what} is not set")
    m = PLACEHOLDER.fullmatch(value.strip())
    if m and m.group(1) in env:
        value, span = env[m.group(1)], None
    elif m:
        return Size(None, line, f"{what} is ${{{m.group(1)}}}, which is not set (give --env)")
    value = value.strip()
    digits = value.lstrip("0")
    if not (value.isascii() and value.isdigit()) or not digits:
        return Size(None, line, f"{what} is " + brief(value, quote="'"))
    if len(digits) > len(str(MAX_COUNT)) or int(digits) > MAX_COUNT:  # no int() of a long text
        raise TooLarge(
            line, f"{what} is {_shown(digits)}: no real cluster is that large (at most {MAX_COUNT})"
        )
    return Size(int(digits), line, span=span, key=what)


def _shown(digits: str) -> str:
    """A number for a message: as written, or how long it is when that is long."""
    return digits if len(digits) <= 24 else f"a number of {len(digits)} digits"
