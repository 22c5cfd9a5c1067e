"""DeepSpeed: ``deepspeed.initialize`` with the rendered JSON, run until DeepSpeed itself has
taken K optimizer steps; the samples of a step are the rows the engine pulled in between, so
the accumulation measured is DeepSpeed's, not ours.

- Without pipeline parallelism: ``engine(batch)``, ``engine.backward``, ``engine.step``, one
  micro-batch at a time, counting rows between two increments of ``engine.global_steps``.
- With pipeline parallelism (PP > 1): the model is a ``deepspeed.pipe.PipelineModule`` over
  the model's layers, and each ``engine.train_batch(data_iter)`` is one optimizer step that
  pulls ``gradient_accumulation_steps`` micro-batches from the iterator; the first stage of each
  data-parallel replica counts them.

The device is the rank's (``--device``): on a GPU, ``DS_ACCELERATOR=cuda``, nccl and bf16;
on CPU, ``DS_ACCELERATOR=cpu``, gloo, a client torch AdamW (no op build) and the shared-memory
comm op switched off (it would compile for ~2 min). With ``sequence_parallel_size`` > 1,
DeepSpeed-Ulysses on a (data, sequence) mesh: the model's attention goes through
``DistributedAttention``, the ranks of one sequence group share their samples and count once.
Tensor parallelism (Megatron-style or AutoTP) is refused before launch (:func:`refuse`), and so
is a JSON DeepSpeed cannot run on a CPU rank (fp16 where the CPU has none, :func:`refuse_config`).
Samples are counted by the shared harness, between two of DeepSpeed's own steps."""

from __future__ import annotations

import json

from translator.frameworks.deepspeed import config_json
from translator.frameworks.deepspeed.ulysses import ulysses
from translator.frameworks.shared.deepspeed_device import fp16_enabled, fp16_refusal, use_device
from translator.rank import hub_model, parity_rank
from translator.rank import model as models
from translator.rank.context import RunContext
from translator.rank.harness import Harness


def refuse(spec, device: str) -> str | None:
    """Why this engine cannot run ``spec``'s layout, else None."""
    if spec.tensor_parallel_size > 1:
        return (
            f"the DeepSpeed engine runs data and pipeline parallelism, not tensor "
            f"{spec.tensor_parallel_size} (AutoTP and Megatron-style TP are not run); use "
            "--framework megatron on GPUs for tensor parallelism"
        )
    if spec.context_parallel_size > 1 and spec.pipeline_parallel_size > 1:
        return (
            f"the DeepSpeed engine runs Ulysses sequence parallel "
            f"{spec.context_parallel_size} without pipeline parallelism, not with pipeline "
            f"{spec.pipeline_parallel_size}"
        )
    return None


def refuse_config(config: str, partners, where: str, device: str) -> str | None:
    """Why DeepSpeed cannot run the JSON ``config`` (from the file ``where``) on ``device``: a
    value left ``"auto"`` (the HF Trainer fills those; DeepSpeed's own config raises a
    ``TypeError`` on one, as each rank died with), fp16 on a CPU that has none."""
    data = json.loads(config)
    if not isinstance(data, dict):
        return None
    auto = _auto_keys(data)
    if auto:
        return (
            f'{where}: {", ".join(auto)} {"is" if len(auto) == 1 else "are"} "auto", which '
            "DeepSpeed itself does not understand (the HF Trainer fills it from its own "
            "arguments): smoke the launch script or TrainingArguments file that hands this "
            "JSON to the Trainer, or write the number"
        )
    if device == "gpu" or fp16_enabled(data) is not True:
        return None
    return fp16_refusal(f'{where}: "fp16": {{"enabled": true}}')


def _auto_keys(data: dict, prefix: str = "") -> list[str]:
    """The dotted keys of ``data`` whose value is ``"auto"``, in the file's order."""
    out = []
    for key, value in data.items():
        if value == "auto":
            out.append(prefix + key)
        elif isinstance(value, dict):
            out += _auto_keys(value, f"{prefix}{key}.")
    return out


def zero_stage(config: str, partners) -> int:
    """The ZeRO stage this engine runs the JSON ``config`` at."""
    return config_json.zero_stage(config)


def refuse_model(spec, config: str) -> str | None:
    """Why this engine cannot build the job's model for ``spec`` and the JSON ``config``: its
    pipeline and Ulysses paths build the stand-in's layers only."""
    data = json.loads(config)
    sp = data.get("sequence_parallel_size", 1) if isinstance(data, dict) else 1
    if spec.pipeline_parallel_size > 1 or (isinstance(sp, int) and sp > 1):
        return (
            "the DeepSpeed engine's pipeline and Ulysses paths build the stand-in only, not the "
            "job's model: run them with --model tiny"
        )
    return None


def run(ctx: RunContext):
    harness = Harness(ctx)
    use_device(harness)
    import deepspeed
    import torch

    config = json.loads(ctx.config.read_text())
    if harness.on_gpu:
        torch.cuda.set_device(harness.device)
        config.setdefault("bf16", {"enabled": True})
    deepspeed.init_distributed(dist_backend="nccl" if harness.on_gpu else "gloo")
    with harness.process_group():
        if ctx.spec.pipeline_parallel_size > 1:
            return _pipeline(ctx, harness, config)
        if config.get("sequence_parallel_size", 1) > 1:
            return _sequence_parallel(ctx, harness, config)
        return _data_parallel(ctx, harness, config)


