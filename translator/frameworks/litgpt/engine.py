"""litgpt: the real ``litgpt pretrain --config <the rendered YAML>`` in each rank (or, for a
finetune file, ``litgpt finetune_full``), through litgpt's own command line (jsonargparse) and
Lightning Fabric.

The rendered file is litgpt's first ``--config``: its ``devices``, ``num_nodes``,
``train.global_batch_size`` and ``train.micro_batch_size`` are read by litgpt itself, which
derives the accumulation (its floors included). A second config gives what a run needs beside
the batch, and nothing of the batch: the model with random weights (``model_config``: the
job's shape, depth cut to ``--layers``, or the stand-in's, :func:`model_config`;
``block_size`` the sequence length; for a finetune, a checkpoint folder of it built in the work
folder, :func:`checkpoint`), synthetic data (:class:`SyntheticTokens`, full
token rows as pretraining packs them; :class:`SyntheticSamples`, samples of their own lengths
that litgpt's SFT collate pads; litgpt ``DataModule``\\ s, nothing read or downloaded), full
precision on CPU, a CSV logger, no checkpoints but the final one, no evaluation beyond the
sanity check. ``pretrain`` stops by ``train.max_tokens``, sized to ``--steps`` optimizer steps
(``steps × accumulation × micro × block × world``, with the accumulation asked of litgpt's
``TrainArgs``); the finetune by ``train.max_steps``.

Counting (the harness's rule): a forward pre-hook on every training forward of litgpt's
``GPT`` (the sanity check runs in eval mode and the FLOP count on the meta device, so neither
counts) adds the rows that enter the model; a global optimizer post-step hook closes the step
each time the optimizer litgpt built steps. ``torch.compile`` is a no-op
(``TORCHDYNAMO_DISABLE``), and Fabric takes the device ``--device`` asks for
(``LT_ACCELERATOR``, its own switch). On several devices litgpt shards with FSDP, which
Fabric runs only on GPU: on CPU the engine runs one process.

A parity run (``smoke --parity``) keeps litgpt's own loop, loss (``chunked_cross_entropy``,
divided by ``gradient_accumulation_iters``) and data order (no shuffling) and puts plain SGD in
place of its optimizer (:data:`PARITY_OPTIMIZER`, no clipping). ``pretrain`` sees what it
trains on, full rows whose every position is predicted; the finetune sees the parity samples
(:mod:`translator.rank.parity_rank`) padded by litgpt's collate, padding labelled
``-100``. The rank writes the loss litgpt logged for the step (the mean of its micro-batches'
losses) and the update SGD at learning rate 1 makes of the gradient the step applies, read by
an optimizer pre-step hook: litgpt's finetune warms the learning rate up from 0, so its first
step does not move the weights.
"""

from __future__ import annotations

import csv
import os
import sys
from pathlib import Path

from translator.rank import parity_rank
from translator.rank.context import RunContext
from translator.rank.engines import model_parallel_sizes
from translator.rank.harness import Harness
from translator.rank.model import IGNORE

#: The classes litgpt's parser instantiates for ``data:``.
DATA_CLASS = f"{__name__}.SyntheticTokens"
SAMPLES_CLASS = f"{__name__}.SyntheticSamples"
#: The config beside the rendered one, in the work folder.
EXTRA_FILE = "litgpt-run.yaml"
#: The command the engine runs for a finetune file: the finetune commands share its loop and
#: loss, and only it trains every weight.
FINETUNE = "finetune_full"
#: A parity run's optimizer, as litgpt's ``--optimizer`` takes a class: plain SGD.
PARITY_OPTIMIZER = {
    "class_path": "torch.optim.SGD",
    "init_args": {"lr": parity_rank.LEARNING_RATE, "momentum": 0.0, "weight_decay": 0.0},
}


def refuse(spec, device: str) -> str | None:
    """Why this engine cannot run ``spec``'s layout on ``device``, else None."""
    bigger = model_parallel_sizes(spec)
    if bigger:
        return f"litgpt's training has data parallelism only, not {bigger}"
    if device == "cpu" and spec.world_size != 1:
        return (
            f"litgpt shards with FSDP on several devices, and Lightning Fabric runs FSDP only on "
            f'GPU ("FSDP is only available on GPU"): on CPU the litgpt engine runs one process, '
            f"not {spec.world_size}; use --nproc-per-node 1 --nnodes 1, or --device gpu"
        )
    return None


