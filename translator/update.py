"""Move an existing config to a new world size or batch, changing only its batch values.

Every other byte stays: values are replaced at the exact span they were read from, a missing
Axolotl key gets its own line, and the result must read back as the new spec or nothing is
written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from translator import solve
from translator.errors import ConfigError, InputError
from translator.findings import finding
from translator.frameworks import Framework
from translator.inspection import Inspection, inspect_reading
from translator.job import RunAs, is_job, read_job
from translator.reading import Launch, Reading
from translator.spec import BatchSpec

#: Errors of the old file that any update rewrites away (beside its framework's own
#: ``rewrites``); any other error is refused first.
REWRITES = {"global-not-divisible", "world-not-divisible", "virtual-pipeline-microbatches"}
#: Spec fields an update carries over from the old config unchanged.
CARRIED = (
    "sequence_length",
    "deepspeed_autotp",
    "zero_stage",
    "virtual_pipeline_stages",
    "microbatch_group_size_per_vp_stage",
    "expert_parallel_size",
    "num_experts",
)


@dataclass(frozen=True)
class Change:
    """One edit of the file."""

    key: str
    """The framework key or flag."""
    old: object
    """Its value before (``None`` when it was not in the file)."""
    new: object
    """Its value after (``None`` when the key was removed)."""
    line: int | None
    """Where it is (or was) in the file."""

    def as_dict(self) -> dict:
        return {"key": self.key, "old": self.old, "new": self.new, "line": self.line}


def target_spec(
    old: Inspection,
    *,
    global_batch: int | None,
    micro: int | None,
    world: int | None,
    nodes: int | None,
    gpus_per_node: int | None,
    tensor: int | None,
    pipeline: int | None,
    context: int | None,
) -> BatchSpec:
    """The new spec: the old global batch and micro-batch unless told otherwise, accumulation
    re-solved. Refuses (exit 1) with the options when that does not divide."""
    from translator.frameworks import get

    rewritten = REWRITES | get(old.reading.framework).rewrites
    kept = [f for f in old.findings if f.severity == "error" and f.code not in rewritten]
    if kept:
        raise ConfigError(kept)
    v = old.values
    g = global_batch or v.get("global_batch_size")
    if g is None:
        raise InputError(
            f"{old.reading.path}: the current global batch is not known (the file "
            "does not say its world size); give --global-batch or --from-world-size"
        )
    m = micro or v.get("micro_batch_size")
    if nodes is None and world is None:
        world = v.get("world_size")
    layout = {
        "tensor_parallel_size": tensor or v.get("tensor_parallel_size", 1),
        "pipeline_parallel_size": pipeline or v.get("pipeline_parallel_size", 1),
        "context_parallel_size": context or v.get("context_parallel_size", 1),
    }
    fields = (
        {k: v[k] for k in CARRIED if v.get(k) is not None}
        | layout
        | {
            "global_batch_size": g,
            "micro_batch_size": m,
            "world_size": world,
            "nodes": nodes,
            "gpus_per_node": gpus_per_node,
        }
    )
    try:
        return BatchSpec(**{k: x for k, x in fields.items() if x is not None})
    except ConfigError as exc:
        if exc.findings[0].code != "global-not-divisible":
            raise
        raise ConfigError(
            [_options(g, m, fields, exc.findings[0].message, old.reading.path)]
        ) from None


def _options(g: int, m: int | None, fields: dict, message: str, where: str):
    world = fields["world_size"] or fields["nodes"] * fields["gpus_per_node"]
    dp = solve.data_parallel_size(
        world,
        fields["tensor_parallel_size"],
        fields["pipeline_parallel_size"],
        fields["context_parallel_size"],
    )
    # As the solver split it: over micro × DP, or over DP alone when the micro-batch is unknown.
    unit, per_rank = (dp, "micro × accumulation") if m is None else (m * dp, "accumulation")
    lr = "; ".join(
        f"global {x} ({per_rank} {x // unit}) needs the learning rate × "
        f"{math.sqrt(x / g):.3g} for Adam (square root) or × {x / g:.3g} for SGD"
        for x in solve.nearest_multiples(g, unit)
    )
    micros = [str(mm) for mm, _ in solve.decompositions(g, dp)] if g % dp == 0 else []
    keep = (
        f"; or keep global {g} with micro-batch {', '.join(micros)}"
        if micros
        else f"; no micro-batch keeps global {g} on data-parallel {dp}"
    )
    return finding(
        "update-impossible", f"cannot keep the batch exact: {message}", hint=lr + keep, where=where
    )


def apply(framework: Framework, reading: Reading, spec: BatchSpec) -> tuple[str, list[Change]]:
    """The file's new text and the changes made; every other byte unchanged."""
    replacements: dict[tuple[int, int], str] = {}
    changes = []
    edits = framework.edits(reading, spec) | launcher_edits(reading, spec)
    for key, new in edits.items():
        old = reading.values.get(key)
        if old is not None and old.value == new:
            continue
        _refuse_shared(reading, key, old, edits)
        if old is None:
            if new is None:
                continue
            at = _insertion(reading, key)
            replacements[at] = f"{key}: {new}{_line_ending(reading.text, at[0])}"
        elif new is None:
            replacements[_line_span(reading.text, old.span, reading.path, key)] = ""
        elif old.file is not None:
            raise InputError(
                f"{reading.where(key)}: {key} is set in {old.file}, not in {reading.path}; "
                f"update that file (to {new})"
            )
        elif old.span is None:
            raise InputError(
                f"{reading.where(key)}: cannot change {key}: its value "
                f"{'is ' + old.why_unknown if old.why_unknown else 'is computed, not written'}"
                f"; set it to {new} by hand"
            )
        elif replacements.get(_without_line_end(reading.text, old.span), str(new)) != str(new):
            raise InputError(
                f"{reading.where(key)}: {key} shares its value with another key "
                "that needs a different one; edit it by hand"
            )
        else:
            replacements[_without_line_end(reading.text, old.span)] = str(new)
        changes.append(
            Change(key, None if old is None else old.value, new, None if old is None else old.line)
        )
    text = reading.text
    for (start, end), new_text in sorted(replacements.items(), reverse=True):
        text = text[:start] + new_text + text[end:]
    return text, changes


