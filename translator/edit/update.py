"""Move an existing config or job to a new world size or batch, changing only its batch values.

Every other byte stays: values are replaced at the exact span they were read from, a missing
Axolotl key gets its own line (:mod:`translator.edit.text_edits`). A job moves whole: the files it
uses whose values change are edited with it (:mod:`translator.edit.update_files`), and the result,
every file together, must read back as the new spec or nothing is written.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from translator.batch import solve
from translator.checks.advice import factor
from translator.edit.text_edits import Change, edit_text
from translator.edit.update_files import Other, other_files
from translator.inspection import Inspection, inspect_reading
from translator.job.definitions import read_definition
from translator.job.definitions.edits import check as definition_check
from translator.job.definitions.edits import copied, layout
from translator.job.definitions.edits import edits as definition_edits
from translator.job.definitions.held import rewritten
from translator.job.script import RunAs, is_job, read_job
from translator.plugin.contract import Framework
from translator.plugin.findings import cannot_edit
from translator.plugin.registry import launchers
from translator.reading import Launch, Reading, Value
from translator.spec import BatchSpec
from translator.words.errors import BatchspecError, ConfigError, InputError
from translator.words.files import reading_as
from translator.words.findings import counted, finding

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
        if v.get("world_size") is None:
            raise InputError(
                f"{old.reading.path}: the current global batch is not known (the file "
                "does not say its world size); give --global-batch or --from-world-size"
            )
        why = [f.message for f in old.findings if f.severity == "warning"]
        raise InputError(
            f"{old.reading.path}: the current global batch is not known on its world "
            f"{v['world_size']} ({'; '.join(dict.fromkeys(why)) or 'its batch keys are not set'})"
            "; give --global-batch"
        )
    m = micro or v.get("micro_batch_size")
    if nodes is None and world is None:
        world, nodes, gpus_per_node = (v.get(k) for k in ("world_size", "nodes", "gpus_per_node"))
    elif nodes is None and world is not None:
        nodes, gpus_per_node = kept_layout(old, world)
    elif gpus_per_node is None:
        gpus_per_node = per_node_now(old)
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
    return _solved(fields, old.reading.path)


def kept(spec: BatchSpec, where: str, *, world: int, micro: int | None = None) -> BatchSpec:
    """``spec``'s global batch on ``world`` processes with micro-batch ``micro`` (default its
    own), every other setting kept and the accumulation re-solved: the rule
    :func:`target_spec` follows, for a spec already solved (a smoke run on fewer processes, a
    tune probe's micro-batch, parity's second split). Refused as :func:`target_spec` refuses,
    naming ``where``."""
    fields = spec.model_dump() | {
        "micro_batch_size": micro or spec.micro,
        "gradient_accumulation_steps": None,
        "data_parallel_size": None,
        "world_size": world,
        "nodes": None,
        "gpus_per_node": None,
    }
    return _solved(fields, where)


def _solved(fields: dict, where: str) -> BatchSpec:
    """The spec of ``fields`` (None: not given), the accumulation solved; a global batch that
    does not divide is refused (exit 1) with the nearest ones and the splits that keep it."""
    try:
        return BatchSpec(**{k: x for k, x in fields.items() if x is not None})
    except ConfigError as exc:
        if exc.findings[0].code != "global-not-divisible":
            raise
        g, m = fields["global_batch_size"], fields["micro_batch_size"]
        raise ConfigError([_options(g, m, fields, exc.findings[0].message, where)]) from None


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


def per_node_now(old: Inspection) -> int:
    """The processes per node the job launches now, which a new node count alone keeps (where
    its launch does not say, a definition's GPUs per node); refused (exit 2) when the job does
    not say them."""
    definition = old.reading.definition
    per_node = old.values.get("gpus_per_node")
    if per_node is None and definition is not None:
        per_node = definition.gpus_per_node
    if per_node is None:
        raise InputError(
            f"{old.reading.path}: the processes it starts per node are not known; give "
            "--nproc-per-node with --nnodes"
        )
    return per_node


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
        f"{factor(math.sqrt(x / g))} for Adam (square root) or × {factor(x / g)} for SGD"
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


def apply(
    framework: Framework,
    reading: Reading,
    spec: BatchSpec,
    elsewhere: dict[str, dict[str, object]] | None = None,
) -> tuple[str, list[Change]]:
    """The file's new text for ``spec`` and the changes made (:func:`edit_text`): its
    framework's batch keys and its launcher's sizes. A value read from another file of the job
    goes to ``elsewhere`` (file -> key -> new value) when given, else it is refused."""
    launch = launcher_edits(reading, spec)
    edits = framework.edits(reading, spec) | launch
    return edit_text(
        framework,
        reading,
        edits,
        frozenset(launch),
        elsewhere,
        definition_edits(reading, spec),
        lambda replacements: copied(reading, replacements),
    )


def edit_job(
    framework: Framework, reading: Reading, spec: BatchSpec
) -> tuple[str, list[Change], list[Other]]:
    """The file's new text and changes for ``spec`` (:func:`apply`), and the other files of its
    job that change with it (:func:`~translator.edit.update_files.other_files`); nothing written.
    A file the job's definition holds (a ConfigMap's accelerate config) is edited where the
    definition writes it, its changes the definition's."""
    elsewhere: dict[str, dict[str, object]] = {}
    text, changes = apply(framework, reading, spec, elsewhere)
    held = reading.definition.held if reading.definition is not None else ()
    with reading_as({h.path: h.text for h in held}):
        others = other_files(framework, reading, spec, elsewhere)
    apart = []
    for other in others:
        within = rewritten(reading, other.path, other.text, text)
        if within is None:
            apart.append(other)
        else:
            text, changes = within, [*changes, *other.changes]
    return text, changes, apart


