"""DeepSpeed on the rank's own device, for every engine that runs DeepSpeed (its own, and the HF
Trainer's with a DeepSpeed JSON)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.launch.harness import Harness


def use_device(harness: Harness) -> None:
    """Point DeepSpeed at the rank's device; call before anything imports ``deepspeed``."""
    # The ranks inherit the launcher's environment (a test may have forced the CPU): the
    # device this rank runs on decides, nothing else.
    os.environ["DS_ACCELERATOR"] = "cuda" if harness.on_gpu else "cpu"
    import deepspeed

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
