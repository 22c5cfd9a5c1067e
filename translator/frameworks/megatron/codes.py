"""The finding codes of the megatron framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "megatron-accumulation-implied": (
        "info",
        "Megatron has no accumulation flag: it is global / (micro x data-parallel)",
    ),
    "megatron-deepspeed-mismatch": (
        "error",
        "the DeepSpeed JSON of a Megatron-DeepSpeed job counts its accumulation in another "
        "micro-batch",
    ),
    "megatron-deepspeed-overridden": (
        "warning",
        "the DeepSpeed JSON's global batch differs from the flags; Megatron-DeepSpeed replaces "
        "it every iteration",
    ),
    "megatron-fork-flag": (
        "info",
        "a flag is spelt the way a Megatron fork spells it (underscores), read as such",
    ),
    "megatron-global-default": (
        "info",
        "without --global-batch-size Megatron uses micro x data-parallel",
    ),
    "megatron-rampup-ignored": (
        "warning",
        "--rampup-batch-size is ignored by recent megatron-core",
    ),
    "megatron-decrease-batch": (
        "warning",
        "--decrease-batch-size-if-needed may round the global batch down",
    ),
}
