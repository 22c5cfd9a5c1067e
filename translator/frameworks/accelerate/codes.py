"""The finding codes of the accelerate framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "accelerate-processes-from-command-line": (
        "warning",
        "num_processes -1: accelerate launch needs --num_processes",
    ),
    "accelerate-uneven-machines": (
        "error",
        "num_processes does not split evenly over num_machines (accelerate floors it)",
    ),
    "accelerate-parallel-sizes": (
        "error",
        "parallelism_config sizes do not multiply to num_processes",
    ),
    "accelerate-deepspeed-file-and-keys": (
        "error",
        "deepspeed_config_file beside accelerate keys it would ignore: accelerate refuses it",
    ),
    "accelerate-deepspeed-no-zero": (
        "error",
        "the DeepSpeed config file has no zero_optimization: accelerate's plugin refuses it",
    ),
    "accelerate-deepspeed-accumulation": (
        "info",
        "the accumulation of the DeepSpeed config an accelerate launch hands the program",
    ),
    "accelerate-batch-elsewhere": (
        "info",
        "an accelerate config gives the launch; the batch is in the training code",
    ),
}