def moved(framework: Framework, reading: Reading, old: BatchSpec, new: BatchSpec) -> Inspection:
    """The job of ``reading`` (which gives ``old``) edited so that, read on ``new``'s world,
    it runs ``new``'s batch (:func:`kept`); its launch is left as it stands, for the caller
    starts ``new``'s processes itself (smoke, a tune probe). The batch keys are edited as
    :func:`edit_job` edits them, at the job's own world: a framework that writes the
    accumulation takes ``new``'s, one that writes the global batch (Megatron, torchtitan) keeps
    it over ``new``'s micro-batch; the edit whose reading gives ``new`` is taken. A job whose
    engine runs the config its reading gives (``job_config``) and whose batch stands where
    ``update`` does not edit (an arguments file) gets the reading's values set instead. Nothing
    is written; ``reading`` is not changed. Refused (exit 1) when no edit gives ``new``."""
    fields = old.model_dump() | {"micro_batch_size": new.micro, "data_parallel_size": None}
    tries = [fields | {"global_batch_size": None, "gradient_accumulation_steps": new.accumulation}]
    if new.global_batch % (new.micro * old.data_parallel) == 0:
        tries.append(
            fields | {"global_batch_size": new.global_batch, "gradient_accumulation_steps": None}
        )
    edits = []
    for one in tries:
        try:
            edits.append(_edit(framework, reading, BatchSpec.model_validate(one)))
        except (BatchspecError, ValueError):
            continue
    # an edit that changes nothing is read as it stands (Megatron's global batch kept): first
    wanted = (new.global_batch, new.micro)
    for edit in sorted(edits, key=lambda e: e is not None):
        found = inspect_reading(*_edited(framework, reading, edit), Launch(world_size=new.world))
        ran = found.spec
        if ran is not None and ran.is_decided and (ran.global_batch, ran.micro) == wanted:
            return found
    raise cannot_edit(
        reading.path,
        f"no edit of its batch keys runs global {new.global_batch} with micro-batch "
        f"{new.micro} on {new.world} processes",
    )


def _edit(framework: Framework, reading: Reading, spec: BatchSpec) -> _Edit | None:
    """The job's edit for ``spec``'s batch values (see :func:`moved`); None when nothing
    changes."""
    try:
        text, changes, others = edit_job(framework, reading, spec)
    except BatchspecError:
        if reading.launcher is None or framework.job_config is None:
            raise
        values = dict(reading.values)
        for key, value in framework.edits(reading, spec).items():
            v = values.get(key)
            line, file = (v.line, v.file) if v is not None else (None, None)
            values[key] = Value(value, line, None, None, file)
        return values
    if not changes and not others:
        return None
    return text, others


#: An edit of a job: its new text and other files, or (where update does not edit the file
#: that holds them) its reading's new values.
_Edit = tuple[str, list[Other]] | dict[str, Value]


def _edited(
    framework: Framework, reading: Reading, edit: _Edit | None
) -> tuple[Framework, Reading]:
    """``(framework, reading)`` of the job after ``edit``: the texts read again once, a copy of
    ``reading`` with the new values, or ``reading`` itself when nothing changes."""
    if edit is None:
        return framework, reading
    if isinstance(edit, dict):
        return framework, dataclasses.replace(reading, values=edit)
    text, others = edit
    with reading_as({other.path: other.text for other in others}):
        return reread(framework, reading, text)


