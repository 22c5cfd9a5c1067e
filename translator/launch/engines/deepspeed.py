"""DeepSpeed: ``deepspeed.initialize`` with the rendered JSON, then ``engine.backward`` and
``engine.step`` until DeepSpeed itself has taken K optimizer steps. Samples are counted as the
rows fed between two increments of ``engine.global_steps``, so the accumulation measured is
DeepSpeed's, not ours. On CPU: ``DS_ACCELERATOR=cpu``, gloo, a client torch AdamW (no op
build) and the shared-memory comm op switched off (it would compile for ~2 min)."""

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
    if ctx.spec.tensor_parallel_size * ctx.spec.pipeline_parallel_size > 1:
        raise RuntimeError("the DeepSpeed smoke engine runs data parallelism only (tensor and "
                           "pipeline parallel smoke runs are not supported yet)")
    deepspeed.init_distributed(dist_backend="nccl" if ctx.device.startswith("cuda") else "gloo")
    net = models.build(ctx.model, ctx.sequence_length)
    if ctx.device.startswith("cuda"):
        torch.cuda.set_device(ctx.device)
        config.setdefault("bf16", {"enabled": True})
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    engine, *_ = deepspeed.initialize(model=net, optimizer=optimizer, config=config)
    try:
        micro = engine.train_micro_batch_size_per_gpu()
        vocab = models.SHAPES[ctx.model].vocab
        gen = torch.Generator().manual_seed(1000 + ctx.rank)
        samples, timer, seen = [], StepTimer(), 0
        while engine.global_steps < ctx.steps:
            tokens = models.batch(micro, ctx.sequence_length, vocab, gen, engine.device)
            engine.backward(engine(tokens))
            before = engine.global_steps
            engine.step()
            seen += tokens.shape[0]
            if engine.global_steps > before:
                samples.append(seen)
                seen = 0
                timer.step()
        return ctx.result(data_parallel_rank=ctx.rank, counts_samples=True,
                          samples_per_step=samples, step_times=timer.times,
                          parameters=sum(p.numel() for p in net.parameters()))
    finally:
        torch.distributed.destroy_process_group()
