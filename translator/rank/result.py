"""What each rank reports, and how the launcher merges the reports into one measurement.

A rank rewrites its report after every optimizer step (``finished`` false) and once more at
the end, so a run that fails, is interrupted or times out still shows what ran."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from translator.batch.counting import replica_totals
from translator.words.contained import replace_unfollowed


@dataclass
class RankResult:
    """One rank's own account of its run, written as ``rank-<R>.json``."""

    rank: int
    """Global rank."""
    world_size: int
    """Processes in the job."""
    data_parallel_rank: int | None
    """Which model replica this rank belongs to (None while the engine has not said)."""
    counts_samples: bool | None
    """True on exactly one rank per data-parallel replica (the one whose samples are summed);
    None while the engine has not said."""
    samples_per_step: list[int] = field(default_factory=list)
    """Samples this rank fed to the model during each optimizer step, as the engine stepped."""
    step_times: list[float] = field(default_factory=list)
    """Wall seconds of each optimizer step."""
    peak_memory_bytes: int = 0
    """``torch.cuda.max_memory_allocated`` on GPU, peak RSS on CPU."""
    baseline_memory_bytes: int = 0
    """On a CPU, the RSS before the model was built (Python, torch, the framework as far as
    the engine imported it: :attr:`RunContext.baseline_memory_bytes`), which the peak holds and
    no estimate counts; 0 on a GPU or where not measured."""
    reserved_peak_bytes: int | None = None
    """``torch.cuda.max_memory_reserved``: what the caching allocator held at most; None on a
    CPU."""
    allocator_retries: int | None = None
    """The caching allocator's ``num_alloc_retries``: allocations that failed, freed the cache
    and were tried again (more than 0: the run is at the memory edge); None on a CPU."""
    device_used_bytes: int | None = None
    """Device memory in use at the end, by every process on the GPU (``mem_get_info``); None
    on a CPU."""
    device: str | None = "cpu"
    """``cpu`` or the GPU's name; None when the rank failed before it knew."""
    sequence_length: int = 0
    """Tokens per sample."""
    parameters: int = 0
    """Model parameters on this rank (for the FLOPs estimate)."""
    error: str | None = None
    """``oom`` when the rank ran out of memory, else a one-line error, else None."""
    micro_batch_size: int | None = None
    """The micro-batch the engine used (reported with an out-of-memory error)."""
    stepped_by: str = ""
    """What took the optimizer steps that close each count (``AdamW``, ``DeepSpeedEngine``,
    megatron-core's ``DistributedOptimizer``...)."""
    packed_rows_per_step: list[int] | None = None
    """Rows this rank fed during each optimizer step when its rows are packed (each holds
    several samples, counted in ``samples_per_step``); None when a row is one sample."""
    finished: bool = False
    """True once the engine's run returned; a report written during the run, or by a rank that
    failed, is not finished."""

    def write(self, folder: Path) -> None:
        """``rank-<R>.json`` in ``folder``, replaced whole, never written through a symlink."""
        replace_unfollowed(
            Path(folder) / f"rank-{self.rank}.json", json.dumps(asdict(self)).encode()
        )

    @classmethod
    def read(cls, path: Path) -> RankResult:
        return cls(**json.loads(Path(path).read_text()))


def read_all(folder: Path) -> list[RankResult]:
    return sorted(
        (RankResult.read(p) for p in Path(folder).glob("rank-*.json")), key=lambda r: r.rank
    )


@dataclass
class Measurement:
    """The merged run."""

    optimizer_steps: int
    """Steps every rank completed (0 when a rank never reported)."""
    samples_per_optimizer_step: list[int] | None
    """Summed over data-parallel replicas, one entry per optimizer step; None when a rank has not
    said yet whether it counts for its replica (a run with model parallelism, stopped early)."""
    tokens_per_second: float | None
    step_time_seconds: float | None
    """Median over steps after the first (the first includes warm-up)."""
    step_time_spread: float | None
    """(slowest − fastest) / median of the timed steps; None with fewer than two of them."""
    peak_memory_bytes: int
    """Largest over ranks."""
    device: str | None
    baseline_memory_bytes: int = 0
    """The baseline of the rank with that peak (:attr:`RankResult.baseline_memory_bytes`)."""
    stepped_by: str = ""
    """What took the optimizer steps (rank 0's engine)."""
    sequence_length: int | None = None
    """Tokens per sample (per packed row), as the ranks ran (None when none reported)."""
    packed_rows_per_optimizer_step: list[int] | None = None
    """The packed rows of each step, summed like the samples, when the ranks packed several
    samples into a row (the global batch counts these rows); None when they did not."""
    memory_by_rank: list[dict] = field(default_factory=list)
    """Each rank's allocated and reserved peaks, allocator retries and device memory in use
    (:func:`rank_memory`), in rank order."""

    @property
    def at_memory_edge(self) -> bool:
        """A rank's allocator had to free its cache and retry: a larger micro-batch would not
        fit, or would fit only slowly."""
        return any((r["allocator_retries"] or 0) > 0 for r in self.memory_by_rank)


def merge(results: list[RankResult], world_size: int | None = None) -> Measurement:
    """Sum the counting ranks' samples step by step, over the steps every rank completed (of
    ``world_size`` ranks: one that never reported completed none)."""
    counting = [r for r in results if r.counts_samples]
    steps = {len(r.samples_per_step) for r in results}
    missing = world_size is not None and len({r.rank for r in results}) < world_size
    n = 0 if missing or not steps else min(steps)
    placed = all(r.counts_samples is not None for r in results)
    per_step = (
        replica_totals((r.samples_per_step for r in counting), n) if placed or n == 0 else None
    )
    packed = any(r.packed_rows_per_step is not None for r in counting)
    rows = replica_totals((r.packed_rows_per_step or [] for r in counting), n) if packed else None
    filled = rows if rows is not None else per_step  # rows of sequence_length tokens each
    times = [max(r.step_times[i] for r in results) for i in range(n)]
    timed = times[1:] or times
    median = statistics.median(timed) if timed else None
    spread = (max(timed) - min(timed)) / median if len(times) > 2 and median else None
    seq = max((r.sequence_length for r in results), default=0)
    peak = max(results, key=lambda r: r.peak_memory_bytes, default=None)
    tokens = (
        (sum(filled[1:] or filled) * seq / sum(timed))
        if filled is not None and timed and sum(timed) > 0
        else None
    )
    return Measurement(
        optimizer_steps=n,
        samples_per_optimizer_step=per_step,
        tokens_per_second=tokens,
        step_time_seconds=median,
        step_time_spread=spread,
        peak_memory_bytes=peak.peak_memory_bytes if peak else 0,
        baseline_memory_bytes=peak.baseline_memory_bytes if peak else 0,
        device=results[0].device if results else None,
        stepped_by=results[0].stepped_by if results else "",
        sequence_length=seq or None,
        packed_rows_per_optimizer_step=rows,
        memory_by_rank=[rank_memory(r) for r in results],
    )


def rank_memory(result: RankResult) -> dict:
    """One rank's memory as ``--json`` lists it."""
    return {
        "rank": result.rank,
        "peak_allocated_bytes": result.peak_memory_bytes,
        "peak_reserved_bytes": result.reserved_peak_bytes,
        "allocator_retries": result.allocator_retries,
        "device_used_bytes": result.device_used_bytes,
    }
