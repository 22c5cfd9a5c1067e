"""The finding codes of the deepspeed framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "deepspeed-pipeline-accumulation": (
        "info",
        "DeepSpeed's pipeline engine runs gradient_accumulation_steps micro-batches per step",
    ),
    "deepspeed-pipeline-zero": ("error", "DeepSpeed's pipeline engine refuses ZeRO stage 2 or 3"),
    "deepspeed-mpu-world": (
        "info",
        "with model parallelism DeepSpeed counts the data-parallel size its mpu reports",
    ),
    "deepspeed-autotp-world": (
        "info",
        "DeepSpeed AutoTP checks train_batch_size against the full world size",
    ),
    "deepspeed-batch-mismatch": (
        "error",
        "train_batch_size is not micro x accumulation x the world DeepSpeed counts",
    ),
    "deepspeed-floor": (
        "error",
        "DeepSpeed would derive a missing batch value by floor division and then fail",
    ),
    "deepspeed-no-batch": (
        "error",
        "neither train_batch_size nor train_micro_batch_size_per_gpu is given",
    ),
    "deepspeed-elasticity-removed": (
        "error",
        "the elasticity block was removed from DeepSpeed and makes it raise",
    ),
}
