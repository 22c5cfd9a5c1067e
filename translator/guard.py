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


class BatchMismatch(RuntimeError):
    """A step consumed another number of samples than the expected global batch."""


class BatchGuard:
    """A ``transformers.TrainerCallback`` (duck-typed: every other callback event is a no-op)
    and a plain-PyTorch helper that stops a job whose real batch is wrong."""

    def __init__(self, global_batch_size: int, steps: int = 1, model_parallel_size: int = 1):
        if global_batch_size < 1 or steps < 1 or model_parallel_size < 1:
            raise ValueError("global_batch_size, steps and model_parallel_size must be >= 1")
        self.global_batch_size = global_batch_size
        """The samples per optimizer step the job must consume."""
        self.steps = steps
        """How many of the first optimizer steps are checked."""
        self.model_parallel_size = model_parallel_size
        """Ranks that feed one shared batch (tensor × context parallel); they count once."""
        self.checked: list[int] = []
        """The global count of each checked step."""
        self._rows = 0
        self._hook = None

    # -- counting -----------------------------------------------------------------------------
    def count(self, batches):
        """``batches`` (a DataLoader...) as they are handed out, each one's rows counted."""
        for batch in batches:
            if len(self.checked) < self.steps:
                self._rows += _rows(batch)
            yield batch

    def watch(self, optimizer) -> None:
        """Check after each of the first ``steps`` steps of this torch optimizer."""
        optimizer.register_step_post_hook(lambda *args, **kwargs: self.step_done())

    def step_done(self) -> None:
        """An optimizer step has finished: check its count (during the first ``steps``)."""
        if len(self.checked) >= self.steps:
            return
        total = _all_ranks(self._rows) // self.model_parallel_size
        self._rows = 0
        self.checked.append(total)
        if total != self.global_batch_size:
            raise BatchMismatch(self._message(len(self.checked), total))
        if len(self.checked) == self.steps and self._hook is not None:
            self._hook.remove()  # nothing more to count

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
        if total < expected and expected % total == 0:
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

    # -- transformers.TrainerCallback ---------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """Count the rows of every training forward of the Trainer's model."""
        if model is not None and self._hook is None:
            self._hook = model.register_forward_pre_hook(self._forward, with_kwargs=True)
        return control

    def _forward(self, module, args, kwargs):
        if module.training and len(self.checked) < self.steps:
            batch = kwargs.get("input_ids", kwargs.get("inputs_embeds"))
            if batch is None and args:
                batch = args[0]
            self._rows += _rows(batch)

    def on_step_end(self, args, state, control, **kwargs):
        """Called by the Trainer once per optimizer step, right after it."""
        self.step_done()
        return control

    def __getattr__(self, name: str):
        if name.startswith("on_"):  # the Trainer calls every event on every callback
            return lambda args, state, control, **kwargs: control
        raise AttributeError(name)


def _rows(batch) -> int:
    """The samples in a batch: the first dimension of its (first) tensor."""
    if isinstance(batch, dict):
        batch = batch.get("input_ids", next(iter(batch.values()), None))
    if isinstance(batch, (tuple, list)):
        batch = batch[0]
    shape = getattr(batch, "shape", None)
    return int(shape[0]) if shape else 0


def _all_ranks(rows: int) -> int:
    """``rows`` summed over every process of the job (itself when there is no group)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return rows
    backend = dist.get_backend()
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if backend == "nccl"
        else torch.device("cpu")
    )
    total = torch.tensor([rows], dtype=torch.long, device=device)
    dist.all_reduce(total)
    return int(total.item())


def _world() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
