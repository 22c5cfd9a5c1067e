"""The torchtune smoke engine: the installed torchtune's own ``full_finetune_distributed`` recipe
(``FullFinetuneRecipeDistributed``: its process group, FSDP2, dataloader, sampler and training
loop), on a tiny random Llama 3 built by ``torchtune.models.llama3.llama3`` and synthetic token
rows, nothing downloaded.

From the config it runs, it takes the batch: ``batch_size``, ``gradient_accumulation_steps``
and ``clip_grad_norm``; everything else is the smoke run's (:func:`config`): the model, a
stand-in tokenizer (:class:`Tokenizer`), the data (:func:`dataset`, exactly ``steps ×
global batch`` rows, so the one epoch holds whole accumulation windows only), a checkpoint of
the random weights written in the work folder for the recipe's checkpointer to load, AdamW, and
``max_steps_per_epoch`` = the steps asked for. Counted through the harness: a forward pre-hook
on the recipe's model counts the rows of each training forward, and the recipe's optimizer's
post-step hook closes the step.

On a CPU rank two memory-housekeeping calls are replaced (:func:`cpu_housekeeping`), nothing
that trains: 0.6.1's recipe logs ``training.get_memory_stats`` after loading the model, which
raises on a CPU ("Logging memory stats is not supported on CPU devices"), and its
``training.cleanup_before_training`` empties the device cache, which ``torch.cpu`` no longer
has (torch 2.13); there they return zeros and only collect garbage.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import yaml

from translator.launch import model as models
from translator.launch.context import RunContext
from translator.launch.engines import data_parallel_only
from translator.launch.harness import Harness

#: Keys of the config the run keeps (the batch); the rest is the smoke run's own.
KEPT = ("batch_size", "gradient_accumulation_steps", "clip_grad_norm")
#: Padding token of the synthetic rows (token ids start above it).
PAD = 0


def refuse(spec, device: str) -> str | None:
    """Why this engine cannot run ``spec``'s layout (it is data-parallel only), else None."""
    return data_parallel_only("torchtune", spec)


def refuse_config(config: str, partners, where: str, device: str) -> str | None:
    """``optimizer_in_bwd`` steps one optimizer per parameter inside the backward pass, which
    the engine cannot watch as the recipe's optimizer."""
    data = yaml.safe_load(config) or {}
    if isinstance(data, dict) and data.get("optimizer_in_bwd") is True:
        return (
            f"{where}: optimizer_in_bwd: true steps inside the backward pass, which the torchtune "
            "engine does not count; smoke it with optimizer_in_bwd: false (the batch is the same)"
        )
    return None


class Tokenizer:
    """What the recipe asks of a tokenizer when the data is already tokens: its padding id."""

    def __init__(self, max_seq_len: int):
        self.max_seq_len = max_seq_len
        """Tokens per row."""
        self.pad_id = PAD
        """The collator pads with it."""


def dataset(tokenizer: Tokenizer, rows: int, vocab: int, seed: int = 1000) -> list[dict]:
    """``rows`` random token rows of ``tokenizer.max_seq_len`` tokens, labels the tokens."""
    import torch

    tokens = torch.randint(
        1, vocab, (rows, tokenizer.max_seq_len), generator=torch.Generator().manual_seed(seed)
    )
    return [{"tokens": t.tolist(), "labels": t.tolist()} for t in tokens.unbind(0)]


