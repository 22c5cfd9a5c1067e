"""A smoke run from start to end: write the work folder, launch (locally, on Slurm or on
Kubernetes), judge what the ranks did (:mod:`translator.launch.judging`) and gather what the
command reports."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from translator.launch import workdir as workdirs
from translator.launch.judging import RunReport, judge
from translator.launch.launcher import Launcher
from translator.launch.preparing import Prepared, engine_info
from translator.launch.progress import Progress
from translator.launch.throughput import built_parameters, estimated_memory, mfu
from translator.rank import parity_rank
from translator.rank.engines import (
    engine,
)
from translator.words.contained import refuse_links, refuse_links_below


def write_workdir(prepared: Prepared) -> None:
    """The work folder for a run: the spec and the engine's config, no results of an old run;
    refused, with nothing written or removed, when a symlink is planted where they go or
    anywhere in the results folder."""
    plan = prepared.plan
    # A dict: for the torch engine the config is spec.json itself.
    files = {
        plan.workdir / "spec.json": prepared.spec.model_dump_json(indent=2),
        plan.workdir / plan.config_name: prepared.config_text,
    } | {plan.workdir / name: text for name, text in prepared.partner_files.items()}
    if plan.model_config is not None:
        files[plan.model_config] = json.dumps(prepared.model.config, indent=2)
    refuse_links(plan.workdir, [*files, plan.results])
    refuse_links_below(plan.results)
    workdirs.make(plan.workdir)
    plan.results.mkdir(exist_ok=True)
    for pattern in ("rank-*.json", parity_rank.FILE.format(rank="*")):
        for stale in plan.results.glob(pattern):
            stale.unlink()
    workdirs.write(plan.workdir, files)


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
class SmokeOutcome:
    """A smoke run, as the command reports it."""

    output: dict
    """``smoke --json``'s object: the resolved spec's keys and what was measured."""
    report: RunReport
    """The ranks' merged reports and what is wrong."""
    stopped: str | None
    """``timeout`` or ``interrupted`` when the run was stopped, else None."""


def run(
    prepared: Prepared,
    launcher: Launcher,
    timeout: float | None,
    memory_limit: int | None,
    say: Progress,
) -> SmokeOutcome:
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
        "baseline_memory_bytes": m.baseline_memory_bytes or None,
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
    return SmokeOutcome(output, report, stopped)
