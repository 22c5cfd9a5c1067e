"""``batchspec tune`` from start to end, for the command line to call with a :class:`Request`.

What would fail after the probes is refused before the first one (an engine that is not
installed before anything imports torch). Then the search runs here, each probe a real run
(:mod:`translator.launch.probes`, :mod:`translator.batch.tuning`), or the whole search is submitted as
one Slurm job that runs this tune again on its first node (``--in-allocation``) and is followed
to its end. The peak memory is fitted to the probes, the pick rendered, and the outcome told:
one JSON object, or the table and bars of :mod:`translator.launch.tune_report`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from translator.batch import tuning
from translator.launch import (
    preparing,
    probes,
    run_model,
    slurm,
    smoke,
    throughput,
    tune_parity,
    tune_report,
)
from translator.launch import workdir as workdirs
from translator.launch.command import SmokePlan
from translator.launch.progress import Progress
from translator.launch.request import RunRequest
from translator.model.memory import GIB
from translator.rank.engines import TORCH, engine, with_option
from translator.spec import BatchSpec
from translator.words.contained import refuse_links
from translator.words.errors import InputError
from translator.words.findings import finding

if TYPE_CHECKING:
    from translator.edit.update import Updated
    from translator.inspection import FileRead
    from translator.plugin.contract import Framework

#: What the Slurm job writes: the inner tune's JSON output.
RESULT_FILE = "tune.json"
#: Parameters only the login side uses; the job is given every other one as it was given.
LOGIN_ONLY = {
    "use_slurm",
    "launcher",
    "k8s_image",
    "k8s_volume",
    "k8s_namespace",
    "partition",
    "account",
    "time_limit",
    "sbatch_extra",
    "setup",
    "gpus_per_node",
    "cpus_per_task",
    "timeout",
    "in_allocation",
    "as_json",
    "debug",
}


@dataclass(frozen=True)
class GivenOption:
    """One parameter of the command line as it was parsed (the Slurm job is given it again)."""

    name: str
    """The parameter's name (``nproc``)."""
    flag: str | None
    """Its first spelling (``--nproc``); None for the FILE argument."""
    value: object
    """The parsed value; ``None``, ``False`` or ``()`` when it was not given."""
    is_flag: bool = False
    """A switch, given without a value."""
    multiple: bool = False
    """Given once per value."""
    off_flag: str | None = None
    """The switch's spelling that turns it off (``--no-parity``), for an on/off switch."""


@dataclass(frozen=True)
class Request:
    """A tune as the command line asks for it: the run every probe shares, and the search's
    own options."""

    run: RunRequest
    """What each probe runs (the file whose global batch is kept, the engine, the world, the
    model, the steps per probe, the folder: each probe a subfolder); its ``timeout`` is the
    whole tune's and its ``memory_limit`` also the capacity the estimate fits in."""
    probe_timeout: float | None
    """Seconds one probe may take (``--probe-timeout``): a probe whose rank hangs (waiting on
    a peer that failed) is stopped, every process of it, and the tune ends."""
    slurm: slurm.SlurmOptions | None
    """Submit the whole tune as one Slurm job with these options; None: run it here."""
    zero_stages: str | None
    """ZeRO stages to try, comma-separated (``--zero-stages``)."""
    threshold: float
    """Tokens/s gain below which a larger micro-batch counts as no better."""
    precision: str | None
    """The estimate's precision (default: bf16 on GPU; on CPU fp32, or ``16-bit`` for a model
    whose config says bf16 or fp16)."""
    attention: str
    """The estimate's attention (``flash`` or ``eager``)."""
    sequence_parallel: bool
    """The estimate counts Megatron's sequence parallelism."""
    distributed_optimizer: bool
    """The estimate counts Megatron's distributed optimizer."""
    overhead: int | None
    """Bytes no formula covers (default: 1 GiB on GPU, 0 on CPU)."""
    out_dir: str | None
    """Where the pick is rendered (``--out``)."""
    targets: str | None
    """The frameworks it is rendered for (default: the tuned one)."""
    force: bool
    """Replace files in ``out_dir``."""
    write: bool
    """Apply the pick to the file itself (and the files of its job) with ``update``'s edit of
    its micro-batch and accumulation (``--write``)."""
    plot_path: str | None
    """A PNG of tokens/s and peak memory against micro-batch."""
    in_allocation: bool
    """Running inside the Slurm allocation that ``slurm`` asked for: probes are job steps."""
    as_json: bool
    """The output is one JSON object (and no progress on stderr, outside an allocation)."""
    parity: bool | None = None
    """Check the pick with ``smoke --parity`` against the file's own micro-batch × accumulation
    (``--parity/--no-parity``); None: when the file gives a split and the engine checks parity."""
    command_line: tuple[GivenOption, ...] = ()
    """The command line as parsed, for the Slurm job to run again."""


