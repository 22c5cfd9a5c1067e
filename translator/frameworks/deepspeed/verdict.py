"""DeepSpeed's own batch arithmetic (``DeepSpeedConfig``), run offline without a process group."""

from __future__ import annotations

import contextlib
import os
from unittest import mock


class _DataParallelUnit:
    """The smallest model-parallel unit DeepSpeed accepts: it reports the data-parallel size,
    as Megatron-DeepSpeed's mpu and the pipeline engine's grid do."""

    def __init__(self, data_parallel_size: int):
        self._dp = data_parallel_size

    def get_data_parallel_world_size(self) -> int:
        return self._dp


def resolve(config: dict, world_size: int, data_parallel_size: int | None = None) -> dict:
    """The batch triple DeepSpeed derives from ``config`` when launched on ``world_size`` ranks.

    ``data_parallel_size`` stands for a model-parallel unit (mpu) passed to
    ``deepspeed.initialize``; leave it ``None`` for plain data parallelism, ZeRO or AutoTP.
    DeepSpeed's own assertion errors propagate unchanged.
    """
    with _quiet_cpu_deepspeed():
        import deepspeed.comm
        from deepspeed.runtime.config import DeepSpeedConfig

        with (
            mock.patch.object(deepspeed.comm, "get_rank", return_value=0),
            mock.patch.object(deepspeed.comm, "get_world_size", return_value=world_size),
        ):
            mpu = None if data_parallel_size is None else _DataParallelUnit(data_parallel_size)
            ds = DeepSpeedConfig(dict(config), mpu=mpu)
    return {
        "train_batch_size": ds.train_batch_size,
        "train_micro_batch_size_per_gpu": ds.train_micro_batch_size_per_gpu,
        "gradient_accumulation_steps": ds.gradient_accumulation_steps,
        "world_size": ds.world_size,
    }


@contextlib.contextmanager
def _quiet_cpu_deepspeed():
    """Select DeepSpeed's CPU accelerator (no GPU here) and keep its logger quiet."""
    saved = os.environ.get("DS_ACCELERATOR")
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    try:
        import logging

        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
        yield
    finally:
        if saved is None:
            os.environ.pop("DS_ACCELERATOR", None)


def verdict(inspection, world: int) -> str:
    """DeepSpeed's own ``DeepSpeedConfig`` on the file at ``world``."""
    import json

    from translator.plugin.contract import NotEnoughKnown

    if '"auto"' in inspection.reading.text:
        raise NotEnoughKnown(
            'its "auto" values are filled by the HF Trainer; DeepSpeed alone refuses them'
        )
    config = json.loads(inspection.reading.text)
    values = inspection.values
    model = values.get("tensor_parallel_size", 1) * values.get("pipeline_parallel_size", 1)
    mpu_dp = (
        None if values.get("deepspeed_autotp") or model == 1 else values.get("data_parallel_size")
    )
    got = resolve(config, world, mpu_dp)
    return (
        f"DeepSpeedConfig at world {world}: train_batch_size {got['train_batch_size']}, "
        f"micro {got['train_micro_batch_size_per_gpu']}, accumulation "
        f"{got['gradient_accumulation_steps']} (counting {got['world_size']:g} ranks)"
    )
