"""megatron-core's own parts run as a smoke engine, for every framework that trains through
megatron-core (Megatron-LM's flags, Megatron-Bridge's ConfigContainer): given the
:class:`EngineLayout` a framework reads from its config, on every rank:

1. ``torch.distributed`` (through the shared harness) and
   ``parallel_state.initialize_model_parallel(TP, PP, virtual stages, CP)``;
2. megatron-core's micro-batch calculator with the data-parallel size parallel_state gives; its
   ``get_num_microbatches()`` is the number of micro-batches per step, as Megatron takes it;
3. the model is megatron-core's ``GPTModel`` with the job's shape (``job_shape``: Megatron's
   flags, a Megatron-Bridge recipe or model block), else the ``--model`` stand-in's (the
   Transformer Engine layer spec where it is installed and the ranks have GPUs, else the local spec), one chunk
   per virtual stage, each wrapped in megatron's ``DistributedDataParallel``; the optimizer is
   ``get_megatron_optimizer`` (the distributed optimizer when the layout asks for it);
4. each optimizer step is one call of ``get_forward_backward_func()`` (no pipelining, 1F1B,
   or interleaved 1F1B with virtual stages) with ``num_microbatches=M``, then the megatron
   optimizer's ``step``; the harness counts the rows the first pipeline stage's data iterator
   handed to the model in between (the first rank of each TP/CP group counts for the replica).

On CPU (gloo) megatron-core runs TP = PP = CP = 1 once its CUDA-only allocations are sent to
the CPU (:func:`cpu_megatron`): dropout is 0 and megatron's inference RNG tracker (no CUDA
RNG states) is used, gradient clipping is off (its norm kernel is CUDA-only). Other layouts are
refused before launch: PP, TP and CP need GPUs, CP also Transformer Engine's attention, and
the distributed optimizer needs GPUs too (:func:`layout_refusal`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import sys
import types
import warnings
from dataclasses import dataclass
from typing import Any

from translator.model import memory
from translator.rank import model as models
from translator.rank import parity_rank
from translator.rank.context import RunContext
from translator.rank.harness import Harness


@dataclass(frozen=True)
class EngineLayout:
    """The batch and parallel layout a framework's rendered config gives."""

    micro_batch_size: int
    """Samples per forward/backward on one rank."""
    global_batch_size: int | None
    """None when the config leaves it out: megatron-core then uses micro x data-parallel."""
    tensor_parallel_size: int = 1
    """``initialize_model_parallel``'s tensor-parallel size."""
    pipeline_parallel_size: int = 1
    """Its pipeline-parallel size."""
    context_parallel_size: int = 1
    """Its context-parallel size."""
    virtual_pipeline_stages: int | None = None
    """Model chunks per pipeline rank (the interleaved schedule); None: one."""
    decrease_batch_size_if_needed: bool = False
    """Whether the calculator rounds a global batch that does not divide down."""
    use_distributed_optimizer: bool = False
    """Whether megatron's distributed optimizer shards the optimizer state (GPUs only)."""
    distributed_optimizer_switch: str = "--use-distributed-optimizer"
    """How the framework's config spells the distributed optimizer (for messages)."""
    calculate_per_token_loss: bool = False
    """Whether the loss of a step is normalised over all its tokens (Megatron's
    ``--calculate-per-token-loss``), else each micro-batch over its own, then averaged."""


#: The optimizer of a parity run: plain SGD, the update a function of the gradient alone.
PARITY_OPTIMIZER = {
    "optimizer": "sgd",
    "lr": parity_rank.LEARNING_RATE,
    "sgd_momentum": 0.0,
    "weight_decay": 0.0,
}


def refusal(tensor: int, pipeline: int, context: int, on_gpu: bool) -> str | None:
    """Why these parallel sizes cannot run here (``on_gpu``: the ranks have GPUs), else None."""
    if not on_gpu:
        for name, size in (("tensor", tensor), ("pipeline", pipeline), ("context", context)):
            if size > 1:
                return (
                    f"{name}-parallel smoke runs ({name} {size}) need GPUs: megatron-core's "
                    f"{name}-parallel communication runs on CUDA only; on CPU the Megatron "
                    "engine runs data parallelism"
                    + (
                        "; --framework deepspeed runs pipeline parallelism on CPU"
                        if name == "pipeline"
                        else ""
                    )
                )
    if context > 1 and importlib.util.find_spec("transformer_engine") is None:
        return (
            f"context-parallel smoke runs (context {context}) need Transformer Engine: "
            "megatron-core's local attention has no context parallelism"
        )
    return None