def command_of(rendered: dict) -> str:
    """The litgpt command for the file: :data:`FINETUNE` for a finetune file (it names a
    ``checkpoint_dir``), else ``pretrain``."""
    from translator.frameworks.litgpt.rules import command_of as file_command

    return FINETUNE if file_command(rendered) == "finetune" else "pretrain"


def model_config(ctx: RunContext) -> dict:
    """litgpt's ``Config`` fields of the shape the run builds (:func:`translator.rank.model.
    job_shape`: the job's, depth cut to ``--layers``, or the stand-in's, as
    :func:`~translator.frameworks.litgpt.models.config_fields` writes it), the sequence length
    as block."""
    from translator.frameworks.litgpt.models import config_fields
    from translator.rank.model import job_shape

    shape = job_shape(ctx)
    return {"name": f"batchspec-{shape.name}", "block_size": ctx.sequence_length} | config_fields(
        shape
    )


def extra_config(ctx: RunContext, command: str, accumulation: int, micro: int, world: int) -> dict:
    """Everything ``litgpt COMMAND`` needs beside the rendered batch keys (``train`` and
    ``eval``: the keys the run sets, which go on the command line)."""
    scratch = Path(ctx.workdir).resolve() / "litgpt"
    config = model_config(ctx)
    block = ctx.sequence_length
    settings: dict = {
        "out_dir": str(scratch / "out"),
        "precision": "32-true" if ctx.device == "cpu" else "bf16-mixed",
        "logger_name": "csv",
        "seed": 1000,
    }
    train: dict = {"save_interval": None}
    evaluation: dict = {"interval": 1_000_000, "initial_validation": False}
    evaluation["final_validation"] = False
    if ctx.parity:
        settings["optimizer"] = PARITY_OPTIMIZER
    if command == "pretrain":
        settings |= {"model_name": config["name"], "model_config": config}
        settings["data"] = {
            "class_path": DATA_CLASS,
            "init_args": {"vocab": config["vocab_size"], "shuffle": not ctx.parity},
        }
        train |= {
            "max_tokens": ctx.steps * accumulation * micro * block * world,
            "max_norm": 1.0,
            "lr_warmup_steps": 0,
        }
        if ctx.parity:  # a constant learning rate (its cosine decays to min_lr), no clipping
            train |= {"max_norm": 1e30, "min_lr": parity_rank.LEARNING_RATE}
    else:
        settings["checkpoint_dir"] = str(checkpoint(scratch / "checkpoint", config))
        settings["data"] = {
            "class_path": SAMPLES_CLASS,
            "init_args": {
                "vocab": config["vocab_size"],
                "rows": 2 * ctx.steps * ctx.spec.global_batch,
                "padded": ctx.parity,
            },
        }
        # A warm-up longer than the run: finetune's cosine lasts max_steps - lr_warmup_steps
        # steps, and torch's CosineAnnealingLR divides by zero at a length of 0.
        train |= {"max_steps": ctx.steps, "lr_warmup_steps": ctx.steps + 1, "epochs": 1}
        train |= {"max_seq_length": block}
        evaluation["max_new_tokens"] = 1
    return settings | {"train": train, "eval": evaluation}


def checkpoint(folder: Path, config: dict) -> Path:
    """A litgpt checkpoint folder of a random GPT (the same weights for the same
    ``config``): its weights, ``model_config.yaml`` and a word-level tokenizer of its vocab."""
    import json

    import torch
    from litgpt.model import GPT, Config
    from litgpt.utils import save_config
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    folder.mkdir(parents=True, exist_ok=True)
    model_config = Config(**config)
    with torch.random.fork_rng():
        torch.manual_seed(1000)
        model = GPT(model_config)
    torch.save(model.state_dict(), folder / "lit_model.pth")
    save_config(model_config, folder)
    vocab = {f"t{i}": i for i in range(model_config.vocab_size)}
    Tokenizer(WordLevel(vocab, unk_token="t0")).save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "t1"})
    )
    return folder


