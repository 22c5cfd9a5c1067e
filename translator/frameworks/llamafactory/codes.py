"""The finding codes of the llamafactory framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "llamafactory-megatron-batch": (
        "info",
        "LLaMA-Factory's Megatron paths: micro × accumulation × world / (TP × PP × CP)",
    ),
    "llamafactory-bad-override": (
        "error",
        "a word after the config is not a key=value override: LLaMA-Factory refuses it",
    ),
    "llamafactory-deepspeed-one-process": (
        "error",
        "DeepSpeed in one process, which LLaMA-Factory refuses (FORCE_TORCHRUN=1)",
    ),
    "llamafactory-not-distributed": (
        "error",
        "plain python on several GPUs (DataParallel), which LLaMA-Factory refuses",
    ),
    "llamafactory-megatron-paths": (
        "warning",
        "with expert parallelism LLaMA-Factory's two Megatron paths give two batches",
    ),
}
