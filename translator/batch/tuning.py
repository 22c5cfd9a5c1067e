"""The search of ``batchspec tune``: the fastest micro-batch among those that keep G exact.

The candidates are the divisors ``b`` of ``n = G / DP`` (accumulation ``n / b``), so every one
keeps the global batch (probed on fewer ranks than the job, those that keep it on both worlds).
The memory estimate ranks them; the real engine probes them:

1. **The edge.** Bisection over the divisor list for the largest micro-batch that fits, started
   at the estimate's guess (the largest the estimate fits, or the top when nothing caps
   memory), and galloping from there: an estimate that is right costs one or two probes. A
   probe that ran but whose allocator had to free its cache and retry is the edge itself:
   nothing larger is probed.
2. **The climb.** Tokens/s against the micro-batch rises and then flattens or falls: the
   untested gaps beside the fastest probe are halved (larger gap first), moving to any faster
   probe; a gap whose two ends are within ``threshold`` of each other is flat and left alone.

At most ``⌈log2 d⌉ + 2`` probes (``d`` divisors); a variant (recompute, ZeRO stage) is only
probed when the one before it cannot run micro-batch 1. Pure logic: ``probe`` is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Candidate:
    micro_batch_size: int
    gradient_accumulation_steps: int
    recompute: bool = False
    zero_stage: int | None = None


@dataclass
class Probe:
    """One real run of a candidate."""

    candidate: Candidate
    samples_per_optimizer_step: list[int] = field(default_factory=list)
    tokens_per_second: float | None = None
    step_time_seconds: float | None = None
    step_time_spread: float | None = None
    """(slowest − fastest) / median of its timed steps (None with fewer than two)."""
    mfu: float | None = None
    """Model FLOPs utilisation (smoke's formula); None on CPU or an unknown GPU."""
    peak_memory_bytes: int | None = None
    estimated_memory_bytes: int | None = None
    out_of_memory: bool = False
    seconds: float = 0.0
    """Wall time of the probe, launch included."""
    parameters: int | None = None
    """Parameters of the model as the probe's ranks built it (None when they did not say)."""
    engine: dict | None = None
    """Whose code ran: ``{"framework": ..., "deepspeed_zero_stage": N or None}``."""
    memory_by_rank: list[dict] = field(default_factory=list)
    """Each rank's allocated and reserved peaks, allocator retries and device memory in use."""
    at_memory_edge: bool = False
    """It ran, but a rank's allocator had to free its cache and retry: nothing larger is
    probed."""
    probed_accumulation: int | None = None
    """The accumulation it ran with on the probes' world: the candidate's is the job's, and
    on fewer ranks than the job the probe accumulates more to keep the global batch."""

    def as_dict(self) -> dict:
        c = self.candidate
        return {
            "micro_batch_size": c.micro_batch_size,
            "gradient_accumulation_steps": c.gradient_accumulation_steps,
            "recompute": c.recompute,
            "zero_stage": c.zero_stage,
            "samples_per_optimizer_step": self.samples_per_optimizer_step,
            "tokens_per_second": self.tokens_per_second,
            "step_time_seconds": self.step_time_seconds,
            "step_time_spread": self.step_time_spread,
            "mfu": self.mfu,
            "peak_memory_bytes": self.peak_memory_bytes,
            "estimated_memory_bytes": self.estimated_memory_bytes,
            "out_of_memory": self.out_of_memory,
            "seconds": round(self.seconds, 2),
            "parameters": self.parameters,
            "engine": self.engine,
            "memory_by_rank": self.memory_by_rank,
            "at_memory_edge": self.at_memory_edge,
            "probed_accumulation": self.probed_accumulation,
        }


def divisors(n: int) -> list[int]:
    return [b for b in range(1, n + 1) if n % b == 0]


def budget(d: int) -> int:
    """Probes allowed for ``d`` divisors."""
    return math.ceil(math.log2(d)) + 2 if d > 1 else 2


@dataclass
class Search:
    """The probes of one tune, and why it picked what it picked."""

    probes: list[Probe] = field(default_factory=list)
    pick: Probe | None = None
    reason: str = ""


def search(
    per_rank: int,
    variants: list[tuple[bool, int | None]],
    fits_estimate: Callable[[Candidate], bool | None],
    probe: Callable[[Candidate], Probe],
    threshold: float = 0.03,
    limit: int | None = None,
    sizes: list[int] | None = None,
) -> Search:
    """Search the micro-batches of ``per_rank`` samples per rank and step for each variant
    ``(recompute, zero_stage)`` in order of preference; ``fits_estimate`` says whether the
    estimate fits a candidate (None: no capacity known). ``sizes``: the micro-batches to try,
    each a divisor of ``per_rank`` (default: every one)."""
    sizes = sizes or divisors(per_rank)
    allowed = limit or budget(len(sizes))
    found = Search()
    for recompute, zero in variants:
        ladder = [Candidate(b, per_rank // b, recompute, zero) for b in sizes]
        tried: dict[int, Probe] = {}

        def run(i: int, ladder=ladder, tried=tried) -> Probe | None:
            if i in tried:
                return tried[i]
            if len(found.probes) >= allowed:
                return None
            result = probe(ladder[i])
            tried[i] = result
            found.probes.append(result)
            return result

        more = (recompute, zero) != variants[-1]
        edge = _edge(ladder, fits_estimate, run, threshold, settle_first=more)
        if edge is None:  # out of budget before anything ran
            break
        if edge < 0:
            continue  # not even micro-batch 1 fits this variant: the next one, if any
        _climb(edge, tried, run, threshold)
        fitting = [p for p in tried.values() if not p.out_of_memory]
        found.pick = max(fitting, key=lambda p: p.tokens_per_second or 0.0)
        found.reason = _reason(found.pick, tried, edge, ladder, threshold)
        return found
    found.reason = "no candidate fits: not even micro-batch 1 ran without running out of memory"
    return found


def _edge(
    ladder: list[Candidate], fits_estimate, run, threshold: float, settle_first: bool = False
) -> int | None:
    """Index of the largest candidate that fits (-1: none does), or of one that fits and is
    already slower than a smaller one while galloping up; None when out of budget. With
    ``settle_first`` a guess that does not fit is followed by micro-batch 1 (is this variant
    possible at all?) before the bisection."""
    guess = len(ladder) - 1
    predicted = [fits_estimate(c) for c in ladder]
    if any(p is False for p in predicted):
        guess = max((i for i, p in enumerate(predicted) if p), default=0)
    lo, hi = -1, len(ladder)  # lo fits (or -1), hi does not (or past the end)
    first = run(guess)
    if first is None:
        return None
    lo, hi = (guess, hi) if not first.out_of_memory else (lo, guess)
    if first.at_memory_edge:
        hi = guess + 1
    bisecting = first.out_of_memory  # else gallop upward from a guess that fit
    if bisecting and settle_first and guess > 0:
        # Another variant waits: learn at once whether micro-batch 1 fits this one at all.
        smallest = run(0)
        if smallest is None:
            return None
        if smallest.out_of_memory:
            return -1
        lo = 0
    step = 1
    while hi - lo > 1:
        if bisecting or lo < 0:
            mid = (lo + hi) // 2
        else:
            mid = min(lo + step, hi - 1)
            step *= 2
        result = run(mid)
        if result is None:
            break
        if result.out_of_memory:
            hi = mid
            bisecting = True
        elif lo >= 0 and _slower(result, run(lo), threshold):
            return mid  # past the fastest already: the edge above cannot hold the pick
        else:
            lo = mid
            if result.at_memory_edge:
                hi = mid + 1
    return lo


def _flat(speeds: dict[int, float], best: int, end: int, threshold: float) -> bool:
    """A gap is flat when the fastest probe's neighbour on the far side of ``end`` is also
    probed and all three are within ``threshold``: the curve levelled off there."""
    beyond = end + (1 if end > best else -1)
    near, far = speeds.get(end), speeds.get(beyond)
    if near is None or far is None:
        return False
    return min(near, far) >= speeds[best] * (1 - threshold)


def _slower(result: Probe, than: Probe, threshold: float) -> bool:
    return (result.tokens_per_second or 0.0) < (than.tokens_per_second or 0.0) * (1 - threshold)


def _climb(edge: int, tried: dict[int, Probe], run, threshold: float) -> None:
    """Halve the untested gaps on either side of the fastest probe (the side that leans up
    first), moving to any faster probe; then the near gaps elsewhere (:func:`_near_gaps`);
    until no gap worth a probe is left or the budget is spent."""
    while True:
        fitting = {
            i: p.tokens_per_second or 0.0
            for i, p in tried.items()
            if not p.out_of_memory and i <= edge
        }
        best_i = max(fitting, key=fitting.__getitem__)
        below = max((i for i in fitting if i < best_i), default=-1)
        above = min((i for i in fitting if i > best_i), default=edge + 1)
        # The side whose far end is faster (or not probed yet) first: the peak leans there.
        gaps = [
            (fitting.get(end, math.inf), abs(end - best_i), mid)
            for end, mid in ((above, (best_i + above) // 2), (below, (best_i + below + 1) // 2))
            if abs(end - best_i) > 1 and not _flat(fitting, best_i, end, threshold)
        ]
        if not gaps:
            gaps = _near_gaps(fitting, fitting[best_i], edge, 2 * threshold)
        if not gaps:
            return
        if run(max(gaps)[2]) is None:
            return


def _near_gaps(speeds: dict[int, float], best: float, edge: int, band: float) -> list:
    """Once the fastest probe's neighbours are known, the leftover budget goes to the largest
    untested gap whose probed ends come within ``band`` of the fastest: one probe varies by a
    few per cent from run to run, so a neighbour measured a little low may hide a faster one
    beyond it."""
    known = sorted(speeds)
    gaps = []
    for lo, hi in zip(known, known[1:] + [edge + 1]):
        ends = [speeds[i] for i in (lo, hi) if i in speeds]
        if hi - lo > 1 and max(ends) >= best * (1 - band):
            gaps.append((0.0, hi - lo, (lo + hi) // 2))
    return gaps


def _reason(pick: Probe, tried: dict[int, Probe], edge: int, ladder, threshold) -> str:
    c = pick.candidate
    fit = max(p.candidate.micro_batch_size for p in tried.values() if not p.out_of_memory)
    oom = [p.candidate.micro_batch_size for p in tried.values() if p.out_of_memory]
    retried = [p.candidate.micro_batch_size for p in tried.values() if p.at_memory_edge]
    edge_text = (
        f"the largest micro-batch probed that fits is {fit}"
        + (f" ({min(oom)} ran out of memory)" if oom else "")
        + (f" ({min(retried)} ran with allocator retries, at the memory edge)" if retried else "")
    )
    at = next(i for i, p in tried.items() if p is pick)
    neighbours = [i for i in (at - 1, at + 1) if 0 <= i <= edge]
    climb = (
        "both its neighbours were probed"
        if all(i in tried for i in neighbours)
        else f"the probes beside it are within {threshold:.0%} of it or the budget was spent"
    )
    return (
        f"{edge_text}; micro-batch {c.micro_batch_size} × accumulation "
        f"{c.gradient_accumulation_steps} is the fastest of {len(tried)} probe(s) and "
        f"{climb}"
    )
