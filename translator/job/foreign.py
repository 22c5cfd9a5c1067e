"""Configs of training frameworks batchspec does not read, named as such.

Several of them share a key or two with a framework batchspec reads (GPT-NeoX's YAML holds
DeepSpeed's ``train_micro_batch_size_per_gpu``; Levanter's and MaxText's a ``per_device_...``
batch; Fast-LLM's a ``micro_batch_size``), so without this they were read as that framework's
with confident numbers that the job never runs. Each is recognised by keys that are its own,
and refused (exit 2) with its name: unknown is never a number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from translator.words import parsing
from translator.words.errors import InputError
from translator.words.files import suffix_of


class ForeignConfig(InputError):
    """A config of a framework batchspec does not read."""

    def __init__(self, message: str, framework: str):
        super().__init__(message)
        self.framework = framework


@dataclass(frozen=True)
class Foreign:
    """A framework batchspec does not read, and how its config shows it."""

    name: str
    """Its name as users say it."""
    shows: Callable[[dict], bool]
    """Whether a parsed config (a mapping) carries keys that only this framework writes."""


def _section(config: dict, key: str) -> dict:
    value = config.get(key)
    return value if isinstance(value, dict) else {}


def _has(config: dict, *keys: str) -> bool:
    return all(k in config for k in keys)


FOREIGN: tuple[Foreign, ...] = (
    # GPT-NeoX: Megatron-style model keys with dashes or underscores beside DeepSpeed's batch.
    Foreign(
        "GPT-NeoX",
        lambda c: (
            any(k in c for k in ("pipe-parallel-size", "pipe_parallel_size"))
            and any(k in c for k in ("model-parallel-size", "model_parallel_size"))
        ),
    ),
    # Levanter: a trainer section with its mesh axes and per-device parallelism.
    Foreign(
        "Levanter",
        lambda c: (
            "per_device_parallelism" in _section(c, "trainer")
            or ("train_batch_size" in _section(c, "trainer") and "mesh" in _section(c, "trainer"))
        ),
    ),
    # MaxText: ICI/DCN mesh sizes beside a per-device batch.
    Foreign(
        "MaxText",
        lambda c: (
            "per_device_batch_size" in c and any(str(k).startswith(("ici_", "dcn_")) for k in c)
        ),
    ),
    # Fast-LLM: a batch section with sequential micro-batches, or a model with its distributed
    # section.
    Foreign(
        "Fast-LLM",
        lambda c: (
            any(
                k in _section(c, "batch")
                for k in ("sequential_micro_batches", "breadth_first_micro_batches")
            )
            or "distributed" in _section(c, "model")
        ),
    ),
    # mistral-finetune: micro-batches counted as num_microbatches, a run folder, a model path.
    Foreign(
        "mistral-finetune",
        lambda c: "num_microbatches" in c and ("run_dir" in c or "model_id_or_path" in c),
    ),
    # fairseq2: a recipe's regime and trainer sections.
    Foreign("fairseq2", lambda c: _has(c, "regime", "trainer") and "dataset" in c),
    # OLMo (built on Composer's keys) before llm-foundry: its data paths or tokenizer identifier.
    Foreign(
        "OLMo",
        lambda c: (
            "global_train_batch_size" in c
            and ("paths" in _section(c, "data") or "identifier" in _section(c, "tokenizer"))
        ),
    ),
    # Composer / llm-foundry: global and per-device micro-batch sizes.
    Foreign(
        "Composer/llm-foundry",
        lambda c: (
            "global_train_batch_size" in c
            and any(k in c for k in ("device_train_microbatch_size", "train_loader"))
        ),
    ),
)


#: Every key the signatures above look for: a text that holds none of them is none of theirs.
MARKERS = (
    "pipe_parallel_size",
    "pipe-parallel-size",
    "trainer",
    "per_device_batch_size",
    "micro_batches",
    "distributed",
    "num_microbatches",
    "regime",
    "global_train_batch_size",
)


def refuse_foreign(path: str, text: str) -> None:
    """A :class:`ForeignConfig` naming the framework when ``text`` (a YAML or JSON file) is a
    config of one batchspec does not read; nothing when it is not, or does not parse (its
    reader says why)."""
    if suffix_of(path) not in (".yaml", ".yml", ".json"):
        return
    if not any(marker in text for marker in MARKERS):
        return  # none of their keys is written: not parsed again (most configs)
    try:
        config = parsing.load_yaml(text, path).data
    except InputError:
        return
    if not isinstance(config, dict):
        return
    for foreign in FOREIGN:
        if foreign.shows(config):
            raise ForeignConfig(
                f"{path}: a config of {foreign.name}, a framework batchspec does not read: its "
                "batch is not checked (give --framework to read it as one that batchspec reads)",
                foreign.name,
            )
