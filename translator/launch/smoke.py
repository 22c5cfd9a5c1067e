"""A smoke run from start to end: resolve the batch on the launched world, write the config the
engine runs, launch (locally or on Slurm), merge the ranks' reports, and check that every
optimizer step consumed exactly the global batch."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from translator.errors import ConfigError, InputError
from translator.files import write_files
from translator.findings import Finding, finding
from translator.inspection import Source
from translator.launch import command
from translator.launch import workdir as workdirs
from translator.launch.launcher import Launcher
from translator.launch.progress import Progress, duration
from translator.launch.request import RunRequest
from translator.launch.run_model import RunModel
from translator.memory import PRESETS, Model
from translator.plugin.registry import get
from translator.rank import failure, parity_rank
from translator.rank.engines import (
    TORCH,
    config_framework,
    config_refusal,
    engine,
    model_refusal,
    shape_refusal,
    zero_stage,
)
from translator.rank.model import SHAPES, ModelShape
from translator.rank.result import Measurement, RankResult, merge, read_all
from translator.reading import Launch
from translator.spec import BatchSpec
from translator.spec_file import WORLD_KEYS, build_spec
from translator.update import kept, moved

#: Tokens per sample when neither the config nor --seq-len says.
DEFAULT_SEQUENCE = {"tiny": 64, "125m": 1024}
#: Peak dense bf16 FLOP/s per GPU, for MFU (NVIDIA data sheets).
PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12}
#: FLOP/s one CPU rank (one thread) sustains, by the model's width, for the estimate of a
#: run's length (rounded down from runs on this project's 2-core machine, 2 ranks): narrow
#: matrices spend their time in overheads (the tiny model, 64 wide, 16 × 2048 tokens per
#: micro-batch: 5.6 GFLOP/s, 24 s a step), wide ones in the matrix kernels (a Llama-3.2-1B
#: shape cut to 2 layers, 2048 wide, under DeepSpeed ZeRO-2: 31 GFLOP/s, 151 s a step, where
#: 5 GFLOP/s had said 15 minutes). Between the two, on the logarithm of the width.
CPU_FLOPS = ((64, 5e9), (2048, 25e9))


def cpu_flops(hidden: int) -> float:
    """FLOP/s of one CPU rank on a model ``hidden`` wide (:data:`CPU_FLOPS`)."""
    (narrow, low), (wide, high) = CPU_FLOPS
    at = min(1.0, max(0.0, math.log(hidden / narrow) / math.log(wide / narrow)))
    return low * (high / low) ** at


#: Steps estimated to take longer than this many seconds are warned about before the launch.
LONG_RUN_SECONDS = 60.0


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
    recompute: :attr:`translator.estimation.Layout.how`); empty for a spec, whose own
    ``zero_stage`` the estimate takes."""


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
    named, trains = None, {}
    if values is not None:
        given = values.get("world_size")
        if nproc is None:  # the spec's own world, when it fixes one on these nodes
            nproc = given // nnodes if isinstance(given, int) and given % nnodes == 0 else 1
        world = nproc * nnodes
        spec, source, findings = _spec_for_world(values, path, world), None, []
        framework = framework or TORCH
    else:
        inspection, nproc = on_world(read, nproc, nnodes, request.micro)
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
    why = config_refusal(framework, config_text, partners, path, device)
    if chosen.config is not None:
        why = why or model_refusal(framework, spec, config_text)
        why = why or shape_refusal(framework, chosen.shape)
    if why:
        raise InputError(f"{why} (nothing was started)")
    length = request.seq_len or spec.sequence_length or sequence_of(chosen, path)
    folder = Path(request.workdir or workdirs.default("smoke", framework)).resolve()
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
    return Prepared(spec, plan, config_text, findings, expect, partners, chosen, trains)


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


def _trains(read: Source, world: int) -> dict:
    """How the file ``read`` trains, as the memory estimate reads it on ``world`` ranks."""
    from translator.estimation import Flag, layout_of_source

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


