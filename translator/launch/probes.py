"""The probes of ``batchspec tune``: each candidate is a smoke run of the real engine, counted by
the harness (its samples per step must be the global batch), timed and measured; inside a Slurm
allocation each probe is a job step (no queue between)."""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from translator.batch.tuning import Candidate, Probe, divisors
from translator.edit.update import kept
from translator.inspection import FileRead
from translator.launch import command, judging, preparing, runner, smoke, throughput
from translator.launch import workdir as workdirs
from translator.launch.request import RunRequest
from translator.launch.run_model import RunModel
from translator.model import memory
from translator.spec import BatchSpec
from translator.words.errors import ConfigError, InputError
from translator.words.findings import finding

#: The probes so far, rewritten after each one (what an interrupted tune still shows).
PROGRESS_FILE = "tune-probes.json"


class Stopped(Exception):
    """A probe was stopped by ``--timeout`` or Ctrl-C (every rank of it is gone)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


@dataclass
class Setup:
    """What every probe shares."""

    spec: BatchSpec
    """The layout being tuned (its global batch is kept)."""
    plan: command.SmokePlan
    """The engine, ranks, model, steps per probe and device of every probe; its ``workdir``
    is the tune's folder, each probe a subfolder."""
    memory_limit: int | None = None
    """Each rank's address-space cap (``--memory-limit``)."""
    deadline: float | None = None
    """``time.monotonic()`` by which the whole tune must end (``--timeout``)."""
    in_allocation: bool = False
    """Inside a Slurm allocation: each probe is an ``srun`` job step."""
    model: RunModel | None = None
    """The model every probe builds (None: the plan's stand-in)."""
    source: FileRead | None = None
    """The job or config tuned, read once, each probe running it with the candidate's
    micro-batch edited in (its engine, ZeRO stage and every other setting as it stands); None:
    a spec, each probe running its own ``candidate.json``."""
    probe_timeout: float | None = None
    """Seconds one probe may take, launch included (``--probe-timeout``): past it the whole
    launch is stopped, an ``srun`` step cancelled, and the tune ends; None: no limit but the
    tune's own."""
    job: BatchSpec | None = None
    """The job's own batch on the world it launches, where the probes run on another
    (``tune --nproc-per-node 2`` of a job of 16 ranks): the candidates keep its global batch
    there, and the pick is its split; None: the probes run on the job's world (``spec``)."""

    @property
    def target(self) -> BatchSpec:
        """The batch the pick is for: the job's, on its own world."""
        return self.job or self.spec

    @property
    def shape(self) -> memory.Model:
        """The probes' model's shape, for the estimate."""
        if self.model is not None:
            return self.model.shape
        return memory.model_named(self.plan.model, self.plan.sequence_length)