def _data_parallel(ctx: RunContext, harness: Harness, config: dict):
    """One optimizer step at a time: DeepSpeed's accumulation of micro-batches, each loss the
    sum over its tokens divided by the tokens of the whole step (× data-parallel × accumulation:
    DeepSpeed averages the replicas' gradients and divides each loss by the accumulation)."""
    import deepspeed
    import torch

    # Built whole, then partitioned by deepspeed.initialize (ZeRO-3 included): deepspeed
    # 0.19.8's zero.Init fails under torch 2.13 ("Signature mismatch" of Tensor.__new__).
    net = hub_model.causal_lm(ctx)
    optimizer = (
        parity_rank.sgd(net.parameters())
        if ctx.parity
        else torch.optim.AdamW(net.parameters(), lr=1e-4)
    )
    engine, *_ = deepspeed.initialize(model=net, optimizer=optimizer, config=config)
    micro, accumulation = (
        engine.train_micro_batch_size_per_gpu(),
        engine.gradient_accumulation_steps(),
    )
    replicas = engine.dp_world_size
    plain = _batches(ctx, micro, engine.device, shifted=False)
    vocab = hub_model.vocab(ctx)
    batches = harness.count(
        parity_rank.micro_batches(ctx.rank, replicas, micro, ctx.sequence_length, vocab)
        if ctx.parity
        else ((t, t[:, 1:]) for t in plain)
    )
    before = parity_rank.snapshot(net.named_parameters()) if ctx.parity and ctx.rank == 0 else None
    loss = 0.0
    while engine.global_steps < ctx.steps:
        step = [[t.to(engine.device) for t in next(batches)] for _ in range(accumulation)]
        divide_by = parity_rank.step_tokens(step, engine.device) / (replicas * accumulation)
        for tokens, targets in step:
            value = engine(tokens, targets, divide_by)
            engine.backward(value)
            loss += float(value) / accumulation
            before_step = engine.global_steps
            engine.step()
            if engine.global_steps > before_step:  # DeepSpeed's own accumulation boundary
                harness.stepped(type(engine).__name__)
    if ctx.parity:
        parity_rank.write(ctx.workdir, ctx.rank, loss, before, net.named_parameters())
    return harness.result(replica=ctx.rank, counts=True, parameters=hub_model.count_parameters(net))


def _sequence_parallel(ctx: RunContext, harness: Harness, config: dict):
    """DeepSpeed-Ulysses: a (data, sequence) mesh; the ranks of one sequence group take the same
    samples, each its slice of the sequence, and count once (the group's first rank)."""
    import deepspeed
    import torch

    sp = config["sequence_parallel_size"]
    if ctx.world_size % sp:
        raise RuntimeError(
            f"sequence_parallel_size {sp} does not divide the {ctx.world_size} ranks"
        )
    mesh = deepspeed.comm.initialize_mesh_device(
        (ctx.world_size // sp, sp), ("data_parallel", "sequence_parallel")
    )
    group = mesh.get_group(mesh_dim="sequence_parallel")
    sp_rank = torch.distributed.get_rank(group)
    net = ulysses(ctx.model, ctx.sequence_length, group, sp_rank, sp)
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    engine, *_ = deepspeed.initialize(
        model=net, optimizer=optimizer, config=config, mesh_param=(ctx.world_size // sp, sp)
    )
    replica = ctx.rank // sp
    source = _batches(
        ctx, engine.train_micro_batch_size_per_gpu(), engine.device, shifted=False, seed=replica
    )
    batches = harness.count(source) if sp_rank == 0 else source
    while engine.global_steps < ctx.steps:
        engine.backward(engine(next(batches)))
        before = engine.global_steps
        engine.step()
        if engine.global_steps > before:
            harness.stepped(type(engine).__name__)
    return harness.result(
        replica=replica, counts=sp_rank == 0, parameters=sum(p.numel() for p in net.parameters())
    )


def _pipeline(ctx: RunContext, harness: Harness, config: dict):
    import deepspeed
    import torch
    from deepspeed.pipe import PipelineModule

    net = PipelineModule(
        layers=models.layers(ctx.model, ctx.sequence_length),
        num_stages=ctx.spec.pipeline_parallel_size,
        loss_fn=models.next_token_loss,
        partition_method="uniform",
    )
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    engine, *_ = deepspeed.initialize(model=net, optimizer=optimizer, config=config)
    batches = harness.count(
        _batches(ctx, engine.train_micro_batch_size_per_gpu(), engine.device, shifted=True)
    )
    for _ in range(ctx.steps):
        engine.train_batch(data_iter=batches)  # one optimizer step, as many micro-batches as
        harness.stepped(type(engine).__name__)  # DeepSpeed's accumulation says
    return harness.result(
        replica=engine.grid.get_data_parallel_id(),
        counts=engine.is_first_stage(),
        parameters=sum(p.numel() for p in net.parameters()),
    )


def _batches(ctx: RunContext, micro: int, device, shifted: bool, seed: int | None = None):
    """Endless random token micro-batches (inputs and targets when ``shifted``); ranks given
    the same ``seed`` (one sequence-parallel group) draw the same samples."""
    import torch

    vocab = hub_model.vocab(ctx)
    generator = torch.Generator().manual_seed(1000 + (ctx.rank if seed is None else seed))
    while True:
        tokens = models.batch(micro, ctx.sequence_length, vocab, generator, device)
        yield (tokens[:, :-1], tokens[:, 1:]) if shifted else tokens
