"""The known ways a framework's loss of one global batch depends on how the batch is split:
each micro-batch's loss divided by its own tokens, then the micro-batches averaged, so padded
samples of different lengths weigh differently in a step of one micro-batch and in a step of
several (``smoke --parity`` shows it; each framework says when it applies and what fixes it)."""

from __future__ import annotations

import functools
import importlib.metadata

from translator.spec import BatchSpec
from translator.words.findings import Finding, finding


def per_micro_batch(spec: BatchSpec | None, how: str, fix: str, where: str) -> list[Finding]:
    """The ``loss-normalisation`` warning for a step of more than one micro-batch (over the
    accumulation and the data-parallel ranks; with one, the split cannot matter); ``how``
    says what the framework does, ``fix`` the flag or version that fixes it. ``spec`` None: the
    engine's own runs, whose split is not known yet."""
    if spec is not None and spec.accumulation * spec.data_parallel == 1:
        return []
    step = (
        ""
        if spec is None
        else f" (this step: accumulation {spec.accumulation} × data-parallel {spec.data_parallel})"
    )
    return [
        finding(
            "loss-normalisation",
            f"{how}: where samples hold different numbers of loss tokens (padding, masked "
            f"prompts), a step of several micro-batches{step} weighs them otherwise than one "
            "micro-batch of the same samples, so splits of one global batch train differently "
            "(smoke --parity fails; packed full rows are not affected)",
            hint=fix,
            where=where,
        )
    ]


@functools.cache
def version(package: str) -> tuple[int, ...] | None:
    """The installed release of ``package`` as numbers (``(4, 45, 2)``), without importing
    it; None when it is not installed."""
    try:
        text = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
    numbers = []
    for part in text.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)
