"""Move an existing config to a new world size or batch, changing only its batch values.

Every other byte stays: values are replaced at the exact span they were read from, a missing
Axolotl key gets its own line, and the result must read back as the new spec or nothing is
written.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from translator import solve
from translator.errors import ConfigError, InputError
from translator.findings import counted, finding
from translator.inspection import Inspection, inspect_reading
from translator.job import RunAs, is_job, read_job
from translator.jobdefs import read_definition
from translator.jobdefs.edits import check as definition_check
from translator.jobdefs.edits import copied, layout
from translator.jobdefs.edits import edits as definition_edits
from translator.plugin.contract import Framework
from translator.plugin.findings import cannot_edit
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
class Edit:
    """The text an update changed for one key: where, and the word before and after."""

    line: int
    """1-based line of the edit (in the file as it was; an added line: where it goes)."""
    old: str | None
    """The word as it was written (``NUM_NODES=1``); ``None`` for an added line."""
    new: str | None
    """The word as it is now (``NUM_NODES=2``); ``None`` for a removed line."""

    def as_dict(self) -> dict:
        return {"line": self.line, "old": self.old, "new": self.new}


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
    """Where the key is (or was) in the file: for a flag, the line of the flag."""
    read_by: str | None = None
    """The launcher whose sizing flag this is (``torchrun``), else ``None``."""
    edit: Edit | None = None
    """The text changed for it, which may stand elsewhere than the key (the variable behind a
    flag); ``None`` when the file computes the value from one that was edited."""

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "old": self.old,
            "new": self.new,
            "line": self.line,
            "read_by": self.read_by,
            "edit": None if self.edit is None else self.edit.as_dict(),
        }

    def describe(self, path: object) -> str:
        """One line of the change report: the key and its line, and where it was edited when
        that is another line (``--nnodes (torchrun, line 40) ← NUM_NODES=1 → 2 (line 12)``)."""
        if self.edit is None:
            return f"{path}:{self.line}: {self.key} {self.old} → {self.new} (computed by the file)"
        if self.old is None and self.read_by and self.edit.old is None:
            return f"{path}:{self.edit.line}: {self.edit.new} (added to the {self.read_by} line)"
        if self.line is None or self.edit.line == self.line or self.edit.old is None:
            return f"{path}:{self.line or '+'}: {self.key} {self.old} → {self.new}"
        by = f"{self.read_by}, " if self.read_by else ""
        return (
            f"{path}: {self.key} ({by}line {self.line}) ← {self.edit.old} → {self.new} "
            f"(line {self.edit.line})"
        )


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
    from translator.plugin.registry import get

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
        world, nodes, gpus_per_node = (v.get(k) for k in ("world_size", "nodes", "gpus_per_node"))
    elif nodes is None and world is not None:
        nodes, gpus_per_node = kept_layout(old, world)
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


def kept_layout(old: Inspection, world: int) -> tuple[int | None, int | None]:
    """``(nodes, processes per node)`` for ``world`` keeping the processes per node the old
    file launches (``deepspeed --num_gpus 8`` to world 16 is 2 nodes × 8, not one node of
    16); one node below that; ``(None, None)`` when the file says no layout. A world that
    is not whole nodes is refused (exit 2), naming the flags that choose another layout."""
    per_node = old.values.get("gpus_per_node")
    if per_node is None or old.values.get("nodes") is None:
        return None, None
    if world <= per_node:
        return 1, world
    if world % per_node == 0:
        return world // per_node, per_node
    shapes = [(world // p, p) for p in range(per_node - 1, 0, -1) if world % p == 0][:2]
    raise InputError(
        f"{old.reading.path}: it runs {counted(per_node, 'process', 'processes')} per node, "
        f"which cannot make world {world} in whole nodes; give --nnodes and --nproc-per-node "
        "(such as " + " or ".join(f"{n} × {p}" for n, p in shapes) + ")"
    )


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
    model = world // dp
    worlds = _nearest_worlds(g if m is None else g // m if g % m == 0 else 0, model, world)
    if worlds:
        kept = f"global {g}" + ("" if m is None else f" and micro-batch {m}")
        keep += f"; or keep {kept} on world {' or '.join(map(str, worlds))}"
    keep += f" (`{_elastic_command(g, m, fields, world)}` lists every world that keeps it)"
    return finding(
        "update-impossible", f"cannot keep the batch exact: {message}", hint=lr + keep, where=where
    )


def _elastic_command(g: int, m: int | None, fields: dict, world: int) -> str:
    """The ``plan --world-sizes`` command that lists the worlds keeping this batch."""
    words = [f"batchspec plan --global-batch {g}"] + ([f"--micro-batch {m}"] if m else [])
    for flag, key in (
        ("--tp", "tensor_parallel_size"),
        ("--pp", "pipeline_parallel_size"),
        ("--cp", "context_parallel_size"),
    ):
        if (fields.get(key) or 1) > 1:
            words.append(f"{flag} {fields[key]}")
    return " ".join([*words, f"--world-sizes 1-{2 * world}"])


def _nearest_worlds(per_replicas: int, model: int, world: int) -> list[int]:
    """The worlds nearest ``world`` below and above it whose data-parallel size (world /
    ``model``) divides ``per_replicas`` (the global batch over the micro-batch), so that the
    batch stays exact there; none when ``per_replicas`` is 0."""
    if not per_replicas:
        return []
    return [dp * model for dp in solve.nearest_divisors(per_replicas, world / model)]


def apply(framework: Framework, reading: Reading, spec: BatchSpec) -> tuple[str, list[Change]]:
    """The file's new text and the changes made; every other byte unchanged. A value the file
    computes (``$((TOTAL / NUM_GPUS))``) is not edited: its change has no :class:`Edit`, and
    :func:`update` checks that the re-read file computes the new value."""
    replacements: dict[tuple[int, int], str] = {}
    changes = []
    launch = launcher_edits(reading, spec)
    edits = framework.edits(reading, spec) | launch
    text = reading.text
    planned = [(key, reading.values.get(key), new) for key, new in edits.items()]
    for key, old, new in planned + definition_edits(reading, spec):
        if old is not None and old.value == new:
            continue
        if key not in edits and old is not None and old.span is not None:
            if replacements.get(_without_line_end(text, old.span)) == str(new):
                continue  # a launch word that reads the definition's literal edits it already
        _refuse_shared(reading, key, old, edits)
        edit: Edit | None
        if old is None and key in launch and reading.launch_at is not None:
            at = (reading.launch_at, reading.launch_at)
            replacements[at] = f" {key} {new}"
            edit = Edit(_line_of(text, at[0]), None, f"{key} {new}")
        elif old is None:
            if new is None:
                continue
            at = _insertion(reading, key)
            written = (
                f"{key}: {new}"
                if framework.inserted is None
                else framework.inserted(reading, key, new)
            )
            ending = _line_ending(text, at[0])
            lead = ""
            if at[0] == len(text) and text and not text.endswith("\n"):
                # After a last line without its newline: end that line first, as the file does.
                ending = lead = "\r\n" if "\r\n" in text else "\n"
            replacements[at] = lead + ending.join(written.split("\n")) + ending
            edit = Edit(_line_of(text, at[0]), None, written)
        elif old.file is not None:
            change = f"delete {key}" if new is None else f"to {new}"
            raise cannot_edit(
                reading.where(key),
                f"{key} is set in {old.file}, not in {reading.path}; update that file ({change})",
            )
        elif new is None:
            at = _line_span(text, old.span, reading.path, key)
            replacements[at] = ""
            edit = Edit(_line_of(text, at[0]), text[at[0] : at[1]].strip(), None)
        elif old.span is None and old.why_unknown:
            raise cannot_edit(
                reading.where(key),
                f"cannot change {key}: its value is {old.why_unknown}; set it to {new} by hand",
            )
        elif old.span is None:
            edit = None
        elif replacements.get(_without_line_end(text, old.span), str(new)) != str(new):
            raise cannot_edit(
                reading.where(key),
                f"{key} shares its value with another key that needs a different one; "
                "edit it by hand",
            )
        else:
            at = _without_line_end(text, old.span)
            replacements[at] = str(new)
            edit = Edit(_line_of(text, at[0]), *_written_as(text, at, str(new)))
        changes.append(
            Change(
                key,
                None if old is None else old.value,
                new,
                None if old is None else old.line,
                reading.launcher if key in reading.launch_keys.values() or key in launch else None,
                edit,
            )
        )
    for (start, end), new_text in sorted(copied(reading, replacements).items(), reverse=True):
        text = text[:start] + new_text + text[end:]
    return text, changes


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


#: What stands before a literal that is a named value: a variable's (``NUM_NODES=``,
#: ``N=${N:-``, ``N="``) or an option's written with ``=`` (``#SBATCH --nodes=``).
ASSIGNMENT = re.compile(
    r"(?:--?[A-Za-z][A-Za-z0-9_-]*|[A-Za-z_][A-Za-z0-9_]*)="
    r"[\"']?(?:\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=][\"']?)?"
)


def _written_as(text: str, span: tuple[int, int], new: str) -> tuple[str, str]:
    """The word that holds the literal at ``span``, before and after it becomes ``new``: a
    whole assignment (``NUM_NODES=1``, ``N=${N:-8}``, ``--nodes=2``), else the literal alone."""
    start, end = span
    line_start = text.rfind("\n", 0, start) + 1
    word_start = max(text.rfind(c, line_start, start) for c in " \t;") + 1
    word_start = max(word_start, line_start)
    if not ASSIGNMENT.fullmatch(text, word_start, start):
        return text[start:end], new
    word_end = end
    while word_end < len(text) and text[word_end] not in " \t;\r\n":
        word_end += 1
    before, after = text[word_start:start], text[end:word_end]
    return before + text[start:end] + after, before + new + after


def launcher_edits(reading: Reading, spec: BatchSpec) -> dict[str, int]:
    """A job's launcher words for a new world: those of its sizes (processes per node, nodes,
    or all processes) that differ from what the launch line gives now. Refused when a size
    that must change has no word on the line (exit 1), and when a world alone does not say
    how to spread over nodes (exit 2)."""
    if reading.world_size is None:  # a config, or a job refused before (its world unknown)
        return {}
    keys, counts = reading.launch_keys, reading.launch_counts
    if not keys and not counts:  # the world is not the launch line's (an accelerate config)
        if spec.world == reading.world_size:
            return {}
        raise _no_word(reading, "total", spec.world, spec)
    out = {}
    for role, count in _wanted(reading, spec).items():
        if counts.get(role) == count or (role not in keys and role not in counts and count == 1):
            continue  # as now (a launcher that names no node count runs on one node)
        if role in keys:
            out[keys[role]] = count
        elif (flag := added_flag(reading, role)) is not None:
            out[flag] = count
        else:
            raise _no_word(reading, role, count, spec)
    return out


def added_flag(reading: Reading, role: str) -> str | None:
    """The flag ``update`` writes after the launcher's name for a size the line does not give
    (``--nnodes`` for torchrun's nodes); ``None`` when it cannot add one there."""
    from translator.shell.launchers import LAUNCHERS

    launcher = LAUNCHERS.get(reading.launcher or "")
    if launcher is None or reading.launch_at is None:
        return None
    spellings = {"per_node": launcher.per_node, "nodes": launcher.nodes, "total": launcher.total}
    return next(iter(spellings[role]), None)


#: A launcher's sizes (roles), as a message names them.
ROLE_WORDS = {"per_node": "processes per node", "nodes": "nodes", "total": "processes"}


def _wanted(reading: Reading, spec: BatchSpec) -> dict[str, int]:
    """The sizes the launch line must give for ``spec``'s world: all processes for a launcher
    that counts them at once (and its nodes); else processes per node and nodes, as the spec
    lays them out (:func:`kept_layout`), or, when it says no layout, all of them on one node."""
    keys, counts, world = reading.launch_keys, reading.launch_counts, spec.world
    if "total" in keys or "total" in counts:
        return {"total": world} | ({} if spec.nodes is None else {"nodes": spec.nodes})
    if spec.gpus_per_node is not None and spec.nodes is not None:
        return {"per_node": spec.gpus_per_node, "nodes": spec.nodes}
    per_node = counts.get("per_node")
    if per_node is None or world <= per_node:
        return {"per_node": world, "nodes": 1}
    if world % per_node == 0:
        return {"per_node": per_node, "nodes": world // per_node}
    raise InputError(
        f"{reading.path}: the {reading.launcher} line starts "
        f"{counted(per_node, 'process', 'processes')} per node, which cannot make world "
        f"{world} in whole nodes; give --nnodes and --nproc-per-node"
    )


def _no_word(reading: Reading, role: str, count: int, spec: BatchSpec) -> ConfigError:
    """Why the launch cannot be edited to give ``count`` for ``role``: the world is set in
    another file, or the line has no word for that size."""
    world = next((s for s in reading.sources if s.name == "world_size" and s.won), None)
    if world is not None and not world.where.startswith(f"{reading.path}:"):
        return cannot_edit(
            reading.path,
            f"cannot launch world {spec.world}: its world {reading.world_size} is set at "
            f"{world.where}, which update does not edit; set it there",
        )
    now = reading.launch_counts.get(role)
    return cannot_edit(
        reading.path,
        f"cannot launch world {spec.world}: the {reading.launcher} line gives no word for its "
        f"{ROLE_WORDS[role]}"
        + ("" if now is None else f" (it takes {now})")
        + f", and update does not add one; write it on the line (for {count}), then update",
    )


def _insertion(reading: Reading, key: str) -> tuple[int, int]:
    """Where a key the file lacks goes: where its framework says (``insertion``), if it can."""
    from translator.plugin.registry import get

    framework = get(reading.framework)
    if framework.insertion is None:
        raise cannot_edit(reading.path, f"{key} is not in the file; add it by hand")
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
        raise cannot_edit(
            reading.where(key),
            f"the value of {key} ({old.value}) is written once and also used by "
            f"{', '.join(sorted(others))}; changing it would change those too. Give {key} a "
            "value of its own, then update",
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
        raise cannot_edit(path, f"cannot remove {key}: its value is not a plain scalar")
    start = text.rfind("\n", 0, span[0]) + 1
    end = text.find("\n", span[1])
    return start, len(text) if end < 0 else end + 1


@dataclass(frozen=True)
class Updated:
    """What an update makes of a file (nothing is written here)."""

    text: str
    """The file's new text (its old text when nothing changes)."""
    changes: list[Change]
    """Each key changed, in the order the framework names them; empty when nothing changes."""
    inspection: Inspection
    """The new text read back."""
    notes: list[str] = field(default_factory=list)
    """What the new launch needs beyond the file (deepspeed's host file for several nodes)."""

    def already(self) -> str:
        """What was already so when nothing changes (``nothing to change: it already launches
        8 processes (1 node × 8) and gives global batch 128 (...)``)."""
        spec, reading = self.inspection.spec, self.inspection.reading
        assert spec is not None  # update() re-read the file as a whole spec
        batch = (
            f"global batch {spec.global_batch_size} (micro-batch {spec.micro_batch_size} × "
            f"accumulation {spec.gradient_accumulation_steps} × data-parallel "
            f"{spec.data_parallel_size})"
        )
        if reading.world_size is None:
            return f"nothing to change: at world {spec.world} it already gives {batch}"
        counts = reading.launch_counts
        shape = ""
        if "per_node" in counts and "nodes" in counts:
            shape = f" ({counted(counts['nodes'], 'node')} × {counts['per_node']})"
        launches = counted(spec.world, "process", "processes")
        return f"nothing to change: it already launches {launches}{shape} and gives {batch}"


def update(
    framework: Framework, old: Inspection, spec: BatchSpec, run_as: RunAs | None = None
) -> Updated:
    """The new text, its changes and its re-read inspection; refused when the file cannot be
    made to launch ``spec``'s world or give its batch exactly."""
    _refuse_an_unwritten_world(old, spec)
    text, changes = apply(framework, old.reading, spec)
    path = old.reading.path
    if is_job(path, text):
        _, reading = read_job(text, path, run_as, framework.name)
    elif old.reading.definition is not None:
        _, reading = read_definition(path, text, run_as, framework.name)
    else:
        reading = framework.read(text, path)
    for change in changes:
        now = reading.values.get(change.key)
        if change.edit is None and (now is None or now.value != change.new):
            raise cannot_edit(
                old.reading.where(change.key),
                f"cannot change {change.key}: its value is computed, not written; "
                f"set it to {change.new} by hand",
            )
    again = inspect_reading(framework, reading, Launch.of(spec))
    definition_check(again.reading, spec)
    errors = [f for f in again.findings if f.severity == "error"]
    if errors:
        raise ConfigError(errors)
    got = again.spec
    if again.reading.world_size not in (None, spec.world_size):
        raise cannot_edit(
            path,
            f"the launch line would still start "
            f"{counted(again.reading.world_size, 'process', 'processes')}, not "
            f"{spec.world_size}; edit it by hand",
        )
    for key in (
        "global_batch_size",
        "micro_batch_size",
        "gradient_accumulation_steps",
        "world_size",
    ):
        if got is None or getattr(got, key) != getattr(spec, key):
            raise cannot_edit(
                path,
                f"after the update the file would give {key} "
                f"{None if got is None else getattr(got, key)}, not "
                f"{getattr(spec, key)}; edit it by hand",
            )
    return Updated(text, changes, again, _launch_notes(old.reading, spec))


def _launch_notes(reading: Reading, spec: BatchSpec) -> list[str]:
    """What the launch needs outside the file once it runs on more of ``spec``'s nodes than
    now, as its launcher says (a host file)."""
    from translator.shell.launchers import LAUNCHERS

    launcher = LAUNCHERS.get(reading.launcher or "")
    nodes, per_node = spec.nodes, spec.gpus_per_node
    if launcher is None or launcher.several_nodes is None or not nodes or per_node is None:
        return []
    if nodes == 1 or nodes == reading.launch_counts.get("nodes"):
        return []
    need = launcher.several_nodes.format(nodes=nodes, per_node=per_node)
    return [f"{reading.path}: {need}"]


def _refuse_an_unwritten_world(old: Inspection, spec: BatchSpec) -> None:
    """A job whose launcher starts a number of processes the file does not write (``--nnodes
    $SLURM_NNODES``, every GPU deepspeed finds) cannot be moved to another world by an edit."""
    reading = old.reading
    if reading.world_size is not None or reading.world_unknown is None or not reading.launcher:
        return  # it launches a world written in it, or no launcher runs it (a config)
    if spec.world == old.values.get("world_size"):
        return  # the batch alone changes, on the world it is said to run on (--from-world-size)
    raise cannot_edit(
        reading.path,
        f"cannot launch world {spec.world}: {reading.world_unknown}, a number the file does "
        "not write; write it on the launch line, or give the world it will run on as "
        "--from-world-size too to re-solve the batch alone",
    )


def update_file(
    path: str,
    framework: str | None,
    from_world_size: int | None,
    run_as: RunAs | None = None,
    **target,
) -> Updated:
    """``update``'s use case: ``path`` read (as ``framework``, or detected; a job as run by
    ``run_as``) on ``from_world_size``, re-solved for ``target`` (:func:`target_spec`'s
    keywords), edited (nothing is written here)."""
    from translator.inspection import read_file

    chosen, reading = read_file(path, framework, run_as)
    old = inspect_reading(chosen, reading, Launch(from_world_size))
    if reading.definition is not None:  # its nodes and GPUs move with the world
        target["nodes"], target["gpus_per_node"] = layout(
            reading, target.get("world"), target.get("nodes"), target.get("gpus_per_node")
        )
    return update(chosen, old, target_spec(old, **target), run_as)