@dataclass(frozen=True)
class TuneOutcome:
    """What a tune tells, and how it exits."""

    output: dict
    """What ``--json`` prints (``pick``, ``probes``, ``probes_used``, ``budget``...)."""
    text: str
    """The same for a terminal; its ``findings`` are printed after it."""
    error: str | None = None
    """The one error line after the output (a tune that was stopped), else None."""
    exit_code: int = 0


def tune(request: Request, echo: Progress) -> TuneOutcome:
    """Run the tune ``request`` asks for; ``echo`` shows its progress (on stderr)."""
    setup, stages = prepare(request)
    check = tune_parity.wanted(request.parity, setup.spec, setup.plan.framework, request.run.file)
    quiet = request.as_json and not request.in_allocation  # a job's log takes the progress
    say = Progress(quiet=True) if quiet else echo
    if request.slurm is not None:
        return submit(setup, request, request.slurm, say)
    device = setup.plan.device
    precision = request.precision or throughput.precision_of(setup.plan, setup.model)
    overhead = request.overhead
    if overhead is None:
        overhead = GIB if device == "gpu" else 0
    estimator = probes.estimator(
        setup,
        precision=precision,
        attention=request.attention,
        sequence_parallel=request.sequence_parallel,
        distributed_optimizer=request.distributed_optimizer,
        overhead=overhead,
    )
    capacity = request.run.memory_limit or _gpu_memory(device)
    result, seconds, stopped = search(
        setup, stages, request.run.recompute, estimator, capacity, request.threshold, say
    )
    return report(request, setup, result, seconds, stopped, check, say)


def prepare(request: Request) -> tuple[probes.Setup, Sequence[int | None]]:
    """What every probe shares, and the ZeRO stages to try; refuses, before any probe, what
    would fail later."""
    run = dataclasses.replace(request.run, source=request.run.read())
    spec, job, source, nproc = _layout(run)
    framework = run.framework or source or TORCH
    device = preparing.check_engine(
        framework, spec, run.device, request.slurm is not None, run.file
    )
    stages = zero_stages(request.zero_stages, framework)
    if run.recompute and "recompute" not in engine(framework).options:
        raise InputError(
            f"--recompute: the {framework} engine does not switch recomputation; "
            f"tune with --framework {' or '.join(with_option('recompute'))}"
        )
    _check_outputs(request, framework, job, spec)
    named = run_model.named_in(run.read(), run.model_config)
    here = None if request.slurm is not None else nproc
    chosen = run.run_model(named, framework, "tune", here)
    plan = SmokePlan(
        framework=framework,
        nproc=nproc,
        nnodes=run.nnodes,
        steps=run.steps,
        model=chosen.stand_in,
        sequence_length=run.seq_len
        or spec.sequence_length
        or preparing.sequence_of(chosen, run.file),
        workdir=workdirs.chosen(run.workdir, "tune", framework),
        config_name="",
        device=device,
    )
    setup = probes.Setup(
        spec,
        plan,
        memory_limit=run.memory_limit,
        deadline=None if run.timeout is None else time.monotonic() + run.timeout,
        in_allocation=request.in_allocation and probes.require_allocation(),
        model=chosen,
        source=None if source is None else run.source,
        probe_timeout=request.probe_timeout,
        job=None if job is spec else job,
    )
    return setup, stages


