"""The finding codes of the megatron-bridge framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "megatron-bridge-generation": (
        "info",
        "which generation of NVIDIA's keys the file is (Megatron-Bridge, NeMo 2, NeMo 1), and "
        "the Megatron-Bridge keys of an older one",
    ),
    "megatron-bridge-recipe-value": (
        "info",
        "a batch or parallel key the override file or launch does not set is the Python "
        "recipe's, unknown here",
    ),
    "megatron-bridge-recipe-table": (
        "info",
        "a batch or parallel key the launch does not set is the one its recipe's function sets "
        "at the Megatron-Bridge commit batchspec's table was read from (another version may "
        "differ)",
    ),
    "megatron-bridge-accumulation-implied": (
        "info",
        "no accumulation key: megatron-core runs global / (micro x data-parallel) micro-batches, "
        "checked only when the job starts",
    ),
    "megatron-bridge-global-default": (
        "info",
        "a null global batch is micro x data-parallel: one micro-batch per step",
    ),
    "megatron-bridge-rounds-down": (
        "warning",
        "decrease_batch_size_if_needed silently rounds the global batch down to a multiple of "
        "micro x data-parallel",
    ),
    "megatron-bridge-decrease-batch": (
        "warning",
        "decrease_batch_size_if_needed is on: on another world it rounds the batch down "
        "instead of failing",
    ),
    "megatron-bridge-rampup": (
        "warning",
        "rampup_batch_size: the global batch grows during the ramp-up (deprecated in Megatron-LM)",
    ),
    "megatron-bridge-schedule-unused": (
        "warning",
        "step_batch_size_schedule is not passed to megatron-core's calculator by Megatron-Bridge",
    ),
    "megatron-bridge-accumulation": (
        "error",
        "trainer.accumulate_grad_batches is not 1: Megatron accumulates itself",
    ),
    "megatron-bridge-nemo-overwritten": (
        "warning",
        "a NeMo 2 model.config parallel size, which the strategy's own size overwrites",
    ),
    "megatron-bridge-bad-override": (
        "error",
        "a word after the launch options is not KEY=VALUE; run_recipe.py refuses it",
    ),
}
