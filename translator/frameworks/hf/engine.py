"""The HF Trainer: the real ``transformers.Trainer`` on the TrainingArguments file (rendered
``hf.yaml``, or the user's own), parsed by ``HfArgumentParser`` as a training script parses it,
with only the run's own settings on top (``max_steps``, an output folder, no saving, logging
or reporting, the CPU when the rank has no GPU). The model is the job's own, built by
``from_config`` with random weights (:mod:`translator.rank.hub_model`), or the stand-in as a
tiny random GPT-2; the data random tokens, or for ``smoke --parity`` padded samples of different lengths
and plain SGD (:data:`PARITY_SETTINGS`), the Trainer's own loss and the update written for
the comparison.

Counted through the harness, which is the Trainer's callback: a forward pre-hook on the
Trainer's model counts the rows of every training forward, and ``on_step_end`` (the Trainer
calls it once per optimizer step, right after it) closes the step. The DeepSpeed JSON a file
names runs with it (the launcher copies it into the work folder as ``deepspeed.json``): the
Trainer then steps through DeepSpeed's engine, on the rank's device. What a CPU rank would
refuse (``tf32``, DeepSpeed's fp16 where the CPU has none) is refused before launch
(:func:`refuse_config`)."""

from __future__ import annotations

from translator.frameworks.deepspeed import config_json as deepspeed_json
from translator.frameworks.deepspeed.config_json import FILENAME as DEEPSPEED_JSON
from translator.frameworks.shared.deepspeed_device import (
    fp16_enabled,
    fp16_refusal,
    use_device,
)
from translator.rank import hub_model, parity_rank
from translator.rank import model as models
from translator.rank.context import RunContext
from translator.rank.engines import data_parallel_only
from translator.rank.harness import Harness
from translator.rank.model import IGNORE

#: Keys of the user's file that the smoke run replaces (where it writes, how long it runs).
RUN_KEYS = {
    "max_steps",
    "output_dir",
    "save_strategy",
    "logging_strategy",
    "report_to",
    "disable_tqdm",
    "use_cpu",
    "deepspeed",
    "eval_strategy",
    "do_eval",
    "push_to_hub",
    "resume_from_checkpoint",
    "num_train_epochs",
}


#: What a parity run sets on top (``smoke --parity``): plain SGD, whose update is the gradient
#: (no clipping, weight decay, warm-up or schedule).
PARITY_SETTINGS = {
    "optim": "sgd",
    "learning_rate": parity_rank.LEARNING_RATE,
    "weight_decay": 0.0,
    "max_grad_norm": 0.0,
    "lr_scheduler_type": "constant",
    "warmup_steps": 0,
}


def refuse(spec, device: str) -> str | None:
    """Why this engine cannot run ``spec``'s layout (it is data-parallel only), else None."""
    return data_parallel_only("HF Trainer", spec)


def refuse_config(config: str, partners, where: str, device: str) -> str | None:
    """Why the Trainer cannot run the TrainingArguments ``config`` (from the file ``where``), with
    the DeepSpeed JSON among ``partners``, on ``device``: what the ranks would raise."""
    import json

    import yaml

    data = yaml.safe_load(config) or {}
    if device == "gpu" or not isinstance(data, dict):
        return None
    if data.get("tf32"):  # TrainingArguments.__post_init__ raises it, use_cpu or not
        return (
            f'{where}: tf32: true needs a GPU (TrainingArguments: "--tf32 requires Ampere or a '
            'newer GPU arch"); run it with --device gpu, or without tf32 on CPU'
        )
    text = partners.get(DEEPSPEED_JSON)
    ds = json.loads(text) if text else {}
    enabled = fp16_enabled(ds) if isinstance(ds, dict) else None
    if enabled is True:
        return fp16_refusal(f'{where}: its DeepSpeed JSON\'s "fp16": {{"enabled": true}}')
    if enabled == "auto" and (data.get("fp16") or data.get("fp16_full_eval")):
        # The Trainer fills "auto" from its own fp16 (HfTrainerDeepSpeedConfig.fill_match).
        return fp16_refusal(f'{where}: fp16: true (its DeepSpeed JSON\'s fp16 is "auto")')
    return None


