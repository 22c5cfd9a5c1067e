"""The model a rank trains: the job's own, built by transformers' ``from_config`` from the
``config.json`` the launcher wrote into the work folder (random weights, nothing downloaded,
no remote code), or the stand-in of :mod:`translator.rank.model` when none was given.

:func:`causal_lm` gives either one the stand-in's interface (``forward(tokens, targets=None,
divide_by=None)`` returns the next-token loss), so an engine that runs a plain module trains
whichever the run asks for; :func:`vocab` is the vocabulary its synthetic tokens come from."""

from __future__ import annotations

import json

from translator.rank import model as models
from translator.rank.context import RunContext


def hf_config(ctx: RunContext):
    """The ``transformers`` config of the run's ``config.json`` (``ctx.model_config``)."""
    from transformers import AutoConfig

    assert ctx.model_config is not None
    data = json.loads(ctx.model_config.read_text(encoding="utf-8"))
    data.pop("auto_map", None)  # refused before launch; never a reason to run remote code
    return AutoConfig.for_model(data.pop("model_type"), **data)


def from_config(ctx: RunContext, **how):
    """The job's model through ``AutoModelForCausalLM.from_config``, random weights (seeded:
    every rank and both runs of a parity check build the same ones); ``how``: its keywords
    (``attn_implementation``, ``dtype``). A parity run builds it in float32 whatever the
    config's ``torch_dtype``: in bfloat16 most entries of a correct one-step update at a small
    learning rate round away, and two right splits would differ by 100 %."""
    import torch
    from transformers import AutoModelForCausalLM

    if ctx.parity:
        how.setdefault("dtype", torch.float32)
    torch.manual_seed(0)
    config = hf_config(ctx)
    for dropout in ("attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop"):
        if getattr(config, dropout, None):  # one step is a function of weights and samples
            setattr(config, dropout, 0.0)
    return AutoModelForCausalLM.from_config(config, **how)


def vocab(ctx: RunContext) -> int:
    """The vocabulary the run's synthetic tokens are drawn from: the config's, else the
    stand-in's."""
    if ctx.model_config is None:
        return models.SHAPES[ctx.model].vocab
    data = json.loads(ctx.model_config.read_text(encoding="utf-8"))
    return int(data.get("text_config", data)["vocab_size"])


def causal_lm(ctx: RunContext, recompute: bool = False):
    """The run's model with the stand-in's loss interface; ``recompute``: activation
    checkpointing of every layer (``gradient_checkpointing_enable`` for the job's model)."""
    if ctx.model_config is None:
        return models.build(ctx.model, ctx.sequence_length, recompute)
    from torch import nn

    class NextTokenLM(nn.Module):
        """The job's model, its loss computed as the stand-in's (padding weighs nothing)."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, tokens, targets=None, divide_by=None):
            logits = self.inner(input_ids=tokens[:, :-1]).logits
            return models.next_token_loss(
                logits, tokens[:, 1:] if targets is None else targets, divide_by
            )

    inner = from_config(ctx)
    if recompute:
        inner.gradient_checkpointing_enable({"use_reentrant": False})
    return NextTokenLM(inner)


def count_parameters(module) -> int:
    """Parameters of a built model, whole: a ZeRO-3 partitioned parameter counts its full size
    (``ds_numel``), not the empty placeholder the rank keeps."""
    return sum(getattr(p, "ds_numel", p.numel()) for p in module.parameters())