def config(ctx: RunContext, given: dict, on_gpu: bool) -> dict:
    """The recipe config of the run: the batch keys of ``given``, the rest the smoke run's."""
    shape = models.SHAPES[ctx.model]
    folder = ctx.workdir / f"torchtune-rank{ctx.rank}"
    return {k: given[k] for k in KEPT if k in given} | {
        "output_dir": str(folder / "output"),
        "model": {
            "_component_": "torchtune.models.llama3.llama3",
            "vocab_size": shape.vocab,
            "num_layers": shape.layers,
            "num_heads": shape.heads,
            "num_kv_heads": shape.heads,
            "embed_dim": shape.hidden,
            "intermediate_dim": 4 * shape.hidden,
            "max_seq_len": ctx.sequence_length,
        },
        "tokenizer": {"_component_": f"{__name__}.Tokenizer", "max_seq_len": ctx.sequence_length},
        "dataset": {
            "_component_": f"{__name__}.dataset",
            "rows": ctx.steps * ctx.spec.global_batch,
            "vocab": shape.vocab,
        },
        "checkpointer": {
            "_component_": "torchtune.training.FullModelTorchTuneCheckpointer",
            "checkpoint_dir": str(folder / "weights"),
            "checkpoint_files": ["tiny.pt"],
            "output_dir": str(folder / "output"),
            "model_type": "LLAMA3",
        },
        "resume_from_checkpoint": False,
        "seed": 0,
        "shuffle": False,
        "epochs": 1,
        "max_steps_per_epoch": ctx.steps,
        "optimizer": {"_component_": "torch.optim.AdamW", "lr": 1e-4, "fused": False},
        "loss": {"_component_": "torchtune.modules.loss.CEWithChunkedOutputLoss"},
        "device": "cuda" if on_gpu else "cpu",
        "dtype": "fp32",
        "enable_activation_checkpointing": False,
        "compile": False,
        "metric_logger": {
            "_component_": "torchtune.training.metric_logging.DiskLogger",
            "log_dir": str(folder / "logs"),
        },
        "log_every_n_steps": 1,
    }


def _write_weights(cfg: dict) -> None:
    """The random weights the recipe's checkpointer loads (this rank's own copy, same seed)."""
    from pathlib import Path

    import torch
    from omegaconf import OmegaConf
    from torchtune import config as tt_config

    torch.manual_seed(0)
    net = tt_config.instantiate(OmegaConf.create(cfg["model"]))
    folder = Path(cfg["checkpointer"]["checkpoint_dir"])
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), folder / "tiny.pt")


#: What the CPU rank's memory log says (the keys ``log_memory_stats`` prints).
NO_MEMORY_STATS = {"peak_memory_active": 0.0, "peak_memory_alloc": 0.0, "peak_memory_reserved": 0.0}


@contextlib.contextmanager
def cpu_housekeeping():
    """The recipe's memory logging and cache emptying, as a CPU rank can run them."""
    import gc

    from torchtune import training

    with (
        mock.patch.object(training, "get_memory_stats", lambda device: NO_MEMORY_STATS),
        mock.patch.object(training, "cleanup_before_training", gc.collect),
    ):
        yield


def run(ctx: RunContext):
    from omegaconf import OmegaConf

    from translator.frameworks.torchtune.verdict import recipe_module

    harness = Harness(ctx)
    given = yaml.safe_load(ctx.config.read_text()) or {}
    cfg = config(ctx, given, harness.on_gpu)
    _write_weights(cfg)
    if harness.on_gpu:
        import torch

        torch.cuda.set_device(harness.device)
    recipe_cls = recipe_module().FullFinetuneRecipeDistributed
    dict_cfg = OmegaConf.create(cfg)
    recipe = recipe_cls(dict_cfg)  # starts the process group itself
    try:
        with contextlib.nullcontext() if harness.on_gpu else cpu_housekeeping():
            recipe.setup(dict_cfg)
        recipe._model.register_forward_pre_hook(
            lambda module, args, kwargs: (
                harness.add(kwargs.get("tokens")) if module.training else None
            ),
            with_kwargs=True,
        )
        harness.watch(recipe._optimizer)
        with contextlib.nullcontext() if harness.on_gpu else cpu_housekeeping():
            recipe.train()
        parameters = sum(p.numel() for p in recipe._model.parameters())
        dp_rank = getattr(recipe, "dp_rank", ctx.rank)
    finally:
        recipe.cleanup()
    return harness.result(replica=dp_rank, counts=True, parameters=parameters)
