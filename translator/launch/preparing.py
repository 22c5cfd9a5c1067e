"""A smoke run prepared: the batch of the file on the launched world (moved there as
``update`` moves a batch), the config and model the engine is fed, refused before anything
is written or started when the engine cannot run it."""

from __future__ import annotations

from dataclasses import dataclass, field

from translator.batch.spec_file import WORLD_KEYS, build_spec
from translator.edit.update import kept, moved
from translator.inspection import FileRead
from translator.launch import command
from translator.launch import workdir as workdirs
from translator.launch.request import RunRequest
from translator.launch.run_model import RunModel
from translator.model.memory import PRESETS
from translator.plugin.registry import get
from translator.rank.engines import (
    TORCH,
    config_framework,
    config_refusal,
    model_refusal,
    require_zero_packages,
    runs_zero,
    shape_refusal,
    zero_stage,
)
from translator.reading import Launch
from translator.spec import BatchSpec
from translator.words.errors import ConfigError, InputError
from translator.words.findings import Finding, finding

#: Tokens per sample when neither the config nor --seq-len says.
DEFAULT_SEQUENCE = {"tiny": 64, "125m": 1024}


@dataclass
class Prepared:
    """What will run."""

    spec: BatchSpec
    plan: command.SmokePlan
    config_text: str
    """The config the engine is fed (the user's own file when it is for that engine)."""
    findings: list[Finding] = field(default_factory=list)
    expect_global: int | None = None
    """The global batch the user believes the file gives (``--expect-global``)."""
    partner_files: dict[str, str] = field(default_factory=dict)
    """Files the config names that the engine runs with it (name in the work folder -> text),
    such as the DeepSpeed JSON of an HF TrainingArguments file."""
    model: RunModel = field(default_factory=lambda: RunModel(PRESETS["tiny"]))
    """The model the ranks build: the job's own, or the stand-in."""
    trains: dict = field(default_factory=dict)
    """How the file trains, as the memory estimate counts it (its ZeRO stage, offload,
    recompute: :attr:`translator.checks.estimation.Layout.how`); empty for a spec, whose own
    ``zero_stage`` the estimate takes."""
    job_global: int | None = None
    """The global batch the job itself runs on the world it launches (None: a spec, or a file
    whose world the run gives): a run whose steps consumed another proves another batch."""


def prepare(request: RunRequest) -> Prepared:
    """Resolve the batch of ``request.file`` on ``nproc x nnodes`` ranks (``nproc`` None: the
    job's own processes per node, else 1; see :func:`on_world`) and choose what the engine is
    fed (the model: see :func:`translator.launch.run_model.choose`). What the engine cannot
    run is refused here, before anything is written or started; a dry run for remote ranks
    only notes an engine not installed here (the nodes' Python runs it). A tune probe's
    ``request.micro`` runs in place of the file's micro-batch with the global batch kept (the
    file edited in memory as ``update`` edits it, every other setting as it stands)."""
    path, nproc, nnodes, framework = request.file, request.nproc, request.nnodes, request.framework
    remote, dry_run = request.remote, request.dry_run
    read = request.read()
    text, values = read.text, read.values
    named, trains, job_global = None, {}, None
    if values is not None:
        given = values.get("world_size")
        if nproc is None:  # the spec's own world, when it fixes one on these nodes
            nproc = given // nnodes if isinstance(given, int) and given % nnodes == 0 else 1
        world = nproc * nnodes
        spec, source, findings = _spec_for_world(values, path, world), None, []
        framework = framework or TORCH
    else:
        inspection, nproc, job_global = on_world(read, nproc, nnodes, request.micro)
        world = nproc * nnodes
        spec, source = inspection.require_spec(), inspection.reading.framework
        findings, named = inspection.findings, inspection.model
        framework = framework or inspection.reading.framework
        trains = _trains(read, world)
    if remote and dry_run:
        findings = [*findings, *_not_installed_here(framework)]
    device = check_engine(framework, spec, request.device, remote, path, not (remote and dry_run))
    chosen = request.run_model(named, framework, "smoke", None if remote else nproc)
    config_name, config_text, partners, more = _engine_config(
        framework, source, text, spec, None if values is not None else inspection
    )
    findings = findings + more
    ran = zero_stage(framework, config_text, partners)
    if not (remote and dry_run):
        require_zero_packages(framework, ran)
    trains, unsharded = _as_run(framework, trains, ran, path)
    findings = findings + unsharded
    why = config_refusal(framework, config_text, partners, path, device)
    if chosen.config is not None:
        why = why or model_refusal(framework, spec, config_text)
        why = why or shape_refusal(framework, chosen.shape)
    if why:
        raise InputError(f"{why} (nothing was started)")
    length = request.seq_len or spec.sequence_length or sequence_of(chosen, path)
    folder = workdirs.chosen(request.workdir, "smoke", framework)
    plan = command.SmokePlan(
        framework=framework,
        nproc=nproc,
        nnodes=nnodes,
        steps=request.steps,
        model=chosen.stand_in,
        sequence_length=length,
        workdir=folder,
        config_name=config_name,
        rdzv_endpoint=request.rdzv_endpoint,
        device=device,
        recompute=request.recompute,
        model_config=None if chosen.config is None else folder / chosen.file,
    )
    expect = request.expect_global
    return Prepared(spec, plan, config_text, findings, expect, partners, chosen, trains, job_global)