def refuse(spec, device: str) -> str | None:
    """Why a megatron-core engine cannot run ``spec``'s layout on ``device`` (``cpu``/``gpu``),
    else None (the engines' ``refuse``)."""
    return refusal(
        spec.tensor_parallel_size,
        spec.pipeline_parallel_size,
        spec.context_parallel_size,
        device == "gpu",
    )


def layout_refusal(layout: EngineLayout, on_gpu: bool) -> str | None:
    """Why this engine cannot run ``layout`` here, else None."""
    why = refusal(
        layout.tensor_parallel_size,
        layout.pipeline_parallel_size,
        layout.context_parallel_size,
        on_gpu,
    )
    if not why and layout.use_distributed_optimizer and not on_gpu:
        # distrib_optimizer.py accepts only torch.cuda.{Half,BFloat16,Float}Tensor parameters.
        why = (
            f"{layout.distributed_optimizer_switch} needs GPUs: megatron-core's distributed "
            "optimizer takes CUDA parameters only; run it with --device gpu, or without it on CPU"
        )
    return why


def check_layout(layout: EngineLayout, on_gpu: bool) -> None:
    """Refuse, with the reason, a layout this engine cannot run here (before any process group;
    the launcher asks the same of the config before any rank starts)."""
    why = layout_refusal(layout, on_gpu)
    if why:
        raise RuntimeError(why)


def keywords(func, **wanted) -> dict:
    """The keyword arguments ``func`` accepts (megatron-core's signatures change by release)."""
    params = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return wanted
    return {k: v for k, v in wanted.items() if k in params}


#: torch factory functions that megatron-core calls with ``device="cuda"``.
_FACTORIES = {"zeros", "ones", "empty", "full", "arange", "tensor", "rand", "randn", "randint"}


class _CpuTorch(types.ModuleType):
    """Stands in for the ``torch`` module inside megatron-core's modules on a CPU run: all of
    torch, except that a factory asked for ``device="cuda..."`` allocates on the CPU and
    ``torch.cuda.current_device()`` answers ``"cpu"``."""

    def __init__(self, torch):
        super().__init__("torch")
        self._torch = torch
        self.cuda = _CpuCuda(torch.cuda)

    def __getattr__(self, name):
        attr = getattr(self._torch, name)
        if name not in _FACTORIES:
            return attr

        def on_cpu(*args, device=None, **kwargs):
            if device is not None and str(device).startswith("cuda"):
                device = "cpu"
            return attr(*args, **kwargs) if device is None else attr(*args, device=device, **kwargs)

        return on_cpu


class _CpuCuda:
    def __init__(self, cuda):
        self._cuda = cuda

    def __getattr__(self, name):
        return getattr(self._cuda, name)

    @staticmethod
    def current_device():
        return "cpu"


@contextlib.contextmanager
def cpu_megatron():
    """While in the block, every loaded ``megatron.core`` module sees :class:`_CpuTorch` as its
    ``torch``; they get the real one back on leaving. On a CPU-only torch, megatron-core's
    schedules (a token counter), its DDP gradient buffer, its global memory buffer, the default
    causal mask and the optimizer's bookkeeping each allocate with ``device="cuda"`` and would
    raise "Torch not compiled with CUDA enabled". The model's own tensors, the optimizer's
    arithmetic and torch itself are untouched."""
    import torch

    stand_in = _CpuTorch(torch)
    # Any: typeshed's ModuleType lets attributes be read, not assigned.
    patched: list[Any] = [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("megatron.core") and getattr(m, "torch", None) is torch
    ]
    for m in patched:
        m.torch = stand_in
    try:
        yield
    finally:
        for m in patched:
            m.torch = torch


