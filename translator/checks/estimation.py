"""``estimate``'s use case: the memory per GPU of a layout and, given a GPU's capacity, whether
it fits and the largest micro-batch that does while keeping the global batch.

A file (a spec, or a framework's config or launch script) gives the layout and, through its
framework's ``memory_settings``, how it trains: the ZeRO stage its sharding counts as, offload,
sequence parallelism, recomputation. Each flag given beside the file fills what the file does
not say, or overrides what it does (an :class:`Override`, printed), or is refused: a flag the
estimate does not use, or one that breaks the file's batch. What the flags change in the batch
is re-derived, the file's global batch kept first, then its micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from translator.batch import solve
from translator.model import memory
from translator.model.memory import GIB, Setting, Settings
from translator.plugin.contract import Framework
from translator.reading import Reading
from translator.spec import BatchSpec
from translator.words.errors import ConfigError, InputError
from translator.words.findings import Finding, finding

if TYPE_CHECKING:
    from translator.inspection import FileRead

#: Tokens per sample when neither the file nor ``--seq-len`` says.
DEFAULT_SEQUENCE = 2048
#: Spec fields that do not change the memory estimate: refused beside a file.
NOT_MEMORY = {"learning_rate", "reference_global_batch_size", "expert_parallel_size", "num_experts"}
#: The batch fields, in the order the file's are kept when a flag changes the batch.
BATCH = ("global_batch_size", "micro_batch_size", "gradient_accumulation_steps")
#: Fields that change the data-parallel size.
LAYOUT = ("world_size", "tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
#: Words for the batch fields in messages.
WORDS = {
    "global_batch_size": "global batch",
    "micro_batch_size": "micro-batch",
    "gradient_accumulation_steps": "accumulation",
    "data_parallel_size": "DP",
}


@dataclass(frozen=True)
class Flag:
    """One flag given on the command line."""

    name: str
    """As spelt (``--seq-len``)."""
    field: str
    """The spec field or :class:`~translator.model.memory.RunSettings` field it sets."""
    value: object
    """Its value."""
    switch: bool = False
    """A flag without a value (``--distributed-optimizer`` sets ``zero_stage`` 1)."""

    @property
    def written(self) -> str:
        """The flag as given (``--seq-len 8192``)."""
        return self.name if self.switch else f"{self.name} {self.value}"


@dataclass(frozen=True)
class Override:
    """A flag that replaces what the file says."""

    flag: Flag
    """The flag."""
    was: object
    """What the file says."""
    where: str | None = None
    """Where the file says it, when known (``ds.json:19 zero_optimization.stage``)."""

    def __str__(self) -> str:
        at = f" ({self.where})" if self.where else ""
        return f"{self.flag.written} overrides the file's {shown(self.was)}{at}"

    def as_dict(self) -> dict:
        return {
            "flag": self.flag.name,
            "value": _plain(self.flag.value),
            "file_value": _plain(self.was),
            "where": self.where,
            "message": str(self),
        }


@dataclass
class Layout:
    """What is estimated: the batch layout and how it trains, with what the flags changed."""

    spec: BatchSpec
    """The layout (decided: micro-batch and accumulation known)."""
    how: dict = field(default_factory=dict)
    """The :data:`~translator.model.memory.SETTINGS` fields the file or the flags fix."""
    settings: list[Setting] = field(default_factory=list)
    """The file's settings in use (those no flag overrode)."""
    overrides: list[Override] = field(default_factory=list)
    """The flags that replace what the file says."""
    rederived: list[str] = field(default_factory=list)
    """What the overrides changed in the batch (``accumulation 32 → 16``)."""
    notes: list[str] = field(default_factory=list)
    """What the file holds that the estimate cannot use, and what it assumes."""
    framework: str | None = None
    """The framework whose file it is (None: a spec, or flags alone)."""
    engines: dict[str, str] = field(default_factory=dict)
    """Setting field -> the engine whose setting the file gives (``zero_stage`` ->
    ``deepspeed``), where that is not the framework's own."""


