"""nanotron's own trainer on the batch blocks of the config, on GPUs only.

nanotron cannot train on a CPU: ``ParallelContext`` asserts the nccl backend and sets a CUDA
device, and its Llama imports flash-attention's CUDA kernels (``flash_attn``) at import time.
So :func:`refuse` turns a CPU run away before any process starts.

On GPUs, the rank writes a whole nanotron config: the file's ``parallelism`` and ``tokens``
blocks as they are (``train_steps`` the run's steps), the job's model as nanotron's own
``LlamaConfig`` with random weights (engine option ``model_shape``: the shape its
``model_config`` gives, :func:`translator.rank.model.job_shape`, depth cut to ``--layers``; the
stand-in's sizes when the run has none; a shape nanotron's Llama cannot build is refused before
launch, :func:`refuse_shape`), Adam with a constant learning rate, no data set (nanotron's own
``dummy_infinite_data_generator`` makes random tokens) and no checkpoint within the run. Then
``DistributedTrainer(config).train(dataloader)``. Counted through the harness: every
micro-batch the trainer draws from the data passes :meth:`Harness.count` (only the first
pipeline stage gets tensors; the others get ``TensorPointer`` s, which hold no rows), and the
trainer's optimizer closes a step each time it steps. Rows count on tensor-parallel rank 0 of
the first stage. The parameters are counted on the built model (a rank's part of it under
tensor or pipeline parallelism, which the report then leaves unknown).
"""

from __future__ import annotations

from translator.frameworks.nanotron.models import model_config
from translator.rank import model as models
from translator.rank.context import RunContext
from translator.rank.harness import Harness

#: What the ranks import (flash-attention too: :func:`refuse` asks for it on GPUs only, so a
#: CPU machine is told first that nanotron does not train there).
REQUIRES = ("torch", "nanotron", "dacite")
#: The ranks' environment: no Weights & Biases run (its trainer starts one when wandb is
#: installed), nothing from the Hub, and the one CUDA connection nanotron's docs ask for.
ENVIRONMENT = {"WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def refuse(spec, device: str) -> str | None:
    import importlib.util

    if device != "gpu":
        return (
            "nanotron trains on CUDA GPUs only (nccl, flash-attention kernels); run it with "
            "--device gpu on a machine with GPUs"
        )
    if importlib.util.find_spec("flash_attn") is None:
        return "nanotron's models import flash_attn, which is not installed: pip install flash-attn"
    return None


def refuse_shape(shape) -> str | None:
    """Why nanotron's ``LlamaConfig`` cannot carry ``shape``, else None."""
    return models.not_llama(shape, "nanotron")


def run(ctx: RunContext):
    import yaml

    harness = Harness(ctx)
    blocks = yaml.safe_load(ctx.config.read_text())
    config_file = ctx.workdir / f"nanotron-rank-{ctx.rank}.yaml"
    config_file.write_text(yaml.safe_dump(whole_config(ctx, blocks)))
    with harness.process_group():
        from translator.frameworks.nanotron import native

        native.config()  # past nanotron 0.4's import cycle, before its trainer imports it
        from nanotron import distributed as dist
        from nanotron.dataloader import dummy_infinite_data_generator
        from nanotron.parallel.pipeline_parallel.utils import get_input_output_pp_ranks
        from nanotron.trainer import DistributedTrainer

        trainer = DistributedTrainer(str(config_file))
        first, last = get_input_output_pp_ranks(model=trainer.model)
        data = dummy_infinite_data_generator(
            micro_batch_size=trainer.micro_batch_size,
            sequence_length=trainer.sequence_length,
            input_pp_rank=first,
            output_pp_rank=last,
            vocab_size=trainer.model_config.vocab_size,
            seed=0,
            parallel_context=trainer.parallel_context,
        )()
        _close_steps(trainer.optimizer, harness)
        trainer.train(iter(harness.count(data)))
        context = trainer.parallel_context
        counts = dist.get_rank(context.pp_pg) == first and dist.get_rank(context.tp_pg) == 0
        return harness.result(
            replica=dist.get_rank(context.dp_pg),
            counts=counts,
            parameters=sum(p.numel() for p in trainer.model.parameters()),
        )


def _close_steps(optimizer, harness: Harness) -> None:
    """Close the harness's step each time nanotron's optimizer (its wrapper) steps."""
    name, step = type(optimizer).__name__, optimizer.step

    def stepped(*args, **kwargs):
        out = step(*args, **kwargs)
        harness.stepped(name)
        return out

    optimizer.step = stepped


def whole_config(ctx: RunContext, blocks: dict) -> dict:
    """A whole nanotron 0.4 config around the file's ``parallelism`` and ``tokens`` blocks."""
    shape = models.job_shape(ctx)
    tokens = dict(blocks["tokens"]) | {
        "train_steps": ctx.steps,
        "sequence_length": ctx.sequence_length,
    }
    return {
        "general": {"project": "batchspec-smoke", "run": "smoke", "seed": 0},
        "parallelism": blocks["parallelism"],
        "tokens": tokens,
        "checkpoints": {
            "checkpoints_path": str(ctx.workdir / "nanotron-checkpoints"),
            "checkpoint_interval": ctx.steps + 1,
        },
        "logging": {"log_level": "warning", "log_level_replica": "warning"},
        "model": {
            "dtype": "bfloat16",
            "init_method": {"std": 0.02},
            "model_config": model_config(shape, ctx.sequence_length),
        },
        "tokenizer": {},
        "optimizer": {
            "zero_stage": 0,
            "weight_decay": 0.0,
            "clip_grad": 1.0,
            "accumulate_grad_in_fp32": True,
            "adam_eps": 1e-8,
            "adam_beta1": 0.9,
            "adam_beta2": 0.95,
            "torch_adam_is_fused": True,
            "learning_rate_scheduler": {
                "learning_rate": 1e-4,
                "lr_warmup_steps": 0,
                "lr_warmup_style": "constant",
                "lr_decay_style": "linear",
            },
        },
        "data": {"dataset": None, "seed": 0},
    }
