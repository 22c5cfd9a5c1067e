"""Plain PyTorch DDP: accumulation with ``no_sync`` on all but the last micro-batch; bf16
autocast on GPU."""

from __future__ import annotations

import contextlib

from translator.launch import model as models
from translator.launch.worker import RunContext, StepTimer


def run(ctx: RunContext):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    device = ctx.device
    backend = "nccl" if device.startswith("cuda") else "gloo"
    dist.init_process_group(backend)
    try:
        if device.startswith("cuda"):
            torch.cuda.set_device(device)
        net = models.build(ctx.model, ctx.sequence_length).to(device)
        ddp = DistributedDataParallel(net, device_ids=[device] if device.startswith("cuda") else None)
        optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
        micro, accumulation = ctx.spec.micro_batch_size, ctx.spec.gradient_accumulation_steps
        def precision():
            if device.startswith("cuda"):
                return torch.autocast("cuda", dtype=torch.bfloat16)
            return contextlib.nullcontext()

        vocab = models.SHAPES[ctx.model].vocab
        gen = torch.Generator().manual_seed(1000 + ctx.rank)
        samples, timer = [], StepTimer()
        for _ in range(ctx.steps):
            seen = 0
            for i in range(accumulation):
                tokens = models.batch(micro, ctx.sequence_length, vocab, gen, device)
                sync = i == accumulation - 1
                with ddp.no_sync() if not sync else contextlib.nullcontext(), precision():
                    (ddp(tokens) / accumulation).backward()
                seen += tokens.shape[0]
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            samples.append(seen)
            timer.step()
        return ctx.result(data_parallel_rank=ctx.rank, counts_samples=True,
                          samples_per_step=samples, step_times=timer.times,
                          parameters=sum(p.numel() for p in net.parameters()))
    finally:
        dist.destroy_process_group()
