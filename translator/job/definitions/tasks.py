"""What SkyPilot and dstack tasks share: GPU specs written ``NAME:COUNT`` and environment
variables a task sets or leaves to the one who launches it."""

from __future__ import annotations

import re

import yaml

from translator.job.definitions import nodes as n
from translator.job.definitions.runs import Export, Size, count, shell_value

#: A GPU count in a spec: ``8``, or a range ``2..8`` (dstack).
COUNT = re.compile(r"(\d+)(?:\.\.(\d*))?")
#: A Cloud TPU slice (``tpu-v2-8``, ``v5litepod-8``, ``v6e-16``): its chips are no GPUs, and
#: what runs on them is not a process per GPU.
TPU = re.compile(r"(?:tpu-)?v\d+[a-z]*(?:pod)?-\d+", re.I)


def gpu_count(
    spec: str, line: int, what: str, env: dict[str, str], node: yaml.Node | None = None
) -> Size:
    """GPUs per node in ``A100:8``, ``H100``, ``80GB:8``, ``24GB..:2``, ``A100:0.5``: the
    part that is a count (one GPU when the spec names one with no count); a range with two
    ends apart, or a fraction, is unknown."""
    parts = [p.strip() for p in spec.split(":") if p.strip()]
    if any(TPU.fullmatch(p) for p in parts):
        return Size(None, line, f"{what} is {spec!r}, a TPU slice: batchspec counts GPU ranks")
    placeholder = next((p for p in parts if p.startswith("$")), None)
    if placeholder is not None:
        return count(placeholder, line, what, env)
    counts = [p for p in parts if COUNT.fullmatch(p) or re.fullmatch(r"\d*\.\d+", p)]
    if not counts:
        return count("1", line, what, env) if parts else Size(None, line, f"{what} is empty")
    m = COUNT.fullmatch(counts[-1])
    if m is None:
        return Size(None, line, f"{what} is {spec!r}, a fraction of a GPU")
    low, high = m.group(1), m.group(2)
    if ".." in m.group(0) and high != low:
        return Size(None, line, f"{what} is {spec!r}: from {low} to {high or 'any number of'} GPUs")
    return count(low, line, what, env, n.tail_span(node, m.group(0)))


def same_count(sizes: list[Size], line: int, what: str) -> Size:
    """One count for several accepted GPU types: the count when all give the same, else
    unknown (the system picks one)."""
    values = {s.value for s in sizes}
    if len(values) == 1 and None not in values:
        return sizes[0] if len(sizes) == 1 else Size(sizes[0].value, line)
    return Size(None, line, f"{what}: one of several GPU choices with different counts")


def task_env(node: yaml.Node | None, env: dict[str, str]) -> tuple[list[Export], list[str]]:
    """A task's variables (a mapping, or a list of ``NAME=value``): exports, and the names it
    leaves to the launch (no value) that ``--env`` does not give."""
    out: list[Export] = []
    left: list[str] = []
    entries: list[tuple[str, str | None, int]] = [
        (key, n.text(value), n.line(value)) for key, value in n.pairs(node)
    ]
    for item in n.items(node):
        name, eq, given = (n.text(item) or "").partition("=")
        entries.append((name.strip(), given if eq else None, n.line(item)))
    for name, value, line in entries:
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            continue
        if value is None:
            if name not in env:
                left.append(name)
            continue  # set when the task is launched (``--env``): unknown here
        out.append(Export(name, shell_value(value), line))
    return out, left