def on_world(read: Source, nproc: int | None, nnodes: int, micro: int | None = None):
    """``(inspection, nproc)``: the file or job ``read`` on ``nproc × nnodes`` processes
    (``nproc`` None: the job's own per node, else 1). On another world than the one the job
    launches, its global batch and micro-batch are kept and the accumulation re-solved, the job
    edited to that (:func:`translator.update.kept`, :func:`translator.update.moved`); where that
    cannot be done, the file's micro-batch and accumulation run on the new world. A finding
    says which global batch runs. ``micro`` (a tune probe's) replaces the file's micro-batch,
    the global batch kept; it must divide."""
    from translator.errors import BatchspecError
    from translator.inspection import inspect_reading

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
        if old is None and micro is not None and micro != on_new.require_spec().micro:
            old = on_new.spec  # a config whose world the launch gives, at a probe's micro-batch
        else:
            return on_new, nproc
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
    return found, nproc


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


def write_workdir(prepared: Prepared) -> None:
    """The work folder for a run: the spec and the engine's config, no results of an old run."""
    plan = prepared.plan
    workdirs.make(plan.workdir)
    plan.results.mkdir(parents=True, exist_ok=True)
    for pattern in ("rank-*.json", parity_rank.FILE.format(rank="*")):
        for stale in plan.results.glob(pattern):
            stale.unlink()
    # A dict: for the torch engine the config is spec.json itself.
    files = {
        plan.workdir / "spec.json": prepared.spec.model_dump_json(indent=2),
        plan.workdir / plan.config_name: prepared.config_text,
    } | {plan.workdir / name: text for name, text in prepared.partner_files.items()}
    if plan.model_config is not None:
        files[plan.model_config] = json.dumps(prepared.model.config, indent=2)
    write_files(list(files.items()), force=True)


def variables(engine_name: str, memory_limit: int | None) -> dict[str, str]:
    """What the ranks' environment sets beside the one they start in: one thread per rank
    unless told, what the engine needs (offline switches), the optional memory cap."""
    out = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "PYTHONUNBUFFERED": "1"}
    out |= engine(engine_name).environment
    if memory_limit:
        from translator.rank.worker import MEMORY_LIMIT_ENV

        out[MEMORY_LIMIT_ENV] = str(memory_limit)
    return out


def environment(engine_name: str, memory_limit: int | None) -> dict:
    """The ranks' environment when they start here: this one and :func:`variables`."""
    return dict(os.environ) | variables(engine_name, memory_limit)


@dataclass
class Report:
    """The outcome of a smoke run."""

    measurement: Measurement
    errors: list[str]
    """Why the run does not prove the batch (empty when it does)."""
    results: list[RankResult]
    out_of_memory: bool = False
    """A rank ran out of memory (by its report, or, dead before reporting, by the log)."""