def launcher_edits(reading: Reading, spec: BatchSpec) -> dict[str, int]:
    """A job's launcher words for a new world: its total, or its processes per node and its
    nodes; refused when the launch line cannot make the world."""
    world = spec.world
    if reading.world_size is None or reading.world_size == world or not reading.launch_keys:
        return {}
    keys = reading.launch_keys
    if "total" in keys:
        return {keys["total"]: world}
    if "nodes" not in keys and "per_node" in keys and spec.gpus_per_node is None:
        return {keys["per_node"]: world}  # one node: all of them there
    per_node = spec.gpus_per_node or reading.launch_counts["per_node"]
    if world % per_node or "nodes" not in keys and world != per_node:
        raise InputError(
            f"{reading.path}: the {reading.launcher} line starts {per_node} "
            f"processes per node{'' if 'nodes' in keys else ' on one node'}, which "
            f"cannot make world {world}; give --nnodes and "
            "--nproc-per-node, or edit the launch line by hand"
        )
    out = {}
    if "per_node" in keys:
        out[keys["per_node"]] = per_node
    if "nodes" in keys:
        out[keys["nodes"]] = world // per_node
    return out


def _insertion(reading: Reading, key: str) -> tuple[int, int]:
    """Where a key the file lacks goes: where its framework says (``insertion``), if it can."""
    from translator.frameworks import get

    framework = get(reading.framework)
    if framework.insertion is None:
        raise InputError(f"{reading.path}: {key} is not in the file; add it by hand")
    return framework.insertion(reading, key)


def _line_ending(text: str, pos: int) -> str:
    """The line ending of the line before ``pos`` (so an inserted line matches its neighbour)."""
    return "\r\n" if text[max(pos - 2, 0) : pos] == "\r\n" else "\n"


def _refuse_shared(reading: Reading, key: str, old, edits: dict) -> None:
    """Refuse to edit a literal that also feeds words other than ``key`` (one variable behind
    ``--micro-batch-size $N --seq-length $N``): the edit would change them silently."""
    if old is None or old.span is None:
        return
    mine = {_flag_name(k) for k in edits}
    others = {
        str(u)
        for u in reading.uses.get(old.span, [])
        if _flag_name(u.word) != _flag_name(key) and _flag_name(u.word) not in mine
    }
    if others:
        raise InputError(
            f"{reading.where(key)}: the value of {key} ({old.value}) is written "
            f"once and also used by {', '.join(sorted(others))}; changing it "
            f"would change those too. Give {key} a value of its own, then update"
        )


def _flag_name(word: str) -> str:
    """A key or the flag that sets it, one way (``--per-device-x`` is ``per_device_x``)."""
    return word.lstrip("-").replace("-", "_")


def _without_line_end(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """``span`` short of a carriage return a reader took into the value (a CRLF file)."""
    start, end = span
    while end > start and text[end - 1] == "\r":
        end -= 1
    return start, end


def _line_span(text: str, span, path: str, key: str) -> tuple[int, int]:
    """The whole line(s) of a top-level ``key: scalar`` entry."""
    if span is None:
        raise InputError(f"{path}: cannot remove {key}: its value is not a plain scalar")
    start = text.rfind("\n", 0, span[0]) + 1
    end = text.find("\n", span[1])
    return start, len(text) if end < 0 else end + 1


def update(framework: Framework, old: Inspection, spec: BatchSpec, run_as: RunAs | None = None):
    """New text, changes and the re-read inspection; refuses when the result is not exact."""
    text, changes = apply(framework, old.reading, spec)
    path = old.reading.path
    if is_job(path, text):
        _, reading = read_job(text, path, run_as, framework.name)
    else:
        reading = framework.read(text, path)
    again = inspect_reading(framework, reading, Launch.of(spec))
    errors = [f for f in again.findings if f.severity == "error"]
    if errors:
        raise ConfigError(errors)
    got = again.spec
    if again.reading.world_size not in (None, spec.world_size):
        raise InputError(
            f"{old.reading.path}: the launch line would still start "
            f"{again.reading.world_size} processes, not {spec.world_size}; "
            "give --nnodes and --nproc-per-node"
        )
    for key in (
        "global_batch_size",
        "micro_batch_size",
        "gradient_accumulation_steps",
        "world_size",
    ):
        if got is None or getattr(got, key) != getattr(spec, key):
            raise InputError(
                f"{old.reading.path}: after the update the file would give {key} "
                f"{None if got is None else getattr(got, key)}, not "
                f"{getattr(spec, key)}; edit it by hand"
            )
    return text, changes, again


def update_file(
    path: str,
    framework: str | None,
    from_world_size: int | None,
    run_as: RunAs | None = None,
    **target,
):
    """``update``'s use case: ``path`` read (as ``framework``, or detected; a job as run by
    ``run_as``) on ``from_world_size``, re-solved for ``target`` (:func:`target_spec`'s
    keywords), edited; the new text, the changes and the re-read inspection (nothing is
    written here)."""
    from translator.inspection import read_file

    chosen, reading = read_file(path, framework, run_as)
    old = inspect_reading(chosen, reading, Launch(from_world_size))
    return update(chosen, old, target_spec(old, **target), run_as)
