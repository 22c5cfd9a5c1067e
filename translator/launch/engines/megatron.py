"""Megatron-core: the rendered ``--flag value`` arguments, run through megatron-core's own code.

What runs is what was rendered: the micro and global batch and the tensor / pipeline / context
parallel sizes are read back from the rendered args file (``translator.backends.megatron.read``),
not taken from the spec. Then, on every rank:

1. ``torch.distributed`` (gloo on CPU, nccl on GPU) and
   ``megatron.core.parallel_state.initialize_model_parallel(tensor_model_parallel_size=TP,
   pipeline_model_parallel_size=PP, context_parallel_size=CP)``;
2. megatron-core's micro-batch calculator
   (``num_microbatches_calculator.init_num_microbatches_calculator``) with the data-parallel size
   that ``parallel_state.get_data_parallel_world_size()`` gives; its ``get_num_microbatches()``
   is the number of micro-batches per optimizer step, exactly as Megatron-LM's training loop
   takes it;
3. the tiny model from ``translator.launch.model``, given what megatron's schedules read off a
   model (``.config``, a ``TransformerConfig``; ``.model_type``; ``set_input_tensor``) and wrapped
   in megatron's own ``megatron.core.distributed.DistributedDataParallel`` (contiguous gradient
   buffer, ``param.main_grad``, bucketed all-reduce); the schedule gets DDP's ``no_sync`` as
   ``config.no_sync_func`` and megatron's ``finalize_model_grads`` as
   ``config.finalize_model_grads_func``, as Megatron-LM wires them;
4. each optimizer step is one call of ``pipeline_parallel.get_forward_backward_func()`` (with
   PP=1 that is ``forward_backward_no_pipelining``) with ``num_microbatches=M``; the data
   iterator it pulls micro-batches from counts the rows it yields, and that count is the rank's
   samples for the step. Then ``torch.optim.AdamW`` steps on the all-reduced ``main_grad``.

Megatron DDP rather than torch DDP: it works on CPU once two CUDA-only allocations are
redirected (see ``_cuda_allocations_on_cpu``), and it is the gradient path Megatron-LM trains
with. Megatron's own optimizer (``get_megatron_optimizer``) is not used: it allocates its
overflow and grad-norm buffers with ``device='cuda'`` in many places and checks
``param.type() == 'torch.cuda.FloatTensor'``; the optimizer does not decide the batch.

Only TP = PP = CP = 1 runs on CPU. Pipeline parallelism is refused everywhere: the tiny model is
one module, not split into stages, so the pipelined schedules have nothing to send between ranks.
"""

from __future__ import annotations

import contextlib
import inspect
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

from translator.backends.megatron import read
from translator.launch import model as models
from translator.launch.harness import Harness
from translator.launch.worker import RunContext


@dataclass(frozen=True)
class Layout:
    """The batch and parallel layout the rendered Megatron args give."""

    micro_batch_size: int
    global_batch_size: int | None
    """None when the args leave it out: Megatron then uses micro x data-parallel."""
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    context_parallel_size: int = 1
    decrease_batch_size_if_needed: bool = False


def read_layout(path: Path) -> Layout:
    """The layout of a rendered Megatron args file, read as the renderer's reader reads it."""
    reading = read(Path(path).read_text(), str(path))

    def count(flag: str, default: int | None) -> int | None:
        if flag not in reading.values:
            return default
        value = reading.count(flag)
        if value is None:
            raise RuntimeError(f"{path}: {flag} is not a literal count "
                               f"({reading.values[flag].value!r})")
        return value

    micro = count("--micro-batch-size", None)
    if micro is None:
        raise RuntimeError(f"{path}: no --micro-batch-size; Megatron needs one")
    if "--rampup-batch-size" in reading.values:
        raise RuntimeError(f"{path}: --rampup-batch-size is not supported by smoke runs "
                           "(the number of micro-batches would change from step to step)")
    return Layout(
        micro_batch_size=micro,
        global_batch_size=count("--global-batch-size", None),
        tensor_parallel_size=count("--tensor-model-parallel-size", 1),
        pipeline_parallel_size=count("--pipeline-model-parallel-size", 1),
        context_parallel_size=count("--context-parallel-size", 1),
        decrease_batch_size_if_needed="--decrease-batch-size-if-needed" in reading.values)


def refuse(spec, device: str) -> str | None:
    """Why this engine cannot run ``spec``'s layout on ``device`` (``cpu``/``gpu``), else None."""
    return _refusal(spec.tensor_parallel_size, spec.pipeline_parallel_size,
                    spec.context_parallel_size, device == "gpu")