def _stream(ctx: RunContext, layout: EngineLayout, replica: int, replicas: int):
    """Endless ``(tokens, targets)`` micro-batches of one data-parallel replica: random tokens,
    or the parity samples."""
    import torch

    micro, vocab = layout.micro_batch_size, models.job_shape(ctx).vocab
    if ctx.parity:
        yield from parity_rank.micro_batches(replica, replicas, micro, ctx.sequence_length, vocab)
    generator = torch.Generator().manual_seed(1000 + replica)
    while True:
        tokens = models.batch(micro, ctx.sequence_length, vocab, generator)
        yield tokens, tokens[:, 1:]


def _step_loss(reported) -> float:
    """The step's loss as Megatron-LM reports it: the targets' loss summed over micro-batches
    and data-parallel ranks, over their count (its last pipeline stage holds ``reported``)."""
    import torch
    import torch.distributed as dist

    total = sum((r["lm loss"] for r in reported), torch.zeros(2))
    dist.all_reduce(total)
    return float(total[0] / total[1])


def _quiet_megatron_warnings() -> None:
    # Every import of megatron.core without Apex / Transformer Engine warns about its fallbacks,
    # and TransformerConfig's own default cuda_graph_scope="full" warns that it is deprecated.
    warnings.filterwarnings("ignore", message=r".*(Apex|Transformer Engine|full scope is deprec)")


def run(ctx: RunContext, layout: EngineLayout):
    """Train ``layout`` on this rank and count its samples (the rank's result)."""
    harness = Harness(ctx)
    check_layout(layout, harness.on_gpu)
    _quiet_megatron_warnings()

    # Imported before the CPU redirection, so that it reaches the modules the run uses.
    import megatron.core.distributed  # noqa: F401
    import megatron.core.models.gpt  # noqa: F401
    import megatron.core.optimizer  # noqa: F401
    import megatron.core.pipeline_parallel  # noqa: F401
    from megatron.core import num_microbatches_calculator as microbatches
    from megatron.core import parallel_state

    redirect = contextlib.nullcontext if harness.on_gpu else cpu_megatron
    with harness.process_group(), redirect():
        parallel_state.initialize_model_parallel(
            **keywords(
                parallel_state.initialize_model_parallel,
                tensor_model_parallel_size=layout.tensor_parallel_size,
                pipeline_model_parallel_size=layout.pipeline_parallel_size,
                virtual_pipeline_model_parallel_size=layout.virtual_pipeline_stages,
                context_parallel_size=layout.context_parallel_size,
            )
        )
        data_parallel = parallel_state.get_data_parallel_world_size()
        microbatches.destroy_num_microbatches_calculator()
        microbatches.init_num_microbatches_calculator(
            **keywords(
                microbatches.init_num_microbatches_calculator,
                rank=ctx.rank,
                rampup_batch_size=None,
                global_batch_size=layout.global_batch_size
                or layout.micro_batch_size * data_parallel,
                micro_batch_size=layout.micro_batch_size,
                data_parallel_size=data_parallel,
                decrease_batch_size_if_needed=layout.decrease_batch_size_if_needed,
            )
        )
        try:
            return _train(ctx, harness, layout)
        finally:
            microbatches.destroy_num_microbatches_calculator()
            parallel_state.destroy_model_parallel()


def architecture(shape: memory.Model) -> dict:
    """TransformerConfig's fields for ``shape`` beyond its sizes, as Megatron's flags set them
    (``--group-query-attention``, ``--ffn-hidden-size``, ``--swiglu``, ``--normalization
    RMSNorm``, ``--disable-bias-linear``); the stand-in's are megatron-core's defaults."""
    import torch.nn.functional as F

    if shape.kv_heads == shape.heads and shape.biases and not shape.gated:
        return {"ffn_hidden_size": shape.ffn}
    return {
        "num_query_groups": shape.kv_heads,
        "ffn_hidden_size": shape.ffn,
        "gated_linear_unit": shape.gated,
        "activation_func": F.silu if shape.gated else F.gelu,
        "normalization": "LayerNorm" if shape.biases else "RMSNorm",
        "add_bias_linear": shape.biases,
        "add_qkv_bias": shape.biases or shape.qkv_bias,
        "qk_layernorm": shape.qk_norm,
        **({"kv_channels": shape.head_dim} if shape.head_dim else {}),
    }