def _layout(request: RunRequest) -> tuple[BatchSpec, BatchSpec, str | None, int]:
    """``(spec, job, framework, nproc)``: the batch on the world the probes run, the job's own
    on the world it launches (``spec`` itself when that is the same), whose file it is (None:
    a spec) and the processes per node: given, else the job's own per node (its global batch
    kept on another world, as smoke keeps it), else the spec's world, else 1."""
    from translator.checks.layouts import load_layout

    read = request.read()
    values = read.values
    if values is None:
        inspection, nproc, _ = preparing.on_world(read, request.nproc, request.nnodes)
        spec = inspection.require_spec()
        job = _job_batch(read, spec, nproc * request.nnodes)
        return spec, job, inspection.reading.framework, nproc
    given = values.get("world_size")
    nnodes = request.nnodes
    nproc = request.nproc or (
        given // nnodes if isinstance(given, int) and given % nnodes == 0 else 1
    )
    world = nproc * nnodes
    spec, _ = load_layout(request.file, None, {"world_size": world})
    if spec.world_size != world:
        raise InputError(
            f"{request.file} is for world size {spec.world_size}, but tune launches "
            f"{world} (--nproc-per-node × --nnodes)"
        )
    return spec, spec, None, nproc


def _job_batch(read: FileRead, spec: BatchSpec, world: int) -> BatchSpec:
    """The job's own batch on the world it launches, where the probes run on another
    ``world`` (``spec``: the batch there); ``spec`` when the job launches no other world or
    gives no whole batch. A ``world`` that cannot keep the job's global batch is refused
    (exit 1) as ``update`` refuses it, naming the micro-batches and worlds that would."""
    from translator.edit.update import kept
    from translator.inspection import inspect_reading
    from translator.reading import Launch

    assert read.framework is not None and read.reading is not None  # a job, not a spec
    job = inspect_reading(read.framework, read.reading, Launch()).spec
    if read.reading.world_size in (None, world) or job is None or not job.is_decided:
        return spec
    kept(job, read.path, world=world)
    return job


def zero_stages(text: str | None, framework: str) -> Sequence[int | None]:
    """The ZeRO stages of ``--zero-stages``, lowest first (``[None]``: the config's own)."""
    if text is None:
        return [None]
    if "zero_stages" not in engine(framework).options:
        raise InputError(
            f"--zero-stages is for the {' or '.join(with_option('zero_stages'))} engine, "
            f"not {framework}"
        )
    try:
        stages = sorted({int(s) for s in text.split(",")})
    except ValueError:
        raise InputError(f"--zero-stages {text!r}: give stages 0-3, comma-separated") from None
    if not stages or any(s not in (0, 1, 2, 3) for s in stages):
        raise InputError(f"--zero-stages {text!r}: give stages 0-3, comma-separated")
    return stages


def _check_outputs(request: Request, framework: str, job: BatchSpec, spec: BatchSpec) -> None:
    """Refuse, before any probe, what would fail after them: a missing matplotlib, a spec or a
    file --write cannot write (``job``: its batch, ``spec``: the probes'), files in --out that
    are there already (and an unknown --to framework, through get_many)."""
    if request.plot_path:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise InputError("--plot needs matplotlib: pip install 'batchspec[plot]'") from None
    if request.write:
        from translator.batch.spec_file import spec_values
        from translator.words.files import read_text

        if spec_values(read_text(request.run.file), request.run.file) is not None:
            raise InputError(
                f"{request.run.file}: --write edits a framework's config or job; a spec's pick is "
                "rendered with --out (nothing was run)"
            )
        _check_write(request.run.file, job, spec)
    if request.out_dir:
        from translator.words.files import check_writable

        paths = [path for _, path in _pick_files(framework, request.out_dir, request.targets)]
        for path in paths:
            if path.exists() and not request.force:
                raise InputError(f"{path} exists; use --force to replace it (nothing was run)")
        check_writable(paths, force=True, within=request.out_dir)


def _pick_files(
    framework: str, out_dir: str, targets: str | None
) -> list[tuple[Framework | None, Path]]:
    """(framework or None for the spec itself, path) for each file --out will hold."""
    from translator.plugin.registry import get_many

    names = targets or (framework if framework != TORCH else None)
    if not names:
        return [(None, Path(out_dir) / "spec.json")]
    return [(b, Path(out_dir) / b.filename) for b in get_many(names)]