@dataclass
class Report:
    """A layout's memory estimate, with the verdict against a capacity when one is given."""

    layout: Layout
    """The layout estimated, with what the file and the flags say."""
    shape: memory.Model
    """The model."""
    sequence_length: int
    """Tokens per sample (the spec's, else :data:`DEFAULT_SEQUENCE`)."""
    run: memory.RunSettings
    """How it runs (precision, recompute, attention, sharding)."""
    result: memory.Estimate
    """The estimate, part by part."""
    capacity: int | None = None
    """One GPU's memory, in bytes, when given."""
    fits: bool | None = None
    """Whether the estimate fits the capacity (None without one)."""
    largest_fitting: int | None = None
    """The largest micro-batch that fits and keeps the global batch (None without a capacity,
    or when none does)."""
    findings: list[Finding] = field(default_factory=list)
    """``memory-exceeds-capacity`` when it does not fit."""
    source: dict | None = None
    """Where the model came from (``source``, ``architecture``, ``parameters``): the job's
    model as resolved; None for a preset or a config.json given as ``--model``."""

    @property
    def spec(self) -> BatchSpec:
        return self.layout.spec

    def as_dict(self) -> dict:
        """``estimate --json``'s object."""
        return {
            "model": self.source
            or {
                "source": "--model",
                "architecture": self.shape.name,
                "parameters": self.shape.parameters,
            },
            "parameters": self.shape.parameters,
            "sequence_length": self.sequence_length,
            "layout": self.spec.output(),
            "precision": self.run.precision,
            "recompute": self.run.recompute,
            "attention": self.run.attention,
            "zero_stage": self.run.zero_stage,
            "offload": sorted(self.run.offload),
            "sequence_parallel": self.run.sequence_parallel,
            "settings": [
                {"field": s.field, "value": _plain(s.value), "where": s.where}
                for s in self.layout.settings
            ],
            "overrides": [o.as_dict() for o in self.layout.overrides],
            "rederived": self.layout.rederived,
            "notes": self.layout.notes,
            **self.result.as_dict(),
            "capacity_bytes": self.capacity,
            "fits": self.fits,
            "largest_fitting_micro_batch": self.largest_fitting,
            "findings": [f.as_dict() for f in self.findings],
            "engine": self.engine(),
        }

    def engine(self) -> dict:
        """Whose code would run: ``{"framework": ..., "deepspeed_zero_stage": N or None}``, as
        ``smoke`` and ``tune`` say it (the ZeRO stage where the file trains under DeepSpeed)."""
        stage = self.run.zero_stage if self.run.zero_optimizer else None
        return {"framework": self.layout.framework, "deepspeed_zero_stage": stage}


def _zero_optimizer(layout: Layout) -> bool:
    """Whether DeepSpeed's ZeRO optimizer runs the layout's stage: the file gives its stage
    as an engine's setting (a DeepSpeed JSON a Trainer or Megatron job names), or the file's
    framework's own engine trains under ZeRO."""
    return layout.engines.get("zero_stage") is not None or _runs_zero(layout.framework)


def _runs_zero(framework: str | None) -> bool:
    """Whether ``framework``'s own engine trains at a ZeRO stage (one that takes
    ``--zero-stages``), so that its stage is said even where its file leaves the default."""
    from translator.plugin import registry

    if framework not in registry.names():
        return False
    engine = registry.get(framework).engine
    return engine is not None and "zero_stages" in engine.options


# The layout --------------------------------------------------------------------------------


def layout_of_flags(flags: list[Flag], names: dict[str, str] | None = None) -> Layout:
    """The layout the flags alone give (micro-batch 1 on one GPU when they give nothing);
    ``names``: the command's flag of each spec field, for messages about one not given."""
    from translator.batch.spec_file import build_spec

    values = {f.field: f.value for f in flags if f.field not in memory.SETTINGS}
    if not values:
        values = {"micro_batch_size": 1, "world_size": 1, "gradient_accumulation_steps": 1}
    layout = Layout(
        build_spec(values, "flags", flags=(names or {}) | {f.field: f.name for f in flags})
    )
    _apply_settings(layout, Settings(), flags)
    return layout


