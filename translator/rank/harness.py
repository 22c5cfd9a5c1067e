"""What the smoke engines share: the device, the process group, and the one counting rule.

The rule (:mod:`translator.batch.counting`): the samples of an optimizer step are the rows that
entered the model on the first pipeline stage of each data-parallel replica (the ranks of one
tensor / context / sequence parallel group share a batch and count once), between two steps of
the engine's *own* optimizer. An engine wraps the data it feeds with :meth:`Harness.count` and
tells the harness when its optimizer stepped, with :meth:`Harness.watch` (a post-step hook on a
torch optimizer) or :meth:`Harness.stepped` (DeepSpeed's ``global_steps``); an engine that runs
the HF Trainer passes the harness as the Trainer's callback. The rank's report says which
replica it belongs to and whether it is the one that counts; the launcher sums those.

After every step the rank rewrites its report (not finished), so a run stopped at step k still
shows its k steps. Until the engine's final report says, a rank of a layout without model
parallelism (tensor × pipeline × context 1) is its own replica and counts; with model
parallelism, which rank counts is the engine's to say, so a report written during the run
leaves it unknown.
"""

from __future__ import annotations

import contextlib
import os
import sys

from translator.batch.counting import TrainerCounter
from translator.rank.context import RunContext, baseline_memory
from translator.rank.result import RankResult

#: Prefix of the progress lines ranks print.
PROGRESS = "[batchspec-smoke]"
#: Rank 0 raises once this many steps closed: how the tests provoke a failure mid-run.
FAIL_AT_STEP_ENV = "BATCHSPEC_FAIL_AT_STEP"


class Harness(TrainerCounter):
    """One rank's run: where it computes, and what it fed between optimizer steps (each step
    is announced on stderr for the progress display)."""

    def __init__(self, ctx: RunContext):
        super().__init__()
        self.ctx = ctx
        self.stepper = ""
        """What took the optimizer steps (a class name), as the engine said."""

    @property
    def device(self) -> str:
        return self.ctx.device

    @property
    def on_gpu(self) -> bool:
        return self.device.startswith("cuda")

    @contextlib.contextmanager
    def process_group(self):
        """``torch.distributed`` for the job (nccl on GPU, gloo on CPU), torn down after. The
        engine has imported its framework and built nothing yet: what the process holds now is
        its baseline (:attr:`RunContext.baseline_memory_bytes`)."""
        import torch
        import torch.distributed as dist

        if self.on_gpu:
            torch.cuda.set_device(self.device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if self.on_gpu else "gloo")
        self.ctx.baseline_memory_bytes = baseline_memory(self.device)
        try:
            yield
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()

    def stepped(self, by: str) -> None:
        super().stepped(by)
        self.stepper = by
        spec = self.ctx.spec
        alone = spec.tensor_parallel_size * spec.pipeline_parallel_size * spec.context_parallel_size
        self._report(
            replica=self.ctx.rank if alone == 1 else None,
            counts=True if alone == 1 else None,
            parameters=0,
        ).write(self.ctx.workdir)
        step = len(self.samples)
        print(f"{PROGRESS} rank {self.ctx.rank} step {step}", file=sys.stderr, flush=True)
        if self.ctx.rank == 0 and os.environ.get(FAIL_AT_STEP_ENV) == str(step):
            raise RuntimeError(f"stopped after step {step}, as {FAIL_AT_STEP_ENV} asks")

    def result(self, *, replica: int, counts: bool, parameters: int) -> RankResult:
        """This rank's final report: ``replica`` is its data-parallel rank, ``counts`` whether
        its rows are the replica's (first pipeline stage, first rank of its TP/CP group)."""
        return self._report(replica=replica, counts=counts, parameters=parameters)

    def _report(self, *, replica: int | None, counts: bool | None, parameters: int) -> RankResult:
        return self.ctx.result(
            data_parallel_rank=replica,
            counts_samples=counts,
            samples_per_step=list(self.samples),
            step_times=list(self.times),
            parameters=parameters,
            stepped_by=self.stepper,
        )
