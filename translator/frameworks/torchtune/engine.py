"""The torchtune smoke engine: the installed torchtune's own ``full_finetune_distributed`` recipe
(``FullFinetuneRecipeDistributed``: its process group, FSDP2, dataloader, sampler and training
loop), on the job's model (:func:`model_config`: the shape its config's builder makes, depth cut
to ``--layers``), or the stand-in, built by torchtune's own component builder with random
weights (:class:`RandomWeights`, a checkpointer that loads nothing), and synthetic token rows,
nothing downloaded.

From the config it runs, it takes the batch: ``batch_size``, ``gradient_accumulation_steps``
and ``clip_grad_norm``; everything else is the smoke run's (:func:`config`): the model's builder, a
stand-in tokenizer (:class:`Tokenizer`), the data (:func:`dataset`, exactly ``steps ×
global batch`` rows, so the one epoch holds whole accumulation windows only), AdamW, and
``max_steps_per_epoch`` = the steps asked for. Counted through the harness: a forward pre-hook
on the recipe's model counts the rows of each training forward, and the recipe's optimizer's
post-step hook closes the step.

A parity run (``smoke --parity``) keeps the recipe's own loss and accumulation (it sums each
micro-batch's loss times its unmasked labels, and before the step scales the gradients by
world ÷ the step's unmasked labels on all ranks) and changes what it is fed: the parity samples
(:func:`parity_dataset`, rows of different lengths that the recipe's ``padded_collate_sft`` pads,
labels with ``-100``) and plain SGD (:data:`PARITY_OPTIMIZER`, no clipping or schedule). Rank 0
writes the loss the recipe logs for the step and the update of the full (unsharded) weights.

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

from translator.rank import model as models
from translator.rank import parity_rank
from translator.rank.context import RunContext
from translator.rank.engines import data_parallel_only
from translator.rank.harness import Harness
from translator.rank.model import IGNORE

#: Keys of the config the run keeps (the batch); the rest is the smoke run's own.
KEPT = ("batch_size", "gradient_accumulation_steps", "clip_grad_norm")
#: Padding token of the synthetic rows (token ids start above it).
PAD = 0
#: The parity run's optimizer: plain SGD, whose update is the gradient.
PARITY_OPTIMIZER = {
    "_component_": "torch.optim.SGD",
    "lr": parity_rank.LEARNING_RATE,
    "momentum": 0.0,
    "weight_decay": 0.0,
}
#: torchtune's datasets that label every token, the first (BOS) included
#: (``TextCompletionDataset``: ``labels = tokens.copy()``); its SFT datasets mask the BOS.
TEXT_COMPLETION = (
    "text_completion_dataset",
    "TextCompletionDataset",
    "cnn_dailymail_articles_dataset",
)


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


def parity_dataset(
    tokenizer: Tokenizer, rows: int, vocab: int, bos_labelled: bool = False
) -> list[dict]:
    """The parity samples (:func:`translator.rank.parity_rank.row`) as torchtune's datasets
    give them: each row its own length, unpadded (the recipe's collate pads), the labels the
    tokens (the recipe shifts them), the first masked as an SFT dataset masks its BOS, or not
    (``bos_labelled``, as a text-completion dataset labels it)."""
    out = []
    for i in range(rows):
        real = parity_rank.real_tokens(i, tokenizer.max_seq_len)
        tokens = parity_rank.row(i, tokenizer.max_seq_len, vocab)[:real].tolist()
        labels = tokens if bos_labelled else [IGNORE, *tokens[1:]]
        out.append({"tokens": tokens, "labels": list(labels)})
    return out


def labels_bos(given: dict) -> bool:
    """Whether the config's dataset is one of torchtune's text-completion datasets, which label
    the BOS (:data:`TEXT_COMPLETION`)."""
    data = given.get("dataset")
    name = data.get("_component_", "") if isinstance(data, dict) else ""
    return isinstance(name, str) and name.rsplit(".", 1)[-1] in TEXT_COMPLETION


def model_config(ctx: RunContext) -> dict:
    """The recipe's ``model:``: the shape the run builds (:func:`translator.rank.model.
    job_shape`) through torchtune's own component builder: ``qwen2`` for a shape with biases
    on q, k and v, else ``llama3_2`` (a Llama: SwiGLU, RMSNorm, grouped-query attention,
    rotary, its head tied or not); the stand-in as a Llama of its sizes, ``4h`` wide, untied."""
    shape = models.job_shape(ctx)
    sizes = {
        "vocab_size": shape.vocab,
        "num_layers": shape.layers,
        "num_heads": shape.heads,
        "num_kv_heads": shape.kv_heads,
        "embed_dim": shape.hidden,
        "intermediate_dim": shape.ffn,
        "max_seq_len": ctx.sequence_length,
    }
    if ctx.model_config is None:
        return {"_component_": "torchtune.models.llama3.llama3", **sizes}
    unbuildable = [
        what
        for what, there in (
            ("biases in every layer", shape.biases),
            ("a plain (not gated) MLP", not shape.gated),
            (f"heads {shape.head_dim} wide, not hidden / heads", shape.head_dim),
            ("a norm on queries and keys", shape.qk_norm),
            (f"{shape.layer_norms} norms a layer", shape.layer_norms != 2),
            ("a bias on the head", shape.head_bias),
            ("learned positions", shape.positions),
        )
        if there
    ]
    if unbuildable:
        raise ValueError(
            f"torchtune's llama3_2 and qwen2 builders do not build {shape.name}: it has "
            f"{', '.join(unbuildable)}"
        )
    tied = {"tie_word_embeddings": shape.tied}
    if shape.qkv_bias:
        return {"_component_": "torchtune.models.qwen2.qwen2", **sizes, **tied}
    return {"_component_": "torchtune.models.llama3_2.llama3_2", **sizes, **tied}


def config(ctx: RunContext, given: dict, on_gpu: bool) -> dict:
    """The recipe config of the run: the batch keys of ``given``, the rest the smoke run's."""
    model = model_config(ctx)
    folder = ctx.workdir / f"torchtune-rank{ctx.rank}"
    rows = {"rows": ctx.steps * ctx.spec.global_batch, "vocab": model["vocab_size"]}
    data = (
        {"_component_": f"{__name__}.parity_dataset", "bos_labelled": labels_bos(given)}
        if ctx.parity
        else {"_component_": f"{__name__}.dataset"}
    )
    kept = {k: given[k] for k in KEPT if k in given and not (ctx.parity and k == "clip_grad_norm")}
    return kept | {
        "output_dir": str(folder / "output"),
        "model": model,
        "tokenizer": {"_component_": f"{__name__}.Tokenizer", "max_seq_len": ctx.sequence_length},
        "dataset": data | rows,
        "checkpointer": {
            "_component_": f"{__name__}.RandomWeights",
            "builder": model["_component_"],
            "arguments": {k: v for k, v in model.items() if k != "_component_"},
            "checkpoint_dir": str(folder / "weights"),
            "output_dir": str(folder / "output"),
            "model_type": "LLAMA3",
        },
        "resume_from_checkpoint": False,
        "seed": 0,
        "shuffle": False,
        "epochs": 1,
        "max_steps_per_epoch": ctx.steps,
        "optimizer": PARITY_OPTIMIZER
        if ctx.parity
        else {"_component_": "torch.optim.AdamW", "lr": 1e-4, "fused": False},
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


class RandomWeights:
    """The recipe's checkpointer, loading nothing: the weights are the model's builder's own
    random ones (seed 0, the same on every rank), and nothing is saved."""

    def __init__(self, builder: str, arguments: dict, checkpoint_dir: str, output_dir: str, **_):
        self.builder, self.arguments = builder, dict(arguments)
        self._checkpoint_dir, self._output_dir = checkpoint_dir, output_dir

    def load_checkpoint(self) -> dict:
        import torch
        from torchtune import training
        from torchtune.config._utils import _get_component_from_path

        with torch.random.fork_rng():
            torch.manual_seed(0)
            net = _get_component_from_path(self.builder)(**self.arguments)
        return {training.MODEL_KEY: net.state_dict()}

    def save_checkpoint(self, state_dict: dict, epoch: int, *args, **kwargs) -> None:
        """Nothing: a smoke run keeps no checkpoint."""


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
        if ctx.parity:
            before = parity_rank.snapshot(parity_rank.gathered(recipe._model.named_parameters()))
            logged = _logged_losses(recipe) if ctx.rank == 0 else []
        with contextlib.nullcontext() if harness.on_gpu else cpu_housekeeping():
            recipe.train()
        if ctx.parity:  # every rank gathers the sharded weights; rank 0 logged the loss
            after = parity_rank.gathered(recipe._model.named_parameters())
            if ctx.rank == 0:
                parity_rank.write(ctx.workdir, 0, logged[0], before, after)
        parameters = sum(p.numel() for p in recipe._model.parameters())
        dp_rank = getattr(recipe, "dp_rank", ctx.rank)
    finally:
        recipe.cleanup()
    return harness.result(replica=dp_rank, counts=True, parameters=parameters)


def _logged_losses(recipe) -> list[float]:
    """The losses the recipe logs, one a step (rank 0 logs them: the step's summed loss over
    its unmasked labels, on every rank together), as it logs them."""
    losses: list[float] = []
    log_dict = recipe._metric_logger.log_dict

    def keep(payload, step):
        losses.append(float(payload["loss"]))
        return log_dict(payload, step=step)

    recipe._metric_logger.log_dict = keep
    return losses