def run(ctx: RunContext):
    import torch
    import yaml
    from litgpt.args import TrainArgs
    from litgpt.model import GPT
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    rendered = yaml.safe_load(ctx.config.read_text()) or {}
    given = rendered.get("train") or {}
    train = TrainArgs(
        **{k: given[k] for k in ("global_batch_size", "micro_batch_size") if k in given}
    )
    devices, nodes = int(rendered.get("devices", 1)), int(rendered.get("num_nodes", 1))
    accumulation = train.gradient_accumulation_iters(devices, nodes)
    command = command_of(rendered)
    extra = Path(ctx.workdir).resolve() / EXTRA_FILE
    settings = extra_config(ctx, command, accumulation, train.micro_batch_size, ctx.world_size)
    # The run's own train keys go on the command line (a second config's train: block would
    # stand in for the rendered one's as a whole); the rest in a file.
    flags = [f"--train.{k}={'null' if v is None else v}" for k, v in settings.pop("train").items()]
    flags += [f"--eval.{k}={v}" for k, v in settings.pop("eval").items()]
    extra.write_text(yaml.safe_dump(settings, sort_keys=False))

    harness = Harness(ctx)
    model: list = []  # litgpt's GPT, from its first training forward
    stepped: dict = {}  # a parity run: the weights before the first step, and SGD's of them

    def count(module, args):
        rows = args[0] if args else None
        if not (isinstance(module, GPT) and module.training and isinstance(rows, torch.Tensor)):
            return
        if rows.device.type != "meta":
            harness.add(rows)
            model[:] = model or [module]

    def before_step(optimizer, *args, **kwargs):
        if ctx.parity and model and not stepped:
            named = list(model[0].named_parameters())
            before = stepped["before"] = parity_rank.snapshot(named)
            grads = parity_rank.snapshot(
                (name, torch.zeros_like(p) if p.grad is None else p.grad) for name, p in named
            )
            stepped["after"] = {n: before[n] - parity_rank.LEARNING_RATE * grads[n] for n in before}

    os.environ["LT_ACCELERATOR"] = "cpu" if ctx.device == "cpu" else "cuda"
    hooks = [
        torch.nn.modules.module.register_module_forward_pre_hook(count),
        register_optimizer_step_pre_hook(before_step),
        register_optimizer_step_post_hook(
            lambda optimizer, *args, **kwargs: harness.stepped(type(optimizer).__name__)
        ),
    ]
    try:
        _litgpt([command, "--config", str(ctx.config), "--config", str(extra), *flags])
    finally:
        for hook in hooks:
            hook.remove()
    if ctx.parity:
        loss = logged_loss(Path(settings["out_dir"]), accumulation)
        before, after = stepped["before"], stepped["after"]
        parity_rank.write(ctx.workdir, ctx.rank, loss, before, after.items())
    parameters = sum(p.numel() for p in model[0].parameters()) if model else 0
    return harness.result(replica=ctx.rank, counts=True, parameters=parameters)


def logged_loss(out_dir: Path, accumulation: int) -> float:
    """The loss litgpt logged for the first optimizer step, from its CSV logger's latest run
    in ``out_dir``: at iteration ``accumulation``, the mean of the step's micro-batch losses
    (its ``running_loss``). The row's ``step`` is the logger's (the iteration before), so the
    ``iter`` column finds it."""
    runs = sorted(
        (out_dir / "logs" / "csv").glob("version_*"), key=lambda p: int(p.name.split("_")[1])
    )
    with open(runs[-1] / "metrics.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row.get("loss") and int(row["iter"]) == accumulation:
                return float(row["loss"])
    raise RuntimeError(f"litgpt logged no loss of the first step in {runs[-1]}")


def _litgpt(arguments: list[str]) -> None:
    """``litgpt ARGUMENTS`` in this process: litgpt's own ``main`` reads ``sys.argv``."""
    from litgpt.__main__ import main

    saved = sys.argv
    sys.argv = ["litgpt", *arguments]
    try:
        main()
    finally:
        sys.argv = saved


# --- litgpt's data modules, built on first use ----------------------------------------------


class Rows:
    """A map-style dataset of random token rows, fixed per index (a module-level class: litgpt
    pickles its data loader's state with the final checkpoint)."""

    def __init__(self, rows: int, length: int, vocab: int, offset: int):
        self.rows, self.length, self.vocab, self.offset = rows, length, vocab, offset

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, index: int):
        import torch

        generator = torch.Generator().manual_seed(self.offset + index)
        return torch.randint(0, self.vocab, (self.length,), generator=generator)


