"""A DeepSpeed JSON read: its batch keys (ints or ``"auto"``), ZeRO stage, AutoTP and sequence
parallel size, duplicate and misspelt keys. DeepSpeed's own reader, which every framework that
names such a JSON imports from here (the HF Trainer family, Axolotl, accelerate,
Megatron-DeepSpeed scripts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from translator.reading import Reading, Value, typo_findings, values_at
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.findings import finding

if TYPE_CHECKING:
    from translator.model.memory import Settings
    from translator.words.findings import Severity

#: The framework name a DeepSpeed JSON's reading carries.
NAME = "deepspeed"
#: The name the JSON has in a smoke run's work folder.
FILENAME = "deepspeed.json"
TBS, MBS, GAS = "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"
BATCH_KEYS = [TBS, MBS, GAS]
#: DeepSpeed AutoTP's tensor-parallel size (``tensor_parallel: {autotp_size: N}``).
AUTOTP = "tensor_parallel.autotp_size"
#: Real DeepSpeed keys that look like batch keys.
LOOKALIKES = {
    "gradient_accumulation_dtype",
    "gradient_clipping",
    "gradient_predivide_factor",
    "sequence_parallel_size",
    "prescale_gradients",
}
#: The HF Trainer argument each "auto" batch key is filled from.
HF_FILLS = {
    TBS: "world_size × per_device_train_batch_size × gradient_accumulation_steps (world = every "
    "process, not the data-parallel size)",
    MBS: "per_device_train_batch_size",
    GAS: "gradient_accumulation_steps",
}

#: Codes of a DeepSpeed JSON's reading, registered by every framework that reads one.
CODES: dict[str, tuple[Severity, str]] = {
    "hf-auto": ("info", 'an "auto" value is filled by the Hugging Face Trainer, not by DeepSpeed'),
    "hf-deepspeed-autotp": (
        "info",
        "DeepSpeed AutoTP under the HF Trainer: tensor-parallel ranks share their micro-batches, "
        "while train_batch_size counts every process",
    ),
}

#: Codes that already say why a file naming such a JSON has no solved batch (its "auto"
#: values are the HF Trainer's to fill): each framework that reads one explains with them.
EXPLAINS = frozenset({"hf-auto"})


def read(text: str, where: str) -> Reading:
    """A DeepSpeed JSON: the batch keys (ints or "auto"), ZeRO, AutoTP, sequence parallel."""
    doc = parsing.load_json(text, where)
    config = doc.data
    if not isinstance(config, dict):
        raise InputError(
            f"{where}: a DeepSpeed config must be a JSON object, not {type(config).__name__}"
        )
    reading = Reading(where, NAME, text)
    lines = {key: doc.positions.get(key, (0,))[0] for key in config}
    reading.values |= values_at(
        doc,
        BATCH_KEYS + ["sequence_parallel_size", "zero_optimization.stage", AUTOTP],
    )
    if "pipeline" in config:
        reading.values["pipeline"] = Value(True, lines["pipeline"])
    for dup in doc.duplicates:
        key = parsing.brief(dup.path)
        reading.findings.append(
            finding(
                "duplicate-key",
                f"{key} is set twice (lines {dup.first} and {dup.again}); "
                "DeepSpeed refuses duplicate keys",
                hint=f"keep one {key}",
                where=f"{where}:{dup.again}",
            )
        )
    if "elasticity" in config:
        reading.findings.append(
            finding(
                "deepspeed-elasticity-removed",
                "the elasticity block was removed from DeepSpeed (0.19.8 raises on it)",
                hint="delete it; batchspec plan lists the batch layouts valid on each world size",
                where=f"{where}:{lines['elasticity']}",
            )
        )
    reading.findings += typo_findings(lines, BATCH_KEYS, LOOKALIKES, where)
    return reading


def zero_stage(text: str) -> int:
    """The ZeRO stage DeepSpeed runs a JSON's text at (``zero_optimization.stage``, 0 when the
    JSON sets none)."""
    import json

    zero = json.loads(text).get("zero_optimization")
    stage = zero.get("stage", 0) if isinstance(zero, dict) else 0
    return stage if type(stage) is int else 0


#: ZeRO-Offload's blocks -> the model-state parts each keeps in CPU memory: the optimizer's
#: states and gradients go with ``offload_optimizer``, the weights with ``offload_param``
#: (stage 3 only), as DeepSpeed's own ``estimate_zero2/3_model_states_mem_needs`` count them.
OFFLOAD = {
    "zero_optimization.offload_optimizer": ("optimizer", "gradients"),
    "zero_optimization.offload_param": ("weights",),
}
#: ZeRO keys that shard over fewer ranks than the data-parallel ones, which the memory model
#: cannot count: ZeRO++'s secondary weight partition, MiCS's shard groups.
PARTIAL = ("zero_optimization.zero_hpz_partition_size", "zero_optimization.mics_shard_size")


def memory_settings(reading: Reading) -> Settings:
    """A DeepSpeed JSON's ZeRO stage and offload, for the memory estimate."""
    from translator.model.memory import Setting, Settings

    doc = parsing.load_json(reading.text, reading.path)
    zero = doc.data.get("zero_optimization") if isinstance(doc.data, dict) else None
    if not isinstance(zero, dict):
        return Settings()

    def where(key: str) -> str:
        line = doc.positions.get(key, (0,))[0]
        return f"{reading.path}:{line} {key}" if line else f"{reading.path} {key}"

    given, unused = [], []
    stage = zero.get("stage")
    if type(stage) is int and stage in (0, 1, 2, 3):
        given.append(Setting("zero_stage", stage, where("zero_optimization.stage"), engine=NAME))
    elif "stage" in zero:
        unused.append(f"{where('zero_optimization.stage')} is {stage!r}, not a ZeRO stage 0-3")
    for key, parts in OFFLOAD.items():
        block = zero.get(key.rpartition(".")[2])
        device = block.get("device") if isinstance(block, dict) else None
        if device in ("cpu", "nvme") and parts == ("weights",) and stage != 3:
            unused.append(f"{where(key + '.device')} {device}: only ZeRO stage 3 offloads weights")
        elif device in ("cpu", "nvme"):
            given.append(Setting("offload", frozenset(parts), f"{where(key + '.device')} {device}"))
    unused += [
        f"{where(key)} {value}: ZeRO shards over groups smaller than the data-parallel ranks, "
        "which the estimate does not count (it divides by DP)"
        for key in PARTIAL
        if isinstance(value := zero.get(key.rpartition(".")[2]), int) and value > 1
    ]
    return Settings(tuple(given), tuple(unused))