def _engine_config(
    framework: str, source: str | None, text: str, spec: BatchSpec, inspection
) -> tuple[str, str, dict[str, str], list[Finding]]:
    """What the engine is fed: ``(file name, text, partner files, findings)``. The plain engine
    takes the spec; a framework's engine its own file as it stands (a job: the config its flags
    give), else the config rendered for the spec, whose loss normalisation is said."""
    config_of = config_framework(framework)
    if config_of is None:
        return "spec.json", spec.model_dump_json(indent=2), {}, []
    own = get(config_of)
    if config_of == source:
        reading, job_config = inspection.reading, own.job_config
        text = reading.text  # the file's, or edited to another split (a tune probe's)
        if reading.launcher is not None and job_config is not None:
            text = job_config(reading)  # a job: what its flags say
        partners = own.partner_files(reading) if own.partner_files is not None else {}
        return own.filename, text, partners, []
    from translator.render import render

    rendered = render(spec, own)
    said = own.loss_normalisation(None, spec) if own.loss_normalisation is not None else []
    return rendered.filename, rendered.text, {}, rendered.findings + said


def _as_run(framework: str, trains: dict, ran: int | None, path: str) -> tuple[dict, list[Finding]]:
    """How the run trains, where the job shards its model states other than through DeepSpeed
    (FSDP: an accelerate config's ``distributed_type: FSDP``, the Trainer's ``--fsdp``, read as
    the ZeRO stage it equals in memory): the engine that runs it under DeepSpeed or plain data
    parallelism runs plain DDP (the Trainer on CPU: accelerate enables FSDP only on GPUs, and
    smoke hands it none). Said, and the estimate beside the peak counts that unsharded run."""
    stage = trains.get("zero_stage")
    if not stage or ran is not None or not runs_zero(framework):
        return trains, []
    said = finding(
        "smoke-sharding-not-run",
        f"{path} shards its model states (FSDP, ZeRO stage {stage} in memory), which this "
        "smoke run does not: the Trainer runs plain data parallelism (DDP) here, so the run "
        "proves the samples of each step, not the job's memory (the estimate beside its peak "
        "counts the unsharded run)",
        hint=f"batchspec estimate {path} counts the job's sharding; run the job itself for its "
        "peak memory",
        where=path,
    )
    return {k: v for k, v in trains.items() if k not in ("zero_stage", "offload")}, [said]


def _trains(read: FileRead, world: int) -> dict:
    """How the file ``read`` trains, as the memory estimate reads it on ``world`` ranks."""
    from translator.checks.estimation import Flag, layout_of_source

    return layout_of_source(read, [Flag("--world-size", "world_size", world)]).how


def sequence_of(chosen: RunModel, path: str) -> int:
    """Tokens per sample of a run whose config and flags give none: the stand-in's default; the
    job's model has none batchspec could pick for it."""
    if chosen.config is None:
        return DEFAULT_SEQUENCE[chosen.stand_in]
    raise InputError(
        f"{path} does not say its sequence length: give --seq-len (the tokens per sample the "
        "job trains on)"
    )


def job_nodes(read: FileRead) -> int:
    """The nodes the job ``read`` launches, as read (a job definition's pods, its launcher's
    nodes): those a scheduler's run starts unless told otherwise; 1 where the file says none."""
    if read.values is not None:  # a spec
        return read.values.get("nodes") or 1
    from translator.inspection import inspect_reading

    assert read.framework is not None and read.reading is not None
    return inspect_reading(read.framework, read.reading, Launch()).values.get("nodes") or 1