def samples(rows: int, length: int, vocab: int, padded: bool, offset: int = 0) -> list[dict]:
    """``rows`` finetune samples as litgpt's SFT datasets give them (``input_ids``, ``labels``
    and ``token_counts``; nothing masked as a prompt): the parity samples' own tokens
    (:func:`translator.rank.parity_rank.row`) when ``padded``, else ``length`` random ones."""
    out = []
    for i in range(offset, offset + rows):
        real = parity_rank.real_tokens(i, length) if padded else length
        ids = parity_rank.row(i, length, vocab)[:real] if padded else Rows(1, length, vocab, i)[0]
        counts = {"raw": real, "raw_plus_prompt_template": real}
        out.append({"input_ids": ids, "labels": ids.clone(), "token_counts": counts})
    return out


def _data_classes():
    """:class:`SyntheticTokens` and :class:`SyntheticSamples`, litgpt ``DataModule``\\ s."""
    from litgpt.data import DataModule
    from litgpt.data.base import get_sft_collate_fn
    from litgpt.prompts import Default
    from torch.utils.data import DataLoader

    class SyntheticTokens(DataModule):
        """Rows of ``max_seq_length + 1`` random tokens (inputs and shifted targets), as
        litgpt's pretraining data modules give them; in order, for a parity run."""

        def __init__(self, vocab: int = 512, rows: int = 100_000, shuffle: bool = True):
            super().__init__()
            self.vocab, self.rows, self.shuffle = vocab, rows, shuffle
            self.batch_size, self.length = 1, 2

        def connect(self, tokenizer=None, batch_size: int = 1, max_seq_length=None, **kwargs):
            self.batch_size, self.length = batch_size, (max_seq_length or 1) + 1

        def train_dataloader(self):
            rows = Rows(self.rows, self.length, self.vocab, 0)
            return DataLoader(rows, batch_size=self.batch_size, shuffle=self.shuffle)  # type: ignore[arg-type]

        def val_dataloader(self):
            rows = Rows(2 * self.batch_size, self.length, self.vocab, self.rows)
            return DataLoader(rows, batch_size=self.batch_size)  # type: ignore[arg-type]

    class SyntheticSamples(DataModule):
        """Finetune samples (:func:`samples`), in order, batched by litgpt's SFT collate:
        padded to the longest of the micro-batch, padding's labels ``-100``."""

        def __init__(self, vocab: int = 512, rows: int = 64, padded: bool = False):
            super().__init__()
            self.vocab, self.rows, self.padded = vocab, rows, padded
            self.batch_size, self.length = 1, 2
            self.prompt_style = Default()  # what the finetune saves beside its checkpoint

        def connect(self, tokenizer=None, batch_size: int = 1, max_seq_length=None, **kwargs):
            self.batch_size, self.length = batch_size, max_seq_length or 2

        def _loader(self, rows: int, offset: int):
            return DataLoader(
                samples(rows, self.length, self.vocab, self.padded, offset),  # type: ignore[arg-type]
                batch_size=self.batch_size,
                collate_fn=get_sft_collate_fn(self.length, parity_rank.PAD, IGNORE),
            )

        def train_dataloader(self):
            return self._loader(self.rows, 0)

        def val_dataloader(self):
            return self._loader(2 * self.batch_size, self.rows)

    for cls in (SyntheticTokens, SyntheticSamples):
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
    return {"SyntheticTokens": SyntheticTokens, "SyntheticSamples": SyntheticSamples}


def __getattr__(name: str):
    # litgpt's parser imports the data classes by name: build them lazily, so that importing
    # this module needs neither litgpt nor torch.
    if name in ("SyntheticTokens", "SyntheticSamples"):
        globals().update(_data_classes())
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