def judge(
    prepared: Prepared, stopped: str | None, timeout: float | None, log_tail: list[str]
) -> Report:
    """Merge the ranks' reports and say what is wrong, if anything (and, for a run that did not
    end, how far it got)."""
    plan, spec = prepared.plan, prepared.spec
    results = read_all(plan.results)
    m = merge(results, plan.world_size)
    ran = f"{m.optimizer_steps} of {plan.steps} optimizer steps ran"
    errors = []
    if stopped == "timeout":
        errors.append(
            f"timed out after {timeout:g} s ({ran}); every process of the run was stopped"
        )
    elif stopped == "interrupted":
        errors.append(f"interrupted ({ran}); every process of the run was stopped")
    # a rank that failed because a peer did says nothing of its own when the peer said why
    first_hand = [r for r in results if r.error and not r.error.startswith(failure.COLLATERAL)]
    for r in results:
        if r.error == failure.DEVICE:
            errors.append(_oom_message(spec, r))
        elif r.error == failure.HOST:
            errors.append(
                f"rank {r.rank} ran out of host memory (not the device's: no smaller micro-batch "
                "fixes it); give the ranks more host memory, or build fewer layers (--layers N)"
            )
        elif r.error and (r in first_hand or not first_hand):
            errors.append(
                f"rank {r.rank} failed after {_steps(len(r.samples_per_step))}: {r.error}"
            )
    missing = sorted(set(range(plan.world_size)) - {r.rank for r in results})
    unfinished = [r for r in results if not r.finished and not r.error]
    oom = any(r.error == failure.DEVICE for r in results)
    if (missing or unfinished) and not errors:
        ranks = ", ".join(map(str, missing + [r.rank for r in unfinished]))
        if plan.device == "gpu" and failure.killed_by_host(log_tail):
            errors.append(
                f"rank(s) {ranks} were killed (SIGKILL) before they could report: the host's "
                "memory killer, most likely; give the ranks more host memory, or --layers N"
            )
        elif any(failure.mentions_out_of_memory(line) for line in log_tail):
            oom = True  # an allocator abort (C++ std::bad_alloc) leaves no report behind
            errors.append(
                f"out of memory on rank(s) {ranks} before they could report (at "
                f"micro-batch {spec.micro_batch_size})"
            )
        else:
            tail = next((line for line in reversed(log_tail) if line.strip()), "no output")
            ended = [f"rank(s) {', '.join(map(str, missing))} reported nothing"] if missing else []
            ended += [
                f"rank {r.rank} ended after {_steps(len(r.samples_per_step))}" for r in unfinished
            ]
            errors.append(f"{'; '.join(ended)}; last output: {tail}")
    if not errors:
        if m.optimizer_steps != plan.steps:
            errors.append(f"{m.optimizer_steps} optimizer steps ran, not {plan.steps}")
        # Packed, the global batch counts rows (each holding several samples), not samples.
        packed = m.packed_rows_per_optimizer_step
        counts = (packed if packed is not None else m.samples_per_optimizer_step) or []
        if any(n != spec.global_batch_size for n in counts):
            errors.append(
                f"{per_step(counts, plan.world_size, packed is not None)}, expected "
                f"{spec.global_batch_size} (the global batch)"
            )
        expected = prepared.expect_global
        if expected is not None and any(n != expected for n in counts):
            errors.append(
                f"{plan.framework} consumed {_samples(counts)} "
                f"{'packed rows' if packed is not None else 'samples'} per optimizer step, not "
                f"the {expected} expected (--expect-global)"
            )
    return Report(m, errors, results, oom)


def verdict(report: Report, plan: command.SmokePlan) -> str:
    """The run in one line: ``ok: 8 samples per optimizer step on 2 ranks, as expected``, or
    ``error: `` and what is wrong."""
    if report.errors:
        return "error: " + "; ".join(report.errors)
    m = report.measurement
    counts = m.samples_per_optimizer_step or []
    if m.packed_rows_per_optimizer_step is None:
        return f"ok: {per_step(counts, plan.world_size)}, as expected"
    rows = per_step(m.packed_rows_per_optimizer_step, plan.world_size, packed=True)
    return f"ok: {rows}, as expected, holding samples {run_lengths(counts)}"


def per_step(counts: list[int], ranks: int, packed: bool = False) -> str:
    """``8 samples per optimizer step on 2 ranks`` (``packed rows`` when ``packed``); with
    steps that differ, run-length."""
    on = f"on {ranks} rank{'s' if ranks != 1 else ''}"
    what = "packed rows" if packed else "samples"
    if len(set(counts)) == 1:
        return f"{counts[0]} {what} per optimizer step {on}"
    return f"{what} per optimizer step {run_lengths(counts)} {on}"


def run_lengths(counts: list[int]) -> str:
    """The samples of each step, run-length: ``8 × 200 steps``; ``8 × 3, 6 × 1`` when they
    differ (in step order); ``-`` for none."""
    runs: list[list[int]] = []
    for n in counts:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    if len(runs) == 1:
        n, times = runs[0]
        return f"{n} × {_steps(times, 'step')}"
    return ", ".join(f"{n} × {times}" for n, times in runs) or "-"


def _samples(counts: list[int]) -> str:
    return str(counts[0]) if len(set(counts)) == 1 else run_lengths(counts)


