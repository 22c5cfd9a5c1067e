"""Plain PyTorch DDP, the way a hand-written training loop does it: a ``DataLoader`` with a
``DistributedSampler`` over a synthetic token dataset, ``micro_batch_size`` rows per batch,
``no_sync`` on all but the last of ``gradient_accumulation_steps`` micro-batches, then
``optimizer.step()``; bf16 autocast on GPU. The loss is normalised over the predicted tokens of
the whole optimizer step (all micro-batches, all ranks), so padding weighs nothing and the
split of the batch changes nothing (what ``smoke --parity`` checks).

What is counted is what the loader yielded between two steps of the optimizer (its post-step
hook, through the harness), not the spec's numbers read back: a loader that hands out fewer
rows (the last, short batch of an epoch) shows as a different count."""

from __future__ import annotations

import contextlib

from translator.rank import hub_model, parity_rank
from translator.rank.context import RunContext
from translator.rank.harness import Harness

#: Optimizer steps' worth of data in one epoch of the synthetic dataset.
EPOCH_STEPS = 1000


def refuse(spec, device: str) -> str | None:
    """Why this engine cannot run ``spec``'s layout (it is data-parallel only), else None."""
    from translator.rank.engines import model_parallel_sizes, runs_layout

    sizes = model_parallel_sizes(spec)
    if sizes:
        others = runs_layout(spec, device)
        return f"the torch engine runs data parallelism only, not {sizes}; " + (
            f"run the layout with --framework {' or '.join(others)}"
            if others
            else f"no engine runs it on {device.upper()}"
        )
    return None


class TokenRows:
    """A map-style dataset of random token rows (fixed per index, so every epoch agrees): each
    item is ``(tokens, targets)``, ``length + 1`` tokens and the next token of each input; for a
    parity run, the padded samples of :mod:`translator.rank.parity_rank`."""

    def __init__(self, rows: int, length: int, vocab: int, padded: bool = False):
        self.rows, self.length, self.vocab, self.padded = rows, length, vocab, padded

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, index: int):
        import torch

        if self.padded:
            tokens, targets = parity_rank.shifted([index], self.length, self.vocab)
            return tokens[0], targets[0]
        gen = torch.Generator().manual_seed(index)
        tokens = torch.randint(0, self.vocab, (self.length + 1,), generator=gen)
        return tokens, tokens[1:]


def run(ctx: RunContext):
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    harness = Harness(ctx)
    with harness.process_group():
        device = harness.device
        net = hub_model.causal_lm(ctx, ctx.recompute).to(device)
        ddp = DistributedDataParallel(net, device_ids=[device] if harness.on_gpu else None)
        optimizer = (
            parity_rank.sgd(ddp.parameters())
            if ctx.parity
            else torch.optim.AdamW(ddp.parameters(), lr=1e-4)
        )
        harness.watch(optimizer)
        micro, accumulation = ctx.spec.micro, ctx.spec.accumulation
        dataset = TokenRows(
            EPOCH_STEPS * ctx.spec.global_batch,
            ctx.sequence_length,
            hub_model.vocab(ctx),
            padded=ctx.parity,
        )
        sampler: DistributedSampler = DistributedSampler(
            dataset,  # type: ignore[arg-type]  # a map-style dataset: __len__ and __getitem__
            num_replicas=ctx.world_size,
            rank=ctx.rank,
            shuffle=True,
            seed=1000,
        )
        loader: DataLoader = DataLoader(
            dataset,  # type: ignore[arg-type]  # as above
            batch_size=micro,
            sampler=sampler,
        )

        def epochs():  # as a training loop does: a new shuffle each epoch, for as long as asked
            epoch = 0
            while True:
                sampler.set_epoch(epoch)
                yield from loader
                epoch += 1

        batches = harness.count(epochs())

        def precision():
            if harness.on_gpu:
                return torch.autocast("cuda", dtype=torch.bfloat16)
            return contextlib.nullcontext()

        before = (
            parity_rank.snapshot(net.named_parameters()) if ctx.parity and ctx.rank == 0 else None
        )
        loss = 0.0
        for _ in range(ctx.steps):
            step = [[t.to(device) for t in next(batches)] for _ in range(accumulation)]
            # The loss of the whole step: each token weighs the same, whatever its micro-batch
            # (DDP averages the ranks' gradients, hence × world).
            divide_by = parity_rank.step_tokens(step, device) / ctx.world_size
            for i, (tokens, targets) in enumerate(step):
                last = i == accumulation - 1
                with ddp.no_sync() if not last else contextlib.nullcontext(), precision():
                    if parity_rank.per_micro_mean():
                        value = ddp(tokens, targets) / accumulation
                    else:
                        value = ddp(tokens, targets, divide_by)
                    value.backward()
                loss += float(value)
            optimizer.step()  # the harness closes the step here
            optimizer.zero_grad(set_to_none=True)
        if ctx.parity:
            parity_rank.write(ctx.workdir, ctx.rank, loss, before, net.named_parameters())
        return harness.result(
            replica=ctx.rank, counts=True, parameters=hub_model.count_parameters(net)
        )