def _refusal(tensor: int, pipeline: int, context: int, on_gpu: bool) -> str | None:
    if pipeline > 1:
        if on_gpu:
            return (f"pipeline-parallel smoke runs (pipeline {pipeline}) are not supported by "
                    "the Megatron engine: the smoke model is not split into pipeline stages; "
                    "--framework deepspeed runs pipeline parallelism")
        return (f"pipeline-parallel smoke runs (pipeline {pipeline}) need GPUs: megatron-core's "
                "pipeline schedules send activations between ranks on CUDA only; "
                "--framework deepspeed runs pipeline parallelism on CPU")
    if not on_gpu:
        for name, size in (("tensor", tensor), ("context", context)):
            if size > 1:
                return (f"{name}-parallel smoke runs ({name} {size}) need GPUs: megatron-core's "
                        f"{name}-parallel layers and communication run on CUDA only")
    return None


def check_layout(layout: Layout, on_gpu: bool) -> None:
    """Refuse, with the reason, a layout this engine cannot run here (before any process group:
    the rendered args are read on the rank too, since a user's own script is run as written)."""
    why = _refusal(layout.tensor_parallel_size, layout.pipeline_parallel_size,
                   layout.context_parallel_size, on_gpu)
    if why:
        raise RuntimeError(why)


def _keywords(func, **wanted) -> dict:
    """The keyword arguments ``func`` accepts (megatron-core's signatures change by release)."""
    params = inspect.signature(func).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return wanted
    return {k: v for k, v in wanted.items() if k in params}


class _CpuTorch(types.ModuleType):
    """Stands in for the ``torch`` module inside a megatron-core module: everything is torch's,
    except ``torch.zeros(..., device="cuda...")``, which allocates on the CPU, and
    ``torch.cuda.current_device()``, which answers ``"cpu"``."""

    def __init__(self, torch):
        super().__init__("torch")
        self._torch = torch
        self.cuda = _CpuCuda(torch.cuda)

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def zeros(self, *args, device=None, **kwargs):
        if device is not None and str(device).startswith("cuda"):
            device = "cpu"
        return self._torch.zeros(*args, device=device, **kwargs)


class _CpuCuda:
    def __init__(self, cuda):
        self._cuda = cuda

    def __getattr__(self, name):
        return getattr(self._cuda, name)

    @staticmethod
    def current_device():
        return "cpu"


@contextlib.contextmanager
def _cuda_allocations_on_cpu():
    """While in the block, two megatron-core modules see ``_CpuTorch`` as their ``torch``.

    Exactly what is redirected, and why (megatron-core 0.16.1; nothing else is changed, and the
    modules get the real ``torch`` back on leaving the block):

    * ``megatron/core/pipeline_parallel/schedules.py``: every schedule starts with
      ``total_num_tokens = torch.zeros([], dtype=torch.int, device="cuda")``, a token counter
      that is otherwise only added to (and passed to ``finalize_model_grads`` for per-token
      loss). ``torch.zeros(device="cuda...")`` -> CPU.
    * ``megatron/core/distributed/param_and_grad_buffer.py``: megatron DDP's contiguous
      gradient buffer is ``torch.zeros(numel, device=torch.cuda.current_device())``.
      ``torch.cuda.current_device()`` -> ``"cpu"`` (and ``torch.zeros(device="cuda")``, used
      there only for the NCCL user-buffer warm-up, which is off).

    On a CPU-only torch each of these raises "Torch not compiled with CUDA enabled". The
    patch is on the module attribute, so the model, the optimizer and torch itself are
    untouched; it is not thread-safe, and needs not be (one training thread per rank).
    """
    import importlib

    import torch

    names = ("megatron.core.pipeline_parallel.schedules",
             "megatron.core.distributed.param_and_grad_buffer")
    modules = [importlib.import_module(n) for n in names]
    saved = [m.torch for m in modules]
    stand_in = _CpuTorch(torch)
    try:
        for m in modules:
            m.torch = stand_in
        yield
    finally:
        for m, original in zip(modules, saved):
            m.torch = original


def _batches(micro_batch_size, sequence_length, vocab, generator, device):
    """Endless random token micro-batches."""
    while True:
        yield models.batch(micro_batch_size, sequence_length, vocab, generator, device)


