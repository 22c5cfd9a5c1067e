"""The seam between a job definition and the job reader: each run of the definition (a
container, a task) is read by :func:`translator.job.script.read_job` as the launch script its node
runs, in the environment the system gives it, and the reading names the definition.
"""

from __future__ import annotations

import dataclasses

from translator.job.definitions.runs import Export, Run
from translator.job.definitions.script import Composed, compose, in_definition
from translator.job.script import RunAs, read_job
from translator.plugin.contract import Framework
from translator.reading import Definition, Reading, Value
from translator.words.errors import NotAJob
from translator.words.findings import counted, finding

#: The variable that lists the GPUs a process sees.
VISIBLE = "CUDA_VISIBLE_DEVICES"


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
    others = tuple(dict.fromkeys(f[0].job for f in found if f[0].job not in (None, run.job)))
    if others:
        _several(reading, run, others)
    return chosen, reading


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