def _gpu_memory(device: str) -> int | None:
    if device != "gpu":
        return None
    import torch

    return torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else None


def search(setup: probes.Setup, stages, recompute: bool, estimator, capacity, threshold, say):
    """``(search, seconds, stopped)``: the search run with real probes; a timeout or Ctrl-C
    ends it with the probes so far (``stopped``: ``timeout`` or ``interrupted``)."""
    job = setup.target
    per_rank = job.global_batch // job.data_parallel
    variants = [(r, z) for z in stages for r in ((False, True) if recompute else (False,))]
    sizes = probes.micro_batches(job, setup.spec)
    plan = setup.plan
    say(
        f"tune: {plan.framework} on {plan.device}, {plan.nnodes} node(s) × {plan.nproc}, "
        f"global batch {job.global_batch_size}"
        + (f" of the job's {job.world} ranks" if setup.job else "")
        + f": {len(sizes)} micro-batches keep it exact, at most {tuning.budget(len(sizes))} "
        "probes"
    )
    done: list[tuning.Probe] = []

    def probe(c: tuning.Candidate) -> tuning.Probe:
        here = probes.candidate_spec(setup.spec, c).accumulation
        say(
            f"probe {len(done) + 1}: micro-batch {c.micro_batch_size} × accumulation "
            f"{c.gradient_accumulation_steps}"
            + (
                f" (accumulation {here} on the {plan.nproc * plan.nnodes} probed)"
                if setup.job
                else ""
            )
            + (" with recompute" if c.recompute else "")
            + (f", ZeRO {c.zero_stage}" if c.zero_stage is not None else "")
            + (f" (job step of {os.environ['SLURM_JOB_ID']})" if setup.in_allocation else "")
        )
        with say.steps(plan.steps) as on_line:
            result = probes.run_probe(setup, c, estimator(c), on_line)
        say(
            "  out of memory"
            if result.out_of_memory
            else f"  {result.tokens_per_second:,.0f} tokens/s, peak "
            f"{tune_report.mib(result.peak_memory_bytes)}"
        )
        done.append(result)
        probes.save_progress(plan.workdir, done)
        return result

    start = time.monotonic()
    fits = (lambda c: None) if capacity is None else (lambda c: estimator(c) <= capacity)
    try:
        result = tuning.search(per_rank, variants, fits, probe, threshold, sizes=sizes)
    except (probes.Stopped, KeyboardInterrupt) as exc:
        stopped = exc.why if isinstance(exc, probes.Stopped) else "interrupted"
        n = len(done) + 1
        why = (
            f"--timeout reached during probe {n}"
            if stopped == "timeout"
            else f"probe {n} did not end within --probe-timeout {setup.probe_timeout:g} s (a "
            "rank may wait on a peer that failed)"
            if stopped == "probe-timeout"
            else f"interrupted during probe {n}"
        )
        partial = tuning.Search(probes=done, reason=why + "; every process of it was stopped")
        return partial, time.monotonic() - start, stopped
    return result, time.monotonic() - start, None


def fit_memory(result: tuning.Search) -> dict | None:
    """Peak memory against micro-batch, least squares over the probes that ran: fixed + per
    sample (None with fewer than two distinct micro-batches)."""
    points = [
        (p.candidate.micro_batch_size, p.peak_memory_bytes)
        for p in result.probes
        if not p.out_of_memory and p.peak_memory_bytes and not p.candidate.recompute
    ]
    xs = {x for x, _ in points}
    if len(xs) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return {"fixed_bytes": int(my - slope * mx), "bytes_per_sample": int(slope)}


