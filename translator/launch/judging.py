"""A smoke run judged: the ranks' reports merged, and whether every optimizer step consumed
exactly the global batch (and why not: a timeout, a rank out of memory, one that ended
early)."""

from __future__ import annotations

from dataclasses import dataclass

from translator.launch import command
from translator.launch.preparing import Prepared
from translator.rank import failure
from translator.rank.result import Measurement, RankResult, merge, read_all
from translator.spec import BatchSpec
from translator.words.findings import counted


@dataclass
class RunReport:
    """The outcome of a smoke run."""

    measurement: Measurement
    errors: list[str]
    """Why the run does not prove the batch (empty when it does)."""
    results: list[RankResult]
    out_of_memory: bool = False
    """A rank ran out of memory (by its report, or, dead before reporting, by the log)."""


def judge(
    prepared: Prepared, stopped: str | None, timeout: float | None, log_tail: list[str]
) -> RunReport:
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
                f"rank {r.rank} failed after {counted(len(r.samples_per_step), 'optimizer step')}: {r.error}"
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
                f"rank {r.rank} ended after {counted(len(r.samples_per_step), 'optimizer step')}"
                for r in unfinished
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
        expected, job = prepared.expect_global, prepared.job_global
        if expected is None and job is not None and any(n != job for n in counts):
            errors.append(
                f"{per_step(counts, plan.world_size, packed is not None)}, not the job's global "
                f"batch {job}: this run does not prove the job (run it on a world that keeps "
                f"its batch, or give --expect-global {counts[0]} to prove this one)"
            )
        if expected is not None and any(n != expected for n in counts):
            errors.append(
                f"{plan.framework} consumed {_samples(counts)} "
                f"{'packed rows' if packed is not None else 'samples'} per optimizer step, not "
                f"the {expected} expected (--expect-global)"
            )
    return RunReport(m, errors, results, oom)


def verdict(report: RunReport, plan: command.SmokePlan) -> str:
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
        return f"{n} × {counted(times, 'step')}"
    return ", ".join(f"{n} × {times}" for n, times in runs) or "-"


def _samples(counts: list[int]) -> str:
    return str(counts[0]) if len(set(counts)) == 1 else run_lengths(counts)


def _oom_message(spec: BatchSpec, r: RankResult) -> str:
    from translator.batch import solve

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
