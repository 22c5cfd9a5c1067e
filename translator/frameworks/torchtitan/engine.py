"""torchtitan: its real ``Trainer`` (``torchtitan.trainer``) on the rendered launch's flags,
parsed by its own ``ConfigManager`` over the ``llama3`` ``debugmodel`` config function, with
only the run's settings on top (the steps, the sequence length, a work folder, no checkpoint,
compile or validation). The tokenizer and the data are stand-ins built in code: random tokens,
the positions of one document per row; nothing is downloaded.

The model is the job's (engine option ``model_shape``): the shape its flavor, config function
or ``--model-config`` gives (:func:`translator.rank.model.job_shape`, depth cut to
``--layers``), built by torchtitan's llama3 model code with random weights (:func:`model_spec`:
``Llama3Model.Config`` with the shape's dim, layers, heads, KV heads, vocabulary and FFN width,
through the module's own layer builder). A shape llama3 cannot build (biases, a GELU MLP, learned
positions, per-head norms, a head width of its own) is refused before launch
(:func:`refuse_shape`); a run without the job's model builds debugmodel's.

Counted through the harness: the rows of each batch as the Trainer takes it (one per forward;
a forward hook would count twice under its replicate wrapper), and a post-step hook on torchtitan's own optimizer closes the step, so the
accumulation measured is ``Trainer.__init__``'s.

On a CPU rank four things of torchtitan assume a GPU and are bridged for the run (:func:`_cpu`):
its device lookup (``torch._utils._get_available_device_type`` answers ``cpu``), the memory
monitor's calls (``torch.cpu`` lacks ``get_device_name``, ``memory_stats``...), the barrier it
sets timeouts with (it passes ``device_ids``, which gloo refuses), and FlexAttention, which has
no backward on CPU: its kernel is replaced by causal SDPA, which is what its block mask computes
for rows of one document each. Data parallelism only: tensor, pipeline and context parallel
layouts are refused before launch (:func:`refuse`).

A parity run (``smoke --parity``) keeps the Trainer's own loss and accumulation
(``train_step`` counts the labels that are not ``IGNORE_INDEX`` in all the step's micro-batches,
sums them over the batch mesh, and each micro-batch's loss is its summed cross-entropy divided
by that count) and changes what it is fed: rows as 0.3.0's SFT path (``ChatDataset``) pads them,
one sample of its own length each, then padding labelled ``IGNORE_INDEX`` (its pretraining path
packs full rows, where every label counts and no split can weigh a token differently), and plain
SGD at learning rate 1 (:func:`_parity`: torchtitan's optimizer names have no SGD, so its factory
is given one; no warm-up, no clipping). Rank 0 writes the update of the whole (gathered) weights,
every rank the loss the Trainer logs."""

from __future__ import annotations

import os
import types

from translator.model import memory
from translator.rank import model as models
from translator.rank import parity_rank
from translator.rank.context import RunContext
from translator.rank.engines import data_parallel_only
from translator.rank.harness import Harness

#: The config function the run builds on (torchtitan's smallest llama3).
MODULE, CONFIG = "llama3", "llama3_debugmodel"


def refuse(spec, device: str) -> str | None:
    """Why this engine cannot run ``spec``'s layout (it is data-parallel only), else None."""
    return data_parallel_only("torchtitan", spec)


def flags(ctx: RunContext, on_gpu: bool) -> list[str]:
    """The rendered launch's flags (read back by the framework's reader), the run's on top. On
    CPU the data-parallel degree runs as replicas (DDP) on the ``full_dtensor`` backend: FSDP's
    reduce-scatter takes ``PREMUL_SUM``, which gloo lacks, and the default ``spmd_types``
    backend refuses the replicas' plain parameters; the batch's degree (replicate × shard) is
    the same."""
    from translator.frameworks.torchtitan import keys, rules

    reading = rules.read(ctx.config.read_text(), str(ctx.config))
    out = []
    for key in keys.DEFAULTS:
        v = reading.values.get(key)
        if v is not None and v.value is not None:
            out += [f"--{key}"] if v.value is True else [f"--{key}", str(v.value)]
    if not on_gpu:
        out += [
            "--parallelism.data_parallel_replicate_degree",
            str(ctx.spec.data_parallel),
            "--parallelism.data_parallel_shard_degree",
            "1",
            "--parallelism.spmd_backend",  # spmd_types wants DTensor parameters there
            "full_dtensor",
        ]
    return [
        *out,
        "--training.steps",
        str(ctx.steps),
        "--training.seq_len",
        str(ctx.sequence_length),
    ]