def report(
    request: Request,
    setup: probes.Setup,
    result: tuning.Search,
    seconds: float,
    stopped,
    check_parity: bool = False,
    say: Progress | None = None,
) -> TuneOutcome:
    """The outcome of a search that ran here: the output, the pick written, the plot drawn;
    with ``check_parity``, the pick checked against the file's own split (``say``: its
    progress)."""
    spec, plan, job = setup.spec, setup.plan, setup.target
    d = len(probes.micro_batches(job, spec))
    picked = probes.candidate_spec(job, result.pick.candidate) if result.pick else None
    findings = []
    if picked is None and not stopped:
        findings.append(
            finding(
                "tune-nothing-fits",
                result.reason,
                where=request.run.file,
                hint="use more ranks, shard more (ZeRO, TP, PP), --recompute, "
                "a shorter sequence, or more memory",
            )
        )
    out = {
        "pick": picked.output() if picked else None,
        "reason": result.reason,
        "probes": [p.as_dict() for p in result.probes],
        "probes_used": len(result.probes),
        "budget": tuning.budget(d),
        "divisors": d,
        **_worlds(setup),
        "seconds": round(seconds, 2),
        "framework": plan.framework,
        "engine": next((p.engine for p in result.probes if p.engine), None),
        "device": plan.device,
        "model": (setup.model or run_model.RunModel(setup.shape)).output(
            max((p.parameters or 0 for p in result.probes), default=0) or None
        ),
        "sequence_length": plan.sequence_length,
        "memory_fit": fit_memory(result),
        "stopped": stopped,
        "files": {},
        "findings": [f.as_dict() for f in findings],
    }
    failed = None
    if check_parity and result.pick is not None and not stopped:
        out["parity"], failed = tune_parity.check(
            request.run.file, setup, result.pick.candidate, say or Progress(quiet=True)
        )
    if picked is not None and request.out_dir and not failed:
        out["files"] = _write_pick(picked, plan.framework, request.out_dir, request)
    if picked is not None and request.write and not failed:
        out["written"], out["changes"] = _write_into(request.run.file, job, picked)
    if request.plot_path:
        tune_report.plot_png(result, request.plot_path, spec.global_batch)
    if stopped:
        return TuneOutcome(
            out,
            tune_report.text(out),
            f"tune stopped: {result.reason}",
            130 if stopped == "interrupted" else 1,
        )
    if failed:
        return TuneOutcome(out, tune_report.text(out), failed, 1)
    return TuneOutcome(out, tune_report.text(out), exit_code=1 if findings else 0)


def _worlds(setup: probes.Setup) -> dict:
    """The world the candidates keep the global batch on (the job's), and the one probed."""
    job, probed, plan = setup.target, setup.spec, setup.plan
    return {
        "candidates_for": {
            "global_batch_size": job.global_batch_size,
            "world_size": job.world,
            "data_parallel_size": job.data_parallel,
        },
        "probed_on": {
            "nodes": plan.nnodes,
            "nproc_per_node": plan.nproc,
            "world_size": probed.world,
            "data_parallel_size": probed.data_parallel,
        },
    }


def _check_write(path: str, job: BatchSpec, probed: BatchSpec) -> None:
    """Refuse now what writing the pick into ``path`` would refuse after the probes: the file,
    and the files a split other than its own edits (any other candidate edits the same ones,
    with the accumulation that keeps the global batch on the job's world)."""
    from translator.words.files import check_writable

    other = next((m for m in probes.micro_batches(job, probed) if m != job.micro), None)
    edited = [] if other is None else _changed(path, _edit_into(path, job.world, other))
    check_writable([Path(path), *(p for p, _ in edited)], force=True)


def _edit_into(path: str, world: int, micro: int) -> Updated:
    """The tuned file and the other files of its job with ``micro`` on ``world`` ranks, as
    ``update --micro-batch`` edits them (every other byte kept; nothing written)."""
    from translator.edit.update import update_file

    keep = dict.fromkeys(("global_batch", "world", "nodes", "gpus_per_node", "tensor", "pipeline"))
    return update_file(path, None, world, None, micro=micro, context=None, **keep)


def _changed(path: str, updated: Updated) -> list[tuple[Path, str | bytes]]:
    """The files ``updated`` changes, each with its new text."""
    files: list[tuple[Path, str | bytes]] = [(Path(path), updated.text)] if updated.changes else []
    return files + [(Path(o.path), o.text) for o in updated.others]