def reread(
    framework: Framework, reading: Reading, text: str, run_as: RunAs | None = None
) -> tuple[Framework, Reading]:
    """``text``, the new text of ``reading``'s file, read as that file is read: a launch script
    as a job (run as ``run_as`` says), a job definition as one, else by ``framework``."""
    path = reading.path
    if is_job(path, text):
        return read_job(text, path, run_as, framework.name)
    if reading.definition is not None:
        return read_definition(path, text, run_as, framework.name)
    return framework, framework.read(text, path)


def launcher_edits(reading: Reading, spec: BatchSpec) -> dict[str, int]:
    """A job's launcher words for a new world: those of its sizes (processes per node, nodes,
    or all processes) that differ from what the launch line gives now. Refused when a size
    that must change has no word on the line (exit 1), and when a world alone does not say
    how to spread over nodes (exit 2)."""
    if reading.world_size is None:  # a config, or a job refused before (its world unknown)
        return {}
    keys, counts = reading.launch_keys, reading.launch_counts
    if not keys and not counts:  # the world is not the launch line's (an accelerate config)
        if spec.world == reading.world_size or reading.launcher_config is not None:
            return {}  # the same, or the launcher's config file gives it (edited with the job)
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
    launcher = launchers().get(reading.launcher or "")
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


@dataclass(frozen=True)
class Updated:
    """What an update makes of a file and the other files of its job (nothing is written here)."""

    text: str
    """The file's new text (its old text when nothing changes)."""
    changes: list[Change]
    """Each key changed, in the order the framework names them; empty when nothing changes."""
    inspection: Inspection
    """The new text read back."""
    notes: list[str] = field(default_factory=list)
    """What the new launch needs beyond the file (deepspeed's host file for several nodes)."""
    others: list[Other] = field(default_factory=list)
    """The other files of the job that change with it (its YAML, its DeepSpeed JSON, its
    launcher's config), each with its new text."""

    @property
    def changed(self) -> bool:
        """Whether any file changes."""
        return bool(self.changes or self.others)

    def already(self) -> str:
        """What was already so when nothing changes (``nothing to change: it already launches
        8 processes (1 node × 8) and gives global batch 128 (...)``)."""
        spec, reading = self.inspection.spec, self.inspection.reading
        batch = (
            None
            if spec is None  # a launcher's config: its world alone
            else f"global batch {spec.global_batch_size} (micro-batch {spec.micro_batch_size} × "
            f"accumulation {spec.gradient_accumulation_steps} × data-parallel "
            f"{spec.data_parallel_size})"
        )
        if reading.world_size is None:
            assert spec is not None  # update() re-read a config as a whole spec
            return f"nothing to change: at world {spec.world} it already gives {batch}"
        world, values = reading.world_size, self.inspection.values
        nodes, per_node = values.get("nodes"), values.get("gpus_per_node")
        shape = (
            "" if nodes is None or per_node is None else f" ({counted(nodes, 'node')} × {per_node})"
        )
        gives = "" if batch is None else f" and gives {batch}"
        launches = counted(world, "process", "processes")
        return f"nothing to change: it already launches {launches}{shape}{gives}"


def update(
    framework: Framework, old: Inspection, spec: BatchSpec, run_as: RunAs | None = None
) -> Updated:
    """The new texts of the file and of the other files of its job, their changes and the
    job re-read from them (before anything is written); refused when the job cannot be made
    to launch ``spec``'s world or give its batch exactly."""
    _refuse_an_unwritten_world(old, spec)
    text, changes, others = edit_job(framework, old.reading, spec)
    with reading_as({o.path: o.text for o in others}):
        again = read_back(framework, old, text, changes, spec, run_as)
    return Updated(text, changes, again, _launch_notes(old.reading, spec), others)


