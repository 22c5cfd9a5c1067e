"""The seam between a job definition and the job reader: each run of the definition (a
container, a task) is read by :func:`translator.job.script.read_job` as the launch script its node
runs, in the environment the system gives it, and the reading names the definition.
"""

from __future__ import annotations

import dataclasses

from translator.job.definitions.runs import Run
from translator.job.definitions.script import Composed, compose, in_definition
from translator.job.script import RunAs, read_job
from translator.plugin.contract import Framework
from translator.reading import Definition, Reading, Value
from translator.shell.values import Word
from translator.words.errors import InputError, NotAJob
from translator.words.files import reading_as
from translator.words.findings import counted, finding


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
    text, a Helm template's rendering).

    Each run is read from a script of its own lines, moved up to the top (:func:`_lifted`): the
    400th job of a file costs what its own lines cost, not the 399 above it. The run chosen is
    read again where its lines stand in the definition, for the reading's lines and literals."""
    run_as = run_as or RunAs()
    found: list[tuple[Run, RunAs, Framework, Reading, Composed | None]] = []
    refused: NotAJob | None = None
    with reading_as({h.path: h.text for run in runs for h in run.files.values()}):
        for run in runs:
            given = _given(run_as, run)
            try:
                found.append((run, given, *_read_alone(run, path, given, framework)))
            except NotAJob as exc:
                refused = exc
        if not found:
            if refused is not None:
                raise refused
            raise NotAJob(f"{path}: no container or task with a command to read")
        setting = [f for f in found if f[3].values]
        run, given, chosen, reading, composed = (setting or found)[-1]
        if composed is None:  # read from its own lines: again, from the definition's
            composed = compose(run)
            chosen, reading = read_job(composed.text, path, given, framework)
    in_definition(reading, composed if editable else None, text)
    _describe(reading, run, editable)
    others = tuple(dict.fromkeys(f[0].job for f in found if f[0].job not in (None, run.job)))
    if others:
        _several(reading, run, others)
    return chosen, reading


def _given(run_as: RunAs, run: Run) -> RunAs:
    """How the run's command runs: with the user's arguments and folder, else the
    definition's, on the GPUs the system gives its node (which a launcher that takes every
    GPU it finds, the Trainer's DataParallel under plain python, count), with the files the
    definition holds at their paths there."""
    gpus = run.gpus_per_node
    return dataclasses.replace(
        run_as,
        args=run_as.args if run_as.args is not None else run.args,
        run_dir=run_as.run_dir or run.run_dir,
        gpus=None if gpus.value is None else Word(str(gpus.value), gpus.line or 1),
        gpus_key=gpus.key or run_as.gpus_key,
        mounts={**{at: held.path for at, held in run.files.items()}, **run_as.mounts},
    )


def _read_alone(
    run: Run, path: str, given: RunAs, framework: str | None
) -> tuple[Framework, Reading, Composed | None]:
    """The run read from a script of its own lines (:func:`_lifted`), and that script when it
    is the one of the definition's lines. An error is given at the definition's lines: the
    run is read from them again."""
    lifted = _lifted(run)
    if lifted is not run:
        try:
            return (*read_job(compose(lifted).text, path, given, framework), None)
        except NotAJob:
            raise
        except InputError:
            pass
    composed = compose(run)
    return (*read_job(composed.text, path, given, framework), composed)


def _lifted(run: Run) -> Run:
    """``run`` with its lines moved up, so that its script starts at the top with room for
    its variables rather than below empty lines for the definition's lines before it: the
    same commands and variables in the same order, the lines not the definition's."""
    lines = [at for at, _ in run.body] + [e.line for e in run.exports if e.line is not None]
    up = min(lines, default=1) - 1 - len(run.exports)
    if up <= 0:
        return run
    return dataclasses.replace(
        run,
        body=[(at - up, piece) for at, piece in run.body],
        exports=[
            e if e.line is None else dataclasses.replace(e, line=e.line - up) for e in run.exports
        ],
    )


def _several(reading: Reading, run: Run, others: tuple) -> None:
    """A file of several training jobs: the one read is said, and the others are named."""
    assert reading.definition is not None
    reading.definition = dataclasses.replace(reading.definition, others=others)
    reading.findings.append(
        finding(
            "job-definition-several",
            f"the file defines {len(others) + 1} training jobs; read: {run.job}; not read: "
            f"{'; '.join(others)}",
            hint="give each job a file of its own (each is then read, checked and updated)",
            where=reading.path,
        )
    )


def _describe(reading: Reading, run: Run, editable: bool) -> None:
    """The definition on the reading (with its literals when ``editable``), its notes as
    findings, and where the launcher's world disagrees with the nodes and GPUs it gives."""
    literals = {
        role: (size.key or role, Value(size.value, size.line, size.span), size.besides)
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
        tuple(run.copies),
        held=tuple(dict.fromkeys(run.files.values())),
    )
    for note in run.notes:
        reading.findings.append(
            finding("job-definition", note, where=reading.path),
        )
    for why in run.differs:
        reading.findings.append(
            finding(
                "job-definition-pods-differ",
                why,
                hint="give every role the same command, or check each one's batch by hand",
                where=reading.path,
            )
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