def layout_of_source(read: FileRead, flags: list[Flag]) -> Layout:
    """The layout and settings of the file ``read`` with the flags given beside it (see the
    module's text)."""
    given = _given(flags, read.path)
    if read.framework is None or read.reading is None:
        found = _spec_file(read.text, read.path)
    else:
        found = _framework_file(read.framework, read.reading, given)
    return _laid_out(found, given, flags, read.path)


def _given(flags: list[Flag], path: str) -> dict[str, Flag]:
    """The flags that change the layout, by field; those the estimate does not use refused."""
    refused = [f for f in flags if f.field in NOT_MEMORY]
    if refused:
        raise InputError(
            f"{refused[0].name} beside {path}: it does not change the memory estimate; drop it"
        )
    given = {f.field: f for f in flags if f.field not in memory.SETTINGS}
    _world_of_nodes(given)
    return given


def _laid_out(read: _Read, given: dict[str, Flag], flags: list[Flag], path: str) -> Layout:
    """The layout of what a file gives with the flags on top, and its settings."""
    layout = Layout(_merged(read.base, given, path), framework=read.framework)
    layout.overrides = [
        Override(f, read.said[f.field])
        for f in given.values()
        if read.said.get(f.field) is not None and read.said[f.field] != f.value
    ]
    layout.rederived = _rederived(read.said, layout.spec, given)
    _apply_settings(layout, read.settings, flags)
    return layout


@dataclass(frozen=True)
class _Read:
    """What a file gives the estimate."""

    base: dict
    """Spec values to put the flags on: the file's, with the world and parallel sizes it
    leaves open taken from the flags."""
    said: dict
    """Spec values the file itself says (what an override replaces)."""
    settings: Settings
    """Its memory settings."""
    framework: str | None = None
    """Its framework (None: a spec)."""


def _world_of_nodes(given: dict[str, Flag]) -> None:
    """``--nnodes`` with ``--nproc-per-node`` as the world they make (both or neither; or
    ``--world-size`` with ``--nproc-per-node``, checked to be whole nodes); the ranks per node
    are kept (a node's CPU memory)."""
    nodes, per_node = given.pop("nodes", None), given.pop("gpus_per_node", None)
    if nodes is None and per_node is None:
        return
    if nodes is None and per_node is not None and "world_size" in given:
        world_flag = given["world_size"]
        solve.whole_nodes(world_flag.value, per_node.value, world_flag.name, per_node.name)  # type: ignore[arg-type]
        given["gpus_per_node"] = per_node
        return
    if nodes is None or per_node is None:
        raise InputError("give both --nnodes and --nproc-per-node, or --world-size alone")
    world = nodes.value * per_node.value  # type: ignore[operator]
    if "world_size" in given and given["world_size"].value != world:
        raise InputError(
            f"--world-size {given['world_size'].value} ≠ {nodes.name} {nodes.value} × "
            f"{per_node.name} {per_node.value} = {world} (fix: drop --world-size or set it to "
            f"{world})"
        )
    given["world_size"] = Flag(f"{nodes.name} × {per_node.name}", "world_size", world)
    given["gpus_per_node"] = per_node


def _spec_file(text: str, path: str) -> _Read:
    """A batchspec spec: its values, and its ZeRO stage as a setting."""
    from translator.batch.spec_file import parse_mapping

    where = "<stdin>" if path == "-" else path
    values, lines = parse_mapping(text, where)
    values = dict(values)
    if "effective_batch_size" in values and "global_batch_size" not in values:
        values["global_batch_size"] = values.pop("effective_batch_size")
    settings = Settings()
    if "zero_stage" in values:
        at = f"{where}:{lines['zero_stage']} zero_stage" if "zero_stage" in lines else where
        settings = Settings((Setting("zero_stage", values["zero_stage"], at),))
    return _Read(values, values, settings)


