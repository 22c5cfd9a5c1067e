"""``estimate``'s use case: the memory per GPU of a layout and, given a GPU's capacity, whether
it fits and the largest micro-batch that does while keeping the global batch."""

from __future__ import annotations

from dataclasses import dataclass, field

from translator import memory, solve
from translator.errors import InputError
from translator.findings import Finding, finding
from translator.memory import GIB
from translator.spec import BatchSpec


@dataclass
class Report:
    """A layout's memory estimate, with the verdict against a capacity when one is given."""

    spec: BatchSpec
    """The layout estimated (decided: micro-batch and accumulation known)."""
    shape: memory.Model
    """The model."""
    sequence_length: int
    """Tokens per sample (the spec's, else 2048)."""
    run: memory.Run
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

    def as_dict(self) -> dict:
        """``estimate --json``'s object."""
        return {
            "model": self.shape.name,
            "parameters": self.shape.parameters,
            "sequence_length": self.sequence_length,
            "layout": self.spec.output(),
            "precision": self.run.precision,
            "recompute": self.run.recompute,
            "attention": self.run.attention,
            **self.result.as_dict(),
            "capacity_bytes": self.capacity,
            "fits": self.fits,
            "largest_fitting_micro_batch": self.largest_fitting,
            "findings": [f.as_dict() for f in self.findings],
        }


def estimate(
    spec: BatchSpec,
    model: str,
    *,
    capacity: int | None = None,
    where: str | None = None,
    **how,
) -> Report:
    """The estimate of ``spec`` with ``model`` (a preset or a config.json); ``how`` is
    :func:`translator.memory.run_of`'s keywords; ``where`` names the file in a finding."""
    if not spec.is_decided:
        raise InputError(
            "the micro-batch is not decided: give --micro-batch (batchspec plan lists the options)"
        )
    seq_len = spec.sequence_length or 2048
    shape = memory.model_named(model, seq_len)
    run = memory.run_of(spec, seq_len, **how)
    found = Report(spec, shape, seq_len, run, memory.estimate(shape, run), capacity)
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
