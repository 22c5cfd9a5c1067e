"""litgpt: the real ``litgpt pretrain --config <the rendered YAML>`` in each rank, through
litgpt's own command line (jsonargparse) and Lightning Fabric.

The rendered file is litgpt's first ``--config``: its ``devices``, ``num_nodes``,
``train.global_batch_size`` and ``train.micro_batch_size`` are read by litgpt itself, which
derives the accumulation (its floors included). A second config gives what a run needs beside
the batch, and nothing of the batch: a tiny random GPT (``model_config``, the shape of
``--model``, ``block_size`` the sequence length), synthetic token rows
(:class:`SyntheticTokens`, a litgpt ``DataModule``; nothing is read or downloaded), full
precision on CPU, a CSV logger, no checkpoints but the final one, no evaluation beyond the
sanity check. ``train.max_tokens`` is sized so that litgpt's own loop stops after ``--steps``
optimizer steps: ``steps × accumulation × micro × block × world``, with the accumulation
asked of litgpt's ``TrainArgs``.

Counting (the harness's rule): a forward pre-hook on every training forward of litgpt's
``GPT`` (the sanity check runs in eval mode and the FLOP count on the meta device, so neither
counts) adds the rows that enter the model; a global optimizer post-step hook closes the step
each time the optimizer litgpt built steps. ``torch.compile`` is a no-op
(``TORCHDYNAMO_DISABLE``), and Fabric takes the device ``--device`` asks for
(``LT_ACCELERATOR``, its own switch). On several devices litgpt shards with FSDP, which
Fabric runs only on GPU: on CPU the engine runs one process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from translator.launch.context import RunContext
from translator.launch.engines import model_parallel_sizes
from translator.launch.harness import Harness

#: The class litgpt's parser instantiates for ``data:``.
DATA_CLASS = f"{__name__}.SyntheticTokens"
#: The config beside the rendered one, in the work folder.
EXTRA_FILE = "litgpt-run.yaml"


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


def extra_config(ctx: RunContext, accumulation: int, micro: int, world: int) -> dict:
    """Everything ``litgpt pretrain`` needs beside the rendered batch keys."""
    from translator.launch.model import SHAPES

    shape = SHAPES[ctx.model]
    block = ctx.sequence_length
    scratch = Path(ctx.workdir).resolve() / "litgpt"
    return {
        "model_name": "batchspec-tiny",
        "model_config": {
            "name": f"batchspec-{ctx.model}",
            "block_size": block,
            "vocab_size": shape.vocab,
            "padded_vocab_size": shape.vocab,
            "n_layer": shape.layers,
            "n_head": shape.heads,
            "n_embd": shape.hidden,
        },
        "out_dir": str(scratch / "out"),
        "precision": "32-true" if ctx.device == "cpu" else "bf16-mixed",
        "data": {"class_path": DATA_CLASS, "init_args": {"vocab": shape.vocab}},
        "logger_name": "csv",
        "seed": 1000,
    } | {
        "train": {
            "max_tokens": ctx.steps * accumulation * micro * block * world,
            "max_norm": 1.0,
            "save_interval": None,
            "lr_warmup_steps": 0,
        },
        "eval": {"interval": 1_000_000, "initial_validation": False, "final_validation": False},
    }


def run(ctx: RunContext):
    import torch
    import yaml
    from litgpt.args import TrainArgs
    from litgpt.model import GPT
    from torch.optim.optimizer import register_optimizer_step_post_hook

    rendered = yaml.safe_load(ctx.config.read_text()) or {}
    given = rendered.get("train") or {}
    train = TrainArgs(
        **{k: given[k] for k in ("global_batch_size", "micro_batch_size") if k in given}
    )
    devices, nodes = int(rendered.get("devices", 1)), int(rendered.get("num_nodes", 1))
    accumulation = train.gradient_accumulation_iters(devices, nodes)
    extra = Path(ctx.workdir).resolve() / EXTRA_FILE
    settings = extra_config(ctx, accumulation, train.micro_batch_size, ctx.world_size)
    # The run's own train keys go on the command line (a second config's train: block would
    # stand in for the rendered one's as a whole); the rest in a file.
    flags = [f"--train.{k}={'null' if v is None else v}" for k, v in settings.pop("train").items()]
    flags += [f"--eval.{k}={v}" for k, v in settings.pop("eval").items()]
    extra.write_text(yaml.safe_dump(settings, sort_keys=False))

    harness = Harness(ctx)
    parameters: list[int] = []

    def count(module, args):
        rows = args[0] if args else None
        if not (isinstance(module, GPT) and module.training and isinstance(rows, torch.Tensor)):
            return
        if rows.device.type != "meta":
            harness.add(rows)
            parameters[:] = parameters or [sum(p.numel() for p in module.parameters())]

    os.environ["LT_ACCELERATOR"] = "cpu" if ctx.device == "cpu" else "cuda"
    forward = torch.nn.modules.module.register_module_forward_pre_hook(count)
    stepped = register_optimizer_step_post_hook(
        lambda optimizer, *args, **kwargs: harness.stepped(type(optimizer).__name__)
    )
    try:
        _litgpt(["pretrain", "--config", str(ctx.config), "--config", str(extra), *flags])
    finally:
        forward.remove()
        stepped.remove()
    return harness.result(replica=ctx.rank, counts=True, parameters=sum(parameters))


def _litgpt(arguments: list[str]) -> None:
    """``litgpt ARGUMENTS`` in this process: litgpt's own ``main`` reads ``sys.argv``."""
    from litgpt.__main__ import main

    saved = sys.argv
    sys.argv = ["litgpt", *arguments]
    try:
        main()
    finally:
        sys.argv = saved


# --- litgpt's data module, built on first use -----------------------------------------------


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


def _data_class():
    """:class:`SyntheticTokens`: a litgpt ``DataModule`` of random token rows."""
    from litgpt.data import DataModule
    from torch.utils.data import DataLoader

    class SyntheticTokens(DataModule):
        """Rows of ``max_seq_length + 1`` random tokens (inputs and shifted targets), as
        litgpt's pretraining data modules give them."""

        def __init__(self, vocab: int = 512, rows: int = 100_000):
            super().__init__()
            self.vocab, self.rows = vocab, rows
            self.batch_size, self.length = 1, 2

        def connect(self, tokenizer=None, batch_size: int = 1, max_seq_length=None, **kwargs):
            self.batch_size, self.length = batch_size, (max_seq_length or 1) + 1

        def train_dataloader(self):
            rows = Rows(self.rows, self.length, self.vocab, 0)
            return DataLoader(rows, batch_size=self.batch_size, shuffle=True)  # type: ignore[arg-type]

        def val_dataloader(self):
            rows = Rows(2 * self.batch_size, self.length, self.vocab, self.rows)
            return DataLoader(rows, batch_size=self.batch_size)  # type: ignore[arg-type]

    SyntheticTokens.__module__ = __name__
    SyntheticTokens.__qualname__ = "SyntheticTokens"
    return SyntheticTokens


def __getattr__(name: str):
    # litgpt's parser imports DATA_CLASS by name: build it lazily, so that importing this
    # module needs neither litgpt nor torch.
    if name == "SyntheticTokens":
        cls = _data_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