def _framework_file(found: Framework, reading: Reading, given: dict[str, Flag]) -> _Read:
    """A framework's file read as it runs, on the world and parallel sizes of the flags: the
    world always, the parallel sizes where the file does not fix them (its framework then
    completes the batch its way)."""
    from translator.inspection import inspect_reading
    from translator.reading import Launch

    alone = inspect_reading(found, reading, Launch())
    launch = Launch(**{k: given[k].value for k in LAYOUT if k in given})  # type: ignore[arg-type]
    spec = (alone if launch == Launch() else inspect_reading(found, reading, launch)).require_spec()
    base = {k: v for k, v in spec.output().items() if k != "tokens_per_step"}
    base.pop("data_parallel_size")  # the world and the parallel sizes give it
    # A parallel size the file fixes stays its own (an override then), one it leaves open is
    # the flag's; the world is the flag's, an override of the file's own when it has one.
    said = base | {k: alone.values[k] for k in (*BATCH, "sequence_length") if k in alone.values}
    said["world_size"] = alone.values.get("world_size")
    settings = found.memory_settings(reading) if found.memory_settings else Settings()
    settings += _launcher_settings(reading)
    if reading.opaque:
        settings += Settings(
            unused=(f"{reading.opaque[0]} may hold more settings, which the estimate cannot see",)
        )
    return _Read(base, said, settings, found.name)


def _launcher_settings(reading: Reading) -> Settings:
    """What the launcher's config of a job says about memory (accelerate's FSDP plugin), by the
    framework whose config it is."""
    from translator.plugin import registry

    config = reading.launcher_config
    if config is None or config.framework not in registry.names():
        return Settings()
    read = registry.get(config.framework).memory_settings
    return read(config) if read is not None else Settings()


def _merged(base: dict, given: dict[str, Flag], path: str) -> BatchSpec:
    """``base`` with the flags on top; the batch values the flags change are re-derived, the
    file's global batch kept first, then its micro-batch. A flag that breaks the batch is
    refused, naming the micro-batches that keep it."""
    from translator.batch.spec_file import WORLD_KEYS, build_spec

    flags = {k: f.value for k, f in given.items()}
    values = dict(base)
    if "world_size" in flags:
        values = {k: v for k, v in values.items() if k not in WORLD_KEYS}
    elif flags.keys() & set(LAYOUT) and "world_size" in values:
        values.pop("data_parallel_size", None)
    changed = [k for k in (*LAYOUT, *BATCH) if k in flags and flags[k] != base.get(k)]
    if changed:
        keep = [k for k in BATCH if k in flags]
        for k in BATCH[:2]:
            if len(keep) < 2 and k not in keep and base.get(k) is not None:
                keep.append(k)
        values = {k: v for k, v in values.items() if k not in BATCH or k in keep}
    try:
        return build_spec(values | flags, path)
    except ConfigError as exc:
        named = " and ".join(given[k].written for k in changed) or "the flags"
        why = "; ".join(f.message for f in exc.findings)
        kept = _keeping(values | flags)
        raise InputError(
            f"{named} beside {path} breaks the file's batch: {why}" + (f"; {kept}" if kept else "")
        ) from None


def _keeping(values: dict) -> str | None:
    """The micro-batches that keep the global batch on the layout's DP, when both are known."""
    global_, dp = values.get("global_batch_size"), _dp(values)
    if global_ is None or not dp or global_ % dp:
        return None
    micro = sorted(m for m, _ in solve.decompositions(global_, dp))
    return f"micro-batches that keep the global batch {global_} on DP {dp}: " + ", ".join(
        map(str, micro)
    )


def _rederived(said: dict, spec: BatchSpec, given: dict[str, Flag]) -> list[str]:
    """What the flags changed in the file's batch that they do not set themselves."""
    before = {**said, "data_parallel_size": _dp(said)}
    return [
        f"{WORDS[k]} {before[k]} → {getattr(spec, k)}"
        for k in (*BATCH, "data_parallel_size")
        if k not in given and before.get(k) is not None and before[k] != getattr(spec, k)
    ]


