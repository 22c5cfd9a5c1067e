"""Which of torchtune's two ways of sizing the data-parallel group counts a file.

- torchtune 0.6.1 (the last release, on PyPI): the recipe reads ``tensor_parallel_dim`` only and
  builds a ``(dp, tp)`` mesh with ``dp = world // tensor_parallel_dim``.
- torchtune's main branch (``version.txt`` 0.7.0, never released): ``training.ParallelDims``
  from ``data_parallel_replicate_dim`` (1), ``data_parallel_shard_dim`` (-1: inferred),
  ``tensor_parallel_dim`` and ``context_parallel_dim``; the batch's data-parallel group is
  replicate × shard (context parallel ranks share a batch).

The torchtune installed here decides how a file counts (it is what would run it); without one,
the file's own keys do. Nothing here imports torchtune.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re

#: The last released torchtune.
RELEASED = "0.6.1"
#: The first version whose recipes build ``ParallelDims`` (main's version.txt).
PARALLEL_DIMS = (0, 7)
#: Keys only main's recipes read.
NEWER_KEYS = ("context_parallel_dim", "data_parallel_shard_dim", "data_parallel_replicate_dim")
#: torchtune's built-in recipes that ``tune run`` refuses to start under torchrun ("does not
#: support distributed training"), as 0.6.1's registry lists them.
SINGLE_DEVICE = (
    "full_finetune_single_device",
    "lora_finetune_single_device",
    "lora_dpo_single_device",
    "ppo_full_finetune_single_device",
    "knowledge_distillation_single_device",
    "generate",
    "dev/generate_v2",
    "eleuther_eval",
    "quantize",
)
#: Its built-in distributed recipes.
DISTRIBUTED = (
    "full_finetune_distributed",
    "lora_finetune_distributed",
    "lora_dpo_distributed",
    "full_dpo_distributed",
    "qat_distributed",
    "qat_lora_finetune_distributed",
    "knowledge_distillation_distributed",
    "dev/lora_finetune_distributed_multi_dataset",
    "dev/early_exit_finetune_distributed",
    "dev/generate_v2_distributed",
    "dev/async_grpo_full_finetune_distributed",
)
#: Of them, those that read ``tensor_parallel_dim``: 0.6.1's, main's.
TENSOR_PARALLEL = {
    False: ("full_finetune_distributed",),
    True: (
        "full_finetune_distributed",
        "lora_finetune_distributed",
        "qat_distributed",
        "dev/async_grpo_full_finetune_distributed",
    ),
}


@functools.cache
def installed() -> str | None:
    """The installed torchtune's version, or None when it is not installed (asked once: a
    distribution lookup costs more than reading a config)."""
    try:
        return importlib.metadata.version("torchtune")
    except importlib.metadata.PackageNotFoundError:
        return None


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version)[:2])


def counts_parallel_dims(file_keys: list[str]) -> tuple[bool, str]:
    """Whether ``ParallelDims`` counts the file (else 0.6.1's ``world // tensor_parallel_dim``),
    and the torchtune that decides it (for messages)."""
    version = installed()
    if version is not None:
        return _numbers(version) >= PARALLEL_DIMS, f"the installed torchtune {version}"
    if file_keys:
        return True, f"torchtune main (the file's {', '.join(file_keys)}; none is installed here)"
    return False, f"torchtune {RELEASED} (none is installed here)"
