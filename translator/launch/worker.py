"""The program every rank runs: ``python -m translator.launch.worker --engine E ...``.

It builds the engine's run from the rendered config, counts the samples the engine consumes
per optimizer step, and writes ``rank-<R>.json`` into the results folder, also when it fails
(an out-of-memory error is reported as such, with the micro-batch).
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from translator.launch.result import RankResult
from translator.spec import BatchSpec

#: Prefix of the progress lines ranks print.
PROGRESS = "[batchspec-smoke]"
#: Exit code of a rank that ran out of memory.
OOM_EXIT = 3
#: Cap on the rank's address space, in bytes (how tests provoke an honest out-of-memory).
MEMORY_LIMIT_ENV = "BATCHSPEC_MEMORY_LIMIT"


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
    """Model name from ``translator.launch.model.SHAPES``."""
    sequence_length: int
    """Tokens per sample."""
    rank: int
    local_rank: int
    world_size: int
    requested_device: str = "auto"
    """``--device``: ``gpu``, ``cpu`` or ``auto`` (a GPU when there is one)."""
    recompute: bool = False
    """Recompute each layer's activations in the backward pass (``tune --recompute``)."""

    @functools.cached_property
    def device(self) -> str:
        """``cpu`` or ``cuda:<n>``, as ``--device`` asks (see ``harness.choose_device``)."""
        from translator.launch.harness import choose_device

        return choose_device(self.requested_device, self.local_rank)

    def result(self, **fields) -> RankResult:
        """A result for this rank with device and peak memory filled in."""
        return RankResult(
            rank=self.rank,
            world_size=self.world_size,
            sequence_length=self.sequence_length,
            device=device_name(self.device),
            peak_memory_bytes=peak_memory(self.device),
            **fields,
        )


def device_name(device: str) -> str:
    import torch

    return torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"


def peak_memory(device: str) -> int:
    import torch

    if device.startswith("cuda"):
        return int(torch.cuda.max_memory_allocated(device))
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


#: What allocators (torch's CPU and CUDA ones, Python, the OS) say when memory runs out.
OUT_OF_MEMORY_WORDS = (
    "out of memory",
    "can't allocate memory",
    "cannot allocate memory",
    "memoryerror",
    "outofmemoryerror",
    "std::bad_alloc",
)


def mentions_out_of_memory(text: str) -> bool:
    """True when an error text (or a log) says memory ran out."""
    lowered = text.lower()
    return any(words in lowered for words in OUT_OF_MEMORY_WORDS)


def is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or mentions_out_of_memory(f"{type(exc).__name__} {exc}")


class StepTimer:
    """Wall time per optimizer step; each step is announced on stderr for the progress display."""

    def __init__(self):
        self.times: list[float] = []
        self._start = time.perf_counter()

    def step(self) -> None:
        now = time.perf_counter()
        self.times.append(now - self._start)
        self._start = now
        print(
            f"{PROGRESS} rank {os.environ.get('RANK', 0)} step {len(self.times)}",
            file=sys.stderr,
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="translator.launch.worker")
    parser.add_argument("--engine", required=True)
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--steps", required=True, type=int)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--seq-len", type=int, required=True)
    parser.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    parser.add_argument("--recompute", action="store_true")
    args = parser.parse_args(argv)

    limit = os.environ.get(MEMORY_LIMIT_ENV)
    if limit:
        # torch and the engine lookup are imported before the cap: a failed import would abort
        # in C++ with no report, or fail before the rank could report; a failed allocation in
        # the run (the engine's own imports included) is reported as such.
        import torch  # noqa: F401

        import translator.launch.engines  # noqa: F401

        resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
    rank = int(os.environ.get("RANK", 0))
    ctx = RunContext(
        spec=BatchSpec.model_validate_json(args.spec.read_text()),
        config=args.config,
        workdir=args.out,
        steps=args.steps,
        model=args.model,
        sequence_length=args.seq_len,
        rank=rank,
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
        requested_device=args.device,
        recompute=args.recompute,
    )
    from translator.launch.engines import module

    try:
        result = module(args.engine).run(ctx)
    except BaseException as exc:  # the launcher needs every rank's outcome, whatever it is
        oom = is_out_of_memory(exc)
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        RankResult(
            rank=rank,
            world_size=ctx.world_size,
            data_parallel_rank=0,
            counts_samples=False,
            error="oom" if oom else f"{type(exc).__name__}: {first_line}",
            micro_batch_size=ctx.spec.micro_batch_size,
            device="unknown",
        ).write(args.out)
        print(f"rank {rank}: {type(exc).__name__}: {first_line}", file=sys.stderr)
        return OOM_EXIT if oom else 1
    result.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