def _quiet_megatron_warnings() -> None:
    # Every import of megatron.core without Apex / Transformer Engine warns about its fallbacks,
    # and TransformerConfig's own default cuda_graph_scope="full" warns that it is deprecated.
    warnings.filterwarnings("ignore", message=r".*(Apex|Transformer Engine|full scope is deprec)")


def run(ctx: RunContext):
    harness = Harness(ctx)
    layout = read_layout(ctx.config)
    check_layout(layout, harness.on_gpu)
    _quiet_megatron_warnings()

    from megatron.core import num_microbatches_calculator as microbatches
    from megatron.core import parallel_state

    with harness.process_group():
        parallel_state.initialize_model_parallel(**_keywords(
            parallel_state.initialize_model_parallel,
            tensor_model_parallel_size=layout.tensor_parallel_size,
            pipeline_model_parallel_size=layout.pipeline_parallel_size,
            context_parallel_size=layout.context_parallel_size))
        data_parallel = parallel_state.get_data_parallel_world_size()
        microbatches.destroy_num_microbatches_calculator()
        microbatches.init_num_microbatches_calculator(**_keywords(
            microbatches.init_num_microbatches_calculator,
            rank=ctx.rank, rampup_batch_size=None,
            global_batch_size=layout.global_batch_size or layout.micro_batch_size * data_parallel,
            micro_batch_size=layout.micro_batch_size, data_parallel_size=data_parallel,
            decrease_batch_size_if_needed=layout.decrease_batch_size_if_needed))
        try:
            return _train(ctx, harness, layout)
        finally:
            microbatches.destroy_num_microbatches_calculator()
            parallel_state.destroy_model_parallel()


def _train(ctx: RunContext, harness: Harness, layout: Layout):
    import torch
    from megatron.core import parallel_state
    from megatron.core.distributed import (DistributedDataParallel,
                                           DistributedDataParallelConfig, finalize_model_grads)
    from megatron.core.enums import ModelType
    from megatron.core.num_microbatches_calculator import get_num_microbatches
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.transformer.transformer_config import TransformerConfig

    device, on_gpu = harness.device, harness.on_gpu
    redirect = contextlib.nullcontext if on_gpu else _cuda_allocations_on_cpu
    shape = models.SHAPES[ctx.model]
    net = models.build(ctx.model, ctx.sequence_length).to(device)
    config = TransformerConfig(num_layers=shape.layers, hidden_size=shape.hidden,
                               num_attention_heads=shape.heads,
                               tensor_model_parallel_size=layout.tensor_parallel_size,
                               context_parallel_size=layout.context_parallel_size)
    net.config = config
    net.model_type = ModelType.encoder_or_decoder
    net.set_input_tensor = lambda tensor: None  # first and last stage: input is the tokens
    with redirect():
        ddp = DistributedDataParallel(config, DistributedDataParallelConfig(), net)
    config.no_sync_func = ddp.no_sync
    config.finalize_model_grads_func = finalize_model_grads
    parameters = list(net.parameters())
    optimizer = torch.optim.AdamW(parameters, lr=1e-4)
    harness.watch(optimizer)

    # Ranks of one replica (tensor / context parallel) see the same samples, as in Megatron.
    data_parallel_rank = parallel_state.get_data_parallel_rank()
    gen = torch.Generator().manual_seed(1000 + data_parallel_rank)
    data = harness.count(_batches(layout.micro_batch_size, ctx.sequence_length, shape.vocab,
                                  gen, device))

    def forward_step(data_iterator, model):
        loss = model(next(data_iterator))
        return loss, lambda output: (output, {"lm loss": output.detach()})

    forward_backward = get_forward_backward_func()
    for _ in range(ctx.steps):
        ddp.zero_grad_buffer()
        with redirect():
            forward_backward(forward_step_func=forward_step, data_iterator=data, model=[ddp],
                             num_microbatches=get_num_microbatches(),
                             seq_length=ctx.sequence_length,
                             micro_batch_size=layout.micro_batch_size, forward_only=False)
        for p in parameters:  # megatron DDP reduces into main_grad; torch's optimizer reads grad
            p.grad = p.main_grad
        optimizer.step()  # the harness closes the step here
        optimizer.zero_grad(set_to_none=True)
    counts = (parallel_state.get_tensor_model_parallel_rank() == 0
              and parallel_state.get_context_parallel_rank() == 0
              and parallel_state.is_pipeline_first_stage())
    return harness.result(replica=data_parallel_rank, counts=counts,
                          parameters=sum(p.numel() for p in parameters))