def zero_stage(config: str, partners) -> int | None:
    """The ZeRO stage the Trainer runs under: its DeepSpeed JSON's, when the TrainingArguments
    ``config`` names one (the run feeds it as ``deepspeed.json``); None without DeepSpeed."""
    import yaml

    data = yaml.safe_load(config) or {}
    text = partners.get(DEEPSPEED_JSON)
    if not isinstance(data, dict) or not data.get("deepspeed") or text is None:
        return None
    return deepspeed_json.zero_stage(text)


def run(ctx: RunContext):
    import transformers
    import yaml

    harness = Harness(ctx)
    data = yaml.safe_load(ctx.config.read_text()) or {}
    settings = {k: v for k, v in data.items() if k not in RUN_KEYS} | {
        "output_dir": str(ctx.workdir / "hf-output"),
        "max_steps": ctx.steps,
        "save_strategy": "no",
        "logging_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "use_cpu": not harness.on_gpu,
    }
    if ctx.parity:
        settings |= PARITY_SETTINGS
    if data.get("deepspeed"):
        use_device(harness)
        settings["deepspeed"] = str(ctx.config.parent / DEEPSPEED_JSON)
    with harness.process_group():
        # Built before the arguments are parsed, so whole: with DeepSpeed's arguments in place,
        # from_config under ZeRO-3 builds inside deepspeed.zero.Init, which fails here (its
        # config sees one rank before DeepSpeed's own process group; under torch 2.13 its
        # Tensor.__new__ patch fails too). The Trainer's deepspeed.initialize partitions it.
        net = hub_model.from_config(ctx) if ctx.model_config else stand_in(ctx)
        # transformers types DataClassType as NewType("DataClassType", Any): no class matches it.
        parser = transformers.HfArgumentParser(transformers.TrainingArguments)  # type: ignore[arg-type]
        (args,) = parser.parse_dict(settings, allow_extra_keys=True)
        vocab = hub_model.vocab(ctx)
        rows = 2 * ctx.steps * ctx.spec.global_batch
        dataset = (padded if ctx.parity else random_rows)(rows, ctx.sequence_length, vocab)
        before = (
            parity_rank.snapshot(net.named_parameters()) if ctx.parity and ctx.rank == 0 else None
        )
        harness.trainer = transformers.Trainer(
            model=net,
            args=args,
            train_dataset=dataset,
            # The harness is a duck-typed callback: the Trainer calls its on_* methods by name.
            callbacks=[harness],  # type: ignore[list-item]
        )
        trained = harness.trainer.train()
        if ctx.parity:  # the Trainer's own loss of the step, as it normalised it
            parity_rank.write(
                ctx.workdir, ctx.rank, trained.training_loss, before, net.named_parameters()
            )
        return harness.result(
            replica=ctx.rank, counts=True, parameters=hub_model.count_parameters(net)
        )


def stand_in(ctx: RunContext):
    """The stand-in as a tiny random GPT-2 of its shape (no dropout: one step is a function of
    the weights and the samples alone)."""
    import torch
    import transformers

    shape = models.SHAPES[ctx.model]
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            n_layer=shape.layers,
            n_embd=shape.hidden,
            n_head=shape.heads,
            vocab_size=shape.vocab,
            n_positions=ctx.sequence_length,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
    )


def random_rows(rows: int, length: int, vocab: int) -> list[dict]:
    """``rows`` samples of ``length`` random tokens, each its own labels."""
    import torch

    tokens = torch.randint(0, vocab, (rows, length), generator=torch.Generator().manual_seed(1000))
    return [{"input_ids": t, "labels": t} for t in tokens.unbind(0)]


def padded(rows: int, length: int, vocab: int) -> list[dict]:
    """The parity samples (:func:`translator.rank.parity_rank.row`) as the Trainer takes them:
    padding masked out of attention and labels (the model shifts the labels itself)."""
    import torch

    out = []
    for i in range(rows):
        ids, real = parity_rank.row(i, length, vocab), parity_rank.real_tokens(i, length)
        mask = (torch.arange(length) < real).long()
        labels = ids.clone()
        labels[real:] = IGNORE
        out.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return out