def _steps(n: int, word: str = "optimizer step") -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _oom_message(spec: BatchSpec, r: RankResult) -> str:
    from translator import solve

    micro = r.micro_batch_size or spec.micro
    smaller = [
        (m, a) for m, a in solve.decompositions(spec.global_batch, spec.data_parallel) if m < micro
    ]
    fix = (
        f"micro-batch {smaller[0][0]} with accumulation {smaller[0][1]} keeps the global "
        f"batch {spec.global_batch_size}"
        if smaller
        else "no smaller micro-batch keeps the global batch; use more ranks or a smaller model"
    )
    return f"out of memory at micro-batch {micro} on rank {r.rank}; fix: {fix}"


def flops_per_token(parameters: int, shape: ModelShape | Model, sequence_length: int) -> int:
    """Training FLOPs per token: 6 N + 12 L h s (PaLM, appendix B)."""
    return 6 * parameters + 12 * shape.layers * shape.hidden * sequence_length


def mfu(report: Report, prepared: Prepared) -> tuple[float | None, str]:
    """Model FLOPs utilisation on GPU: (6 N + 12 L h s) FLOPs per token (PaLM, appendix B)
    × tokens/s / (GPUs × peak dense bf16 FLOP/s). None on CPU, on an unknown GPU, or for a run
    that failed."""
    formula = "6·N + 12·L·h·s FLOPs per token (PaLM appendix B), peak dense bf16"
    m = report.measurement
    peak = next((v for k, v in PEAK_FLOPS.items() if k in (m.device or "")), None)
    if peak is None or not m.tokens_per_second or not report.results or report.errors:
        return None, formula
    shape, plan = prepared.model.shape, prepared.plan
    params = max(r.parameters for r in report.results)
    per_token = flops_per_token(params, shape, m.sequence_length or plan.sequence_length)
    return m.tokens_per_second * per_token / (plan.world_size * peak), formula


def estimated_seconds(
    prepared: Prepared,
    cores: int | None,
    sequence_length: int | None = None,
    steps: int | None = None,
) -> float | None:
    """How long the optimizer steps of a CPU run take, roughly (start-up not included): each
    rank's tokens per step (micro × accumulation × sequence) × FLOPs per token of the model
    (:func:`flops_per_token`, its parameters from its shape) / :data:`CPU_FLOPS`, × ranks per
    core when there are more ranks than ``cores`` (None: the nodes' own, not known here).
    ``sequence_length`` and ``steps``: another run's, for the advice. None on a GPU."""
    plan, spec = prepared.plan, prepared.spec
    if plan.device != "cpu":
        return None
    length = sequence_length or plan.sequence_length
    shape = _shape(prepared)
    if isinstance(shape, Model):
        params = shape.parameters
    else:
        params = 12 * shape.layers * shape.hidden**2 + (2 * shape.vocab + length) * shape.hidden
    tokens = spec.micro * spec.accumulation * length
    crowding = max(1.0, plan.nproc / cores) if cores else 1.0
    seconds = tokens * flops_per_token(params, shape, length) / cpu_flops(shape.hidden) * crowding
    return (steps or plan.steps) * seconds


def _shape(prepared: Prepared) -> ModelShape | Model:
    """The shape of the model the run builds: the job's, else the stand-in's."""
    if prepared.model.config is not None:
        return prepared.model.shape
    return SHAPES[prepared.plan.model]


def long_run_warning(prepared: Prepared, cores: int | None) -> str | None:
    """A warning for a run whose steps are estimated (:func:`estimated_seconds`) to take longer
    than :data:`LONG_RUN_SECONDS`, with how long it would take shortened; else None."""
    seconds = estimated_seconds(prepared, cores)
    if seconds is None or seconds <= LONG_RUN_SECONDS:
        return None
    plan, spec = prepared.plan, prepared.spec
    tips = []
    shorter = [
        length
        for length in (2**k for k in range(4, 16))
        if length < plan.sequence_length
        and (estimated_seconds(prepared, cores, length) or 0) <= LONG_RUN_SECONDS / 4
    ]
    if shorter:
        quick = estimated_seconds(prepared, cores, shorter[-1]) or 0
        tips.append(f"--seq-len {shorter[-1]} (about {duration(quick)})")
    if plan.steps > 1:
        one = estimated_seconds(prepared, cores, steps=1) or 0
        tips.append(f"--steps 1 (about {duration(one)})")
    return (
        f"warning: {_steps(plan.steps)} of micro-batch {spec.micro_batch_size} × accumulation "
        f"{spec.gradient_accumulation_steps} × {plan.sequence_length} tokens per rank may take "
        f"about {duration(seconds)} on CPU (the {prepared.model.architecture} model at "
        f"{cpu_flops(_shape(prepared).hidden) / 1e9:.3g} GFLOP/s per rank)"
        + (f"; shorter: {' or '.join(tips)}" if tips else "")
    )


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