def embeddings(shape: memory.Model) -> dict:
    """GPTModel's position embedding and head, as the flags set them: rotary for a model with
    no learned positions (``--position-embedding-type rope``), an untied head with
    ``--untie-embeddings-and-output-weights``."""
    if not shape.positions and not shape.biases:
        return {
            "position_embedding_type": "rope",
            "share_embeddings_and_output_weights": shape.tied,
        }
    return {"share_embeddings_and_output_weights": shape.tied}


def _model_chunks(ctx: RunContext, harness: Harness, layout: EngineLayout):
    """megatron-core's GPTModel, one chunk per virtual pipeline stage of this rank."""
    import torch
    from megatron.core import parallel_state
    from megatron.core.models.gpt import GPTModel, gpt_layer_specs
    from megatron.core.tensor_parallel import random as megatron_random
    from megatron.core.transformer.transformer_config import TransformerConfig

    shape = models.job_shape(ctx)
    chunks = layout.virtual_pipeline_stages or 1
    stages = layout.pipeline_parallel_size * chunks
    layers = -(-shape.layers // stages) * stages  # a multiple of the stages
    dtype = torch.bfloat16 if harness.on_gpu else torch.float32
    config = TransformerConfig(
        **keywords(
            TransformerConfig,
            num_layers=layers,
            hidden_size=shape.hidden,
            num_attention_heads=shape.heads,
            **architecture(shape),
            tensor_model_parallel_size=layout.tensor_parallel_size,
            pipeline_model_parallel_size=layout.pipeline_parallel_size,
            virtual_pipeline_model_parallel_size=layout.virtual_pipeline_stages,
            context_parallel_size=layout.context_parallel_size,
            bf16=harness.on_gpu,
            params_dtype=dtype,
            pipeline_dtype=dtype,
            hidden_dropout=0.0,
            attention_dropout=0.0,
            use_cpu_initialization=not harness.on_gpu,
            calculate_per_token_loss=layout.calculate_per_token_loss,
        )
    )
    use_te = harness.on_gpu and importlib.util.find_spec("transformer_engine") is not None
    spec = (
        gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec()
        if use_te
        else gpt_layer_specs.get_gpt_layer_local_spec()
    )
    torch.manual_seed(0)  # the same initial weights whatever the split
    if harness.on_gpu:
        megatron_random.model_parallel_cuda_manual_seed(1234)
    else:  # no CUDA RNG states to keep: megatron's tracker that forks nothing
        megatron_random.initialize_rng_tracker(inference_rng_tracker=True, force_reset=True)
    out = []
    for chunk in range(chunks):
        if layout.virtual_pipeline_stages:
            parallel_state.set_virtual_pipeline_model_parallel_rank(chunk)
        out.append(
            GPTModel(
                config=config,
                transformer_layer_spec=spec,
                vocab_size=shape.vocab,
                # the job's learned position table (--max-position-embeddings rows)
                max_sequence_length=max(shape.positions, ctx.sequence_length),
                **embeddings(shape),
                pre_process=parallel_state.is_pipeline_first_stage(),
                post_process=parallel_state.is_pipeline_last_stage(),
            ).to(harness.device)
        )
    if layout.virtual_pipeline_stages:
        parallel_state.set_virtual_pipeline_model_parallel_rank(0)
    return config, out


def _train(ctx: RunContext, harness: Harness, layout: EngineLayout):
    import torch
    from megatron.core import parallel_state
    from megatron.core.distributed import (
        DistributedDataParallel,
        DistributedDataParallelConfig,
        finalize_model_grads,
    )
    from megatron.core.num_microbatches_calculator import get_num_microbatches
    from megatron.core.pipeline_parallel import get_forward_backward_func

    config, chunks = _model_chunks(ctx, harness, layout)
    ddp_config = DistributedDataParallelConfig(
        use_distributed_optimizer=layout.use_distributed_optimizer
    )
    ddp = [DistributedDataParallel(config, ddp_config, chunk) for chunk in chunks]
    optimizer = _optimizer(ctx, harness, layout, config, ddp)
    config.no_sync_func = [m.no_sync for m in ddp] if len(ddp) > 1 else ddp[0].no_sync
    config.finalize_model_grads_func = finalize_model_grads
    config.grad_scale_func = optimizer.scale_loss

    # Ranks of one replica (tensor / context parallel) see the same samples, as in Megatron;
    # only the first virtual chunk of the first stage takes samples into the model.
    replica = parallel_state.get_data_parallel_rank()
    iterators = []
    for chunk in range(len(ddp)):
        stream = _stream(ctx, layout, replica, parallel_state.get_data_parallel_world_size())
        iterators.append(harness.count(stream) if chunk == 0 else stream)
    positions = torch.arange(ctx.sequence_length, device=harness.device).unsqueeze(0)

    forward_backward = get_forward_backward_func()
    named = [(n, p) for m in chunks for n, p in m.named_parameters()]
    before = parity_rank.snapshot(named) if ctx.parity and ctx.rank == 0 else None
    reported = []
    for _ in range(ctx.steps):
        for m in ddp:
            m.zero_grad_buffer()
        optimizer.zero_grad()
        reported = forward_backward(
            forward_step_func=_forward_step(harness, layout, positions),
            data_iterator=iterators if len(ddp) > 1 else iterators[0],
            model=ddp,
            num_microbatches=get_num_microbatches(),
            seq_length=ctx.sequence_length,
            micro_batch_size=layout.micro_batch_size,
            forward_only=False,
        )
        updated, *_ = optimizer.step()
        if updated:  # a skipped update (loss-scale overflow) is not an optimizer step
            harness.stepped(type(optimizer).__name__)
    if ctx.parity:
        parity_rank.write(ctx.workdir, ctx.rank, _step_loss(reported), before, named)
    counts = (
        parallel_state.get_tensor_model_parallel_rank() == 0
        and parallel_state.get_context_parallel_rank() == 0
        and parallel_state.is_pipeline_first_stage(ignore_virtual=True)
    )
    return harness.result(
        replica=replica,
        counts=counts,
        parameters=sum(p.numel() for m in chunks for p in m.parameters()),
    )


def _optimizer(ctx: RunContext, harness: Harness, layout: EngineLayout, config, ddp):
    """Megatron's optimizer over the wrapped chunks: the parity run's plain SGD, else Adam;
    bf16 and gradient clipping on a GPU."""
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer

    settings = PARITY_OPTIMIZER if ctx.parity else {"optimizer": "adam", "lr": 1e-4}
    return get_megatron_optimizer(
        OptimizerConfig(
            **keywords(
                OptimizerConfig,
                **settings,
                bf16=harness.on_gpu,
                params_dtype=config.params_dtype,
                use_distributed_optimizer=layout.use_distributed_optimizer,
                clip_grad=1.0 if harness.on_gpu and not ctx.parity else 0.0,
            )
        ),
        ddp,
    )


def _forward_step(harness: Harness, layout: EngineLayout, positions):
    """Megatron's forward step over the engine's samples, with pretrain_gpt's loss."""
    import torch

    def forward_step(data_iterator, model):
        tokens, targets = (t.to(harness.device) for t in next(data_iterator))
        mask = targets != models.IGNORE  # padding is never a target
        batch = {
            "tokens": tokens[:, :-1],
            "labels": targets.masked_fill(~mask, 0),
            "loss_mask": mask.float(),
            "position_ids": positions.expand(tokens.shape[0], -1),
        }
        if layout.context_parallel_size > 1:  # each CP rank takes its share of the sequence
            from megatron.core.utils import get_batch_on_this_cp_rank

            batch = get_batch_on_this_cp_rank(batch)
        output = model(batch["tokens"], batch["position_ids"], None, labels=batch["labels"])

        def loss(output_tensor):
            # As Megatron-LM's pretrain_gpt: the sum over the step's targets and their count;
            # megatron-core divides by the micro-batch's count, or the step's with
            # --calculate-per-token-loss.
            mask = batch["loss_mask"]
            total = (output_tensor.float() * mask).sum()
            count = mask.sum().to(torch.int)
            return total, count, {"lm loss": torch.stack([total.detach(), count.float()])}

        return output, loss

    return forward_step