def _write_into(path: str, job: BatchSpec, picked: BatchSpec) -> tuple[list[str], list[str]]:
    """The pick written into the tuned file and the other files of its job (``job``: its
    batch before): the paths written, and what changed as ``update`` says it, after a line
    with the split before and after."""
    from translator.words.files import write_files

    updated = _edit_into(path, picked.world, picked.micro)
    if not updated.changed:
        return [], [f"{path}: {updated.already()}"]
    written = [str(w.path) for w in write_files(_changed(path, updated), force=True)]
    said = [
        f"{path}: {_moved(job, picked)}, global batch {picked.global_batch_size} kept on "
        f"{picked.world} ranks (data-parallel {picked.data_parallel})",
        *(c.describe(path) for c in updated.changes),
        *(c.describe(o.path) for o in updated.others for c in o.changes),
    ]
    return written, said


def _moved(job: BatchSpec, picked: BatchSpec) -> str:
    """``micro-batch 8 × accumulation 4 → 32 × 1`` (the pick alone where the job gave no
    split)."""
    new = f"{picked.micro} × {picked.accumulation}"
    if job.micro is None:
        return f"micro-batch {picked.micro} × accumulation {picked.accumulation}"
    return f"micro-batch {job.micro} × accumulation {job.accumulation} → {new}"


def _write_pick(spec, framework: str, out_dir: str, request: Request) -> dict:
    from translator.render import render
    from translator.words.files import write_files

    files = []
    for target, path in _pick_files(framework, out_dir, request.targets):
        if target is None:
            files.append(("spec", path, spec.model_dump_json(indent=2)))
        else:
            files.append((target.name, path, render(spec, target).text))
    written = write_files([(path, text) for _, path, text in files], request.force)
    return {name: str(w.path) for (name, _, _), w in zip(files, written)}


def submit(setup: probes.Setup, request: Request, options: slurm.SlurmOptions, say) -> TuneOutcome:
    """The whole tune as one Slurm job: submit, follow, its result (or, stopped, the probes
    it had run)."""
    slurm.require_sbatch()
    plan = setup.plan
    result = plan.workdir / RESULT_FILE
    text = slurm.script(plan, options, command=job_command(request), stdout=result)
    stale = (result, plan.workdir / probes.PROGRESS_FILE)
    refuse_links(plan.workdir, stale)  # Slurm writes the result through whatever is there
    workdirs.make(plan.workdir)
    for path in stale:
        path.unlink(missing_ok=True)
    job = slurm.run_job(
        plan,
        text,
        "tune.sbatch",
        smoke.environment(plan.framework, setup.memory_limit),
        request.run.timeout,
        say,
        submitted=": the whole tune runs in one allocation",
    )
    if job.stopped or not result.exists() or not result.read_text():
        done = probes.read_progress(plan.workdir)
        return TuneOutcome(
            {"pick": None, "probes": done, "stopped": job.state, "slurm_job": job.id},
            f"job {job.id} ended {job.state}; {len(done)} probe(s) ran "
            f"(see {plan.workdir}/slurm-{job.id}.out)",
            f"tune job {job.id}: {job.state}",
            130 if job.state == "interrupted" else 1,
        )
    out = json.loads(result.read_text()) | {"slurm_job": job.id}
    failed = out.get("stopped") or out.get("pick") is None
    return TuneOutcome(out, tune_report.text(out), exit_code=1 if failed else 0)


def job_command(request: Request) -> list[str]:
    """This tune's own command line for the Slurm job, rebuilt from the parsed options."""
    args = [sys.executable, "-m", "translator", "tune"]
    for given in request.command_line:
        if given.off_flag and given.value is False:  # an on/off switch turned off
            args.append(given.off_flag)
        if given.name in LOGIN_ONLY or given.value in (None, False, ()):
            continue
        if given.flag is None:
            args.append(str(Path(str(given.value)).resolve()))
        elif given.is_flag:
            args.append(given.flag)
        else:
            values = (
                given.value if given.multiple and isinstance(given.value, tuple) else [given.value]
            )
            for one in values:
                args += [given.flag, str(one)]
    return [*args, "--in-allocation", "--json"]