def built_parameters(results: list[RankResult], spec: BatchSpec) -> int | None:
    """The parameters of the model as the ranks built it (each rank holds it whole without
    model parallelism); None with model parallelism, where a rank holds a part, or when no
    rank said."""
    if spec.tensor_parallel_size * spec.pipeline_parallel_size * spec.context_parallel_size > 1:
        return None
    return max((r.parameters for r in results), default=0) or None


def estimated_memory(prepared: Prepared, sequence_length: int) -> dict:
    """The estimate of :mod:`translator.memory` for the run as it ran (the engines train in
    bf16 on a GPU, fp32 on CPU), to set beside the peak it measured."""
    from translator import memory

    gpu = prepared.plan.device == "gpu"
    run = memory.run_of(
        prepared.spec,
        sequence_length,
        precision="bf16" if gpu else "fp32",
        overhead=memory.GIB if gpu else 0,
        **prepared.trains,
    )
    found = memory.estimate(prepared.model.shape, run)
    states = sum(p.bytes for p in found.parts if p.name in memory.STATES)
    return {"model_states_bytes": states, **found.as_dict()}


@dataclass
class Outcome:
    """A smoke run, as the command reports it."""

    output: dict
    """``smoke --json``'s object: the resolved spec's keys and what was measured."""
    report: Report
    """The ranks' merged reports and what is wrong."""
    stopped: str | None
    """``timeout`` or ``interrupted`` when the run was stopped, else None."""


def run(
    prepared: Prepared,
    launcher: Launcher,
    timeout: float | None,
    memory_limit: int | None,
    say: Progress,
) -> Outcome:
    """Run ``prepared`` through ``launcher`` and judge what the ranks did; ``say`` tells the
    progress."""
    plan = prepared.plan
    launcher.check()
    built = launcher.build(plan, variables(plan.framework, memory_limit))  # before any write
    write_workdir(prepared)
    ran = launcher.launch(plan, built, timeout, say)
    stopped, tail = ran.stopped, ran.log_tail
    report = judge(prepared, stopped, timeout, tail)
    utilisation, formula = mfu(report, prepared)
    m = report.measurement
    # The sequence length the ranks ran (the config's or --seq-len's, as the engine took it).
    length = m.sequence_length or plan.sequence_length
    spec = prepared.spec.model_copy(update={"sequence_length": length})
    output = spec.output() | {
        "engine": engine_info(prepared),
        "model": prepared.model.output(built_parameters(report.results, spec)),
        "estimated_memory": estimated_memory(prepared, length),
        "framework": plan.framework,
        "optimizer_steps": m.optimizer_steps,
        "samples_per_optimizer_step": m.samples_per_optimizer_step,
        "packed_rows_per_optimizer_step": m.packed_rows_per_optimizer_step,
        "tokens_per_second": m.tokens_per_second,
        "step_time_seconds": m.step_time_seconds,
        "peak_memory_bytes": m.peak_memory_bytes or None,
        "device": m.device,
        "stepped_by": m.stepped_by or None,
        "mfu": utilisation,
        "mfu_formula": formula,
        "workdir": str(plan.workdir),
        "launcher": launcher.name,
        "slurm_job": ran.job if launcher.name == "slurm" else None,
        "job": ran.job,
        "expect_global": prepared.expect_global,
        "errors": report.errors,
        "findings": [f.as_dict() for f in prepared.findings],
    }
    return Outcome(output, report, stopped)