def run(ctx: RunContext):
    import torch

    harness = Harness(ctx)
    if not harness.on_gpu:
        _cpu()
    from torchtitan.config.manager import ConfigManager

    with harness.process_group():
        config = ConfigManager().parse_args(
            ["--module", MODULE, "--config", CONFIG, *flags(ctx, harness.on_gpu)]
        )
        config.dump_folder = str(ctx.workdir / "torchtitan")
        config.checkpoint.enable = False
        config.compile.enable = False
        config.validator.enable = False
        config.tokenizer = _Built(types.SimpleNamespace(eos_id=0, bos_id=1, pad_id=0))
        if ctx.model_config is not None:
            shape = models.job_shape(ctx)
            config.model_spec = model_spec(config.model_spec, shape)
            config.loss.loss_fn.global_vocab_size = shape.vocab
        vocab = config.model_spec.model.vocab_size
        config.dataloader = _Data(ctx, harness, vocab)
        if ctx.parity:
            _parity(config, harness.on_gpu)
        torch.manual_seed(0)
        trainer = config.build()
        try:
            model = trainer.model_parts[0]
            harness.watch(trainer.optimizers.optimizers[0])
            if ctx.parity:  # gathered on every rank (the parameters are DTensors)
                before = parity_rank.snapshot(parity_rank.gathered(model.named_parameters()))
                losses = _logged_losses(trainer)
            trainer.train()
            if ctx.parity:
                after = parity_rank.gathered(model.named_parameters())
                first = before if ctx.rank == 0 else None
                parity_rank.write(ctx.workdir, ctx.rank, losses[0], first, after)
        finally:
            trainer.close()
        rank = trainer.parallel_dims.get_mesh("batch").get_local_rank() if ctx.world_size > 1 else 0
        return harness.result(
            replica=rank, counts=True, parameters=sum(p.numel() for p in model.parameters())
        )


def refuse_shape(shape: memory.Model) -> str | None:
    """Why torchtitan's llama3 cannot build ``shape``, else None."""
    return models.not_llama(shape, "torchtitan")


