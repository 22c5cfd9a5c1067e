"""The counting rule, in one place: the smoke harness and the guard inside a real job use it.

The samples of an optimizer step are the rows that entered the model between two steps of the
framework's *own* optimizer, on the first pipeline stage of each data-parallel replica; the
ranks of one tensor/context-parallel group share a batch and count once.

A :class:`StepCounter` counts one process's rows: the data as it is handed to the model
(:meth:`~StepCounter.count`) or each training forward (:meth:`~StepCounter.forward`, a forward
pre-hook), and closes a step when the framework's optimizer has stepped
(:meth:`~StepCounter.watch` for a torch optimizer, :meth:`~StepCounter.stepped` for any other).
:class:`TrainerCounter` is the same counter as a ``transformers.TrainerCallback``. The totals
over replicas: :func:`replica_totals` from the counting ranks' reports (the smoke launcher),
:func:`all_ranks` inside a running job (the guard).

Importing this module needs neither torch nor transformers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence


def _shape(batch) -> tuple[int, ...]:
    """The shape of the tensor whose first dimension is a batch's rows (its ``input_ids``, or
    its first tensor); ``()`` when there is none."""
    if isinstance(batch, dict):
        batch = batch.get("input_ids", next(iter(batch.values()), None))
    if isinstance(batch, (tuple, list)):
        batch = batch[0] if batch else None
    return tuple(getattr(batch, "shape", ()))


class StepCounter:
    """One process's rows, tokens and wall time of each optimizer step."""

    def __init__(self):
        self.samples: list[int] = []
        """Samples of each closed step (its rows, unless a row holds several: packing)."""
        self.rows: list[int] = []
        """Rows of each closed step (a packed row holds several samples)."""
        self.tokens: list[int] = []
        """Tokens of each closed step (rows × sequence positions)."""
        self.times: list[float] = []
        """Wall seconds of each closed step (the first from when the counter was made, or
        from :meth:`restart_clock`)."""
        self.counting = True
        """Whether rows are counted; off, batches pass uncounted."""
        self._rows = 0
        self._samples = 0
        self._tokens = 0
        self._start = time.perf_counter()

    def add(self, batch, samples: int | None = None) -> None:
        """A batch that enters the model: its rows (the first dimension) and tokens, and its
        ``samples`` (given when its rows are packed, else one a row)."""
        if not self.counting:
            return
        shape = _shape(batch)
        rows = int(shape[0]) if shape else 0
        self._rows += rows
        self._samples += rows if samples is None else samples
        self._tokens += rows * int(shape[1]) if len(shape) > 1 else rows

    def count(self, batches):
        """``batches`` as they are handed to the model, each one counted."""
        for batch in batches:
            self.add(batch)
            yield batch

    def forward(self, module, args, kwargs) -> None:
        """A forward pre-hook (``register_forward_pre_hook(..., with_kwargs=True)``): counts the
        batch of every training forward."""
        if module.training:
            batch = kwargs.get("input_ids", kwargs.get("inputs_embeds"))
            self.add(args[0] if batch is None and args else batch)

    def watch(self, optimizer) -> None:
        """Close a step whenever this torch optimizer steps (its own post-step hook)."""
        name = type(optimizer).__name__
        optimizer.register_step_post_hook(lambda *args, **kwargs: self.stepped(name))

    def stepped(self, by: str) -> None:
        """The framework's optimizer ``by`` (its class name) has just stepped: close the step."""
        now = time.perf_counter()
        self.samples.append(self._samples)
        self.rows.append(self._rows)
        self.tokens.append(self._tokens)
        self.times.append(now - self._start)
        self._rows = self._samples = self._tokens = 0
        self._start = now

    def restart_clock(self) -> None:
        """The next step's time runs from now."""
        self._start = time.perf_counter()


class TrainerCounter(StepCounter):
    """A :class:`StepCounter` that is a ``transformers.TrainerCallback`` (duck-typed, so that
    importing it needs no transformers; every event it does not handle is a no-op): a forward
    pre-hook on the Trainer's model counts each training forward, and ``on_step_end``, which the
    Trainer calls once per optimizer step right after it, closes the step."""

    def __init__(self):
        super().__init__()
        self.trainer = None
        """The Trainer it is attached to, when its user says (it names what stepped)."""
        self._hook = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """Count the rows of every training forward of the Trainer's model."""
        if model is not None and self._hook is None:
            self._hook = model.register_forward_pre_hook(self.forward, with_kwargs=True)
        return control

    def on_step_end(self, args, state, control, **kwargs):
        """Called by the Trainer once per optimizer step, right after it."""
        # What the Trainer stepped through: DistributedDataParallel, or DeepSpeed's engine.
        wrapped = getattr(self.trainer, "model_wrapped", None)
        self.stepped("Trainer" if wrapped is None else f"Trainer ({type(wrapped).__name__})")
        return control

    def stop(self) -> None:
        """Count nothing more (and take the hook off the model)."""
        self.counting = False
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def __getattr__(self, name: str):
        if name.startswith("on_"):  # the Trainer calls every event on every callback
            return lambda args, state, control, **kwargs: control
        raise AttributeError(name)


def replica_totals(counting: Iterable[Sequence[int]], steps: int) -> list[int]:
    """The samples of each of the first ``steps`` optimizer steps: the per-step rows of each
    data-parallel replica's one counting rank (first pipeline stage, first rank of its TP/CP
    group), summed."""
    counting = list(counting)
    return [sum(rows[i] for rows in counting) for i in range(steps)]


def all_ranks(rows: int, shared_by: int = 1) -> int:
    """``rows`` summed over every process of the running job (itself without a process group),
    each group of ``shared_by`` ranks that feed one batch (tensor × context parallel) counted
    once."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return rows // shared_by
    backend = dist.get_backend()
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if backend == "nccl"
        else torch.device("cpu")
    )
    total = torch.tensor([rows], dtype=torch.long, device=device)
    dist.all_reduce(total)
    return int(total.item()) // shared_by
