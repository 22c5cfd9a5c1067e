"""The program every rank runs: ``python -m translator.rank.worker --engine E ...``.

It builds the engine's run from the rendered config, counts the samples the engine consumes
per optimizer step, and writes ``rank-<R>.json`` into the results folder, also when it fails
(an out-of-memory error is reported as such, with the micro-batch).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from dataclasses import replace
from pathlib import Path

from translator.rank import failure
from translator.rank.context import RunContext, baseline_memory
from translator.rank.engines import module
from translator.rank.result import RankResult
from translator.spec import BatchSpec

#: Exit code of a rank that ran out of memory.
OOM_EXIT = 3
#: Cap on the rank's address space, in bytes (how tests provoke an honest out-of-memory).
MEMORY_LIMIT_ENV = "BATCHSPEC_MEMORY_LIMIT"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="translator.rank.worker")
    parser.add_argument("--engine", required=True)
    parser.add_argument("--spec", required=True, type=Path)
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--steps", required=True, type=int)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--model-config", type=Path)
    parser.add_argument("--seq-len", type=int, required=True)
    parser.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    parser.add_argument("--recompute", action="store_true")
    parser.add_argument("--parity", action="store_true")
    args = parser.parse_args(argv)

    limit = os.environ.get(MEMORY_LIMIT_ENV)
    if limit:
        # torch (and the engine lookup, above) are imported before the cap: a failed import
        # would abort in C++ with no report, or fail before the rank could report; a failed
        # allocation in the run (the engine's own imports included) is reported as such.
        import torch  # noqa: F401

        resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
    rank = int(os.environ.get("RANK", 0))
    ctx = RunContext(
        spec=BatchSpec.model_validate_json(args.spec.read_text()),
        config=args.config,
        workdir=args.out,
        steps=args.steps,
        model=args.model,
        model_config=args.model_config,
        sequence_length=args.seq_len,
        rank=rank,
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
        requested_device=args.device,
        recompute=args.recompute,
        parity=args.parity,
    )
    try:
        ctx.baseline_memory_bytes = baseline_memory(ctx.device)
        result = module(args.engine).run(ctx)
    except BaseException as exc:  # the launcher needs every rank's outcome, whatever it is
        kind = failure.classify(exc, _device(ctx))
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        said = f"{type(exc).__name__}: {first_line}"
        failed(ctx, failure.error_text(kind, said)).write(args.out)
        print(f"rank {rank}: {said}", file=sys.stderr)
        return OOM_EXIT if kind == failure.DEVICE else 1
    replace(result, finished=True).write(args.out)
    return 0


def _device(ctx: RunContext) -> str:
    """The rank's device, for a failure's class: ``cpu`` where it cannot be told."""
    try:
        return ctx.device
    except Exception:  # the failure may be choosing it
        return "cpu"


def failed(ctx: RunContext, error: str) -> RankResult:
    """The report of a rank whose run raised: the steps it reported so far, and the error."""
    path = ctx.workdir / f"rank-{ctx.rank}.json"
    if path.exists():
        return replace(
            RankResult.read(path), error=error, micro_batch_size=ctx.spec.micro_batch_size
        )
    return RankResult(
        rank=ctx.rank,
        world_size=ctx.world_size,
        data_parallel_rank=None,
        counts_samples=None,
        error=error,
        micro_batch_size=ctx.spec.micro_batch_size,
        device=None,
    )


if __name__ == "__main__":
    sys.exit(main())