def _dp(values: dict) -> int | None:
    """The data-parallel size of spec values: their world over the parallel sizes (None when
    it does not divide), else their own."""
    world = values.get("world_size")
    if world is None:
        return values.get("data_parallel_size")
    model = 1
    for k in LAYOUT[1:]:
        model *= values.get(k) or 1
    return None if world % model else world // model


def _apply_settings(layout: Layout, settings: Settings, flags: list[Flag]) -> None:
    """The run settings: a flag's, else the file's (offloads add up), else the defaults; an
    overridden one is said so."""
    told = {f.field: f for f in flags if f.field in memory.SETTINGS}
    for name in memory.SETTINGS:
        mine = [s for s in settings.given if s.field == name]
        if name == "offload":
            if mine:
                layout.how[name] = frozenset().union(*(s.value for s in mine))  # type: ignore[arg-type]
                layout.settings += mine
            continue
        engines = {s.engine for s in mine if s.engine is not None}
        if engines:
            layout.engines[name] = engines.pop()
        flag = told.get(name)
        if flag is None and mine:
            layout.how[name] = mine[-1].value
            layout.settings.append(mine[-1])
        elif flag is not None:
            layout.how[name] = flag.value
            if mine and mine[-1].value != flag.value:
                layout.overrides.append(Override(flag, mine[-1].value, mine[-1].where))
    layout.notes += list(settings.unused)
    if layout.spec.sequence_length is None:
        layout.notes.append(
            f"no sequence length given: {DEFAULT_SEQUENCE} tokens per sample assumed (--seq-len)"
        )


# The estimate ------------------------------------------------------------------------------


def estimate(
    layout: Layout,
    model: str | memory.Model,
    *,
    capacity: int | None = None,
    where: str | None = None,
    **how,
) -> Report:
    """The estimate of ``layout`` with ``model`` (a preset, a config.json, or the shape of the
    job's model as resolved); ``how`` is
    :func:`translator.model.memory.run_of`'s keywords for what a file does not say (precision,
    attention, overhead); ``where`` names the file in a finding."""
    spec = layout.spec
    if not spec.is_decided:
        raise InputError(
            "the micro-batch is not decided: give --micro-batch (batchspec plan lists the options)"
        )
    seq_len = spec.sequence_length or DEFAULT_SEQUENCE
    shape = model if isinstance(model, memory.Model) else memory.model_named(model, seq_len)
    run = memory.run_of(spec, seq_len, zero_optimizer=_zero_optimizer(layout), **(how | layout.how))
    found = Report(layout, shape, seq_len, run, memory.estimate(shape, run), capacity)
    if capacity:
        found.fits = found.result.total <= capacity
        options = [m for m, _ in solve.decompositions(spec.global_batch, spec.data_parallel)]
        found.largest_fitting = memory.largest_fitting(shape, run, options, capacity)
        if not found.fits:
            found.findings.append(_too_big(found, capacity, where))
    return found


def _too_big(found: Report, capacity: int, where: str | None) -> Finding:
    best = found.largest_fitting
    return finding(
        "memory-exceeds-capacity",
        f"an estimated {found.result.total / GIB:.1f} GiB per GPU does not fit in "
        f"{capacity / GIB:.1f} GiB",
        where=where,
        hint=(
            f"micro-batch {best} keeps the global batch {found.spec.global_batch} and fits"
            if best
            else "no micro-batch fits: shard more (ZeRO, TP, PP), recompute activations, or use "
            "more memory"
        ),
    )


def shown(value: object) -> str:
    """A value as a message shows it: on/off for a switch, parts joined for an offload."""
    if value is True:
        return "on"
    if value is False or value is None:
        return "off"
    if isinstance(value, frozenset):
        return "+".join(sorted(value))
    return str(value)


def _plain(value: object) -> object:
    """A value as JSON holds it."""
    return sorted(value) if isinstance(value, frozenset) else value
