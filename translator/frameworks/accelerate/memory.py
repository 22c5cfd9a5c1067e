"""What an accelerate config says about memory: ``distributed_type: FSDP`` with its
``fsdp_config``, the FSDP plugin accelerate launches the program with (its sharding strategy or,
in FSDP2, ``fsdp_reshard_after_forward``; parameter offload; activation checkpointing), counted
as the ZeRO stage it shards like. A DeepSpeed launch's config is the DeepSpeed JSON's to say."""

from __future__ import annotations

from translator.frameworks.shared import fsdp
from translator.model.memory import Settings
from translator.reading import Reading
from translator.words import parsing
from translator.words.errors import InputError


def memory_settings(reading: Reading) -> Settings:
    """The FSDP the config launches with (accelerate's defaults: FSDP1, ``FULL_SHARD``); none
    for another distributed type."""
    try:
        config = parsing.load_yaml(reading.text, reading.path).data
    except InputError:
        return Settings()
    if not isinstance(config, dict) or str(config.get("distributed_type", "")).upper() != "FSDP":
        return Settings()
    block = fsdp.config_of(config.get("fsdp_config"))
    version = 2 if str(block.get("version", 1)) == "2" else 1
    if version == 1 and "sharding_strategy" in block:
        block.setdefault("reshard_after_forward", block["sharding_strategy"])
    offload = str(block.get("offload_params")).lower() == "true"
    where = f"{reading.path}: distributed_type FSDP"
    return fsdp.settings(block, version, offload, where)