def micro_batches(job: BatchSpec, probed: BatchSpec) -> list[int]:
    """The micro-batches a tune tries: those that keep the global batch on the job's world and
    on the probes' (the divisors of both worlds' samples per rank and step)."""
    return divisors(math.gcd(*(s.global_batch // s.data_parallel for s in (job, probed))))


def candidate_spec(spec: BatchSpec, c: Candidate) -> BatchSpec:
    """``spec`` with the candidate's micro-batch and ZeRO stage on its own world and nodes: its
    global batch kept, the accumulation re-solved (the job's on its world, the probe's on the
    probes')."""
    moved = kept(spec, "candidate.json", world=spec.world, micro=c.micro_batch_size)
    same = {"nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node}
    if c.zero_stage is not None:
        same["zero_stage"] = c.zero_stage
    return BatchSpec.model_validate(moved.model_dump() | same)


def probe_folder(setup: Setup, c: Candidate) -> Path:
    name = (
        f"probe-m{c.micro_batch_size}"
        + ("-recompute" if c.recompute else "")
        + (f"-zero{c.zero_stage}" if c.zero_stage is not None else "")
    )
    return setup.plan.workdir / name


def estimator(setup: Setup, **how):
    """Candidate -> estimated bytes per GPU for the probes' model (``how``: the keywords of
    :func:`translator.model.memory.run_of`; recompute follows the candidate)."""
    shape = setup.shape

    def estimate(c: Candidate) -> int:
        run = memory.run_of(
            candidate_spec(setup.spec, c),
            setup.plan.sequence_length,
            recompute="full" if c.recompute else "none",
            **how,
        )
        return memory.estimate(shape, run).total

    return estimate


def run_probe(setup: Setup, c: Candidate, estimated: int | None, on_line) -> Probe:
    """One real run of ``c``; out of memory is a result, any other failure ends the tune."""
    folder = probe_folder(setup, c)
    path = folder / "candidate.json"
    workdirs.make(setup.plan.workdir)
    workdirs.write(
        setup.plan.workdir, {path: candidate_spec(setup.spec, c).model_dump_json(indent=2)}
    )
    plan = setup.plan
    as_filed = setup.source is not None and c.zero_stage is None  # a ZeRO stage: the candidate's
    prepared = preparing.prepare(
        RunRequest(
            setup.source.path if setup.source is not None and as_filed else str(path),
            plan.framework,
            plan.nproc,
            plan.nnodes,
            plan.steps,
            setup.model or plan.model,
            plan.sequence_length,
            folder,
            device=plan.device,
            recompute=c.recompute,
            micro=c.micro_batch_size if as_filed else None,
            source=setup.source,
        )
    )
    left = None if setup.deadline is None else max(setup.deadline - time.monotonic(), 0.1)
    own_deadline = setup.probe_timeout is not None and (left is None or setup.probe_timeout < left)
    start = time.monotonic()
    smoke.write_workdir(prepared)
    step = f"batchspec-probe-{folder.name}"
    outcome = runner.run(
        _command(setup, prepared.plan, step),
        smoke.environment(prepared.plan.framework, setup.memory_limit),
        setup.probe_timeout if own_deadline else left,
        on_line,
    )
    if outcome.stopped and setup.in_allocation:
        cancel_step(step)
    report = judging.judge(prepared, outcome.stopped, left, outcome.log_tail)
    if outcome.stopped:
        timed_out = own_deadline and outcome.stopped == "timeout"
        raise Stopped("probe-timeout" if timed_out else outcome.stopped)
    oom = report.out_of_memory
    if report.errors and not oom:
        raise ConfigError(
            [
                finding(
                    "tune-probe-failed",
                    f"the probe of micro-batch {c.micro_batch_size} × accumulation "
                    f"{c.gradient_accumulation_steps}: " + "; ".join(report.errors),
                    where=str(path),
                )
            ]
        )
    m = report.measurement
    # The median step (after the warm-up one): a slow outlier step does not decide the pick.
    tokens = (
        None
        if oom or not m.step_time_seconds
        else setup.spec.global_batch * plan.sequence_length / m.step_time_seconds
    )
    return Probe(
        c,
        m.samples_per_optimizer_step or [],  # unknown only for a probe that ran out of memory
        tokens,
        step_time_seconds=None if oom else m.step_time_seconds,
        step_time_spread=None if oom else m.step_time_spread,
        mfu=None if oom else throughput.mfu(report, prepared)[0],
        peak_memory_bytes=m.peak_memory_bytes or None,
        estimated_memory_bytes=estimated,
        out_of_memory=oom,
        seconds=time.monotonic() - start,
        parameters=throughput.built_parameters(report.results, prepared.spec),
        engine=preparing.engine_info(prepared),
        memory_by_rank=m.memory_by_rank,
        at_memory_edge=not oom and m.at_memory_edge,
        probed_accumulation=prepared.spec.accumulation,
    )


def _command(setup: Setup, plan: command.SmokePlan, step: str) -> list[str]:
    """torchrun here, or an ``srun`` job step called ``step`` on the allocation's nodes."""
    if not setup.in_allocation:
        return command.local_command(plan)
    endpoint = None
    if plan.nnodes > 1:  # the allocation's first node hosts the rendezvous, as in smoke's job
        from translator.launch.slurm import RDZV_PORT

        head = _output(["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]])
        endpoint = f"{head.split()[0]}:{RDZV_PORT}"
    return [
        "srun",
        f"--job-name={step}",
        "--kill-on-bad-exit=1",
        f"--nodes={plan.nnodes}",
        "--ntasks-per-node=1",
        plan.python,
        "-m",
        "torch.distributed.run",
        *command.torchrun_args(plan, endpoint),
        *command.worker_args(plan),
    ]


def cancel_step(name: str) -> None:
    """``scancel`` the allocation's job step called ``name``: killing ``srun`` here does not
    always end its tasks on the other nodes."""
    import subprocess

    job = os.environ["SLURM_JOB_ID"]
    listed = subprocess.run(
        ["squeue", "--steps", "--jobs", job, "--noheader", "--format", "%i %j"],
        capture_output=True,
        text=True,
    ).stdout
    for line in listed.splitlines():
        step, _, step_name = line.strip().partition(" ")
        if step_name == name:
            subprocess.run(["scancel", "--quiet", step], capture_output=True)


def _output(argv: list[str]) -> str:
    import subprocess

    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def save_progress(workdir: Path, probes: list[Probe]) -> None:
    workdirs.write(
        workdir, {workdir / PROGRESS_FILE: json.dumps([p.as_dict() for p in probes], indent=2)}
    )


def read_progress(workdir: Path) -> list[dict]:
    path = workdir / PROGRESS_FILE
    return json.loads(path.read_text()) if path.exists() else []


def require_allocation() -> bool:
    """True inside a Slurm allocation; outside one, ``--in-allocation`` is refused."""
    if "SLURM_JOB_ID" not in os.environ:
        raise InputError("--in-allocation: not inside a Slurm allocation (no SLURM_JOB_ID)")
    return True
