"""What one rank knows before its engine runs: the batch, the config, its rank and device
(:class:`RunContext`), and how it tells an out-of-memory error from any other.

This is the floor under the harness and the engines; it imports neither of them, nor the
worker that builds the context."""

from __future__ import annotations

import functools
import os
import resource
from dataclasses import dataclass
from pathlib import Path

from translator.rank.result import RankResult
from translator.spec import BatchSpec


@dataclass
class RunContext:
    """Everything an engine needs to run on this rank."""

    spec: BatchSpec
    """The batch to run (what the config was rendered from)."""
    config: Path
    """The rendered framework config (DeepSpeed JSON, Axolotl YAML, Megatron args)."""
    workdir: Path
    """Results folder, shared by all ranks (and a place for scratch files)."""
    steps: int
    """Optimizer steps to run."""
    model: str
    """The stand-in's name (``translator.rank.model.SHAPES``), built when ``model_config`` is
    None."""
    sequence_length: int
    """Tokens per sample."""
    rank: int
    """Global rank."""
    local_rank: int
    """Rank on this node (which GPU it takes)."""
    world_size: int
    """Processes in the job."""
    requested_device: str = "auto"
    """``--device``: ``gpu``, ``cpu`` or ``auto`` (a GPU when there is one)."""
    recompute: bool = False
    """Recompute each layer's activations in the backward pass (``tune --recompute``)."""
    model_config: Path | None = None
    """The job's model as a ``config.json`` the launcher wrote (depth cut to ``--layers``):
    what the engines that build the job's model build (:mod:`translator.rank.hub_model`)."""
    parity: bool = False
    """A parity run (``smoke --parity``): padded samples of different lengths, plain SGD, and
    the loss and update written for comparison (:mod:`translator.rank.parity_rank`)."""
    baseline_memory_bytes: int = 0
    """On a CPU, the resident memory of the rank's process before it builds the model: as its
    engine starts (Python, torch), again as the engine opens its process group through the
    harness (its framework imported); in the measured peak, in no estimate. 0 on a GPU (whose
    peak counts the run's allocations alone) or before it is measured (:func:`baseline_memory`)."""

    @functools.cached_property
    def device(self) -> str:
        """``cpu`` or ``cuda:<n>``, as ``--device`` asks (see :func:`choose_device`)."""
        return choose_device(self.requested_device, self.local_rank)

    def result(self, **fields) -> RankResult:
        """A result for this rank with device and peak memory filled in."""
        return RankResult(
            rank=self.rank,
            world_size=self.world_size,
            sequence_length=self.sequence_length,
            device=device_name(self.device),
            peak_memory_bytes=peak_memory(self.device),
            baseline_memory_bytes=self.baseline_memory_bytes,
            **allocator(self.device),
            **fields,
        )


def choose_device(requested: str, local_rank: int) -> str:
    """``cpu``, or ``cuda:<local rank>``: ``gpu`` demands one, ``auto`` takes one if present."""
    if requested == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return f"cuda:{local_rank % torch.cuda.device_count()}"
    if requested == "gpu":
        raise RuntimeError(
            f"no GPU on this node ({os.uname().nodename}) although --device gpu "
            "was asked; use --device cpu"
        )
    return "cpu"


def device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def allocator(device: str) -> dict:
    """What the GPU's caching allocator says beyond the allocated peak: its reserved peak, its
    retries (a cudaMalloc that failed, the cache freed and tried again: the run is at the
    memory edge) and the device memory in use by every process on it; nothing on a CPU."""
    if not device.startswith("cuda"):
        return {}
    import torch

    free, total = torch.cuda.mem_get_info(device)
    return {
        "reserved_peak_bytes": int(torch.cuda.max_memory_reserved(device)),
        "allocator_retries": int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0)),
        "device_used_bytes": int(total - free),
    }


def baseline_memory(device: str) -> int:
    """What the process holds before it builds the model, on a CPU (its peak resident memory
    so far, torch imported); 0 on a GPU."""
    if device.startswith("cuda"):
        return 0
    import torch  # noqa: F401  (every engine imports it: part of the baseline)

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def peak_memory(device: str) -> int:
    import torch

    if device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated(device))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
