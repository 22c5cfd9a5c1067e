"""The seam between a job definition and the job reader: what a system runs on each node,
written as the launch script the node runs, read by :func:`translator.job.read_job`.

A system starts the same command on every node, with variables it sets itself
(``SKYPILOT_NUM_NODES``, ``PET_NNODES``...) and those the definition sets (``env``, ``envs``).
The script composed here exports them, then runs the command, each line at the line of the
definition it comes from, so what the reader reports points into the definition. A value the
definition leaves to a placeholder (``${TP}``, ``{{ .Values.tp }}``) is a variable no one sets:
unknown unless ``--env`` gives it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from translator.errors import NotAJob
from translator.findings import counted, finding
from translator.job import RunAs, read_job
from translator.plugin.contract import Framework
from translator.reading import Definition, Reading, Value

#: ``$(NAME)``: a Kubernetes reference to a variable set before (in ``env``), or a shell's.
REFERENCE = re.compile(r"\$\(([A-Za-z_]\w*)\)")
#: What stays an expansion in a value written for the shell: ``${NAME...}`` and ``$NAME``.
EXPANSION = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_]\w*")
#: The variable that lists the GPUs a process sees.
VISIBLE = "CUDA_VISIBLE_DEVICES"
#: A whole value that is one placeholder: ``${NAME}``, ``$NAME``.
PLACEHOLDER = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")


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
    notes: list[str] = field(default_factory=list)
    """What the definition leaves open or the reading assumes (``read as on node 0``)."""
    run_dir: str | None = None
    """The local folder the command runs in (a SkyPilot ``workdir``), when the definition says."""


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
    if value.isascii() and value.isdigit() and int(value) >= 1:
        return Size(int(value), line, span=span, key=what)
    return Size(None, line, f"{what} is {value!r}")


#: The function the node's command is wrapped in when variables are set below it.
NODE = "batchspec_node"
#: A span of the composed script -> the span of the definition's literal it stands for.
Moved = dict[tuple[int, int], tuple[int, int]]


@dataclass(frozen=True)
class Composed:
    """The node's launch script, and where its literals stand in the definition."""

    text: str
    """The script."""
    moved: Moved
    """Each variable's value that is a literal of the definition (``num_nodes: 2``): its
    span in the script -> its span in the definition (the command's own words are found by
    their line, which the script keeps)."""


def compose(run: Run) -> Composed:
    """The node's launch script: the variables, then the command, each on the line it has in
    the definition where the lines allow it. Variables the definition sets below the command
    (a container's ``env`` after its ``args``) stand on their own lines there, and the command
    is wrapped in a function called after them; where no line is free, they are gathered just
    above the command."""
    pieces = sorted(run.body, key=lambda p: p[0])
    # in the order of their lines: a reference (``$(X)``) names a variable set above it
    exports = sorted(run.exports, key=lambda e: e.line or 0)
    start = pieces[0][0] if pieces else 1
    end = (pieces[-1][0] + pieces[-1][1].count("\n")) if pieces else 1
    below = [e for e in exports if e.line is not None and e.line > end + 1]
    wrapped = bool(below) and start > 2
    above = [e for e in exports if not wrapped or e not in below]
    lines: list[str] = []
    placed: list[tuple[int, int, Export]] = []  # (line index, column of the value, export)
    _place(above, lines, placed, start - 1 - wrapped)
    if wrapped:
        lines.extend([""] * (start - 2 - len(lines)))
        lines.append(f"{NODE}() {{")
    for at, text in pieces:
        lines.extend([""] * (at - 1 - len(lines)))
        lines.extend(text.split("\n"))
    if wrapped:
        lines.append("}")
        _place(below, lines, placed, None)
        lines.append(f'{NODE} "$@"')
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    moved = {
        (offsets[i] + col, offsets[i] + col + len(e.value)): e.span
        for i, col, e in placed
        if e.span is not None
    }
    return Composed("\n".join(lines) + "\n", moved)


def _place(
    exports: list[Export],
    lines: list[str],
    placed: list[tuple[int, int, Export]],
    last: int | None,
) -> None:
    """An ``export`` for each variable added to ``lines``, each on its line where it is free
    and no later than ``last`` (``None``: no end), the rest gathered on one line; where each
    value stands goes on ``placed``."""
    for i, export in enumerate(exports):
        statement = f"export {export.name}={export.value}"
        value_at = len(statement) - len(export.value)
        want = max(export.line or 0, len(lines) + 1)
        if last is not None:
            want = min(want, last - (len(exports) - i) + 1)  # a line left for each after it
        if want <= len(lines) and lines and lines[-1].startswith("export "):
            placed.append((len(lines) - 1, len(lines[-1]) + 2 + value_at, export))
            lines[-1] += f"; {statement}"
            continue
        lines.extend([""] * (want - 1 - len(lines)))
        placed.append((len(lines), value_at, export))
        lines.append(statement)


