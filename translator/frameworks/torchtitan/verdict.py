"""torchtitan's own code on a file's values at a world size: ``Trainer.Config`` (its
dataclasses' fields and ``__post_init__`` checks: an unknown key is a ``TypeError``, the
pipeline micro-batch split a ``ValueError``) and ``ParallelDims`` (the mesh product), then the
batch arithmetic of ``Trainer.__init__``, which needs a running trainer and is mirrored here in
its words, on the degrees ``ParallelDims`` derived."""

from __future__ import annotations

from translator.frameworks.torchtitan import keys
from translator.words.findings import counted


def configured(values: dict, world: int):
    """``(Trainer.Config, ParallelDims)`` built from ``values`` (torchtitan key -> value) by the
    installed torchtitan; its own exceptions propagate."""
    from torchtitan.config.configs import ParallelismConfig, TrainingConfig
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.trainer import Trainer

    sections: dict[str, dict] = {"training": {}, "parallelism": {}}
    for key, value in values.items():
        section, _, name = key.partition(".")
        sections[section][name] = value
    config = Trainer.Config(
        training=TrainingConfig(**sections["training"]),
        parallelism=ParallelismConfig(**sections["parallelism"]),
    )
    return config, ParallelDims.from_config(config.parallelism, world)


def accumulation(config, dims) -> int:
    """``Trainer.__init__``'s gradient accumulation steps, with its assert's words (the sample
    generation) or its ValueError's (the token one)."""
    batch = dims.dp_replicate * dims.dp_shard
    training = config.training
    if hasattr(training, "num_tokens_per_train_step"):
        pieces = config.parallelism.num_pp_microbatches if dims.pp > 1 else 1
        per_rank = training.num_tokens_per_microbatch_per_dp_rank * pieces
        total = training.num_tokens_per_train_step
        total = per_rank * batch if total < 0 else total
        if total % (per_rank * batch):
            raise ValueError(
                f"training.num_tokens_per_train_step ({total}) must be divisible by the number "
                "of tokens processed globally in one gradient accumulation iteration "
                f"({per_rank * batch})."
            )
        return total // (per_rank * batch)
    total = training.global_batch_size
    total = training.local_batch_size * batch if total < 0 else total
    if total % (training.local_batch_size * batch):
        raise AssertionError(
            "global batch size must be multiple of local batch size times data-parallel degree "
            f"({total} % ({training.local_batch_size} * {batch}) != 0)"
        )
    return total // (training.local_batch_size * batch)


def parsed(module: str, function: str, values: dict):
    """``(Trainer.Config, flags)``: torchtitan's ConfigManager on ``--module``, ``--config`` and
    the flags of ``values`` (the config function's own values under them)."""
    from torchtitan.config.manager import ConfigManager

    args = ["--module", module, "--config", function]
    for key, value in values.items():
        args += [f"--{key}"] if value is True else [f"--{key}", str(value)]
    return ConfigManager().parse_args(args), args


def verdict(inspection, world: int) -> str:
    """torchtitan's ConfigManager on a launch's ``--module``/``--config`` and flags (else its
    config classes on a file's values), then ParallelDims at ``world``."""
    from torchtitan.distributed.parallel_dims import ParallelDims

    from translator.plugin.contract import NotEnoughKnown

    reading = inspection.reading
    values = {}
    function = [reading.values.get(k) for k in ("module", "config")]
    for key in keys.DEFAULTS:
        v = reading.values.get(key)
        if v is None or (v.value is None and None not in function):
            continue  # a launch's config function gives what the flags do not
        if v.value is None:
            raise NotEnoughKnown(f"{key} is unknown ({v.why_unknown})")
        values[key] = v.value
    if None not in function:
        module, name = (v.value for v in function if v is not None)
        if not isinstance(module, str) or not isinstance(name, str):
            raise NotEnoughKnown("--module or --config is unknown")
        config, _ = parsed(module, name, values)
        dims = ParallelDims.from_config(config.parallelism, world)
        how = f"torchtitan's ConfigManager (--module {module} --config {name}) and ParallelDims"
    else:
        config, dims = configured(values, world)
        how = "torchtitan's Trainer.Config and ParallelDims"
    steps = accumulation(config, dims)
    return (
        f"{how} accept it: data-parallel {dims.dp_replicate} × {dims.dp_shard}, "
        f"{counted(steps, 'accumulation step')} per optimizer step"
    )