def read_back(
    framework: Framework,
    old: Inspection,
    text: str,
    changes: list[Change],
    spec: BatchSpec,
    run_as: RunAs | None,
) -> Inspection:
    """``text`` read as the file (a job: with the files it names as they read now) and
    checked: each computed value follows its edit, no error, and the spec's world and batch."""
    path = old.reading.path
    _, reading = reread(framework, old.reading, text, run_as)
    for change in changes:
        now = reading.values.get(change.key)
        if change.edit is None and (now is None or now.value != change.new):
            raise cannot_edit(
                old.reading.where(change.key),
                f"cannot change {change.key}: its value is computed, not written; "
                f"set it to {change.new} by hand",
            )
    _refuse_unwritten_sizes(framework, reading, spec)
    again = inspect_reading(framework, reading, Launch.of(spec))
    definition_check(again.reading, spec)
    errors = [f for f in again.findings if f.severity == "error"]
    if errors:
        raise ConfigError(errors)
    got = again.spec
    if again.reading.world_size not in (None, spec.world_size):
        raise cannot_edit(
            path,
            f"the launch would still start "
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
    return again


#: The model-parallel sizes an update must leave written in the job (flag, spec field).
SIZES = (
    ("--tp", "tensor_parallel_size", "tensor-parallel"),
    ("--pp", "pipeline_parallel_size", "pipeline-parallel"),
    ("--cp", "context_parallel_size", "context-parallel"),
)


def _refuse_unwritten_sizes(framework: Framework, reading: Reading, spec: BatchSpec) -> None:
    """Each model-parallel size of ``spec`` must be what the new files give on their own: one
    they hold nowhere (``--tp 4`` for a DeepSpeed JSON without AutoTP's size) would be dropped
    silently, the batch re-solved for a layout no file launches."""
    alone = inspect_reading(framework, reading, Launch(spec.world, nodes=spec.nodes))
    for flag, key, words in SIZES:
        got = alone.values.get(key, 1)
        if getattr(spec, key) != got:
            raise cannot_edit(
                reading.path,
                f"{words} {getattr(spec, key)} would be written nowhere: updated, the job "
                f"gives {words} {got} on its own (no file of it holds that size as a literal "
                "update edits), so the batch would be solved for a layout nothing launches; "
                f"set it where the job sets it (update its launch script with {flag}), or "
                "write it into the file, then update",
            )


def _launch_notes(reading: Reading, spec: BatchSpec) -> list[str]:
    """What the launch needs outside the file once it runs on more of ``spec``'s nodes than
    now, as its launcher says (a host file)."""
    launcher = launchers().get(reading.launcher or "")
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
    now = old.values.get("world_size")
    if spec.world == now:
        return  # the batch alone changes, on the world it is said to run on (--from-world-size)
    alone = (
        "give the world it will run on as --from-world-size too to re-solve the batch alone"
        if now is None
        else f"so update cannot move it from world {now} (--from-world-size); write it on the "
        f"launch line, or give --from-world-size {spec.world} to re-solve the batch alone for "
        "the world it will run on"
    )
    raise cannot_edit(
        reading.path,
        f"cannot launch world {spec.world}: {reading.world_unknown}, a number the file does "
        + ("not write; write it on the launch line, or " if now is None else "not write, ")
        + alone,
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
    keywords), edited (nothing is written here). A launcher's config alone is moved to the
    new world (:func:`move_launch`)."""
    from translator.inspection import read_file

    chosen, reading = read_file(path, framework, run_as)
    old = inspect_reading(chosen, reading, Launch(from_world_size))
    if reading.definition is not None and reading.definition.others:
        raise InputError(
            f"{path}: defines {len(reading.definition.others) + 1} training jobs, and update "
            f"moves one: it would leave {'; '.join(reading.definition.others)} as it is; give "
            "each job a file of its own"
        )
    if reading.definition is not None:  # its nodes and GPUs move with the world
        target["nodes"], target["gpus_per_node"] = layout(
            reading, target.get("world"), target.get("nodes"), target.get("gpus_per_node")
        )
    if chosen.launch_edits is not None:
        return move_launch(chosen, old, **target)
    return update(chosen, old, target_spec(old, **target), run_as)


def move_launch(
    framework: Framework,
    old: Inspection,
    *,
    world: int | None,
    nodes: int | None,
    gpus_per_node: int | None,
    **batch,
) -> Updated:
    """A launcher's config (accelerate's) moved to a new world: it holds no batch, so only its
    world and nodes change (``batch``, the other targets, must be unset); the processes per
    node are kept unless given (:func:`kept_layout`)."""
    assert framework.launch_edits is not None
    path = old.reading.path
    given = [k for k, v in batch.items() if v is not None]
    if given or (world is None and nodes is None):
        raise InputError(
            f"{path}: a {framework.name} config gives the launch, not the batch: update it with "
            "--world-size, or --nnodes and --nproc-per-node"
        )
    if nodes is None and world is not None:
        errors = [f for f in old.findings if f.severity == "error"]
        if errors:  # its layout is not known (uneven machines): the flags must give one
            raise ConfigError(errors)
        nodes, gpus_per_node = kept_layout(old, world)
    elif nodes is not None and gpus_per_node is None and world is None:
        gpus_per_node = per_node_now(old)
    total = world or (nodes or 1) * (gpus_per_node or 1)
    launch = Launch(total, nodes=nodes)
    text, changes = edit_text(framework, old.reading, framework.launch_edits(old.reading, launch))
    again = inspect_reading(framework, framework.read(text, path), Launch())
    errors = [f for f in again.findings if f.severity == "error"]
    if errors:
        raise ConfigError(errors)
    if again.reading.world_size != total:
        raise cannot_edit(
            path, f"after the update the file would not launch {total}; edit it by hand"
        )
    return Updated(text, changes, again)
