"""Command lines for a smoke run, built as argument lists (never a shell string)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SmokePlan:
    """Everything that decides what runs."""

    framework: str
    """Engine: deepspeed, megatron, axolotl or torch."""
    nproc: int
    """Processes per node."""
    nnodes: int
    """Nodes."""
    steps: int
    """Optimizer steps."""
    model: str
    """The stand-in's name (``tiny``, ``125m``), built when ``model_config`` is None."""
    sequence_length: int
    """Tokens per sample."""
    workdir: Path
    """Folder for the spec, the rendered config and the ranks' results (shared across nodes)."""
    config_name: str
    """File name of the rendered config inside ``workdir``."""
    rdzv_endpoint: str | None = None
    """``host:port`` of the rendezvous for several nodes."""
    python: str = sys.executable
    """The interpreter every rank runs (the one batchspec runs in)."""
    device: str = "auto"
    """``gpu``, ``cpu`` or ``auto`` (a GPU when the node has one)."""
    recompute: bool = False
    """Recompute each layer's activations in the backward pass (engines that can say so)."""
    model_config: Path | None = None
    """The ``config.json`` of the job's model the ranks build (written into the work folder,
    its depth cut to ``--layers``); None: the stand-in."""
    parity: bool = False
    """One side of a parity check: the ranks run its samples and optimizer and write their loss
    and update (:mod:`translator.rank.parity_rank`)."""

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes

    @property
    def results(self) -> Path:
        return self.workdir / "results"


def worker_args(plan: SmokePlan) -> list[str]:
    """``-m translator.rank.worker ...``: what each rank runs."""
    return [
        "-m",
        "translator.rank.worker",
        "--engine",
        plan.framework,
        "--spec",
        str(plan.workdir / "spec.json"),
        "--config",
        str(plan.workdir / plan.config_name),
        "--out",
        str(plan.results),
        "--steps",
        str(plan.steps),
        "--model",
        plan.model,
        *(["--model-config", str(plan.model_config)] if plan.model_config else []),
        "--seq-len",
        str(plan.sequence_length),
        "--device",
        plan.device,
        *(["--recompute"] if plan.recompute else []),
        *(["--parity"] if plan.parity else []),
    ]


def torchrun_args(plan: SmokePlan, endpoint: str | None = None) -> list[str]:
    """torchrun's own arguments: standalone (a free port) on one node, else a c10d rendezvous."""
    if plan.nnodes == 1:
        return ["--standalone", "--nnodes", "1", "--nproc_per_node", str(plan.nproc)]
    return [
        "--nnodes",
        str(plan.nnodes),
        "--nproc_per_node",
        str(plan.nproc),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        endpoint or plan.rdzv_endpoint or "",
        "--rdzv-id",
        "batchspec-smoke",
    ]


def local_command(plan: SmokePlan) -> list[str]:
    """The full command for this machine (run on every node when ``nnodes`` > 1)."""
    return [plan.python, "-m", "torch.distributed.run", *torchrun_args(plan), *worker_args(plan)]