def on_world(read: FileRead, nproc: int | None, nnodes: int, micro: int | None = None):
    """``(inspection, nproc, job_global)``: the file or job ``read`` on ``nproc × nnodes`` processes
    (``nproc`` None: the job's own per node, else 1). On another world than the one the job
    launches, its global batch and micro-batch are kept and the accumulation re-solved, the job
    edited to that (:func:`translator.edit.update.kept`, :func:`translator.edit.update.moved`); where that
    cannot be done, the file's micro-batch and accumulation run on the new world. A finding
    says which global batch runs. ``micro`` (a tune probe's) replaces the file's micro-batch,
    the global batch kept; it must divide. ``job_global``: the global batch the job runs on the
    world it launches (None when the run's world is the file's only world)."""
    from translator.inspection import inspect_reading
    from translator.words.errors import BatchspecError

    path, chosen, reading = read.path, read.framework, read.reading
    assert chosen is not None and reading is not None  # a framework's file, not a spec
    job = inspect_reading(chosen, reading, Launch())
    nproc = nproc or job.values.get("gpus_per_node") or 1
    world = nproc * nnodes
    # Only a world the job launches is kept apart from the batch (a file's batch keys that
    # imply a world, such as a full DeepSpeed triple, must fit the run's)
    launched = reading.world_size is not None and job.spec is not None and job.spec.is_decided
    old = job.spec if launched else None
    if old is None or (old.world == world and micro in (None, old.micro)):
        on_new = inspect_reading(chosen, reading, Launch(world_size=world))
        if old is not None or micro is None or micro == on_new.require_spec().micro:
            return on_new, nproc, None if old is None else old.global_batch
        old = on_new.require_spec()  # a config whose world the launch gives, at a probe's micro
    try:
        found = moved(chosen, reading, old, kept(old, path, world=world, micro=micro))
        kept_words = "the accumulation re-solved to keep the global batch"
    except BatchspecError as exc:
        if micro is not None:
            raise
        found = inspect_reading(chosen, reading, Launch(world_size=world))
        kept_words = f"not the job's global batch: {exc}"
    if old.world != world and found.spec is not None and found.spec.is_decided:
        ran = found.spec
        found.findings.append(
            finding(
                "smoke-other-world",
                f"{path} runs global batch {old.global_batch_size} on {old.world} processes "
                f"(micro {old.micro} × accumulation {old.accumulation} × data-parallel "
                f"{old.data_parallel}); this smoke run starts {world}: micro {ran.micro} × "
                f"accumulation {ran.accumulation} × data-parallel {ran.data_parallel} = global "
                f"{ran.global_batch_size}, {kept_words}",
                where=path,
            )
        )
    return found, nproc, old.global_batch


def _spec_for_world(values: dict, path: str, world: int) -> BatchSpec:
    given = {k: v for k, v in values.items() if k in WORLD_KEYS and v is not None}
    spec = build_spec(values if given else values | {"world_size": world}, path)
    if spec.world_size != world:
        raise ConfigError(
            [
                finding(
                    "smoke-world-mismatch",
                    f"{path} is for world size {spec.world_size}, but the smoke run launches {world}",
                    hint=f"launch {spec.world_size} processes, or plan the batch for {world}: "
                    f"batchspec plan {path} --world-size {world}",
                    where=path,
                )
            ]
        )
    return spec


def check_engine(
    framework: str,
    spec: BatchSpec,
    device: str | None,
    remote: bool,
    where: str,
    installed_here: bool = True,
) -> str:
    """Refuse, before any process starts, an engine that is not installed (before anything
    imports torch; unless not ``installed_here`` is asked) or a layout it does not run (``where``: the file that asks for it); the
    device the ranks compute on (see :func:`resolve_device`)."""
    from translator.rank.engines import refusal, require_installed

    if installed_here:
        require_installed(framework)
    device = resolve_device(device, remote)
    why = refusal(framework, spec, device)
    if why:
        raise InputError(f"{where}: {why} (nothing was started)")
    return device


def _not_installed_here(framework: str) -> list[Finding]:
    """A warning when ``framework``'s engine is not installed on this machine, for a run
    whose ranks start elsewhere."""
    from translator.rank.engines import not_installed

    absent, install = not_installed(framework)
    if not absent:
        return []
    return [
        finding(
            "framework-not-installed",
            f"the {framework} engine needs {', '.join(absent)}, not installed here: the "
            "nodes' Python must have it",
            hint=f"{install} where the ranks run",
        )
    ]


def resolve_device(requested: str | None, remote: bool = False) -> str:
    """``gpu`` or ``cpu``: as asked; else ``gpu`` when the ranks run ``remote`` (Slurm's or
    Kubernetes' nodes have the GPUs that a login machine lacks), else ``gpu`` when this
    machine has one."""
    if requested not in (None, "auto"):
        return requested
    if remote:
        return "gpu"
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # an engine that runs without torch
        return "cpu"
    import torch

    return "gpu" if torch.cuda.is_available() else "cpu"


def engine_info(prepared: Prepared) -> dict:
    """Whose code runs: ``{"framework": ..., "deepspeed_zero_stage": N or None}`` (the ZeRO
    stage where the engine runs DeepSpeed)."""
    plan = prepared.plan
    stage = zero_stage(plan.framework, prepared.config_text, prepared.partner_files)
    return {"framework": plan.framework, "deepspeed_zero_stage": stage}


def engine_words(info: dict) -> str:
    """``hf (DeepSpeed ZeRO-2)``, or the framework alone."""
    stage = info["deepspeed_zero_stage"]
    return info["framework"] + ("" if stage is None else f" (DeepSpeed ZeRO-{stage})")
