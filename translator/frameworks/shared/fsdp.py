"""PyTorch FSDP as the Hugging Face Trainer sets it up through accelerate's FSDP plugin (the
Trainer's ``fsdp`` and ``fsdp_config``, which Axolotl hands on), for the memory estimate.

transformers 5 (``TrainingArguments._process_fsdp_args``): a legacy ``fsdp`` string or list
(``"full_shard auto_wrap offload"``) fills ``fsdp_config``; ``fsdp_config`` keys lose a
``fsdp_`` prefix; ``version`` defaults to 2. FSDP2 reshards the weights after the forward pass
unless ``reshard_after_forward`` is false (sharded as ZeRO 3, else as ZeRO 2); FSDP1's
strategy is ``FULL_SHARD`` (3), ``SHARD_GRAD_OP`` (2) or ``NO_SHARD`` (0), and its hybrid
strategies shard within a node only. CPU offload moves the weights, gradients and optimizer
step to the CPU; ``activation_checkpointing`` recomputes each wrapped layer.
"""

from __future__ import annotations

from translator.model.memory import STATES, Setting, Settings

#: accelerate's FSDP1 strategies (``FSDP_SHARDING_STRATEGY``, numbered from 1) -> ZeRO stage;
#: None for the hybrid ones, which shard over a node's ranks only.
FSDP1_STAGES = {
    "FULL_SHARD": 3,
    "SHARD_GRAD_OP": 2,
    "NO_SHARD": 0,
    "HYBRID_SHARD": None,
    "HYBRID_SHARD_ZERO2": None,
}


def legacy(items: object, config: dict, version: int) -> None:
    """The Trainer's legacy ``fsdp`` options (a string or a list) into ``config``, as
    transformers translates them (it keeps what ``config`` already sets)."""
    words = items.split() if isinstance(items, str) else items if isinstance(items, list) else []
    for word in map(str, words):
        if word.upper() in FSDP1_STAGES:
            if version == 2:
                config.setdefault("reshard_after_forward", word != "shard_grad_op")
            else:
                config.setdefault("reshard_after_forward", word)
        elif word == "offload":
            config.setdefault("cpu_offload", True)


def settings(config: dict, version: int, offload: bool, where: str) -> Settings:
    """The ZeRO stage FSDP shards as, its CPU offload (``offload``) and activation
    checkpointing, from a ``fsdp_config`` (prefixes removed) at ``version``; ``where`` names
    the setting."""
    given: list[Setting] = []
    unused: list[str] = []
    reshard = config.get("reshard_after_forward")  # transformers passes no other strategy key
    if version == 2:
        stage = 2 if str(reshard).lower() == "false" else 3
        given.append(Setting("zero_stage", stage, f"{where} (FSDP2)"))
    else:
        strategy = str(reshard or "FULL_SHARD").upper()
        if strategy.isdigit() and 1 <= int(strategy) <= len(FSDP1_STAGES):
            strategy = list(FSDP1_STAGES)[int(strategy) - 1]
        sharded = FSDP1_STAGES.get(strategy, 3)
        if sharded is None:
            unused.append(
                f"{where}: FSDP {strategy} shards within a node only, which the estimate does "
                "not count (it divides by DP)"
            )
        else:
            given.append(Setting("zero_stage", sharded, f"{where} (FSDP1 {strategy})"))
    if offload:
        given.append(Setting("offload", frozenset(STATES), f"{where} (CPU offload)"))
    if str(config.get("activation_checkpointing")).lower() == "true":
        given.append(Setting("recompute", "full", f"{where} activation_checkpointing"))
    return Settings(tuple(given), tuple(unused))


def config_of(value: object) -> dict:
    """A ``fsdp_config`` mapping with its keys' ``fsdp_`` prefixes removed (``{}`` when it is
    not a mapping)."""
    if not isinstance(value, dict):
        return {}
    return {str(k).removeprefix("fsdp_"): v for k, v in value.items()}
