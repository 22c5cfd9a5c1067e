"""The finding codes of the axolotl framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "axolotl-no-pipeline": ("error", "Axolotl has no pipeline parallelism"),
    "axolotl-batch-keys": ("error", "Axolotl's validator refuses this combination of batch keys"),
    "axolotl-batch-size-redundant": (
        "warning",
        "Axolotl ignores batch_size, which equals micro_batch_size and so says "
        "accumulation 1 anyway",
    ),
    "axolotl-batch-size-ignored": (
        "error",
        "Axolotl ignores batch_size beside micro_batch_size without accumulation",
    ),
    "axolotl-world-rounding": (
        "error",
        "Axolotl floors world / context / tensor, silently changing the batch",
    ),
    "axolotl-deepspeed-mismatch": (
        "error",
        "the DeepSpeed JSON disagrees with the Axolotl YAML that points to it",
    ),
    "axolotl-sample-packing": (
        "info",
        "with sample packing a micro-batch holds packed rows, not samples",
    ),
    "axolotl-null-batch": ("error", "a batch key is null, which Axolotl keeps and then fails on"),
    "axolotl-option-to-launcher": (
        "error",
        "an underscore option of axolotl train is not Axolotl's: it goes to the launcher",
    ),
    "axolotl-accumulation-from-batch-size": (
        "info",
        "gradient_accumulation_steps is null, so Axolotl derives it from batch_size",
    ),
}