def in_definition(reading: Reading, composed: Composed | None, text: str) -> None:
    """The reading's literals moved from the composed script to the definition ``text``
    (which becomes the reading's text): a variable's value to the literal it stands for, a
    word of the command to the same word on the same line of the definition; a literal found
    in neither, or any when there is no ``composed`` script to go by, has no span there
    (``update`` does not edit it)."""

    def moved(span: tuple[int, int] | None) -> tuple[int, int] | None:
        if span is None or composed is None or span[1] > len(composed.text):
            return None
        if span in composed.moved:
            return composed.moved[span]
        return _same_word(composed.text, text, span)

    for key, value in list(reading.values.items()):
        if value.file is None and value.span is not None:
            reading.values[key] = dataclasses.replace(value, span=moved(value.span))
    reading.uses = {
        at: uses for span, uses in reading.uses.items() if (at := moved(span)) is not None
    }
    reading.arguments = [
        dataclasses.replace(
            word,
            span=moved(word.span),
            sources=frozenset(a for s in word.sources if (a := moved(s)) is not None),
        )
        for word in reading.arguments
    ]
    reading.text = text


#: What ends a word of a line (a shell word, a YAML list item or quoted scalar).
BOUNDS = " \t\"'[],"


def _same_word(script: str, text: str, span: tuple[int, int]) -> tuple[int, int] | None:
    """Where ``script``'s literal at ``span`` stands in ``text``: in the word around it, found
    once on the same line there."""
    start, end = span
    line = script.count("\n", 0, start)
    line_start = script.rfind("\n", 0, start) + 1
    line_end = script.find("\n", start)
    word_start, word_end = start, end
    while word_start > line_start and script[word_start - 1] not in BOUNDS:
        word_start -= 1
    while word_end < line_end and script[word_end] not in BOUNDS:
        word_end += 1
    word = script[word_start:word_end]
    lines = text.split("\n")
    if line >= len(lines) or not word or lines[line].count(word) != 1:
        return None
    at = sum(len(x) + 1 for x in lines[:line]) + lines[line].index(word) + start - word_start
    return (at, at + end - start) if text[at : at + end - start] == script[start:end] else None


def read_runs(
    path: str,
    text: str,
    runs: list[Run],
    run_as: RunAs | None,
    framework: str | None,
    editable: bool = True,
) -> tuple[Framework, Reading]:
    """The job a definition (``text``) runs: each of its runs read as a launch script, the
    last one that launches a training program a framework reads (a driver or a side container
    launches none); the definition's kind and layout go on the reading, its literals are
    those of ``text`` (none, unless ``editable``: the composed script was made from another
    text, a Helm template's rendering)."""
    run_as = run_as or RunAs()
    found: list[tuple[Run, Framework, Reading, Composed]] = []
    refused: NotAJob | None = None
    for run in runs:
        _visible(run)
        composed = compose(run)
        given = dataclasses.replace(
            run_as,
            args=run_as.args if run_as.args is not None else run.args,
            run_dir=run_as.run_dir or run.run_dir,
        )
        try:
            chosen, reading = read_job(composed.text, path, given, framework)
        except NotAJob as exc:
            refused = exc
            continue
        found.append((run, chosen, reading, composed))
    if not found:
        if refused is not None:
            raise refused
        raise NotAJob(f"{path}: no container or task with a command to read")
    setting = [f for f in found if f[2].values]
    run, chosen, reading, composed = (setting or found)[-1]
    in_definition(reading, composed if editable else None, text)
    _describe(reading, run, editable)
    return chosen, reading


def _visible(run: Run) -> None:
    """The GPUs each node sees are those the definition gives it (a launcher that takes every
    GPU it finds, the Trainer's DataParallel under plain python): ``CUDA_VISIBLE_DEVICES``
    lists them, unless the definition sets it itself."""
    count = run.gpus_per_node.value
    if count is None or any(e.name == VISIBLE for e in run.exports):
        return
    devices = ",".join(str(i) for i in range(count))
    run.exports.insert(0, Export(VISIBLE, devices, run.gpus_per_node.line))


def _describe(reading: Reading, run: Run, editable: bool) -> None:
    """The definition on the reading (with its literals when ``editable``), its notes as
    findings, and where the launcher's world disagrees with the nodes and GPUs it gives."""
    literals = {
        role: (size.key or role, Value(size.value, size.line, size.span))
        for role, size in (("nodes", run.nodes), ("gpus_per_node", run.gpus_per_node))
        if size.span is not None and editable
    }
    reading.definition = Definition(
        run.kind,
        run.name,
        run.nodes.value,
        run.gpus_per_node.value,
        run.nodes.why,
        run.gpus_per_node.why,
        literals,
    )
    for note in run.notes:
        reading.findings.append(
            finding("job-definition", note, where=reading.path),
        )
    counts = reading.launch_counts
    per_node, nodes = counts.get("per_node"), counts.get("nodes")
    gpus, machines = run.gpus_per_node.value, run.nodes.value
    if reading.launcher in (None, "python"):
        return
    if per_node is not None and gpus is not None and per_node != gpus:
        reading.findings.append(
            finding(
                "job-definition-mismatch",
                f"{reading.launcher} starts {counted(per_node, 'process', 'processes')} per "
                f"node, but the {run.kind} gives each node {counted(gpus, 'GPU')}",
                hint="make the launcher's processes per node the GPUs each node gets",
                where=_at(reading.path, run.gpus_per_node.line),
            )
        )
    if nodes is not None and machines is not None and nodes != machines:
        reading.findings.append(
            finding(
                "job-definition-mismatch",
                f"{reading.launcher} waits for {nodes} nodes, but the {run.kind} starts {machines}",
                hint="make the launcher's node count the nodes the definition starts",
                where=_at(reading.path, run.nodes.line),
            )
        )


def _at(path: str, line: int | None) -> str:
    return path if line is None else f"{path}:{line}"
