"""DeepSpeed: ``deepspeed.initialize`` with the rendered JSON, run until DeepSpeed itself has
taken K optimizer steps; the samples of a step are the rows the engine pulled in between, so
the accumulation measured is DeepSpeed's, not ours.

- Without pipeline parallelism: ``engine(batch)``, ``engine.backward``, ``engine.step``, one
  micro-batch at a time, counting rows between two increments of ``engine.global_steps``.
- With pipeline parallelism (PP > 1): the model is a ``deepspeed.pipe.PipelineModule`` over
  the model's layers, and each ``engine.train_batch(data_iter)`` is one optimizer step that
  pulls ``gradient_accumulation_steps`` micro-batches from the iterator; the first stage of each
  data-parallel replica counts them.

On CPU: ``DS_ACCELERATOR=cpu``, gloo, a client torch AdamW (no op build) and the shared-memory
comm op switched off (it would compile for ~2 min). Tensor parallelism (Megatron-style or
AutoTP) is not run by this engine."""

from __future__ import annotations

import json
import os

from translator.launch import model as models
from translator.launch.worker import RunContext, StepTimer


def run(ctx: RunContext):
    os.environ.setdefault("DS_ACCELERATOR", "cpu" if ctx.device == "cpu" else "cuda")
    import deepspeed
    import torch

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    config = json.loads(ctx.config.read_text())
    if ctx.spec.tensor_parallel_size > 1:
        raise RuntimeError("the DeepSpeed smoke engine runs data and pipeline parallelism; "
                           "tensor parallel smoke runs are not supported")
    deepspeed.init_distributed(dist_backend="nccl" if ctx.device.startswith("cuda") else "gloo")
    if ctx.device.startswith("cuda"):
        torch.cuda.set_device(ctx.device)
        config.setdefault("bf16", {"enabled": True})
    try:
        if ctx.spec.pipeline_parallel_size > 1:
            return _pipeline(ctx, config)
        return _data_parallel(ctx, config)
    finally:
        torch.distributed.destroy_process_group()


def _data_parallel(ctx: RunContext, config: dict):
    import deepspeed
    import torch

    net = models.build(ctx.model, ctx.sequence_length)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    engine, *_ = deepspeed.initialize(model=net, optimizer=optimizer, config=config)
    micro = engine.train_micro_batch_size_per_gpu()
    batches = _Batches(ctx, micro, engine.device, shifted=False)
    samples, timer = [], StepTimer()
    while engine.global_steps < ctx.steps:
        engine.backward(engine(next(batches)))
        before = engine.global_steps
        engine.step()
        if engine.global_steps > before:
            samples.append(batches.take_count())
            timer.step()
    return ctx.result(data_parallel_rank=ctx.rank, counts_samples=True,
                      samples_per_step=samples, step_times=timer.times,
                      parameters=sum(p.numel() for p in net.parameters()))


def _pipeline(ctx: RunContext, config: dict):
    import deepspeed
    import torch
    from deepspeed.pipe import PipelineModule

    net = PipelineModule(layers=models.layers(ctx.model, ctx.sequence_length),
                         num_stages=ctx.spec.pipeline_parallel_size,
                         loss_fn=models.next_token_loss, partition_method="uniform")
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    engine, *_ = deepspeed.initialize(model=net, optimizer=optimizer, config=config)
    batches = _Batches(ctx, engine.train_micro_batch_size_per_gpu(), engine.device, shifted=True)
    samples, timer = [], StepTimer()
    for _ in range(ctx.steps):
        engine.train_batch(data_iter=batches)
        samples.append(batches.take_count())
        timer.step()
    return ctx.result(data_parallel_rank=engine.grid.get_data_parallel_id(),
                      counts_samples=engine.is_first_stage(), samples_per_step=samples,
                      step_times=timer.times,
                      parameters=sum(p.numel() for p in net.parameters()))


class _Batches:
    """Random token micro-batches that count the rows handed out."""

    def __init__(self, ctx: RunContext, micro: int, device, shifted: bool):
        import torch

        self.micro, self.device, self.shifted, self.count = micro, device, shifted, 0
        self.length, self.vocab = ctx.sequence_length, models.SHAPES[ctx.model].vocab
        self.generator = torch.Generator().manual_seed(1000 + ctx.rank)

    def __iter__(self):
        return self

    def __next__(self):
        tokens = models.batch(self.micro, self.length, self.vocab, self.generator, self.device)
        self.count += tokens.shape[0]
        return (tokens[:, :-1], tokens[:, 1:]) if self.shifted else tokens

    def take_count(self) -> int:
        count, self.count = self.count, 0
        return count
