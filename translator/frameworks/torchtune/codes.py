"""The finding codes of the torchtune framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "torchtune-batch": (
        "info",
        "torchtune has no global batch key: batch_size × data-parallel × accumulation, unchecked",
    ),
    "torchtune-missing-key": (
        "error",
        "a key the recipe reads as cfg.KEY (no default) is missing: it stops with a missing key",
    ),
    "torchtune-no-batch-keys": (
        "warning",
        "no top-level batch_size or gradient_accumulation_steps: another recipe's layout",
    ),
    "torchtune-unreleased-keys": (
        "warning",
        "context/data-parallel dims of torchtune's main branch, which torchtune 0.6.1 ignores",
    ),
    "torchtune-mesh": (
        "error",
        "the parallel dims do not multiply to the world size (ParallelDims refuses them)",
    ),
    "torchtune-optimizer-in-bwd": (
        "error",
        "optimizer_in_bwd with gradient accumulation, which the recipe refuses",
    ),
    "torchtune-tp-plan": (
        "error",
        "tensor_parallel_dim > 1 without a tensor_parallel_plan, which the recipe refuses",
    ),
    "torchtune-epoch-tail": (
        "info",
        "micro-batches after an epoch's last full accumulation window change a step's batch",
    ),
    "torchtune-packed": (
        "info",
        "dataset.packed: each row packs several samples up to tokenizer.max_seq_len tokens",
    ),
    "torchtune-tp-ignored": (
        "warning",
        "tensor_parallel_dim under a built-in recipe that does not read it (it shards over all ranks)",
    ),
    "torchtune-single-device": (
        "error",
        "a single-device recipe under tune run with torchrun options, which tune run refuses",
    ),
    "torchtune-no-pipeline": ("error", "torchtune's recipes have no pipeline parallelism"),
    "torchtune-no-context-parallel": (
        "error",
        "torchtune 0.6.1, the last release, has no context parallelism",
    ),
    "torchtune-bad-override": (
        "error",
        "a word after the config that is not key=value (torchtune refuses it)",
    ),
    "torchtune-builtin-config": (
        "warning",
        "a built-in config name that the installed torchtune does not resolve here",
    ),
    "torchtune-one-process": (
        "error",
        "a distributed recipe under tune run without torchrun options: no process group starts",
    ),
}
