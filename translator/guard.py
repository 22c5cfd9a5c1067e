"""A guard inside the real job: the first optimizer steps must consume exactly the global batch.

Drop it into your own training::

    from translator.guard import BatchGuard
    trainer = Trainer(..., callbacks=[BatchGuard(global_batch_size=256, steps=2)])

or, in a plain PyTorch loop::

    guard = BatchGuard(global_batch_size=256, steps=2)
    loader = guard.count(loader)   # counts the rows each batch hands to the model
    guard.watch(optimizer)         # checks after each of the first optimizer steps

During the first ``steps`` optimizer steps it counts the samples that entered the model on every
rank (a forward pre-hook on the Trainer's model, or the loader you wrap), sums them over the
processes (``torch.distributed``, when the job has a process group), divides by the ranks that
share one batch (``model_parallel_size``: tensor × context parallel), and stops the job with
:class:`BatchMismatch` the moment a step's count differs from the global batch you expect,
naming both numbers and the likely cause. After those steps it does nothing.

Importing this module needs neither transformers nor torch; they are used when the job runs.
"""

from __future__ import annotations

from translator.batch.counting import TrainerCounter, all_ranks


class BatchMismatch(RuntimeError):
    """A step consumed another number of samples than the expected global batch."""


class BatchGuard(TrainerCounter):
    """A ``transformers.TrainerCallback`` (duck-typed: every other callback event is a no-op)
    and a plain-PyTorch helper (:meth:`count`, :meth:`watch`) that stops a job whose real batch
    is wrong."""

    def __init__(self, global_batch_size: int, steps: int = 1, model_parallel_size: int = 1):
        if global_batch_size < 1 or steps < 1 or model_parallel_size < 1:
            raise ValueError("global_batch_size, steps and model_parallel_size must be >= 1")
        super().__init__()
        self.global_batch_size = global_batch_size
        """The samples per optimizer step the job must consume."""
        self.steps = steps
        """How many of the first optimizer steps are checked."""
        self.model_parallel_size = model_parallel_size
        """Ranks that feed one shared batch (tensor × context parallel); they count once."""
        self.checked: list[int] = []
        """The global count of each checked step."""

    def step_done(self) -> None:
        """An optimizer step has finished: check its count (during the first ``steps``). For a
        loop whose optimizer step has no post-step hook to :meth:`watch`."""
        self.stepped("")

    def stepped(self, by: str) -> None:
        if not self.counting:  # past the checked steps
            return
        super().stepped(by)
        total = all_ranks(self.samples[-1], self.model_parallel_size)
        self.checked.append(total)
        if len(self.checked) == self.steps:
            self.stop()  # nothing more to count
        if total != self.global_batch_size:
            raise BatchMismatch(self._message(len(self.checked), total))

    def _message(self, step: int, total: int) -> str:
        expected = self.global_batch_size
        world = _world()
        causes = []
        if total > expected and total % expected == 0:
            causes.append(
                f"{total // expected}× too many: DataParallel (plain `python` on "
                f"{total // expected} GPUs), a per-device value taken for a global one, "
                "or tensor/context-parallel ranks counted as replicas "
                "(model_parallel_size)"
            )
        if 0 < total < expected and expected % total == 0:
            causes.append(
                f"{expected // total}× too few: accumulation or world size lower than "
                "planned, split_batches, or auto_find_batch_size after an "
                "out-of-memory"
            )
        if not causes:
            causes.append("the micro-batch, accumulation or world size differ from the plan")
        return (
            f"BatchGuard: optimizer step {step} consumed {total} samples over {world} "
            f"process(es), but the global batch should be {expected}; likely cause: "
            f"{'; '.join(causes)}. Stopped before more steps train on the wrong batch."
        )


def _world() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
