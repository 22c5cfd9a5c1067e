"""accelerate's own code on a config file: ``load_config_from_file`` (what ``accelerate launch``
reads) and ``ParallelismConfig`` (its size check)."""

from __future__ import annotations

import os
import tempfile

from translator.reading import Reading


def load(reading: Reading):
    """The file as ``accelerate launch --config_file`` loads it (a ``ClusterConfig``)."""
    from accelerate.commands.config.config_args import load_config_from_file

    suffix = ".json" if reading.text.lstrip().startswith("{") else ".yaml"
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as tmp:
        tmp.write(reading.text)
    try:
        return load_config_from_file(tmp.name)
    finally:
        os.unlink(tmp.name)


def parallelism_total(config) -> int | None:
    """``ParallelismConfig(...).total_size`` for the config's ``parallelism_config`` block."""
    from accelerate.parallelism_config import ParallelismConfig

    block = getattr(config, "parallelism_config", None) or {}
    if not block:
        return None
    sizes = {
        k.removeprefix("parallelism_config_"): v for k, v in block.items() if k.endswith("_size")
    }
    return ParallelismConfig(**sizes).total_size


def verdict(inspection, world: int) -> str:
    """accelerate's own ``load_config_from_file`` and ``ParallelismConfig`` on the file."""

    config = load(inspection.reading)
    return (
        f"load_config_from_file: num_processes {config.num_processes}, num_machines "
        f"{config.num_machines}, distributed_type {config.distributed_type}"
    )
