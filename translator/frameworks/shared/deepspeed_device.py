"""DeepSpeed on the rank's own device, for every engine that runs DeepSpeed (its own, and the HF
Trainer's with a DeepSpeed JSON)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.rank.harness import Harness


def use_device(harness: Harness) -> None:
    """Point DeepSpeed at the rank's device; call before anything imports ``deepspeed``."""
    # The ranks inherit the launcher's environment (a test may have forced the CPU): the
    # device this rank runs on decides, nothing else.
    os.environ["DS_ACCELERATOR"] = "cuda" if harness.on_gpu else "cpu"
    import deepspeed

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False


def fp16_enabled(config: dict):
    """The JSON's ``fp16.enabled`` (``True``, ``"auto"`` for a Trainer to decide), else None."""
    block = config.get("fp16")
    return block.get("enabled") if isinstance(block, dict) else None


def fp16_refusal(setting: str) -> str | None:
    """Why DeepSpeed cannot run fp16 (switched on by ``setting``, for the message: the file and
    the key) on this machine's CPU, else None. DeepSpeed's CPU accelerator has fp16 only where
    oneDNN does, and its engine raises "Type fp16 is not supported on your device." otherwise
    (``DeepSpeedEngine._do_sanity_check``); bf16 it always has."""
    if _cpu_has_fp16():
        return None
    return (
        f"{setting} cannot run on this CPU: DeepSpeed's CPU accelerator has no fp16 here "
        '("Type fp16 is not supported on your device"); run it with --device gpu, or with '
        "bf16 on CPU"
    )


def _cpu_has_fp16() -> bool:
    """What DeepSpeed's ``CPU_Accelerator.is_fp16_supported`` asks (without importing DeepSpeed)."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    except Exception:  # as DeepSpeed: a torch without the check has no fp16 on CPU
        return False