def model_spec(spec, shape: memory.Model):
    """The config function's ``ModelSpec`` with its llama3 model at ``shape``: the module's own
    layer builder (``_build_llama3_layers``, the flavors' per-layer configs and initialisation)
    at the shape's sizes, the flavor's rotary settings at the shape's head width, and the
    embedding, final norm and head resized; tied when the shape is."""
    import dataclasses

    from torchtitan.models import llama3

    model, dim = spec.model, shape.hidden
    rope = dataclasses.replace(model.layers[0].attention.rope, dim=dim // shape.heads)
    layers = llama3._build_llama3_layers(
        fuse_qkv=True,
        n_layers=shape.layers,
        dim=dim,
        n_heads=shape.heads,
        n_kv_heads=shape.kv_heads,
        hidden_dim=shape.ffn,
        rope=rope,
        attn_backend="flex",  # debugmodel's; on CPU its kernel runs as causal SDPA (_cpu)
    )
    resized = dataclasses.replace(
        model,
        dim=dim,
        vocab_size=shape.vocab,
        enable_weight_tying=shape.tied,
        tok_embeddings=dataclasses.replace(
            model.tok_embeddings, num_embeddings=shape.vocab, embedding_dim=dim
        ),
        norm=dataclasses.replace(model.norm, normalized_shape=dim),
        lm_head=dataclasses.replace(
            model.lm_head,
            in_features=dim,
            out_features=shape.vocab,
            param_init=llama3._output_linear_init(dim),
        ),
        layers=layers,
    )
    return dataclasses.replace(spec, model=resized)


class _Built:
    """A config whose ``build`` returns a made object (torchtitan builds its parts so)."""

    def __init__(self, made):
        self.made = made

    def build(self, **_):
        return self.made


def _parity(config, on_gpu: bool) -> None:
    """The parity run's settings, on ``config``: plain SGD at learning rate 1 for every
    parameter, no warm-up (the first step's factor is 1), no clipping (an infinite norm clips
    by 1); on CPU float32 compute, where torchtitan's default is bf16 autocast (its
    ``mixed_precision_param``, taken by autocast when no parameter is sharded), whose rounding
    of each micro-batch's gradient alone differs by 4e-3 between splits."""
    import torch
    from torchtitan.components.optimizer.optimizer import OptimizersContainer, ParamGroupConfig

    known = OptimizersContainer._resolve_optimizer_factory
    OptimizersContainer._resolve_optimizer_factory = staticmethod(
        lambda name: torch.optim.SGD if name == "SGD" else known(name)
    )
    sgd = {"lr": parity_rank.LEARNING_RATE, "momentum": 0.0, "weight_decay": 0.0}
    config.optimizer.param_groups = [
        ParamGroupConfig(pattern=".*", optimizer_name="SGD", optimizer_kwargs=sgd)
    ]
    config.optimizer.implementation = "for-loop"
    config.lr_scheduler.warmup_steps = 0
    config.training.max_norm = float("inf")
    if not on_gpu:
        config.training.mixed_precision_param = "float32"


def _logged_losses(trainer) -> list[float]:
    """The losses the Trainer logs, one a step (``global_avg_loss``: the step's summed loss over
    its counted labels, on every rank together)."""
    losses: list[float] = []
    log = trainer.metrics_processor.log

    def keep(step, global_avg_loss, *args, **kwargs):
        losses.append(float(global_avg_loss))
        return log(step, global_avg_loss, *args, **kwargs)

    trainer.metrics_processor.log = keep
    return losses


class _Data:
    """torchtitan's dataloader config, duck-typed: ``build`` gives endless batches of the size
    and length the Trainer asks for (``{"input", "positions"}``, labels): random tokens, or a
    parity run's padded samples."""

    def __init__(self, ctx: RunContext, harness: Harness, vocab: int):
        self.ctx, self.harness, self.vocab = ctx, harness, vocab

    def build(self, *, local_batch_size: int, seq_len: int, **_):
        if self.ctx.parity:
            return _ParityBatches(local_batch_size, seq_len, self.ctx, self.harness, self.vocab)
        return _Batches(local_batch_size, seq_len, self.ctx.rank, self.harness, self.vocab)


class _Batches:
    """Each batch is counted as the Trainer takes it: it pulls one per forward (its
    ``batch_generator``), so these are the rows that enter the model."""

    def __init__(self, rows: int, length: int, seed: int, harness: Harness, vocab: int):
        self.rows, self.length, self.seed, self.harness = rows, length, seed, harness
        self.vocab = vocab

    def __iter__(self):
        import torch

        generator = torch.Generator().manual_seed(1000 + self.seed)
        positions = torch.arange(self.length).repeat(self.rows, 1)
        while True:
            tokens = torch.randint(0, self.vocab, (self.rows, self.length + 1), generator=generator)
            self.harness.add(tokens[:, :-1])
            yield {"input": tokens[:, :-1], "positions": positions}, tokens[:, 1:]

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class _ParityBatches(_Batches):
    """The parity samples (:func:`translator.rank.parity_rank.micro_batches`: each step the
    next global batch of samples, whatever the split), a sample a row, padding after it
    labelled ``IGNORE_INDEX`` (-100, :data:`translator.rank.model.IGNORE`)."""

    def __init__(self, rows: int, length: int, ctx: RunContext, harness: Harness, vocab: int):
        super().__init__(rows, length, ctx.rank, harness, vocab)
        self.replicas = ctx.world_size

    def __iter__(self):
        import torch

        positions = torch.arange(self.length).repeat(self.rows, 1)
        for tokens, labels in parity_rank.micro_batches(
            self.seed, self.replicas, self.rows, self.length, self.vocab
        ):
            self.harness.add(tokens[:, :-1])
            yield {"input": tokens[:, :-1], "positions": positions}, labels


def _cpu() -> None:
    """torchtitan on a CPU rank: what it assumes of a GPU, bridged (see the module's text)."""
    import torch
    import torch._utils

    torch._utils._get_available_device_type = lambda: "cpu"  # before torchtitan is imported
    pages = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    stand_ins = {
        "get_device_name": lambda *_: "cpu",
        "get_device_properties": lambda *_: types.SimpleNamespace(total_memory=pages),
        "reset_peak_memory_stats": lambda *_: None,
        "empty_cache": lambda *_: None,
        "memory_stats": lambda *_: {},
    }
    for name, stand_in in stand_ins.items():
        if not hasattr(torch.cpu, name):
            setattr(torch.cpu, name, stand_in)
    import torchtitan.distributed.utils as distributed
    from torchtitan.models.common import attention

    distributed.set_pg_timeouts = lambda *_, **__: None  # its barrier passes gloo device_ids

    def causal(q, k, v, *, scale, enable_gqa, **_):
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=scale, enable_gqa=enable_gqa
        )
        return out, types.SimpleNamespace(lse=None, max_scores=None)

    attention.FlexAttention._compiled_flex_attn = staticmethod(causal)
