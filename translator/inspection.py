"""Read a framework config and tell the truth about its batch: the resolved spec (``None``
for what cannot be known) and every finding, each with its location."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from pathlib import Path

from pydantic import ValidationError

from translator.batch import solve
from translator.batch.spec_file import describe
from translator.checks.advice import general_findings
from translator.job.definitions import read_definition, system_of
from translator.job.detection import claimant, detect
from translator.job.foreign import refuse_foreign
from translator.job.script import RunAs, is_job, read_job
from translator.model import model_split
from translator.model.named_model import NamedModel, resolve
from translator.plugin.contract import Framework
from translator.plugin.inspection import Inspection
from translator.plugin.registry import FRAMEWORKS, by_claim_order
from translator.reading import Launch, Reading, running_in
from translator.spec import BatchSpec
from translator.words.errors import BatchspecError, ConfigError, InputError
from translator.words.files import read_text
from translator.words.findings import Finding, finding, has_errors

#: World sizes shown when a file does not say its own.
COMMON_WORLDS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def is_batch_config(path: str, text: str, framework: str | None = None) -> bool:
    """Whether a file holds batch settings at all, as its framework (given, or the one that
    claims it; else any) marks them."""
    found = FRAMEWORKS[framework] if framework else claimant(path, text)
    return any(f.holds_batch(text) for f in ([found] if found else by_claim_order()))


def inspect_file(
    path: str,
    framework: str | None = None,
    launch: Launch | None = None,
    run_as: RunAs | None = None,
) -> Inspection:
    """Read ``path`` and resolve its batch on ``launch`` (flags win over the file)."""
    found, reading = read_file(path, framework, run_as)
    return inspect_reading(found, reading, launch or Launch())


def read_file(
    path: str, framework: str | None = None, run_as: RunAs | None = None
) -> tuple[Framework, Reading]:
    """``path`` read by its framework (given, or detected); a launch script is read as a job,
    run as ``run_as`` says, by the framework whose program it launches."""
    return read_text_of(path, read_text(path), framework, run_as)


def read_text_of(
    path: str, text: str, framework: str | None = None, run_as: RunAs | None = None
) -> tuple[Framework, Reading]:
    """:func:`read_file` of ``path`` whose ``text`` was read already."""
    if is_job(path, text):
        return read_job(text, path, run_as, framework)
    if system_of(path, text) is not None:
        return read_definition(path, text, run_as, framework)
    if framework is None:
        refuse_foreign(path, text)
        refuse_a_spec(path, text)
    found = FRAMEWORKS[framework] if framework else detect(path, text)
    if run_as is None or run_as.run_dir is None:
        return found, found.read(text, path)
    with running_in([Path(run_as.run_dir)]):  # where the paths it names open
        return found, found.read(text, path)


@dataclasses.dataclass(frozen=True)
class FileRead:
    """The file a run is asked for, read and parsed once: every step of a run (the batch on
    its world, the engine's config, the model, how it trains) and every probe of a tune starts
    from this reading, never from the path again."""

    path: str
    """The file, as the user named it."""
    text: str
    """Its text."""
    values: dict | None
    """A batchspec spec's values; None for a framework's config or job."""
    framework: Framework | None = None
    """The framework that read a config or job (None for a spec)."""
    reading: Reading | None = None
    """Its reading (None for a spec)."""


def read_source(path: str, framework: str | None = None) -> FileRead:
    """``path`` read once: a spec's values, else its framework's reading (``framework``'s, or
    detected; a launch script as a job)."""
    from translator.batch.spec_file import spec_values

    text = read_text(path)
    values = spec_values(text, path)
    if values is not None:
        return FileRead(path, text, values)
    found, reading = read_text_of(path, text, framework)
    return FileRead(path, text, None, found, reading)


def named_model(framework: Framework, reading: Reading) -> NamedModel | None:
    """The model ``reading`` names: the framework's own reading of it, else the general one."""
    own = framework.named_model(reading) if framework.named_model is not None else None
    return own if own is not None else resolve(reading)


def refuse_a_spec(path: str, text: str) -> None:
    """A batchspec spec (:func:`~translator.batch.spec_file.spec_values`) is not read as the
    framework whose keys it shares (``micro_batch_size`` is Axolotl's too): smoke, estimate
    and tune take it as a spec, so here it is refused, not read another way."""
    from translator.batch.spec_file import spec_values

    if spec_values(text, path) is not None:
        raise InputError(
            f"{path}: this is a batchspec spec (only spec keys), not a framework's config: "
            "plan, render, smoke, estimate and tune read it; give --framework to read it as "
            "a framework's config"
        )


def inspect_together(loaded: list[tuple[Framework, Reading]], launch: Launch) -> list[Inspection]:
    """Files of one job: a launcher's config among them (``accelerate launch --config_file``)
    gives the others its world size, parallel sizes and accumulation override, unless the
    command line gave them; it is told which files it launches (:attr:`Launch.launches`)."""
    provider = next(((b.launch_of, r) for b, r in loaded if b.launch_of is not None), None)
    shared = launch
    if provider is not None:
        launch_of, source = provider
        given = launch_of(source)
        shared = Launch(
            launch.world_size or given.world_size,
            launch.tensor_parallel_size or given.tensor_parallel_size,
            launch.pipeline_parallel_size or given.pipeline_parallel_size,
            launch.context_parallel_size or given.context_parallel_size,
            given.gradient_accumulation_steps,
            source.path,
            nodes=launch.nodes or (None if launch.world_size else given.nodes),
            handed=given.handed,
        )
    launched = tuple(r.path for b, r in loaded if b.launch_of is None)
    return [
        inspect_reading(
            b,
            r,
            dataclasses.replace(launch, launches=launched)
            if provider and r is provider[1]
            else shared,
        )
        for b, r in loaded
    ]


def inspect_reading(framework: Framework, reading: Reading, launch: Launch) -> Inspection:
    """Interpret a reading the framework's way on ``launch``, solve it, and collect findings
    (what the command line gives wins over what the job's launcher gives)."""
    if reading.launch is not None:
        given = reading.launch
        launch = Launch(
            launch.world_size,
            launch.tensor_parallel_size or given.tensor_parallel_size,
            launch.pipeline_parallel_size or given.pipeline_parallel_size,
            launch.context_parallel_size or given.context_parallel_size,
            launch.gradient_accumulation_steps or given.gradient_accumulation_steps,
            launch.source or given.source,
            nodes=launch.nodes or (None if launch.world_size else given.nodes),
            handed=launch.handed or given.handed,
        )
    world = launch.world_size or reading.world_size
    launch = dataclasses.replace(launch, world_size=world)
    values, findings = framework.interpret(reading, launch)
    values = _with_layout(_with_launch(values, launch), launch, reading)
    unknown = sorted(k for k, v in values.items() if v is None)
    values = {k: v for k, v in values.items() if v is not None}
    model = named_model(framework, reading)
    split = (
        None if model is None else model.parts,
        None if framework.split_rules is None else framework.split_rules(reading, values),
    )
    if set(unknown) & LAYOUT_KEYS:  # nothing about DP or accumulation is known then
        findings.append(_depends_on(values, unknown, reading, split))
        findings.sort(key=lambda f: ("error", "warning", "info").index(f.severity))
        return Inspection(reading, _known_values(values, unknown), None, findings, model)
    spec, wrong, missing = _solve(values, reading, split)
    if unknown and not wrong:
        missing = [_depends_on(values, unknown, reading, split)]
    if not has_errors(findings):
        findings += wrong
    if not has_errors(findings) and (
        unknown
        or not any(f.code in framework.explains for f in findings)
        or any(f.code == "world-unknown" for f in missing)
    ):
        findings += missing
    if spec is not None and spec.is_decided:
        findings += [
            f if f.where else Finding(f.code, f.severity, f.message, reading.path, f.hint)
            for f in general_findings(spec, *split) + framework.check(spec)
        ]
        if framework.loss_normalisation is not None:
            findings += framework.loss_normalisation(reading, spec)
    shown = (
        _known_values(values)
        if spec is None
        else values | {k: v for k, v in spec.output().items() if v is not None}
    )
    findings.sort(key=lambda f: ("error", "warning", "info").index(f.severity))
    return Inspection(reading, shown, spec, findings, model)


def _known_values(values: dict, unknown: Collection[str] = ()) -> dict:
    """What follows from the values even though they make no valid spec; nothing is derived
    from a value in ``unknown`` (a size the file leaves to the running script)."""
    out: dict = {
        k: 1
        for k in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
        if k not in unknown
    }
    out |= values
    if any(
        k in unknown
        for k in (
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "context_parallel_size",
            "world_size",
        )
    ):
        return {k: v for k, v in out.items() if v is not None}
    world = out.get("world_size")
    model = math.prod(
        out.get(k, 1)
        for k in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
    )
    if world is not None and "data_parallel_size" not in out and world % model == 0:
        out["data_parallel_size"] = world // model
    keys = (
        "global_batch_size",
        "micro_batch_size",
        "gradient_accumulation_steps",
        "data_parallel_size",
    )
    try:
        out |= dict(zip(keys, solve.complete(*(out.get(k) for k in keys))))
    except BatchspecError:
        pass
    return {k: v for k, v in out.items() if v is not None}


def _with_launch(values: dict, launch: Launch) -> dict:
    layout = {
        "world_size": launch.world_size,
        "tensor_parallel_size": launch.tensor_parallel_size,
        "pipeline_parallel_size": launch.pipeline_parallel_size,
        "context_parallel_size": launch.context_parallel_size,
    }
    merged = dict(values)
    for key, value in layout.items():
        if value is not None and (merged.get(key) is None or key == "world_size"):
            merged[key] = value
    if launch.world_size is not None:
        merged.pop("nodes", None)
        merged.pop("gpus_per_node", None)
    return merged


def _with_layout(values: dict, launch: Launch, reading: Reading) -> dict:
    """The values with the nodes their world spreads over and the processes on each: as the
    command line gives them, else as the job's launch starts its own world; a world given
    alone leaves them unknown (absent), as does one that does not split evenly."""
    world, nodes = values.get("world_size"), launch.nodes
    counts = reading.launch_counts
    if nodes is None and world is not None and world == reading.world_size:
        nodes = counts.get("nodes")
        per_node = counts.get("per_node")
        if nodes is not None and per_node is not None and "total" not in counts:
            nodes = nodes if nodes * per_node == world else None
    if nodes is None or world is None or world % nodes:
        return values
    return values | {"nodes": nodes, "gpus_per_node": world // nodes}


def _solve(values: dict, reading: Reading, split: tuple = (None, None)):
    """``(spec, wrong, missing)``: the spec, or the findings saying the values are wrong, or
    that too few are known; ``split``, the model's parts and the framework's rules for them,
    keep the sizes a fix names to those the model splits on."""
    try:
        return BatchSpec.model_validate(values, context={"model": split}), [], []
    except ValidationError as exc:  # a count past any cluster's (world 10**18)
        lines = {k: v.line for k, v in reading.values.items() if v.line is not None}
        raise InputError(describe(exc, reading.path, lines)) from None
    except ConfigError as exc:
        where = next((reading.where(k) for k in reading.values if "batch" in k), reading.path)
        return (
            None,
            [
                Finding(f.code, f.severity, f.message, f.where or where, f.hint)
                for f in exc.findings
            ],
            [],
        )
    except InputError as exc:
        # the world is the launch's, or the file's own (an accelerate config's num_processes)
        if "world_size" not in values and "data_parallel_size" not in values:
            return None, [], [_world_unknown(values, reading)]
        return (
            None,
            [],
            [
                finding(
                    "missing-batch-value",
                    f"{exc}",
                    where=reading.path,
                    hint="add the missing batch value to the file",
                )
            ],
        )


#: Spec fields that decide the data-parallel size.
LAYOUT_KEYS = {
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "context_parallel_size",
    "world_size",
    "nodes",
    "gpus_per_node",
}
#: Values tried for a size the script leaves unknown.
CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


def _fitting(
    values: dict, field: str, candidates, label: str, split: tuple = (None, None)
) -> list[str]:
    """For each candidate value of ``field`` that makes a decided spec, and that the model
    and the nodes take (``split``: the model's parts and the framework's rules): the batch
    it gives."""
    parts, rules = split
    accept = model_split.fits(parts, rules, values.get("gpus_per_node"))
    names = {f: name for name, f in model_split.SIZES.items()}
    options = []
    for candidate in candidates:
        if field in names and not accept(names[field], candidate):
            continue
        try:
            spec = BatchSpec(**(values | {field: candidate}))
        except (ConfigError, InputError):
            continue
        if spec.is_decided:
            options.append(
                f"{label}{candidate} → global {spec.global_batch} (micro "
                f"{spec.micro} × accumulation {spec.accumulation} × DP {spec.data_parallel})"
            )
    return options


def _depends_on(
    values: dict, unknown: list[str], reading: Reading, split: tuple = (None, None)
) -> Finding:
    """Which values of the unknown field fit (the model too), and the batch each gives."""
    options = (
        _fitting(values, unknown[0], CANDIDATES, f"{unknown[0]} ", split)
        if len(unknown) == 1
        else []
    )
    names = ", ".join(unknown)
    flags = [FLAG_OF[k] for k in unknown if k in FLAG_OF]
    return finding(
        "batch-depends-on-unknown",
        f"the batch depends on {names}, which the script does not fix"
        + (f"; for each value that fits: {'; '.join(options)}" if options else ""),
        hint="write the value as a literal"
        + (f", or give it with {' and '.join(flags)}" if flags else ""),
        where=reading.path,
    )


#: The inspect flag that gives each value a job may leave unknown (the others have none).
FLAG_OF = {
    "tensor_parallel_size": "--tp",
    "pipeline_parallel_size": "--pp",
    "context_parallel_size": "--cp",
    "world_size": "--world-size",
}


def _world_unknown(values: dict, reading: Reading) -> Finding:
    options = _fitting(values, "world_size", COMMON_WORLDS, "")
    return finding(
        "world-unknown",
        str(reading.world_unknown or "the file does not say how many processes run it")
        + ", so the global batch is not known"
        + (f"; on common world sizes: {'; '.join(options[:6])}" if options else ""),
        hint="give --world-size (or --nnodes and --nproc-per-node)",
        where=reading.path,
    )
