"""``update`` on a job definition: the nodes and GPUs it gives the job are edited with the
launch, so that the system starts the world the launcher asks for."""

from __future__ import annotations

from translator.plugin.findings import cannot_edit
from translator.reading import Reading, Value
from translator.spec import BatchSpec
from translator.words.errors import InputError
from translator.words.findings import counted

#: How each size of the layout is said.
NOUNS = {"nodes": ("node", "nodes"), "gpus_per_node": ("GPU per node", "GPUs per node")}


def layout(
    reading: Reading, world: int | None, nodes: int | None, gpus_per_node: int | None
) -> tuple[int | None, int | None]:
    """The nodes and GPUs per node a new world takes on a definition: as given, else the world
    spread over nodes of the GPUs it gives each (one node of the world's GPUs when it is
    smaller than one)."""
    definition = reading.definition
    if definition is None or nodes is not None or world is None:
        return nodes, gpus_per_node
    per_node = definition.gpus_per_node
    if per_node is None:
        return nodes, gpus_per_node
    if world <= per_node:
        return 1, world
    if world % per_node:
        raise InputError(
            f"{reading.path}: the {definition.kind} gives each node "
            f"{counted(per_node, 'GPU')}, which cannot make world {world}; give --nnodes and "
            "--nproc-per-node"
        )
    return world // per_node, per_node


def edits(reading: Reading, spec: BatchSpec) -> list[tuple[str, Value, int]]:
    """``(key, value, new)`` for each size of the definition the spec changes and that it
    writes as one literal (``num_nodes: 2``, ``nvidia.com/gpu: 8``, a PyTorchJob's Worker
    replicas: the nodes less its Master)."""
    definition = reading.definition
    if definition is None:
        return []
    wanted = {"nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node}
    return [
        (key, value, new - besides)
        for role, (key, value, besides) in definition.literals.items()
        if (new := wanted.get(role)) is not None and new > besides
    ]


def copied(reading: Reading, replacements: dict[tuple[int, int], str]) -> dict:
    """``replacements`` with each one inside a span other pods repeat made in the copy too
    (the Worker containers of a PyTorchJob); refused where the copy is written otherwise."""
    definition = reading.definition
    if definition is None:
        return replacements
    out = dict(replacements)
    for (start, end), new in replacements.items():
        for first, last, copy in definition.copies:
            if not first <= start <= end <= last:
                continue
            if copy is None:
                raise cannot_edit(
                    reading.path,
                    f"the other pods' containers are written otherwise than the ones read "
                    f"(line {reading.text.count(chr(10), 0, start) + 1}): edit them by hand",
                )
            out[(copy + start - first, copy + end - first)] = new
    return out


def check(reading: Reading, spec: BatchSpec) -> None:
    """After the edits: the definition gives the spec's nodes and GPUs per node, or the
    update is refused, naming what to set by hand."""
    definition = reading.definition
    if definition is None:
        return
    for role, want in (("nodes", spec.nodes), ("gpus_per_node", spec.gpus_per_node)):
        have = getattr(definition, role)
        if want is None or have == want:
            continue
        one, many = NOUNS[role]
        raise cannot_edit(
            reading.path,
            f"the {definition.kind} would still give "
            f"{'-' if have is None else counted(have, one, many)}, not {want}: it does not "
            "write that as one literal (replicas of several roles, replicas × parallelism, a "
            f"placeholder, GPUs in several pod templates); set it to {want} by hand",
        )
